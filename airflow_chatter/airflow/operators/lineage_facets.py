"""The OpenLineage run facets of the operators: what a drain, a receiver and a requeue did, in counts.

Imported only by ``operators/lineage.py`` when OpenLineage asks for facets (it imports the OpenLineage client, which
``apache-airflow-providers-openlineage`` brings; without it nothing imports this module). Each facet's
``_schemaURL`` is a URN naming it and its version (no schema is published; docs/ecosystem.md lists the fields);
consumers store facets they do not know as they are.
"""

from __future__ import annotations

from typing import ClassVar

from attrs import define
from openlineage.client.facet_v2 import RunFacet

SCHEMA_BASE = "urn:airflow-chatter:openlineage:facets:1-0-0:"


@define
class ChatterRunFacet(RunFacet):
    """The facets' one ``_schemaURL`` rule: ``SCHEMA_BASE`` plus the facet's class name."""

    @classmethod
    def _get_schema(cls) -> str:
        return SCHEMA_BASE + cls.__name__


@define
class ChatterDrainRunFacet(ChatterRunFacet):
    """One drain of one lease (key ``chatter_drain``): ``delivered`` to Kafka and stamped, stamped
    ``undeliverable``, ``skipped`` (not admitted by the source), ``dropped``, and the change-feed ``documents`` read."""

    lease: str
    delivered: int
    undeliverable: int
    skipped: int
    dropped: int
    documents: int

    _additional_skip_redact: ClassVar[list[str]] = ["lease"]


@define
class ChatterReceiveRunFacet(ChatterRunFacet):
    """One bounded receive (key ``chatter_receive``): deliveries ``received``, ``processed`` (their writes
    committed), ``duplicates`` (a marker found: nothing written), and messages ``dispatched`` in-process."""

    group_id: str
    received: int
    processed: int
    duplicates: int
    dispatched: int

    _additional_skip_redact: ClassVar[list[str]] = ["group_id"]


@define
class ChatterRequeueRunFacet(ChatterRunFacet):
    """One requeue (key ``chatter_requeue``): undeliverable documents set back to pending (``requeued``), those
    changed meanwhile (left alone), those ``not_found``; ``dry_run`` when it only selected."""

    requeued: int
    changed_meanwhile: int
    not_found: int
    dry_run: bool


FACETS = {
    "chatter_drain": ChatterDrainRunFacet,
    "chatter_receive": ChatterReceiveRunFacet,
    "chatter_requeue": ChatterRequeueRunFacet,
}

"""OpenLineage for the drain, backfill, requeue and receive operators, the way Airflow's providers report it.

An operator mixes in ``ChatterLineage``, says which datasets it reads and writes (``lineage_before_run``, from its
arguments and its connections), and records at the end of ``execute`` what it did (``record_lineage``). The
OpenLineage provider's listener then calls ``get_openlineage_facets_on_start`` / ``_on_complete`` / ``_on_failure``
and gets an ``OperatorLineage``. The provider is optional: its classes are imported only inside those calls, which the
provider alone makes.

START does no I/O, not even a connection read: the listener gives it a few seconds, and a task's connection lookups
go to Airflow's API server (under load a START that read them was lost). Naming a dataset takes the connection (the
account's host, the brokers), so START names none; COMPLETE and FAIL name them, from the hooks the task already built.

Datasets are named per the OpenLineage naming spec:

* Azure Cosmos DB container: namespace ``azurecosmos://{host}/dbs/{database}``, name ``colls/{container}`` (the
  host of the connection's endpoint, with its port when that is not 443, as for the emulator);
* Kafka topic: namespace ``kafka://{bootstrap server host:port}`` (the connection's first), name the topic: the
  same server as the topic's ``kafka://`` asset (``airflow_chatter.airflow.assets``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

    from airflow_chatter.airflow.hooks.cosmos import ChatterCosmosHook


def cosmos_namespace(endpoint: str, database: str) -> str:
    """``azurecosmos://{host}/dbs/{database}`` for an account endpoint such as ``https://acct.documents.azure.com:443/``."""
    parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
    host = parts.hostname or ""
    netloc = host if parts.port in (None, 443) else f"{host}:{parts.port}"
    return f"azurecosmos://{netloc}/dbs/{database}"


def kafka_namespace(server: str) -> str:
    """``kafka://{host:port}`` for the first bootstrap server of a connection."""
    return f"kafka://{server}"


@dataclass(frozen=True)
class LineageDataset:
    """One dataset of a run; ``rows``: the records it read (an input) or wrote (an output), when counted."""

    namespace: str
    name: str
    rows: int | None = None


def cosmos_dataset(hook: ChatterCosmosHook, container: str, database: str | None = None) -> LineageDataset:
    """The dataset of a container of ``hook``'s account (connection reads only, no network I/O)."""
    return LineageDataset(cosmos_namespace(hook.endpoint(), hook.database(database)), f"colls/{container}")


def kafka_dataset(server: str, topic: str, rows: int | None = None) -> LineageDataset:
    return LineageDataset(kafka_namespace(server), topic, rows)


@dataclass(frozen=True)
class LineageRecord:
    """What a run did: its datasets, its run facet (a key of ``lineage_facets.FACETS`` and its fields) and, for a
    run that failed, its error (as ``type: message``, as the task log shows it)."""

    inputs: Sequence[LineageDataset]
    outputs: Sequence[LineageDataset]
    facet: tuple[str, Mapping[str, Any]] | None = None
    error: str | None = None


def operator_lineage(record: LineageRecord) -> OperatorLineage[Any, Any]:
    """The OpenLineage provider's ``OperatorLineage`` of ``record`` (imports the provider: call it only from the
    ``get_openlineage_facets_*`` methods)."""
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import InputDataset, OutputDataset
    from openlineage.client.facet_v2 import (
        error_message_run,
        input_statistics_input_dataset,
        output_statistics_output_dataset,
    )

    from airflow_chatter.airflow.operators.lineage_facets import FACETS

    in_stats = input_statistics_input_dataset.InputStatisticsInputDatasetFacet
    out_stats = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet

    def rows(d: LineageDataset, key: str, facet: Any) -> dict[str, Any]:
        return {} if d.rows is None else {key: facet(rowCount=d.rows)}

    inputs = [
        InputDataset(namespace=d.namespace, name=d.name, inputFacets=rows(d, "inputStatistics", in_stats))
        for d in record.inputs
    ]
    outputs = [
        OutputDataset(namespace=d.namespace, name=d.name, outputFacets=rows(d, "outputStatistics", out_stats))
        for d in record.outputs
    ]
    run_facets: dict[str, Any] = {}
    if record.facet is not None:
        key, values = record.facet
        run_facets[key] = FACETS[key](**values)
    if record.error is not None:
        run_facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
            message=record.error, programmingLanguage="python"
        )
    return OperatorLineage(inputs=inputs, outputs=outputs, run_facets=run_facets)


class ChatterLineage:
    """The three ``get_openlineage_facets_*`` methods of an operator, from ``lineage_before_run`` and the record of
    its run (``record_lineage``, called by ``execute`` before it returns or raises)."""

    _lineage_record: LineageRecord | None = None

    def lineage_before_run(self) -> LineageRecord:
        """The datasets known before the run (its rendered fields and connections: reads them through the task's
        hooks); no network I/O."""
        raise NotImplementedError

    def record_lineage(self, record: LineageRecord) -> None:
        self._lineage_record = record

    def record_lineage_error(self, error: BaseException) -> None:
        """Record the datasets known before the run and ``error``; a failure to name them is no concern of the
        failing task (it must fail with ``error``, not with that)."""
        try:
            self.record_lineage(replace(self.lineage_before_run(), error=f"{type(error).__name__}: {error}"))
        except Exception:  # noqa: BLE001 - lineage never changes how a task fails
            self._lineage_record = None

    def get_openlineage_facets_on_start(self) -> OperatorLineage[Any, Any]:
        """No I/O: no dataset (naming one reads a connection), no run facet (the counts come with the run)."""
        return operator_lineage(LineageRecord(inputs=(), outputs=()))

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage[Any, Any]:
        return operator_lineage(self._lineage_record or self.lineage_before_run())

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> OperatorLineage[Any, Any]:
        """What the run did before it failed; the listener adds the exception it failed with (``errorMessage``)
        where it has one, else the recorded error stands."""
        return operator_lineage(self._lineage_record or self.lineage_before_run())

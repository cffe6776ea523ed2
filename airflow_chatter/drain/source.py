"""A source's leases: its verified containers, its Source Identity, its LeaseStore and its LeaseTopology.

:meth:`SourceLeases.open` does the I/O a source needs before anything is drained, in this order: verify both
containers (CNT: a container the drain cannot serve safely is refused with every violation at once, never drained
degraded), then choose the Source Identity (SRC-02), then build the LeaseStore and the LeaseTopology on them. Every
request made through it is charged to its ``request_units`` (F-11), paced (under the source's cap and what the
container serves) and retried on 429 within the drain's wait budget.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TypedDict, Unpack

from airflow_chatter.clock import Clock, utc_now
from airflow_chatter.drain.identity import SourceIdentity, instance_name
from airflow_chatter.drain.leases import LeaseStore
from airflow_chatter.drain.monitored_container import verify_containers
from airflow_chatter.drain.options import SourceOptions
from airflow_chatter.drain.request_units import LEASES, RequestUnits
from airflow_chatter.drain.topology import LeaseTopology
from airflow_chatter.ports import ContainerProperties, DocumentContainer
from airflow_chatter.ports.request_priority import LOW, RequestPriority
from airflow_chatter.ports.throttle import ThrottleLimits


class LeaseOpening(TypedDict, total=False):
    """How :meth:`SourceLeases.open` opens a source's leases; every key is optional."""

    #: The UTC wall clock: lease expiry, suspension windows, lag (default ``utc_now``).
    clock: Clock
    #: The name of this drain on the leases it takes (default: host + uuid).
    owner: str | None
    #: Where leases created for new ranges start reading (default the beginning; RLY-08).
    start_from: datetime | None
    #: The Cosmos connection's 429 limits, each overridden by the source's own (F-11).
    throttle_limits: ThrottleLimits | None
    #: The Cosmos connection's request priority, overridden by the source's own (F-11; neither set: low).
    request_priority: RequestPriority | None
    #: Monotonic seconds and the sleep of the drain's pace and 429 waits (default ``time.monotonic`` / ``sleep``).
    monotonic: Callable[[], float]
    sleep: Callable[[float], None]


@dataclass(frozen=True)
class SourceLeases:
    """One source's verified containers and the lease set they serve; build it with :meth:`open`."""

    source: SourceOptions
    #: The monitored container, metered (every request charged to ``request_units``), paced, 429s retried.
    monitored: DocumentContainer
    properties: ContainerProperties
    identity: SourceIdentity
    store: LeaseStore
    topology: LeaseTopology
    request_units: RequestUnits
    throttle_limits: ThrottleLimits
    clock: Clock

    @classmethod
    def open(
        cls,
        source: SourceOptions,
        monitored: DocumentContainer,
        leases: DocumentContainer,
        **opening: Unpack[LeaseOpening],
    ) -> SourceLeases:
        """Verify both containers and build the source's lease set on them, as ``opening`` says (``LeaseOpening``).

        Raises one ``ContainerContractError`` naming every violation of both containers, each under its own name.
        """
        properties, lease_properties = verify_containers(monitored, source.partition_key_paths, leases)
        identity = source_identity(source, properties, lease_properties)
        clock = opening.get("clock", utc_now)
        limits = (opening.get("throttle_limits") or ThrottleLimits()).overridden(
            source.max_throttle_retries, source.max_throttle_wait_seconds
        )
        units = RequestUnits(
            limits,
            cap=source.max_request_units_per_second,
            priority=source.request_priority or opening.get("request_priority") or LOW,
            clock=opening.get("monotonic", time.monotonic),
            sleep=opening.get("sleep", time.sleep),
        )
        metered = units.retrying(monitored)
        store = LeaseStore(
            units.retrying(leases, kind=LEASES),
            identity.processor_name,
            owner=opening.get("owner") or instance_name(),
            lease_prefix=source.lease_prefix,
            lease_duration_seconds=source.lease_duration_seconds,
            clock=clock,
            start_from=opening.get("start_from"),
        )
        return cls(source, metered, properties, identity, store, LeaseTopology(store, metered), units, limits, clock)


def source_identity(
    source: SourceOptions, monitored: ContainerProperties, lease: ContainerProperties
) -> SourceIdentity:
    """SRC-02: the declared pair when given, else the ground truth of both containers."""
    if source.monitored_source_identity is not None and source.lease_source_identity is not None:
        return SourceIdentity.declared(source.monitored_source_identity, source.lease_source_identity)
    return SourceIdentity.ground_truth(monitored, lease)


__all__ = ["LeaseOpening", "SourceLeases", "source_identity"]

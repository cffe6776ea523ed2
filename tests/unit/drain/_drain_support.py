"""Shared helpers for the drain engine's unit tests: a manual clock, metric readers, document builders."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader, NumberDataPoint

from airflow_chatter.drain.telemetry import DrainTelemetry
from airflow_chatter.outbox.document import OutboxMessage
from airflow_chatter.ports import Document
from airflow_chatter.testing.clock import ManualClock

T0 = datetime(2026, 11, 30, 6, 0, 0, tzinfo=UTC)


@dataclass
class Metrics:
    """An SDK meter provider with an in-memory reader, and lookups by instrument name."""

    reader: InMemoryMetricReader = field(default_factory=InMemoryMetricReader)

    def __post_init__(self) -> None:
        self.provider = MeterProvider(metric_readers=[self.reader])

    def telemetry(self, **kwargs: Any) -> DrainTelemetry:
        return DrainTelemetry(meter_provider=self.provider, **kwargs)

    def collect(self) -> dict[str, list[Any]]:
        """Instrument name -> its data points (cumulative)."""
        data = self.reader.get_metrics_data()
        found: dict[str, list[Any]] = {}
        if data is None:
            return found
        for resource_metrics in data.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    found.setdefault(metric.name, []).extend(metric.data.data_points)
                    found.setdefault(f"{metric.name}#unit", []).append(metric.unit)
                    found.setdefault(f"{metric.name}#scope", []).append(scope_metrics.scope.name)
        return found

    def counter(self, name: str, **attributes: Any) -> int:
        """Sum of a counter's points whose attributes include ``attributes`` (dots given as ``__``)."""
        wanted = {k.replace("__", "."): v for k, v in attributes.items()}
        total = 0
        for point in self.collect().get(name, []):
            assert isinstance(point, NumberDataPoint)
            if all(point.attributes.get(k) == v for k, v in wanted.items()):
                total += int(point.value)
        return total

    def points(self, name: str) -> list[Any]:
        return self.collect().get(name, [])

    def histogram_values(self, name: str) -> tuple[int, float]:
        """(count, sum) across every point of a histogram."""
        count, total = 0, 0.0
        for point in self.points(name):
            assert isinstance(point, HistogramDataPoint)
            count += point.count
            total += point.sum
        return count, total


def outbox_doc(
    message_id: str | None = None,
    tenant: Any = "t1",
    *,
    destination: str = "orders",
    body: str = '{"n":1}',
    context: dict[str, Any] | None = None,
    paths: tuple[str, ...] = ("/tenantId",),
    **overrides: Any,
) -> Document:
    """A genuine pending outbox document (default on ``/tenantId``); ``overrides`` change exactly those fields."""
    message = OutboxMessage(
        message_id or f"msg-{uuid.uuid4().hex[:8]}",
        destination,
        body,
        "application/json",
        context or {},
    )
    doc = message.to_document(paths, tenant)
    for key, value in overrides.items():
        if value is _ABSENT:
            doc.pop(key, None)
        else:
            doc[key] = value
    return doc


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


#: Pass as an override to remove a field from a built document.
ABSENT: Any = _Absent()
_ABSENT = ABSENT


def domain_doc(item_id: str | None = None, tenant: Any = "t1", **fields: Any) -> Document:
    """An application document that shares the container (never drained)."""
    return {"id": item_id or f"order-{uuid.uuid4().hex[:8]}", "tenantId": tenant, "kind": "order", **fields}


def header(message: Any, name: str) -> bytes | None:
    for key, value in message.headers:
        if key == name:
            return value
    return None


def context_json(**entries: Any) -> str:
    return json.dumps(entries, separators=(",", ":"))


def ids(documents: Iterable[Document]) -> list[str]:
    return [d["id"] for d in documents]


# ------------------------------------------------------------------------------------------------
# The rig: two in-memory containers, a fake publisher, a manual clock and an SDK meter provider.
# Everything that touches MemoryDocumentContainer's own API (fault injection, counters, splits)
# goes through the few functions below, so the tests read in port terms.
# ------------------------------------------------------------------------------------------------

from airflow_chatter.adapters.memory.container import MemoryDocumentContainer
from airflow_chatter.adapters.memory.faults import OperationCall, fail
from airflow_chatter.drain.engine import DrainEngine
from airflow_chatter.drain.options import SourceOptions
from airflow_chatter.drain.summary import DrainSummary
from airflow_chatter.ports import BatchFailed, ContainerError, FeedRange
from airflow_chatter.testing.fakes import FakePublisher
from airflow_chatter.testing.handlers import first_of


def memory_container(
    clock: ManualClock,
    *,
    paths: tuple[str, ...] = ("/tenantId",),
    default_ttl: int | None = -1,
    container_id: str = "orders",
) -> MemoryDocumentContainer:
    return MemoryDocumentContainer(
        partition_key_paths=paths,
        default_ttl=default_ttl,
        clock=clock,
        container_id=container_id,
    )


def fail_operation(container: MemoryDocumentContainer, operation: str, error: BaseException, **when: Any) -> None:
    """Arm a fault: ``on_call=n`` (1-based) or ``times=n`` / forever."""
    container.handler = first_of(container.handler, fail(operation, error=error, **when))


def clear_faults(container: MemoryDocumentContainer) -> None:
    container.handler = None


def calls(container: MemoryDocumentContainer, operation: str) -> int:
    return container.calls[operation]


def split(container: MemoryDocumentContainer, feed_range: FeedRange) -> tuple[FeedRange, ...]:
    return tuple(container.split_feed_range(feed_range))


def merge(container: MemoryDocumentContainer, left: FeedRange, right: FeedRange) -> FeedRange:
    return container.merge_feed_ranges(left, right)


def fail_stamp(container: MemoryDocumentContainer, item_id: str, error: ContainerError) -> None:
    """Fail every stamp of one document, however it is written: its point patch (one by one, or a refused batch's
    fallback), and any transactional batch that carries it, refused as a whole as Cosmos refuses a batch one of
    whose operations fails (``BatchFailed``: that operation's status, 424 for the others)."""

    def carries(call: OperationCall) -> bool:
        return any(op.id == item_id for op in call.arguments["operations"])

    def refused(call: OperationCall) -> BatchFailed:
        ids = [op.id for op in call.arguments["operations"]]
        index = ids.index(item_id)
        status = error.status_code or 500
        statuses = [status if i == index else 424 for i in range(len(ids))]
        return BatchFailed(str(error), failed_index=index, status_code=status, operation_statuses=statuses)

    container.handler = first_of(container.handler, fail("execute_batch", error=refused, when=carries))
    container.handler = first_of(
        container.handler, fail("patch", error=error, when=lambda call: call.item_id == item_id)
    )


@dataclass
class Rig:
    clock: ManualClock = field(default_factory=lambda: ManualClock(T0))
    metrics: Metrics = field(default_factory=Metrics)
    paths: tuple[str, ...] = ("/tenantId",)

    def __post_init__(self) -> None:
        self.monitored = memory_container(self.clock, paths=self.paths)
        self.leases = memory_container(self.clock, paths=("/id",), container_id="leases")
        self.publisher = FakePublisher()
        self.telemetry = self.metrics.telemetry()

    def source(self, **kwargs: Any) -> SourceOptions:
        kwargs.setdefault("name", "orders-outbox")
        kwargs.setdefault("partition_key_paths", self.paths)
        # A test that asserts the one-by-one order (RLY-07) names stamp_mode="sequential" itself.
        return SourceOptions(**kwargs)

    def engine(
        self, publishers: Any = None, *, owner: str = "drain-a", timing: Any = None, **source_kwargs: Any
    ) -> DrainEngine:
        """``timing``: ``(monotonic, sleep)`` for the drain's pace and 429 waits (default the real ones)."""
        opening: dict[str, Any] = {} if timing is None else {"monotonic": timing[0], "sleep": timing[1]}
        return DrainEngine.open(
            self.source(**source_kwargs),
            self.monitored,
            self.leases,
            publishers if publishers is not None else self.publisher,
            clock=self.clock,
            telemetry=self.telemetry,
            owner=owner,
            **opening,
        )

    def engine_with(
        self, *, throttle_limits: Any = None, connection_priority: Any = None, timing: Any = None, **source_kwargs: Any
    ) -> DrainEngine:
        """An engine given the Cosmos connection's 429 limits and request priority (what the Airflow layer reads
        from the hook); ``timing`` as for :meth:`engine`."""
        opening: dict[str, Any] = {} if timing is None else {"monotonic": timing[0], "sleep": timing[1]}
        return DrainEngine.open(
            self.source(**source_kwargs),
            self.monitored,
            self.leases,
            self.publisher,
            clock=self.clock,
            telemetry=self.telemetry,
            owner="drain-a",
            throttle_limits=throttle_limits,
            request_priority=connection_priority,
            **opening,
        )

    def seed(self, *documents: Document) -> list[Document]:
        return [self.monitored.create(doc, self._pk(doc)) for doc in documents]

    def current(self, doc: Document) -> Document:
        return self.monitored.read(doc["id"], self._pk(doc))

    def drain(self, engine: DrainEngine | None = None, **kwargs: Any) -> DrainSummary:
        """Drain the (single) lease of the monitored container once."""
        engine = engine or self.engine()
        summaries = engine.drain_all(**kwargs)
        assert len(summaries) == 1, summaries
        return summaries[0]

    def lease(self, engine: DrainEngine) -> Any:
        (only,) = engine.store.list_leases()
        return only

    def _pk(self, doc: Document) -> Any:
        from airflow_chatter.outbox.partition_keys import recover_partition_key

        return recover_partition_key(doc, self.paths)

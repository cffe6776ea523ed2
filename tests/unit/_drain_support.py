"""Shared helpers for the drain engine's unit tests: a manual clock, metric readers, document builders."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader, NumberDataPoint

from airflow_chatter.outbox import OutboxMessage
from airflow_chatter.ports import Document
from airflow_chatter.telemetry import DrainTelemetry

T0 = datetime(2026, 11, 30, 6, 0, 0, tzinfo=timezone.utc)


@dataclass
class ManualClock:
    """A UTC wall clock the test moves by hand (never sleeps)."""

    now: datetime = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


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
    **overrides: Any,
) -> Document:
    """A genuine pending outbox document on ``/tenantId``; ``overrides`` change exactly those fields."""
    message = OutboxMessage(
        message_id or f"msg-{uuid.uuid4().hex[:8]}",
        destination,
        body,
        "application/json",
        context or {},
    )
    doc = message.to_document(("/tenantId",), tenant)
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

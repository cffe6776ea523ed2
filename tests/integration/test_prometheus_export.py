"""The Prometheus recipe of docs/ui.md, run: a drain against the emulator and the real broker records its
OpenTelemetry instruments through a meter provider with a Prometheus reader, and ``/metrics`` on 127.0.0.1 serves
them under the names and labels the docs give. Skipped only when ``opentelemetry-exporter-prometheus`` (the
``prometheus`` extra) is not installed.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from airflow_chatter.adapters.cosmos.container import CosmosDocumentContainer
from airflow_chatter.adapters.kafka.admin import ensure_topics
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.drain.engine import DrainEngine
from airflow_chatter.drain.options import SourceOptions
from airflow_chatter.drain.telemetry import DrainTelemetry
from airflow_chatter.outbox.document import OutboxMessage
from tests.fixtures.cosmos import ContainerFactory

pytest.importorskip("opentelemetry.exporter.prometheus", reason="the prometheus extra is not installed")

# --8<-- [start:serve]
from opentelemetry import metrics  # noqa: E402 - after the skip: the recipe needs the extra
from opentelemetry.exporter.prometheus import PrometheusMetricReader  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from prometheus_client import CollectorRegistry, start_http_server  # noqa: E402


@dataclass
class PrometheusEndpoint:
    """The running ``/metrics`` endpoint and the meter provider behind it; ``stop`` shuts both down."""

    provider: MeterProvider
    server: Any
    port: int

    def stop(self) -> None:
        self.server.shutdown()
        self.provider.shutdown()  # also takes the reader's collector out of the registry


def serve_prometheus(port: int = 9464, addr: str = "127.0.0.1", *, set_global: bool = True) -> PrometheusEndpoint:
    """Serve ``/metrics`` on ``addr:port`` (0: any free port) from a meter provider with a Prometheus reader.

    ``set_global`` makes it the process's global meter provider, which every drain uses unless given another one
    (OpenTelemetry lets a process set it once)."""
    registry = CollectorRegistry()  # only the OpenTelemetry metrics, no Python process collectors
    reader = PrometheusMetricReader(registry=registry)
    provider = MeterProvider(metric_readers=[reader], resource=Resource.create({"service.name": "airflow-chatter"}))
    if set_global:
        metrics.set_meter_provider(provider)
    server, _thread = start_http_server(port, addr=addr, registry=registry)
    return PrometheusEndpoint(provider, server, server.server_address[1])


# --8<-- [end:serve]

pytestmark = [pytest.mark.kafka, pytest.mark.cosmos]


@pytest.fixture
def endpoint() -> Iterator[PrometheusEndpoint]:
    # Not the global provider: another test of this session may have set it, and a process sets it once.
    served = serve_prometheus(0, set_global=False)
    yield served
    served.stop()


def _sample(text: str, name: str, **labels: str) -> float:
    """The value of the one sample ``name`` whose labels include ``labels``."""
    values = []
    for line in text.splitlines():
        match = re.match(r"^(\w+)\{(.*)\} (\S+)$", line)
        if match and match.group(1) == name:
            found = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(2)))
            if all(found.get(k) == v for k, v in labels.items()):
                values.append(float(match.group(3)))
    assert len(values) == 1, f"{name}{labels}: {values} in\n{text}"
    return values[0]


def test_a_drain_with_the_prometheus_reader_serves_its_instruments_on_metrics(
    endpoint: PrometheusEndpoint, cosmos_container_factory: ContainerFactory, kafka_bootstrap: str
) -> None:
    monitored = CosmosDocumentContainer(cosmos_container_factory(("/tenantId",), -1))
    leases = CosmosDocumentContainer(cosmos_container_factory(("/id",), None))
    topic = f"chatter-prometheus.{uuid.uuid4().hex[:12]}"
    ensure_topics(KafkaSettings(bootstrap_servers=kafka_bootstrap), [topic], partitions=1)
    for n in range(3):
        message = OutboxMessage(f"prom-{n}", topic, json.dumps({"n": n}), "application/json")
        document = message.to_document(("/tenantId",), "acme")
        if n == 2:
            document.pop("Destination")  # undeliverable: the contract refuses it
        monitored.create(document, "acme")
    publisher = KafkaPublisher(KafkaSettings(bootstrap_servers=kafka_bootstrap, max_block_ms=15_000))
    try:
        source = SourceOptions(name="orders", partition_key_paths=("/tenantId",))
        telemetry = DrainTelemetry(meter_provider=endpoint.provider)
        engine = DrainEngine.open(source, monitored, leases, publisher, telemetry=telemetry, owner="prometheus-test")
        (summary,) = engine.drain_all()
    finally:
        publisher.close()
    assert (summary.published, summary.delivered, summary.undeliverable) == (2, 2, 1)

    response = httpx.get(f"http://127.0.0.1:{endpoint.port}/metrics", timeout=10)

    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    text = response.text
    print(text)  # the excerpt docs/ui.md shows comes from this output
    outcome = "chatter_messaging_outbox_drain_outcome"
    assert _sample(text, "chatter_messaging_outbox_drain_documents_total", **{outcome: "admitted"}) == 2
    assert _sample(text, "chatter_messaging_outbox_drain_undeliverable_total") == 1
    assert _sample(text, "chatter_messaging_outbox_drain_lag_seconds_count") == 3
    assert "# TYPE chatter_messaging_outbox_drain_batch_size histogram" in text
    assert 'service_name="airflow-chatter"' in text, "the resource is exported as target_info"

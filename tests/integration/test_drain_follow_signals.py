"""A following drain killed mid-stream (F-04, RLY-05): SIGTERM ends it at a page boundary, SIGKILL anywhere.

A child process follows one lease of an emulator container while this test writes pending documents at a steady
pace; the child is stopped mid-stream, the writes go on, and a second drain takes over. Every claim is read back
from Kafka and the lease document: nothing lost, at most one page published twice (none for SIGTERM).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from airflow_chatter.adapters.cosmos.container import CosmosDocumentContainer
from airflow_chatter.adapters.kafka.admin import ensure_topics
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.drain.engine import DrainEngine
from airflow_chatter.drain.options import SourceOptions
from airflow_chatter.drain.summary import DrainSummary
from airflow_chatter.outbox.document import OutboxMessage
from devkit.services import CosmosEndpoint
from tests.fixtures.cosmos import ContainerFactory
from tests.fixtures.kafka import consume_records
from tests.integration._follow_child import PAGE

pytestmark = [pytest.mark.kafka, pytest.mark.cosmos]

REPO = Path(__file__).resolve().parents[2]
BEFORE, AFTER = 30, 20  # documents written before and after the signal


def _write(monitored: CosmosDocumentContainer, topic: str, start: int, count: int) -> None:
    for i in range(start, start + count):
        tenant = f"tenant-{i % 3}"
        doc = OutboxMessage(f"m-{i}", topic, json.dumps({"i": i}), "application/json", {}).to_document(
            ("/tenantId",), tenant
        )
        monitored.create(doc, tenant)
        time.sleep(0.02)  # a steady stream, so the signal lands while pages are being published


def _take_over(
    monitored: CosmosDocumentContainer, leases: CosmosDocumentContainer, source: str, bootstrap: str
) -> DrainSummary:
    """A short drain of the same source by another owner, once the lease is free (released, or expired)."""
    publisher = KafkaPublisher(KafkaSettings(bootstrap_servers=bootstrap, client_id="chatter-follow-next"))
    options = SourceOptions(source, ("/tenantId",), max_batch_size=PAGE, lease_duration_seconds=60)
    try:
        with DrainEngine.open(options, monitored, leases, publisher, owner="next-run") as engine:
            for _ in range(100):
                (summary,) = engine.drain_all()
                if summary.lease_held_by is None:
                    return summary
                time.sleep(1)
            raise AssertionError("the killed drain's lease never expired")
    finally:
        publisher.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_f04_a_following_drain_killed_mid_stream_loses_nothing_and_repeats_at_most_one_page(
    sig: signal.Signals,
    cosmos_container_factory: ContainerFactory,
    cosmos_database: Any,
    cosmos_endpoint: CosmosEndpoint,
    kafka_bootstrap: str,
) -> None:
    monitored_proxy = cosmos_container_factory(("/tenantId",), -1)
    leases_proxy = cosmos_container_factory(("/id",), None)
    monitored, leases = CosmosDocumentContainer(monitored_proxy), CosmosDocumentContainer(leases_proxy)
    topic = f"chatter-follow.{uuid.uuid4().hex[:12]}"
    ensure_topics(KafkaSettings(bootstrap_servers=kafka_bootstrap), [topic], partitions=3)
    source = f"follow-{uuid.uuid4().hex[:8]}"
    config: dict[str, Any] = {
        "bootstrap": kafka_bootstrap,
        "endpoint": cosmos_endpoint.url,
        "key": cosmos_endpoint.key,
        "verify": cosmos_endpoint.verify,
        "database": cosmos_database.id,
        "monitored": monitored_proxy.id,
        "leases": leases_proxy.id,
        "source": source,
    }
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.integration._follow_child"],
        env={**os.environ, "CHILD_CONFIG": json.dumps(config)},
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "following", child.stderr.read() if child.stderr else ""
        _write(monitored, topic, 0, BEFORE)
        child.send_signal(sig)
        _write(monitored, topic, BEFORE, AFTER)
        out, err = child.communicate(timeout=90)
    finally:
        if child.poll() is None:
            child.kill()
    if sig == signal.SIGTERM:
        assert child.returncode == 0, err
        stopped = json.loads(out.strip().splitlines()[-1])
        assert stopped["error_type"] is None and stopped["published"] > 0, stopped
        (lease,) = leases.query("SELECT * FROM c")
        assert lease["owner"] is None, "released at the page boundary: the next run takes over at once"
    else:
        assert child.returncode == -signal.SIGKILL
    after = _take_over(monitored, leases, source, kafka_bootstrap)
    after.raise_for_error()
    total = BEFORE + AFTER
    records = consume_records(kafka_bootstrap, topic, total, timeout_s=60)
    counts = Counter(dict(r.headers)["message-id"].decode() for r in records)
    assert set(counts) == {f"m-{i}" for i in range(total)}, "nothing lost"
    repeated = sum(n - 1 for n in counts.values())
    if sig == signal.SIGTERM:
        assert repeated == 0, counts
    else:
        assert repeated <= PAGE, counts  # at most the page in flight when the process died
    statuses = Counter(d["status"] for d in monitored.query("SELECT c.status FROM c"))
    assert statuses == {"delivered": total}

"""Follow mode against the Cosmos emulator and the real Kafka broker: the memory scenarios of
tests/unit/drain/test_drain_follow.py, run unchanged through azure-cosmos and a Kafka producer (F-04, SUS-04).

The waits are scripted (``_follow_script.Script``): what happens while the drain waits between polls (a lease stolen,
a real split on the emulator, a suspension window running out) happens at a known poll, and the engine's clock is a
manual one the script moves, so nothing depends on wall-clock timing. Every claim is read back from Kafka (each
document once), the documents' states, the lease document and the summary.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from airflow_chatter.adapters.cosmos.container import CosmosDocumentContainer
from airflow_chatter.adapters.kafka.admin import ensure_topics
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.drain.engine import DrainEngine
from airflow_chatter.drain.follow import FOLLOW_FIELD, Follow, StopRequest
from airflow_chatter.drain.leases import SPLIT, LeaseLostError
from airflow_chatter.drain.options import SourceOptions
from airflow_chatter.drain.suspension import SuspensionState
from airflow_chatter.drain.telemetry import EMPTY_POLL_REQUEST_UNITS, EMPTY_POLLS, POLLS
from airflow_chatter.outbox.document import OutboxMessage
from airflow_chatter.ports import OutgoingMessage, Publisher, PublishOutcome
from airflow_chatter.ports.request_charges import charged_to, current_sink
from airflow_chatter.testing.clock import ManualClock
from devkit.services import CosmosEndpoint, emulator_admin, emulator_configured
from tests.fixtures.cosmos import ContainerFactory
from tests.fixtures.kafka import consume_records
from tests.unit.drain._drain_support import Metrics
from tests.unit.drain._follow_script import Script, steal

pytestmark = [pytest.mark.kafka, pytest.mark.cosmos]

TENANTS = [f"tenant-{i}" for i in range(12)]


class _CountedFeed(CosmosDocumentContainer):
    """The monitored container, counting change-feed reads: what the script tells one wait from the next by.

    ``on_read`` runs before each read (a test moves the manual clock there: a read that takes time)."""

    feed_reads = 0
    on_read: Callable[[], None] | None = None

    def read_change_feed(self, *args: Any, **kwargs: Any) -> Any:
        self.feed_reads += 1
        if self.on_read is not None:
            self.on_read()
        return super().read_change_feed(*args, **kwargs)


class _ChargedLeases(CosmosDocumentContainer):
    """The lease container, keeping each lease write's own charge, as the emulator reports it, in order."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.write_charges: list[float] = []

    def replace(self, *args: Any, **kwargs: Any) -> Any:
        outer = current_sink()
        charges: list[float] = []

        def both(charge: float) -> None:  # the drain is charged as usual; this write's charge is kept too
            charges.append(charge)
            if outer is not None:
                outer(charge)

        with charged_to(both):
            written = super().replace(*args, **kwargs)
        self.write_charges.append(sum(charges))
        return written


class _Recorded(Publisher):
    """The real Kafka publisher, recording each message id handed to it (what the drain published, in order)."""

    def __init__(self, inner: KafkaPublisher) -> None:
        self.inner = inner
        self.ids: list[str] = []

    def send_batch(self, messages: Sequence[OutgoingMessage]) -> list[PublishOutcome]:
        self.ids.extend(dict(m.headers)["message-id"].decode() for m in messages)
        return self.inner.send_batch(messages)

    def close(self) -> None:
        self.inner.close()


@dataclass
class _Rig:
    """One source over emulator containers, publishing to a fresh Kafka topic, on a manual clock."""

    monitored: _CountedFeed
    leases: _ChargedLeases
    bootstrap: str
    topic: str
    publisher: _Recorded
    clock: ManualClock = field(default_factory=lambda: ManualClock(datetime.now(UTC)))
    metrics: Metrics = field(default_factory=Metrics)
    source: str = field(default_factory=lambda: f"follow-{uuid.uuid4().hex[:8]}")

    def engine(self, owner: str = "drain-a", **settings: Any) -> DrainEngine:
        options = SourceOptions(self.source, ("/tenantId",), max_batch_size=3, **settings)
        return DrainEngine.open(
            options,
            self.monitored,
            self.leases,
            self.publisher,
            clock=self.clock,
            owner=owner,
            telemetry=self.metrics.telemetry(),
        )

    def seed(self, *labels: str) -> set[str]:
        """One pending document per label, spread over the tenants (so over every partition key range)."""
        for i, label in enumerate(labels):
            tenant = TENANTS[i % len(TENANTS)]
            doc = OutboxMessage(label, self.topic, json.dumps({"n": i}), "application/json").to_document(
                ("/tenantId",), tenant
            )
            self.monitored.create(doc, tenant)
        return set(labels)

    def script(self, at_poll: dict[int, Callable[[], None]] | None = None) -> Script:
        return Script(lambda: self.monitored.feed_reads, self.clock.advance, at_poll or {})

    def on_kafka(self, expected: int) -> Counter[str]:
        records = consume_records(self.bootstrap, self.topic, expected, timeout_s=60)
        return Counter(dict(r.headers)["message-id"].decode() for r in records)

    def statuses(self) -> dict[str, str]:
        return {str(d["MessageId"]): str(d["status"]) for d in self.monitored.query("SELECT * FROM c")}

    def lease(self, lease_id: str) -> dict[str, Any]:
        return dict(self.leases.read(lease_id, lease_id))


@pytest.fixture
def make_rig(cosmos_container_factory: ContainerFactory, kafka_bootstrap: str) -> Iterator[Callable[[Any], _Rig]]:
    made: list[_Rig] = []

    def make(monitored_proxy: Any = None) -> _Rig:
        proxy = monitored_proxy if monitored_proxy is not None else cosmos_container_factory(("/tenantId",), -1)
        topic = f"chatter-follow.{uuid.uuid4().hex[:12]}"
        ensure_topics(KafkaSettings(bootstrap_servers=kafka_bootstrap), [topic], partitions=3)
        publisher = _Recorded(
            KafkaPublisher(KafkaSettings(bootstrap_servers=kafka_bootstrap, client_id="chatter-follow-test"))
        )
        rig = _Rig(
            _CountedFeed(proxy),
            _ChargedLeases(cosmos_container_factory(("/id",), None)),
            kafka_bootstrap,
            topic,
            publisher,
        )
        made.append(rig)
        return rig

    yield make
    for rig in made:
        rig.publisher.close()


def test_f04_a_lease_stolen_while_following_is_noticed_before_the_next_publish(
    make_rig: Callable[[Any], _Rig],
) -> None:
    rig = make_rig(None)
    rig.seed("msg-0")
    engine = rig.engine()
    [lease] = engine.ensure_leases()

    def steal_and_write() -> None:
        steal(rig.leases, lease.id, "drain-b")
        rig.seed("msg-1")

    summary = engine.drain_lease(lease.id, follow=rig.script({2: steal_and_write}).follow())
    assert isinstance(summary.error, LeaseLostError)
    assert rig.publisher.ids == ["msg-0"], "msg-1 is the new owner's to publish"
    assert rig.on_kafka(1) == {"msg-0": 1}
    assert rig.lease(lease.id)["owner"] == "drain-b", "the loser wrote nothing over the new owner's lease"
    assert rig.statuses() == {"msg-0": "delivered", "msg-1": "pending"}
    # The polls (the empty ones, and the one that found msg-1), and what the empty ones cost, as instruments.
    assert summary.empty_polls >= 2 and summary.polls == summary.empty_polls + 1
    assert summary.empty_poll_request_units > 0, "an empty change-feed read is charged"
    assert (rig.metrics.counter(POLLS), rig.metrics.counter(EMPTY_POLLS)) == (summary.polls, summary.empty_polls)
    units = sum(p.value for p in rig.metrics.points(EMPTY_POLL_REQUEST_UNITS))
    assert round(units, 2) == summary.empty_poll_request_units
    # The new owner (once the stolen lease is free) publishes msg-1, once.
    steal(rig.leases, lease.id, None)
    rig.engine(owner="drain-b").drain_lease(lease.id).raise_for_error()
    assert rig.on_kafka(2) == {"msg-0": 1, "msg-1": 1}
    assert rig.statuses() == {"msg-0": "delivered", "msg-1": "delivered"}


def test_sus_04_a_suspended_lease_while_following_publishes_nothing_until_its_probe(
    make_rig: Callable[[Any], _Rig],
) -> None:
    rig = make_rig(None)
    engine = rig.engine()
    [lease] = engine.ensure_leases()
    engine.store.save_suspension(engine.store.get(lease.id), SuspensionState(5, True, rig.clock(), False))
    rig.seed("msg-0")
    suspended_at = rig.clock()
    stop = StopRequest()
    script = rig.script()
    seen: list[tuple[timedelta, int]] = []

    def sleep(seconds: float) -> None:
        seen.append((rig.clock() - suspended_at, len(rig.publisher.ids)))
        if rig.publisher.ids:
            stop.request()
        script.sleep(seconds)

    summary = engine.drain_lease(
        lease.id, follow=Follow(0.25, should_stop=stop, sleep=sleep, monotonic=script.monotonic)
    )
    summary.raise_for_error()
    assert rig.publisher.ids == ["msg-0"], "the probe batch went out, once"
    assert seen and all(sent == 0 for elapsed, sent in seen if elapsed < timedelta(seconds=60))
    assert summary.refused_batches >= 1
    assert rig.monitored.feed_reads < 12, "waiting out the window is a handful of feed reads, not one per slice"
    assert rig.on_kafka(1) == {"msg-0": 1}
    document = rig.lease(lease.id)
    assert document["owner"] is None, "released"
    assert not engine.store.get(lease.id).suspension.suspended, "the probe's receipt closed the suspension"
    assert rig.statuses() == {"msg-0": "delivered"}


def test_f04_a_real_split_while_following_hands_over_to_the_children_and_delivers_everything_once(
    cosmos_endpoint: CosmosEndpoint, cosmos_container_factory: ContainerFactory, make_rig: Callable[[Any], _Rig]
) -> None:
    if not cosmos_endpoint.is_emulator:
        pytest.skip("a real account cannot be split on demand")
    with emulator_configured(cosmos_endpoint, partition_ranges=2):
        proxy = cosmos_container_factory(("/tenantId",), -1)
    rig = make_rig(proxy)
    before = rig.seed(*(f"before-{i}" for i in range(len(TENANTS))))
    engine = rig.engine()
    first, other = engine.ensure_leases()
    after: set[str] = set()

    def split_and_write() -> None:
        link = proxy.container_link
        ranges = emulator_admin(cosmos_endpoint, "GET", "ranges", params={"container": link})["ranges"]
        span = json.loads(engine.store.get(first.id).feed_range.token)["Range"]
        [range_id] = [r["id"] for r in ranges if (r["minInclusive"], r["maxExclusive"]) == (span["min"], span["max"])]
        emulator_admin(cosmos_endpoint, "POST", "split", body={"container": link, "range_id": range_id})
        after.update(rig.seed(*(f"after-{i}" for i in range(len(TENANTS)))))

    summary = engine.drain_lease(first.id, follow=rig.script({2: split_and_write}).follow())
    summary.raise_for_error()
    assert after, "the split happened while the drain followed"
    assert len(summary.split_into) == 2, "the following drain met the split and handed over to the children"
    assert engine.store.get(first.id).state == SPLIT
    for lease_id in [*summary.split_into, other.id]:
        engine.drain_lease(lease_id).raise_for_error()
    everything = before | after
    assert Counter(rig.publisher.ids) == dict.fromkeys(everything, 1), "each document published once"
    assert rig.on_kafka(len(everything)) == dict.fromkeys(everything, 1)
    assert rig.statuses() == dict.fromkeys(everything, "delivered")
    assert FOLLOW_FIELD in rig.lease(first.id), "the following drain kept its live counts on its lease"


def test_f11_the_request_units_of_empty_polls_include_the_lease_renewals_they_wrote(
    cosmos_endpoint: CosmosEndpoint, make_rig: Callable[[Any], _Rig]
) -> None:
    if not cosmos_endpoint.is_emulator:
        pytest.skip("the emulator's request-charges switch")
    rig = make_rig(None)
    engine = rig.engine(lease_duration_seconds=1.0)  # renewed every half second: every other poll of 0.25 s
    [lease] = engine.ensure_leases()
    rig.monitored.on_read = lambda: rig.clock.advance(0.2)  # a read takes time: a renewal may fall due meanwhile
    stop = StopRequest()
    with emulator_configured(cosmos_endpoint, request_charges=True):
        summary = engine.drain_lease(lease.id, follow=rig.script({12: stop.request}).follow(stop))
    summary.raise_for_error()
    take, *renewals, release = rig.leases.write_charges
    assert len(renewals) >= 3 and summary.empty_polls == rig.monitored.feed_reads == 12
    assert min(rig.leases.write_charges) > 1, "modelled charges, not the constant 1"
    # Every charge of an idle follow is an empty poll's (its feed read, the renewal it wrote), but the take (a read
    # and a write) and the release of the lease.
    assert summary.empty_poll_request_units == pytest.approx(
        summary.request_units_by_kind["feed"] + sum(renewals), abs=0.05
    )
    assert summary.request_units_by_kind["leases"] > take + sum(renewals) + release, "the take's read, besides"
    units = sum(p.value for p in rig.metrics.points(EMPTY_POLL_REQUEST_UNITS))
    assert round(units, 2) == summary.empty_poll_request_units

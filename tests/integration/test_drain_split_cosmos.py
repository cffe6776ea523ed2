"""A feed-range split, drained through azure-cosmos: each child lease drains its own half, once (F-04).

Two ways. A real split: the emulator serves two partition key ranges and splits one on demand (docs/emulator.md);
the drain learns of it as on an account, from a 410 the SDK follows and then ``FeedRangeGone``. And a listed split:
the container's feed ranges listed as two halves of the range it had. Those halves are real EPK sub-ranges that the SDK
reads (it sends their bounds, the emulator's compat layer filters by them), and each child lease resumes from its
parent's continuation, which is exactly what happens after a split on an account. Against a real account
(``COSMOS_ENDPOINT``/``COSMOS_KEY``) the same test runs unchanged.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from airflow_chatter.adapters.cosmos.container import CosmosDocumentContainer
from airflow_chatter.drain.engine import DrainEngine
from airflow_chatter.drain.leases import SPLIT, Lease
from airflow_chatter.drain.options import SourceOptions
from airflow_chatter.outbox.document import OutboxMessage
from airflow_chatter.ports import BadRequest, Document, FeedRange, PartitionKey, ServiceUnavailable
from airflow_chatter.testing.fakes import FakePublisher
from tests.fixtures.cosmos import (
    ContainerFactory,
    CosmosEndpoint,
    emulator_admin,
    emulator_configured,
    sdk_feed_range_halves,
)

pytestmark = pytest.mark.cosmos

TENANTS = [f"tenant-{i}" for i in range(12)]


class _ListedAsSplit(CosmosDocumentContainer):
    """Lists ``halves`` as the container's feed ranges once they are set: the split, as the lease store sees it."""

    halves: Sequence[FeedRange] = ()

    def read_feed_ranges(self, *, force_refresh: bool = False) -> list[FeedRange]:
        return list(self.halves) if self.halves else super().read_feed_ranges(force_refresh=force_refresh)


def _seed(monitored: CosmosDocumentContainer, run: str, label: str) -> set[str]:
    ids = set()
    for tenant in TENANTS:
        message_id = f"{run}-{label}-{tenant}"
        doc = OutboxMessage(message_id, "orders", json.dumps({"tenant": tenant}), "application/json").to_document(
            ("/tenantId",), tenant
        )
        monitored.create(doc, tenant)
        ids.add(message_id)
    return ids


def test_f04_after_a_split_each_child_lease_drains_only_its_half_from_the_parent_checkpoint(
    cosmos_container_factory: ContainerFactory,
) -> None:
    monitored = _ListedAsSplit(cosmos_container_factory(("/tenantId",), -1))
    leases = CosmosDocumentContainer(cosmos_container_factory(("/id",), None))
    publisher = FakePublisher()
    source = SourceOptions(name=f"split-{uuid.uuid4().hex[:8]}", partition_key_paths=("/tenantId",), max_batch_size=5)
    engine = DrainEngine.open(source, monitored, leases, publisher, owner="split-test")
    run = uuid.uuid4().hex[:8]

    before = _seed(monitored, run, "before")
    [parent] = engine.ensure_leases()
    [summary] = engine.drain_all()
    summary.raise_for_error()
    assert {m.headers[0][1].decode() for m in publisher.sent} == before

    # The range splits while more documents arrive; the store finds the children when it lists the ranges.
    after = _seed(monitored, run, "after")
    monitored.halves = sdk_feed_range_halves(parent.feed_range)
    children = engine.ensure_leases()
    assert sorted(child.feed_range.token for child in children) == sorted(h.token for h in monitored.halves)
    assert engine.store.get(parent.id).state == SPLIT

    published: list[set[str]] = []
    for child in children:
        already = len(publisher.sent)
        engine.drain_lease(child.id).raise_for_error()
        published.append({m.headers[0][1].decode() for m in publisher.sent[already:]})

    # Each child published the documents of its own half only: read the half from the beginning to know which.
    statuses: dict[str, str] = {}
    for child, ids in zip(children, published, strict=True):
        latest = monitored.read_change_feed(child.feed_range, max_item_count=1_000).documents
        in_half = {str(doc["MessageId"]) for doc in latest if str(doc["MessageId"]).startswith(f"{run}-after-")}
        assert ids == in_half, "a child lease publishes its own half, not its parent's whole range"
        statuses.update((str(doc["MessageId"]), str(doc["status"])) for doc in latest)
    assert published[0] and published[1], "the halves split the tenants"
    assert published[0] | published[1] == after and not published[0] & published[1], "each document once"
    assert statuses == dict.fromkeys(before | after, "delivered")
    for child in children:
        assert engine.store.get(child.id).continuation != parent.continuation, "each child checkpointed its own"


def _published_ids(publisher: FakePublisher) -> list[str]:
    return [m.headers[0][1].decode() for m in publisher.sent]


@dataclass
class _Drained:
    """A source over an emulator container with several partition key ranges, every range drained once."""

    proxy: Any
    monitored: CosmosDocumentContainer
    leases: CosmosDocumentContainer
    publisher: FakePublisher
    engine: DrainEngine
    run: str
    first_leases: list[Lease]


def _drained_over_ranges(
    endpoint: CosmosEndpoint,
    factory: ContainerFactory,
    partition_ranges: int,
    monitored_type: type[CosmosDocumentContainer] = CosmosDocumentContainer,
    leases_type: type[CosmosDocumentContainer] = CosmosDocumentContainer,
) -> _Drained:
    if not endpoint.is_emulator:
        pytest.skip("a real account cannot be split on demand")
    with emulator_configured(endpoint, partition_ranges=partition_ranges):
        proxy = factory(("/tenantId",), -1)
    monitored = monitored_type(proxy)
    leases = leases_type(factory(("/id",), None))
    publisher = FakePublisher()
    source = SourceOptions(name=f"split-{uuid.uuid4().hex[:8]}", partition_key_paths=("/tenantId",), max_batch_size=3)
    engine = DrainEngine.open(source, monitored, leases, publisher, owner="split-test")
    run = uuid.uuid4().hex[:8]
    before = _seed(monitored, run, "before")
    first_leases = engine.ensure_leases()
    assert len(first_leases) == partition_ranges, "one lease per partition key range"
    for summary in engine.drain_all():
        summary.raise_for_error()
    assert sorted(_published_ids(publisher)) == sorted(before)
    return _Drained(proxy, monitored, leases, publisher, engine, run, first_leases)


def _split_on_the_server(endpoint: CosmosEndpoint, drained: _Drained, lease: Lease) -> dict[str, str]:
    """Split the partition key range ``lease`` drains (the SDK's routing map does not know yet); its EPK span."""
    link = drained.proxy.container_link
    ranges = emulator_admin(endpoint, "GET", "ranges", params={"container": link})["ranges"]
    span: dict[str, str] = json.loads(lease.feed_range.token)["Range"]
    [range_id] = [r["id"] for r in ranges if (r["minInclusive"], r["maxExclusive"]) == (span["min"], span["max"])]
    emulator_admin(endpoint, "POST", "split", body={"container": link, "range_id": range_id})
    return span


def test_f04_a_real_split_found_by_a_running_drain_hands_each_child_its_share_once(
    cosmos_endpoint: CosmosEndpoint, cosmos_container_factory: ContainerFactory
) -> None:
    drained = _drained_over_ranges(cosmos_endpoint, cosmos_container_factory, 2)
    monitored, publisher, engine, first_leases, proxy = (
        drained.monitored,
        drained.publisher,
        drained.engine,
        drained.first_leases,
        drained.proxy,
    )
    before = set(_published_ids(publisher))

    # The first range splits on the server; the SDK's routing map does not know yet. More documents arrive.
    parent_span = _split_on_the_server(cosmos_endpoint, drained, first_leases[0])
    after = _seed(monitored, drained.run, "after")
    already = len(publisher.sent)
    # The parent's lease drains on, from its checkpoint: the SDK gets 410 on the parent's range id, refreshes its
    # routing map and reads a child; the adapter then reports FeedRangeGone and the drain splits the lease.
    split_summary = engine.drain_lease(first_leases[0].id)
    split_summary.raise_for_error()
    assert len(split_summary.split_into) == 2, "the running drain met FeedRangeGone and split its lease"
    for lease_id in [*split_summary.split_into, first_leases[1].id]:
        engine.drain_lease(lease_id).raise_for_error()

    published_after = _published_ids(publisher)[already:]
    assert sorted(published_after) == sorted(after), "each new document once"
    parent = engine.store.get(first_leases[0].id)
    assert parent.state == SPLIT and len(parent.children) == 2, "the drain split the lease on FeedRangeGone"
    children = [engine.store.get(engine.store.lease_id(FeedRange(token))) for token in parent.children]
    spans = sorted(
        (json.loads(c.feed_range.token)["Range"]["min"], json.loads(c.feed_range.token)["Range"]["max"])
        for c in children
    )
    assert spans[0][0] == parent_span["min"] and spans[0][1] == spans[1][0] and spans[1][1] == parent_span["max"]
    statuses = {
        str(doc["MessageId"]): str(doc["status"])
        for doc in proxy.query_items("SELECT * FROM c", enable_cross_partition_query=True)
    }
    assert statuses == dict.fromkeys(before | after, "delivered")


class _NoOverlap(CosmosDocumentContainer):
    """A container whose feed-range overlaps cannot be computed (``BadRequest``, as for tokens not in the EPK format):
    the topology finds a split through ``is_feed_range_subset`` only."""

    def feed_range_overlap(self, a: FeedRange, b: FeedRange) -> FeedRange | None:
        raise BadRequest("the ranges cannot be compared")


class _StopsAtWrite(CosmosDocumentContainer):
    """A lease container whose ``stop_at``-th create or replace fails before it is sent: a listing that stops."""

    stop_at = 0
    writes = 0

    def _count(self) -> None:
        self.writes += 1
        if self.writes == self.stop_at:
            raise ServiceUnavailable("the listing stops here")

    def create(self, document: Document, partition_key: PartitionKey) -> Document:
        self._count()
        return super().create(document, partition_key)

    def replace(
        self, item_id: str, partition_key: PartitionKey, document: Document, *, if_match: str | None = None
    ) -> Document:
        self._count()
        return super().replace(item_id, partition_key, document, if_match=if_match)


def test_f04_a_real_split_found_without_overlaps_retires_the_parent_before_its_children_and_recovers_a_stop(
    cosmos_endpoint: CosmosEndpoint, cosmos_container_factory: ContainerFactory
) -> None:
    drained = _drained_over_ranges(cosmos_endpoint, cosmos_container_factory, 3, _NoOverlap, _StopsAtWrite)
    leases, publisher, engine, first_leases = drained.leases, drained.publisher, drained.engine, drained.first_leases
    assert isinstance(leases, _StopsAtWrite)
    parent_span = _split_on_the_server(cosmos_endpoint, drained, first_leases[1])
    after = _seed(drained.monitored, drained.run, "after")
    already = len(publisher.sent)

    # The listing stops at its second lease write (after the first step of the split): the parent must be retired
    # by then, never active beside a child, and it names its children for the next listing.
    leases.writes, leases.stop_at = 0, 2
    with pytest.raises(ServiceUnavailable, match="the listing stops here"):
        engine.ensure_leases()
    parent = engine.store.get(first_leases[1].id)
    assert parent.state == SPLIT and len(parent.children) == 2, "retired first, its children recorded"
    active = [lease for lease in engine.store.list_leases() if lease.state == "active"]
    assert parent.id not in {lease.id for lease in active}

    leases.stop_at = 0
    for summary in engine.drain_all():
        summary.raise_for_error()
    assert sorted(_published_ids(publisher)[already:]) == sorted(after), "each new document once"
    children = [engine.store.get(engine.store.lease_id(FeedRange(token))) for token in parent.children]
    assert all(child.state == "active" for child in children)
    spans = sorted(child.feed_range.epk_bounds() or ("", "") for child in children)
    assert (spans[0][0], spans[0][1], spans[1][1]) == (parent_span["min"], spans[1][0], parent_span["max"])

"""A feed-range split, drained through azure-cosmos: each child lease drains its own half, once (F-04).

The emulator has one physical partition and cannot split, so the split is what the lease store sees of one: the
container's feed ranges listed as two halves of the range it had. Those halves are real EPK sub-ranges that the SDK
reads (it sends their bounds, the emulator's compat layer filters by them), and each child lease resumes from its
parent's continuation, which is exactly what happens after a split on an account. Against a real account
(``COSMOS_ENDPOINT``/``COSMOS_KEY``) the same test runs unchanged.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence

import pytest

from airflow_chatter.adapters.cosmos.container import CosmosDocumentContainer
from airflow_chatter.drain.engine import DrainEngine
from airflow_chatter.drain.leases import SPLIT
from airflow_chatter.drain.options import SourceOptions
from airflow_chatter.outbox.document import OutboxMessage
from airflow_chatter.ports import FeedRange
from airflow_chatter.testing.fakes import FakePublisher
from tests.fixtures.cosmos import ContainerFactory, sdk_feed_range_halves

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
    engine = DrainEngine(source, monitored, leases, publisher, owner="split-test")
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

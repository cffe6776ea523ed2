"""F-10: the stamp writer's concurrency bound, its batch limits, and every batch of a page written exactly once.

The writer runs ``stamp_concurrency`` lanes that each take the next unwritten batch; these tests hold the container
inside its batches to see how many are in flight at once, and count what reached it.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Sequence

import pytest

from airflow_chatter.adapters.memory.container import MemoryDocumentContainer
from airflow_chatter.drain.stamps import StampRequest, StampWriter
from airflow_chatter.ports import BatchOperation, BatchOperationResult, PartitionKey, PatchOperation

DELIVERED = (PatchOperation("set", "/status", "delivered"),)


class HoldingContainer(MemoryDocumentContainer):
    """Counts the batches in flight; each batch waits until ``concurrency`` are in flight or no more can come."""

    def __init__(self, concurrency: int, batches: int) -> None:
        super().__init__(partition_key_paths=("/tenantId",))
        self._cond = threading.Condition()
        self._in_flight = 0
        self._started = 0
        self._concurrency, self._batches = concurrency, batches
        self.peak = 0
        self.keys: Counter[str] = Counter()

    def execute_batch(
        self, partition_key: PartitionKey, operations: Sequence[BatchOperation]
    ) -> list[BatchOperationResult]:
        with self._cond:
            self._in_flight += 1
            self._started += 1
            self.peak = max(self.peak, self._in_flight)
            self.keys[str(partition_key)] += 1
            self._cond.notify_all()
            # Hold until as many batches are in flight as the writer may have, or all of them have started.
            self._cond.wait_for(
                lambda: self._in_flight >= self._concurrency or self._started >= self._batches, timeout=10
            )
        try:
            return super().execute_batch(partition_key, operations)
        finally:
            with self._cond:
                self._in_flight -= 1
                self._cond.notify_all()


def _seeded(container: MemoryDocumentContainer, keys: int, per_key: int) -> list[StampRequest]:
    requests = []
    for i in range(per_key):
        for k in range(keys):
            item_id = f"doc-{k}-{i}"
            container.create({"id": item_id, "tenantId": f"t{k}", "status": "pending"}, f"t{k}")
            requests.append(StampRequest(item_id, f"t{k}", DELIVERED, "delivered"))
    return requests


@pytest.mark.parametrize("concurrency", [2, 3, 8])
def test_f10_batches_of_many_keys_run_at_most_stamp_concurrency_at_once_and_each_exactly_once(concurrency: int) -> None:
    keys = 20
    container = HoldingContainer(concurrency, batches=keys)
    requests = _seeded(container, keys, per_key=3)
    writer = StampWriter(container, "batched", concurrency)
    try:
        outcomes = writer.write(requests)
    finally:
        writer.close()
    assert container.peak == concurrency  # the bound is reached, never passed
    assert container.keys == Counter({f"t{k}": 1 for k in range(keys)})  # one batch per key, none written twice
    assert [o.request for o in outcomes] == requests  # each request's own outcome, in input order
    assert all(o.landed for o in outcomes)
    assert {container.read(r.item_id, r.partition_key)["status"] for r in requests} == {"delivered"}


def test_f10_an_error_a_batch_raises_outside_the_port_reaches_the_caller() -> None:
    class Broken(MemoryDocumentContainer):
        def execute_batch(
            self, partition_key: PartitionKey, operations: Sequence[BatchOperation]
        ) -> list[BatchOperationResult]:
            if partition_key == "t7":
                raise RuntimeError("a bug in the container, not a ContainerError")
            return super().execute_batch(partition_key, operations)

    container = Broken(partition_key_paths=("/tenantId",))
    requests = _seeded(container, 10, per_key=2)
    writer = StampWriter(container, "batched", 4)
    try:
        with pytest.raises(RuntimeError, match="a bug in the container"):
            writer.write(requests)
    finally:
        writer.close()


def test_f10_partition_keys_that_only_look_alike_never_share_a_batch() -> None:
    """Cosmos hashes ``"1"``, ``1``, ``1.0``-as-int, ``True`` and the hierarchical ``["1"]`` into different logical
    partitions; a batch is opened on one key, so each of them must get its own batch (or point patch), and the
    string that spells a hierarchical key's JSON must not join that key's batch either."""

    class Recording(MemoryDocumentContainer):
        def __init__(self) -> None:
            super().__init__(partition_key_paths=("/pk",))
            self.batches: list[tuple[PartitionKey, list[str]]] = []

        def execute_batch(
            self, partition_key: PartitionKey, operations: Sequence[BatchOperation]
        ) -> list[BatchOperationResult]:
            self.batches.append((partition_key, [op.id for op in operations]))
            return [BatchOperationResult(200, f"e-{op.id}", {"id": op.id, "status": "delivered"}) for op in operations]

    container = Recording()
    keys: list[PartitionKey] = ["1", 1, True, ["1"], '["1"]']
    requests = [StampRequest(f"{n}-{i}", key, DELIVERED, "delivered") for n, key in enumerate(keys) for i in range(2)]
    writer = StampWriter(container, "batched", 1)
    outcomes = writer.write(requests)
    assert [o.request for o in outcomes] == requests and all(o.landed for o in outcomes)
    by_key = sorted((repr(key), ids) for key, ids in container.batches)
    assert by_key == sorted((repr(key), [f"{n}-0", f"{n}-1"]) for n, key in enumerate(keys))


class RecordingContainer(MemoryDocumentContainer):
    """Records each transactional batch it is sent: its item ids and its JSON weight (ids and patch operations)."""

    def __init__(self) -> None:
        super().__init__(partition_key_paths=("/tenantId",))
        self.batches: list[tuple[list[str], int]] = []

    def execute_batch(
        self, partition_key: PartitionKey, operations: Sequence[BatchOperation]
    ) -> list[BatchOperationResult]:
        body = [{"id": op.id, "operations": [p.as_cosmos() for p in op.patch_operations]} for op in operations]
        self.batches.append(([op.id for op in operations], len(json.dumps(body))))
        return super().execute_batch(partition_key, operations)


def test_f10_a_batch_is_cut_before_2_mb_and_keeps_feed_order_within_its_key() -> None:
    """F-10: ≤ 100 operations and ≤ 2 MB per transactional batch. Stamps of 50 KB each (a long status value): 100 of
    them would weigh 5 MB, so the writer must cut a key's 100 requests into batches under 2 MB, in feed order."""
    container = RecordingContainer()
    heavy = (PatchOperation("set", "/status", "x" * 50_000),)
    requests = []
    for i in range(100):
        item_id = f"doc-{i:03d}"
        container.create({"id": item_id, "tenantId": "t0", "status": "pending"}, "t0")
        requests.append(StampRequest(item_id, "t0", heavy, "x" * 50_000))
    writer = StampWriter(container, "batched", 1)
    outcomes = writer.write(requests)
    assert all(o.landed for o in outcomes) and [o.request for o in outcomes] == requests
    assert len(container.batches) >= 3, "5 MB of stamps cannot go in fewer than three batches of 2 MB"
    assert all(weight <= 2 * 1024 * 1024 for _, weight in container.batches), [w for _, w in container.batches]
    written = [item_id for ids, _ in container.batches for item_id in ids]
    assert written == [r.item_id for r in requests]  # every stamp once, feed order kept within the key
    assert {container.read(r.item_id, "t0")["status"] for r in requests} == {"x" * 50_000}


def test_rly_07_a_sequential_writer_stops_at_the_first_failed_stamp_and_writes_nothing_after_it() -> None:
    """``stamp_mode: sequential``: one point patch per stamp in feed order; the first failure (a document deleted
    meanwhile) is the last outcome reported, and no later document is stamped."""
    container = MemoryDocumentContainer(partition_key_paths=("/tenantId",))
    requests = _seeded(container, keys=1, per_key=5)
    container.delete(requests[2].item_id, "t0")
    writer = StampWriter(container, "sequential")
    outcomes = writer.write(requests)
    assert [o.request for o in outcomes] == requests[:3]
    assert [o.landed for o in outcomes] == [True, True, False]
    assert outcomes[0].written is not None and outcomes[0].written["status"] == "delivered"
    later = [container.read(r.item_id, "t0")["status"] for r in (requests[0], requests[1], requests[3], requests[4])]
    assert later == ["delivered", "delivered", "pending", "pending"]

"""Writing stamps: grouped per partition key in transactional batches (F-10), or one by one (``sequential``).

The engine hands the writer a run's stamps in feed order, one :class:`StampRequest` each, and gets back one
:class:`StampOutcome` per request that was written: the document as the write returned it, or its error.

The writer groups the requests by partition key (feed order kept inside a group), cuts each group into batches of
at most ``max_batch_operations`` operations and :data:`MAX_BATCH_BYTES`, and writes the batches on up to
``concurrency`` lanes. A batch of one is a plain point patch (same charge, one request either way). A batch refused
as a whole (``BatchFailed`` for one of its operations: a document deleted meanwhile, a 412; or any other error of
the whole request) is retried operation by operation, so every document gets its own outcome and the documents
that can be stamped are. Each operation is still the RLY-03 patch.

``batched`` (the default) writes batches of up to :data:`MAX_BATCH_OPERATIONS` on ``concurrency`` lanes and
reports every request. ``sequential`` is the same writer with batches of one on one lane that stops at its first
failed stamp: the requests after it are neither written nor reported (RLY-07's one-by-one order).

WHY threads on the sync client, not the async one: the hook hands the drain a sync ``CosmosClient``; a request is
a blocking HTTP call that releases the GIL while it waits, so a handful of threads overlaps the round trips the
way an event loop would, with no second client, no second connection pool and no event loop inside an Airflow
task. docs/benchmarks.md measures the threads against one-by-one stamps and the emulator's own concurrent rate; an
async client was not measured.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Literal, NamedTuple

from airflow_chatter.ports import (
    BatchOperation,
    ContainerError,
    Document,
    DocumentContainer,
    PartitionKey,
    PatchOperation,
)

StampMode = Literal["batched", "sequential"]
STAMP_MODES: tuple[str, ...] = ("batched", "sequential")

#: Cosmos DB's limits for one transactional batch.
MAX_BATCH_OPERATIONS = 100
MAX_BATCH_BYTES = 2 * 1024 * 1024
#: Room kept for the request's own envelope when sizing a batch.
_BATCH_ROOM = MAX_BATCH_BYTES - 4096
#: A patch operation's share of a batch besides its id and its operations (the operation's own keys and quotes).
_OPERATION_OVERHEAD = 64

Operations = tuple[PatchOperation, ...]


class StampRequest(NamedTuple):
    """One status write: ``operations`` patched onto ``item_id`` in ``partition_key``; ``status`` is the value set."""

    item_id: str
    partition_key: PartitionKey
    operations: Operations
    status: str


class StampOutcome(NamedTuple):
    """Exactly one of ``written`` (the document as the write returned it) and ``error`` is set."""

    request: StampRequest
    written: Document | None = None
    error: BaseException | None = None

    @property
    def landed(self) -> bool:
        return self.error is None


class StampWriter:
    """Writes stamps to ``container`` in ``mode``; ``concurrency`` bounds the batches in flight (batched mode)."""

    def __init__(self, container: DocumentContainer, mode: StampMode = "batched", concurrency: int = 8) -> None:
        self.container = container
        self.mode = mode
        sequential = mode == "sequential"
        self.concurrency = 1 if sequential else concurrency
        self.max_batch_operations = 1 if sequential else MAX_BATCH_OPERATIONS
        self.stops_at_failure = sequential
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def write(self, requests: Sequence[StampRequest]) -> list[StampOutcome]:
        """Each written request's outcome, in input order (``sequential``: up to and including the first failure)."""
        outcomes: list[StampOutcome | None] = [None] * len(requests)
        batches = _batches(requests, self.max_batch_operations)
        if len(batches) <= 1 or self.concurrency <= 1:
            for batch in batches:
                self._batch(requests, batch, outcomes)
                if self.stops_at_failure and not _all_landed(outcomes, batch):
                    break
        else:
            self._in_lanes(requests, batches, outcomes)
        return [outcome for outcome in outcomes if outcome is not None]

    def close(self) -> None:
        """Stop the worker threads (idle ones also stop by themselves when the process exits)."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)

    # -- internals -------------------------------------------------------------------------------------------

    def _pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                workers = max(1, self.concurrency - 1)
                self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="chatter-stamp")
            return self._executor

    def _in_lanes(
        self, requests: Sequence[StampRequest], batches: Sequence[list[int]], outcomes: list[StampOutcome | None]
    ) -> None:
        """Write ``batches`` on ``concurrency`` lanes that each take the next unwritten batch until none is left.

        At most ``concurrency`` requests are in flight, and a page costs ``concurrency - 1`` hand-offs to the pool
        whatever its number of partition keys. The calling thread is one of the lanes instead of only waiting.
        Each batch writes only its own positions of ``outcomes`` (the batches are disjoint).
        """
        taken = iter(batches)
        lock = threading.Lock()

        def lane() -> None:
            while True:
                with lock:
                    batch = next(taken, None)
                if batch is None:
                    return
                self._batch(requests, batch, outcomes)

        pool = self._pool()
        futures = [pool.submit(lane) for _ in range(min(self.concurrency, len(batches)) - 1)]
        lane()
        for future in futures:
            future.result()

    def _one(self, request: StampRequest) -> StampOutcome:
        """The point patch of one request."""
        try:
            written = self.container.patch(request.item_id, request.partition_key, request.operations)
        except Exception as exc:  # noqa: BLE001 - the document's own outcome; the engine decides what it means
            return StampOutcome(request, error=exc)
        return StampOutcome(request, written=written)

    def _batch(self, requests: Sequence[StampRequest], batch: list[int], outcomes: list[StampOutcome | None]) -> None:
        """Write the positions ``batch`` (one partition key, feed order) into ``outcomes``."""
        if len(batch) > 1:
            self._transactional(requests, batch, outcomes)
        else:
            outcomes[batch[0]] = self._one(requests[batch[0]])

    def _transactional(
        self, requests: Sequence[StampRequest], batch: list[int], outcomes: list[StampOutcome | None]
    ) -> None:
        operations = [BatchOperation.patch(requests[i].item_id, requests[i].operations) for i in batch]
        try:
            answered = self.container.execute_batch(requests[batch[0]].partition_key, operations)
        except ContainerError:
            # F-10: refused as a whole; nothing of it was written. One by one, each document gets its own outcome.
            answered = None
        if answered is None or len(answered) != len(batch):
            for index in batch:
                outcomes[index] = self._one(requests[index])
            return
        for index, result in zip(batch, answered, strict=True):
            request = requests[index]
            if not 200 <= result.status_code < 300:
                error = ContainerError(f"batch patch answered {result.status_code}")
                outcomes[index] = StampOutcome(request, error=error)
            elif result.body is not None:
                outcomes[index] = StampOutcome(request, written=result.body)
            else:
                # A committed patch of a transactional batch may come back without its body; the status is the one set.
                written = {"id": request.item_id, "status": request.status, "_etag": result.etag}
                outcomes[index] = StampOutcome(request, written=written)


def _all_landed(outcomes: Sequence[StampOutcome | None], batch: list[int]) -> bool:
    return all(outcome is not None and outcome.landed for outcome in (outcomes[index] for index in batch))


def _key(partition_key: PartitionKey) -> object:
    """A hashable group key: a string as itself, another scalar with its type (so 1, 1.0 and True stay apart), and a
    hierarchical key as its JSON text in a tuple (so it never meets a string key that happens to spell it)."""
    if isinstance(partition_key, str):
        return partition_key
    if isinstance(partition_key, int | float | bool) or partition_key is None:
        return (type(partition_key), partition_key)
    return (list, json.dumps(partition_key, sort_keys=True, default=str))


def _operations_size(operations: Operations) -> int:
    """A stamp's operations' share of a batch's bytes: the operations as JSON, and an operation's own overhead."""
    return len(json.dumps([op.as_cosmos() for op in operations], default=str)) + _OPERATION_OVERHEAD


def _batches(requests: Sequence[StampRequest], max_operations: int) -> list[list[int]]:
    """The requests' positions grouped per partition key (feed order kept inside a group), cut at the batch limits."""
    open_batches: dict[object, list[int]] = {}  # per group key: its open batch
    open_bytes: dict[object, int] = {}  # and that batch's bytes
    batches: list[list[int]] = []
    for index, request in enumerate(requests):
        key = _key(request.partition_key)
        size = len(json.dumps(request.item_id)) + _operations_size(request.operations)
        batch = open_batches.get(key)
        if batch is None or len(batch) >= max_operations or open_bytes[key] + size > _BATCH_ROOM:
            batch = open_batches[key] = [index]
            batches.append(batch)
            open_bytes[key] = size
        else:
            batch.append(index)
            open_bytes[key] += size
    return batches


__all__ = [
    "MAX_BATCH_BYTES",
    "MAX_BATCH_OPERATIONS",
    "STAMP_MODES",
    "StampMode",
    "StampOutcome",
    "StampRequest",
    "StampWriter",
]

"""Writing a page's stamps: one by one (``sequential``) or grouped per partition key in batches (F-10).

The engine hands the writer the stamps of documents whose publishes are confirmed, in feed order, and gets back
each document's own outcome (the document the write returned, or its error), in the same order.

``batched`` (the default) groups the requests by partition key, cuts each group into transactional batches of at
most :data:`MAX_BATCH_OPERATIONS` operations and :data:`MAX_BATCH_BYTES`, and writes the batches concurrently on
up to ``concurrency`` threads. A group of one is a plain point patch (same charge, one request either way). A
batch refused as a whole (``BatchFailed`` for one of its operations: a document deleted meanwhile, a 412; or any
other error of the whole request) is retried operation by operation, so every document gets its own outcome and
the documents that can be stamped are. Each operation is still the RLY-03 patch.

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
    BatchOperationResult,
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
_ENVELOPE_BYTES = 4096
_BATCH_ROOM = MAX_BATCH_BYTES - _ENVELOPE_BYTES


class StampRequest(NamedTuple):
    """One status write: ``operations`` patched onto ``item_id`` in ``partition_key``; ``status`` is the value set.

    A named tuple rather than a frozen dataclass: one is built per drained document, and a frozen dataclass's
    ``__init__`` (an ``object.__setattr__`` per field) costs twice as much for the same immutable value.
    """

    item_id: str
    partition_key: PartitionKey
    operations: tuple[PatchOperation, ...]
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
        self.concurrency = concurrency
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def write(self, requests: Sequence[StampRequest]) -> list[StampOutcome]:
        """Each request's outcome, in input order. ``sequential`` stops at the first failure (later ones unwritten
        and not reported: the caller fails the page there, as RLY-07 had it)."""
        if self.mode == "sequential":
            return self._sequential(requests)
        chunks = _chunks(requests)
        # Each chunk writes its documents' outcomes at their own input positions (the lanes' chunks are disjoint).
        outcomes: list[StampOutcome | None] = [None] * len(requests)
        if len(chunks) <= 1 or self.concurrency <= 1:
            for chunk in chunks:
                self._chunk(requests, chunk, outcomes)
        else:
            self._in_lanes(requests, chunks, outcomes)
        return outcomes  # type: ignore[return-value]  # every position is set: the chunks cover every request

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
        self, requests: Sequence[StampRequest], chunks: Sequence[list[int]], outcomes: list[StampOutcome | None]
    ) -> None:
        """Write ``chunks`` on ``concurrency`` lanes that each take the next unwritten chunk until none is left.

        At most ``concurrency`` requests are in flight, as with one task per chunk, but a page costs only
        ``concurrency - 1`` hand-offs to the pool whatever its number of partition keys (a task per chunk cost one
        per key: measurable against a fast store). The calling thread is one of the lanes instead of only waiting.
        """
        taken = iter(chunks)
        lock = threading.Lock()

        def lane() -> None:
            while True:
                with lock:
                    chunk = next(taken, None)
                if chunk is None:
                    return
                self._chunk(requests, chunk, outcomes)

        pool = self._pool()
        futures = [pool.submit(lane) for _ in range(min(self.concurrency, len(chunks)) - 1)]
        lane()
        for future in futures:
            future.result()

    def _sequential(self, requests: Sequence[StampRequest]) -> list[StampOutcome]:
        outcomes: list[StampOutcome] = []
        for request in requests:
            outcome = self._one(request)
            outcomes.append(outcome)
            if not outcome.landed:
                break
        return outcomes

    def _one(self, request: StampRequest) -> StampOutcome:
        try:
            written = self.container.patch(request.item_id, request.partition_key, request.operations)
        except Exception as exc:  # noqa: BLE001 - the document's own outcome; the engine decides what it means
            return StampOutcome(request, error=exc)
        return StampOutcome(request, written=written)

    def _chunk(self, requests: Sequence[StampRequest], chunk: list[int], outcomes: list[StampOutcome | None]) -> None:
        """Write the requests at positions ``chunk`` (one partition key) and put each outcome at its position."""
        if len(chunk) == 1:
            outcomes[chunk[0]] = self._one(requests[chunk[0]])
            return
        batch = [requests[index] for index in chunk]
        operations = [BatchOperation.patch(r.item_id, r.operations) for r in batch]
        try:
            results = self.container.execute_batch(batch[0].partition_key, operations)
        except ContainerError:
            # F-10: refused as a whole; nothing of it was written. One by one, each document gets its own outcome.
            results = None
        if results is None or len(results) != len(batch):
            for index, request in zip(chunk, batch, strict=True):
                outcomes[index] = self._one(request)
            return
        for index, request, result in zip(chunk, batch, results, strict=True):
            outcomes[index] = _outcome(request, result)


def _outcome(request: StampRequest, result: BatchOperationResult) -> StampOutcome:
    if not 200 <= result.status_code < 300:
        return StampOutcome(request, error=ContainerError(f"batch patch answered {result.status_code}"))
    written = result.body
    if written is None:
        # A committed patch of a transactional batch may come back without its body; the status is the one set.
        written = {"id": request.item_id, "status": request.status, "_etag": result.etag}
    return StampOutcome(request, written=written)


def _key(partition_key: PartitionKey) -> object:
    """A hashable group key: a string as itself, another scalar with its type (so 1, 1.0 and True stay apart), and a
    hierarchical key as its JSON text in a tuple (so it never meets a string key that happens to spell it)."""
    if type(partition_key) is str:
        return partition_key
    if isinstance(partition_key, str | int | float | bool) or partition_key is None:
        return (type(partition_key), partition_key)
    return (list, json.dumps(partition_key, sort_keys=True, default=str))


def _chunks(requests: Sequence[StampRequest]) -> list[list[int]]:
    """The requests' positions grouped per partition key (feed order kept inside a group), cut at the batch limits."""
    # Per group key: the positions of its open chunk, and that chunk's bytes. Closed chunks are only in ``chunks``.
    groups: dict[object, list[int]] = {}
    sizes: dict[object, int] = {}
    chunks: list[list[int]] = []
    # The engine hands every request of a page the same operations tuple: its size is measured once.
    op_sizes: dict[int, tuple[tuple[PatchOperation, ...], int]] = {}
    for index, request in enumerate(requests):
        pk = request.partition_key
        key = pk if type(pk) is str else _key(pk)
        operations = request.operations
        known = op_sizes.get(id(operations))
        if known is None:
            measured = len(json.dumps([op.as_cosmos() for op in operations], default=str)) + 64
            known = op_sizes[id(operations)] = (operations, measured)
        size = len(request.item_id) + known[1]
        current = groups.get(key)
        if current is None or len(current) >= MAX_BATCH_OPERATIONS or sizes[key] + size > _BATCH_ROOM:
            current = groups[key] = [index]
            chunks.append(current)
            sizes[key] = size
            continue
        current.append(index)
        sizes[key] += size
    return chunks


__all__ = [
    "MAX_BATCH_BYTES",
    "MAX_BATCH_OPERATIONS",
    "STAMP_MODES",
    "StampMode",
    "StampOutcome",
    "StampRequest",
    "StampWriter",
]

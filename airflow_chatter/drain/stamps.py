"""Writing a run's stamps: one by one (``sequential``) or grouped per partition key in batches (F-10).

The engine hands the writer the stamps of documents whose publishes are confirmed, in feed order, as a
:class:`StampSheet` (columns: each position's item id and partition key, one set of operations shared by all of them
but a few), and gets back :class:`StampResults`: the positions whose stamp failed, with each one's error, and what
the write of the last position returned. A run is a page of documents that almost all land, so nothing is built per
document that lands: per-document state exists only for the ones that differ (another operation, a failure).

``batched`` (the default) groups the positions by partition key, cuts each group into transactional batches of at
most :data:`MAX_BATCH_OPERATIONS` operations and :data:`MAX_BATCH_BYTES`, and writes the batches concurrently on
up to ``concurrency`` threads. A group of one is a plain point patch (same charge, one request either way). A
batch refused as a whole (``BatchFailed`` for one of its operations: a document deleted meanwhile, a 412; or any
other error of the whole request) is retried operation by operation, so every document gets its own outcome and
the documents that can be stamped are. Each operation is still the RLY-03 patch.

:meth:`StampWriter.write` is the same write for a list of :class:`StampRequest`, with one :class:`StampOutcome`
each: the form for a caller that wants every document's own outcome (the benchmarks' store ceiling, the tests).

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
from dataclasses import dataclass, field
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
#: The most JSON bytes one character of an item id can take (a character outside the BMP: two ``\\uXXXX`` escapes).
_ID_CHAR_BYTES = 12
#: A patch operation's share of a batch besides its id and its operations (the operation's own keys and quotes).
_OPERATION_OVERHEAD = 64

Operations = tuple[PatchOperation, ...]


@dataclass(slots=True)
class StampSheet:
    """The stamps of one run as columns: position ``i`` patches ``operations`` onto ``ids[i]`` in ``keys[i]``
    (and sets ``status``), unless ``others`` holds its own ``(operations, status)`` for ``i``."""

    operations: Operations
    status: str
    ids: list[str] = field(default_factory=list)
    keys: list[PartitionKey] = field(default_factory=list)
    others: dict[int, tuple[Operations, str]] = field(default_factory=dict)

    def add(self, item_id: str, partition_key: PartitionKey, operations: Operations, status: str) -> None:
        """Add one stamp; its operations and status are kept by position only when they are not the shared ones.

        (A caller adding many stamps with the shared operations may append to ``ids`` and ``keys`` instead.)
        """
        if operations is not self.operations or status != self.status:
            self.others[len(self.ids)] = (operations, status)
        self.ids.append(item_id)
        self.keys.append(partition_key)

    def operations_at(self, index: int) -> Operations:
        other = self.others.get(index)
        return self.operations if other is None else other[0]

    def status_at(self, index: int) -> str:
        other = self.others.get(index)
        return self.status if other is None else other[1]


@dataclass(slots=True)
class StampResults:
    """What a sheet's write did: ``errors`` by position (empty when every stamp landed), ``last`` the document the
    write of the sheet's last position returned (``None`` if it failed or was not written), and, only when asked
    for, ``written`` by position."""

    errors: dict[int, BaseException] = field(default_factory=dict)
    last: Document | None = None
    written: dict[int, Document] | None = None


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
        self.concurrency = concurrency
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def write_sheet(self, sheet: StampSheet, *, keep_written: bool = False) -> StampResults:
        """Write every stamp of ``sheet``. ``sequential`` stops at the first failure (later ones unwritten and not
        reported: the caller fails the page there, as RLY-07 had it)."""
        results = StampResults(written={} if keep_written else None)
        if not sheet.ids:
            return results
        if self.mode == "sequential":
            for index in range(len(sheet.ids)):
                if not self._one(sheet, index, results):
                    break
            return results
        chunks = _chunks(sheet)
        if len(chunks) <= 1 or self.concurrency <= 1:
            for chunk in chunks:
                self._chunk(sheet, chunk, results)
        else:
            self._in_lanes(sheet, chunks, results)
        return results

    def write(self, requests: Sequence[StampRequest]) -> list[StampOutcome]:
        """Each request's outcome, in input order (``sequential``: up to the first failure)."""
        if not requests:
            return []
        first = requests[0]
        sheet = StampSheet(first.operations, first.status)
        for request in requests:
            sheet.add(request.item_id, request.partition_key, request.operations, request.status)
        results = self.write_sheet(sheet, keep_written=True)
        written = results.written
        assert written is not None
        outcomes = []
        for index, request in enumerate(requests):
            error = results.errors.get(index)
            if error is not None:
                outcomes.append(StampOutcome(request, error=error))
            elif index in written:
                outcomes.append(StampOutcome(request, written=written[index]))
            else:
                break  # sequential: not written after the first failure
        return outcomes

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

    def _in_lanes(self, sheet: StampSheet, chunks: Sequence[list[int]], results: StampResults) -> None:
        """Write ``chunks`` on ``concurrency`` lanes that each take the next unwritten chunk until none is left.

        At most ``concurrency`` requests are in flight, as with one task per chunk, but a page costs only
        ``concurrency - 1`` hand-offs to the pool whatever its number of partition keys (a task per chunk cost one
        per key: measurable against a fast store). The calling thread is one of the lanes instead of only waiting.
        Each chunk writes only its own positions of ``results`` (the chunks are disjoint).
        """
        taken = iter(chunks)
        lock = threading.Lock()

        def lane() -> None:
            while True:
                with lock:
                    chunk = next(taken, None)
                if chunk is None:
                    return
                self._chunk(sheet, chunk, results)

        pool = self._pool()
        futures = [pool.submit(lane) for _ in range(min(self.concurrency, len(chunks)) - 1)]
        lane()
        for future in futures:
            future.result()

    def _one(self, sheet: StampSheet, index: int, results: StampResults) -> bool:
        """The point patch of position ``index``; whether it landed."""
        try:
            written = self.container.patch(sheet.ids[index], sheet.keys[index], sheet.operations_at(index))
        except Exception as exc:  # noqa: BLE001 - the document's own outcome; the engine decides what it means
            results.errors[index] = exc
            return False
        if results.written is not None:
            results.written[index] = written
        if index == len(sheet.ids) - 1:
            results.last = written
        return True

    def _chunk(self, sheet: StampSheet, chunk: list[int], results: StampResults) -> None:
        """Write the positions ``chunk`` (one partition key, feed order) and record what the sheet's results keep."""
        if len(chunk) == 1:
            self._one(sheet, chunk[0], results)
            return
        ids, others, shared = sheet.ids, sheet.others, sheet.operations
        if others:
            operations = [BatchOperation.patch(ids[i], sheet.operations_at(i)) for i in chunk]
        else:
            operations = [BatchOperation.patch(ids[i], shared) for i in chunk]
        try:
            answered: list[BatchOperationResult] | None = self.container.execute_batch(sheet.keys[chunk[0]], operations)
        except ContainerError:
            # F-10: refused as a whole; nothing of it was written. One by one, each document gets its own outcome.
            answered = None
        if answered is None or len(answered) != len(chunk):
            for index in chunk:
                self._one(sheet, index, results)
            return
        written = results.written
        for index, result in zip(chunk, answered, strict=True):
            if not 200 <= result.status_code < 300:
                results.errors[index] = ContainerError(f"batch patch answered {result.status_code}")
            elif written is not None:
                written[index] = _written(sheet, index, result)
        last = chunk[-1]
        if last == len(ids) - 1 and last not in results.errors:
            results.last = _written(sheet, last, answered[-1])


def _written(sheet: StampSheet, index: int, result: BatchOperationResult) -> Document:
    if result.body is not None:
        return result.body
    # A committed patch of a transactional batch may come back without its body; the status is the one set.
    return {"id": sheet.ids[index], "status": sheet.status_at(index), "_etag": result.etag}


def _key(partition_key: PartitionKey) -> object:
    """A hashable group key: a string as itself, another scalar with its type (so 1, 1.0 and True stay apart), and a
    hierarchical key as its JSON text in a tuple (so it never meets a string key that happens to spell it)."""
    if type(partition_key) is str:
        return partition_key
    if isinstance(partition_key, str | int | float | bool) or partition_key is None:
        return (type(partition_key), partition_key)
    return (list, json.dumps(partition_key, sort_keys=True, default=str))


def _operations_bytes(operations: Operations) -> int:
    return len(json.dumps([op.as_cosmos() for op in operations], default=str)) + _OPERATION_OVERHEAD


def _chunks(sheet: StampSheet) -> list[list[int]]:
    """The sheet's positions grouped per partition key (feed order kept inside a group), cut at the batch limits.

    The byte limit is only counted when it can bind: a stamp is a status and a ttl, so 100 of them weigh a few
    dozen KB, far under 2 MB, unless an item id or a status value is very long.
    """
    # Each distinct operations tuple's weight, measured once (the sheet shares one but for a few positions).
    weights = {id(operations): _operations_bytes(operations) for operations in _distinct_operations(sheet)}
    longest_id = max(map(len, sheet.ids))
    if MAX_BATCH_OPERATIONS * (longest_id * _ID_CHAR_BYTES + max(weights.values())) <= _BATCH_ROOM:
        return _chunks_by_count(sheet.keys)
    return _chunks_by_bytes(sheet, weights)


def _distinct_operations(sheet: StampSheet) -> list[Operations]:
    return [sheet.operations, *(operations for operations, _ in sheet.others.values())]


def _chunks_by_count(keys: Sequence[PartitionKey]) -> list[list[int]]:
    groups: dict[object, list[int]] = {}
    chunks: list[list[int]] = []
    for index, pk in enumerate(keys):
        key = pk if type(pk) is str else _key(pk)
        current = groups.get(key)
        if current is None or len(current) >= MAX_BATCH_OPERATIONS:
            current = groups[key] = [index]
            chunks.append(current)
        else:
            current.append(index)
    return chunks


def _chunks_by_bytes(sheet: StampSheet, weights: dict[int, int]) -> list[list[int]]:
    """``weights``: each of the sheet's operations tuples' bytes, by ``id``."""
    # Per group key: the positions of its open chunk, and that chunk's bytes. Closed chunks are only in ``chunks``.
    groups: dict[object, list[int]] = {}
    sizes: dict[object, int] = {}
    chunks: list[list[int]] = []
    for index, (item_id, pk) in enumerate(zip(sheet.ids, sheet.keys, strict=True)):
        key = _key(pk)
        size = len(json.dumps(item_id)) + weights[id(sheet.operations_at(index))]
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
    "StampResults",
    "StampSheet",
    "StampWriter",
]

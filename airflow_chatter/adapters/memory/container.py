"""``MemoryDocumentContainer``: the port methods of the in-memory container, over its versions (``versions.py``).

Every port method runs through :meth:`MemoryDocumentContainer._run`: count the call, the :meth:`check` hook (default:
the fault handler, ``container.handler``), apply in a ``Transaction``, commit, the :meth:`after_apply` hook."""

from __future__ import annotations

import copy
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from jsonpointer import resolve_pointer
from typing_extensions import override

from airflow_chatter.adapters.memory.documents import (
    MAX_BATCH_OPERATIONS,
    expiry,
    normalised_body,
    validated_default_ttl,
    validated_paths,
)
from airflow_chatter.adapters.memory.faults import OperationCall, OperationHandler
from airflow_chatter.adapters.memory.patch import apply_patch, check_patch_targets
from airflow_chatter.adapters.memory.query import (
    normalise_parameters,
    parse_filter_predicate,
    parse_query,
    run_query,
)
from airflow_chatter.adapters.memory.ranges import (
    Continuation,
    EpkRange,
    PartitionKeyValue,
    canonical_component,
    even_ranges,
    merge_ranges,
    overlap,
    split_range,
)
from airflow_chatter.adapters.memory.versions import ItemKey, StoredVersion, Transaction
from airflow_chatter.clock import Clock, utc_now
from airflow_chatter.ports import (
    BadRequest,
    BatchFailed,
    BatchOperation,
    BatchOperationKind,
    BatchOperationResult,
    ChangeFeedPage,
    ChangeFeedStart,
    Conflict,
    ContainerError,
    ContainerProperties,
    Document,
    DocumentContainer,
    FeedRange,
    FeedRangeGone,
    NotFound,
    PartitionKey,
    PatchOperation,
    PreconditionFailed,
)

_T = TypeVar("_T")
_PUTS = (BatchOperationKind.CREATE, BatchOperationKind.UPSERT, BatchOperationKind.REPLACE)


class MemoryDocumentContainer(DocumentContainer):
    """An in-memory Cosmos DB container; the package docstring lists the semantics it keeps.

    ``partition_key_paths`` (default ``("/pk",)``, up to three for a hierarchical key) and ``default_ttl``
    (default ``None``: TTL off) are the container's definition; ``clock`` (default UTC wall clock) gives ``_ts``
    and decides expiry; ``feed_range_count`` (default 1) cuts the EPK space into that many feed ranges; the
    account endpoint, database and container ids only feed :meth:`properties`.
    """

    def __init__(
        self,
        *,
        partition_key_paths: Sequence[str] = ("/pk",),
        default_ttl: int | None = None,
        clock: Clock = utc_now,
        feed_range_count: int = 1,
        account_endpoint: str = "memory://localhost/",
        database_id: str = "chatter",
        container_id: str = "outbox",
    ) -> None:
        self._paths = validated_paths(partition_key_paths)
        self._default_ttl = validated_default_ttl(default_ttl)
        self._clock = clock
        self._ranges = even_ranges(feed_range_count)
        self._properties = ContainerProperties(
            account_endpoint, database_id, container_id, self._paths, self._default_ttl
        )
        self._rid = uuid.uuid4().hex[:16]
        self._lock = threading.RLock()
        #: The live versions, in commit order (a commit re-inserts what it writes): so also in ``_lsn`` order.
        self._items: dict[ItemKey, StoredVersion] = {}
        self._lsn = 0
        #: Faults to inject: asked of every call before it applies and after it commits (``faults.fail`` builds one).
        self.handler: OperationHandler | None = None
        #: How often each port method was called (including calls that failed), e.g. ``calls["patch"]``.
        self.calls: Counter[str] = Counter()

    # -- hooks ----------------------------------------------------------------------------------------------

    def check(self, call: OperationCall) -> None:
        """Run before an operation applies, under the lock; raise to fail it. Default: the fault handler."""
        self._raise_due(call)

    def after_apply(self, call: OperationCall, result: Any) -> None:
        """Run after an operation applied (and committed), under the lock; raise to report a lost response."""
        if self.handler is not None:
            self._raise_due(replace(call, applied=True))

    def _raise_due(self, call: OperationCall) -> None:
        error = None if self.handler is None else self.handler(call)
        if error is not None:
            raise error

    def _run(self, call: OperationCall, apply: Callable[[Transaction], _T]) -> _T:
        """Number and count the call, run the hooks and ``apply`` in one transaction, and commit it if ``apply``
        returns. ``call`` comes numbered 0: the number is taken under the lock."""
        with self._lock:
            self.calls[call.operation] += 1
            call = replace(call, number=self.calls[call.operation])
            self.check(call)
            transaction = Transaction(self._items, self._lsn + 1, self._now())
            result = apply(transaction)
            for key, stored in transaction.writes.items():
                self._items.pop(key, None)  # re-insert, so iteration order stays commit order
                if stored is not None:
                    self._items[key] = stored
            if transaction.writes:
                self._lsn = transaction.lsn
            self.after_apply(call, result)
            return result

    def _now(self) -> float:
        now = self._clock()
        return (now if now.tzinfo is not None else now.replace(tzinfo=UTC)).timestamp()

    # -- the port (documented on DocumentContainer; only what is particular to this one is said here) --------

    @override
    def properties(self) -> ContainerProperties:
        return self._run(OperationCall("properties", 0), lambda _t: self._properties)

    @override
    def create(self, document: Document, partition_key: PartitionKey) -> Document:
        call = OperationCall("create", 0, _id_of(document), partition_key, {"document": document})
        return self._run(call, lambda t: self._put(t, BatchOperationKind.CREATE, document, partition_key)[0])

    @override
    def read(self, item_id: str, partition_key: PartitionKey) -> Document:
        call = OperationCall("read", 0, item_id, partition_key)
        return self._run(call, lambda t: self._existing(t, item_id, partition_key).copy())

    @override
    def replace(
        self, item_id: str, partition_key: PartitionKey, document: Document, *, if_match: str | None = None
    ) -> Document:
        call = OperationCall("replace", 0, item_id, partition_key, {"document": document, "if_match": if_match})
        replace = BatchOperationKind.REPLACE
        return self._run(call, lambda t: self._put(t, replace, document, partition_key, if_match, item_id)[0])

    @override
    def upsert(self, document: Document, partition_key: PartitionKey, *, if_match: str | None = None) -> Document:
        arguments = {"document": document, "if_match": if_match}
        call = OperationCall("upsert", 0, _id_of(document), partition_key, arguments)
        return self._run(call, lambda t: self._put(t, BatchOperationKind.UPSERT, document, partition_key, if_match)[0])

    @override
    def delete(self, item_id: str, partition_key: PartitionKey, *, if_match: str | None = None) -> None:
        call = OperationCall("delete", 0, item_id, partition_key, {"if_match": if_match})
        self._run(call, lambda t: self._delete(t, item_id, partition_key, if_match))

    @override
    def patch(
        self,
        item_id: str,
        partition_key: PartitionKey,
        operations: Sequence[PatchOperation],
        *,
        if_match: str | None = None,
        filter_predicate: str | None = None,
    ) -> Document:
        arguments = {"operations": tuple(operations), "if_match": if_match, "filter_predicate": filter_predicate}
        call = OperationCall("patch", 0, item_id, partition_key, arguments)
        return self._run(call, lambda t: self._patch(t, item_id, partition_key, operations, if_match, filter_predicate))

    @override
    def execute_batch(
        self, partition_key: PartitionKey, operations: Sequence[BatchOperation]
    ) -> list[BatchOperationResult]:
        call = OperationCall("execute_batch", 0, None, partition_key, {"operations": tuple(operations)})
        return self._run(call, lambda t: self._batch(t, partition_key, operations))

    @override
    def query(
        self, sql: str, parameters: Mapping[str, Any] | None = None, *, partition_key: PartitionKey | None = None
    ) -> Iterator[Any]:
        """Run a query of the SQL subset (``SUPPORTED_SQL``), scoped to ``partition_key`` when given.

        Results are computed eagerly under the lock (a consistent snapshot), so a ``BadRequest`` is raised by
        this call, not by the first ``next()``. ``SELECT VALUE COUNT(1)`` yields one integer.
        """
        call = OperationCall("query", 0, None, partition_key, {"sql": sql, "parameters": parameters})
        return iter(self._run(call, lambda t: self._query(t, sql, parameters, partition_key)))

    @override
    def read_feed_ranges(self, *, force_refresh: bool = False) -> list[FeedRange]:
        call = OperationCall("read_feed_ranges", 0, arguments={"force_refresh": force_refresh})
        return self._run(call, lambda _t: [r.feed_range for r in self._ranges])

    @override
    def is_feed_range_subset(self, parent: FeedRange, child: FeedRange) -> bool:
        call = OperationCall("is_feed_range_subset", 0, arguments={"parent": parent, "child": child})
        return self._run(call, lambda _t: EpkRange.parse(parent).covers(EpkRange.parse(child)))

    @override
    def feed_range_overlap(self, a: FeedRange, b: FeedRange) -> FeedRange | None:
        return self._run(OperationCall("feed_range_overlap", 0, arguments={"a": a, "b": b}), lambda _t: overlap(a, b))

    @override
    def read_change_feed(
        self,
        feed_range: FeedRange,
        *,
        continuation: str | None = None,
        start: ChangeFeedStart | datetime = ChangeFeedStart.BEGINNING,
        max_item_count: int = 100,
    ) -> ChangeFeedPage:
        """``continuation`` wins over ``start``; a page holds one batch's changes whole, so it may be larger than
        ``max_item_count``, as on the service."""
        arguments = {"feed_range": feed_range, "continuation": continuation, "start": start}
        call = OperationCall("read_change_feed", 0, arguments={**arguments, "max_item_count": max_item_count})
        return self._run(call, lambda t: self._change_feed(t, feed_range, continuation, start, max_item_count))

    # -- test helpers (not part of the port) ----------------------------------------------------------------

    def split_feed_range(self, feed_range: FeedRange) -> tuple[FeedRange, FeedRange]:
        """Split a current feed range in two at its EPK midpoint, as a partition split does.

        Afterwards reading the parent raises ``FeedRangeGone``; the parent's continuations resume on either child.
        """
        with self._lock:
            return split_range(self._ranges, feed_range)

    def halve_feed_range(self, feed_range: FeedRange) -> tuple[FeedRange, FeedRange]:
        """The two halves of a feed range at its EPK midpoint, without splitting it: sub-ranges a reader may hold
        (as after a split or a merge) while the range itself stays current."""
        left, right = EpkRange.parse(feed_range).halves()
        return left.feed_range, right.feed_range

    def merge_feed_ranges(self, left: FeedRange, right: FeedRange) -> FeedRange:
        """Merge two adjacent current feed ranges into one, as a partition merge does.

        Afterwards both old ranges are still readable (each lies inside the merged one, and their continuations
        resume there), as the SDK serves a sub-range of a physical partition; ``read_feed_ranges`` lists the merge.
        """
        with self._lock:
            return merge_ranges(self._ranges, left, right)

    def feed_range_of(self, partition_key: PartitionKey) -> FeedRange:
        """Return the current feed range that holds a (full) partition key."""
        with self._lock:
            epk = self._key(partition_key).epk
            return next(r.feed_range for r in self._ranges if r.contains(epk))

    @property
    def last_lsn(self) -> int:
        """The ``_lsn`` of the latest committed write (0 for a container never written)."""
        return self._lsn

    # -- partition keys -------------------------------------------------------------------------------------

    def _key(self, partition_key: PartitionKey, *, allow_prefix: bool = False) -> PartitionKeyValue:
        levels = len(self._paths)
        if isinstance(partition_key, (list, tuple)):
            components = tuple(partition_key)
        elif levels == 1:
            components = (partition_key,)
        else:
            raise BadRequest(f"a hierarchical container {list(self._paths)} takes a list partition key")
        if not components or len(components) > levels or (len(components) < levels and not allow_prefix):
            raise BadRequest(f"partition key {partition_key!r} does not match the paths {list(self._paths)}")
        return PartitionKeyValue(tuple(canonical_component(component) for component in components))

    def _key_in(self, document: Document) -> PartitionKeyValue:
        """Read the partition key out of a body; an absent value is ``None``, as the port defines it."""
        return PartitionKeyValue(tuple(canonical_component(resolve_pointer(document, p, None)) for p in self._paths))

    # -- writes ---------------------------------------------------------------------------------------------

    def _body(self, document: Document, key: PartitionKeyValue) -> Document:
        """A checked copy of a body (``normalised_body``) that carries the partition key given."""
        body = normalised_body(document)
        if (found := self._key_in(body).json) != key.json:
            raise BadRequest(f"the partition key in the document {found} differs from the one given {key.json}")
        return body

    def _write(
        self, transaction: Transaction, body: Document, key: PartitionKeyValue, previous: StoredVersion | None
    ) -> Document:
        """Store a checked body as the new version of its item and return the caller's copy of it."""
        body["_rid"] = previous.document["_rid"] if previous is not None else uuid.uuid4().hex[:16]
        body["_etag"] = f'"{uuid.uuid4()}"'
        ts = body["_ts"] = int(transaction.now)
        stored = StoredVersion(body, key, transaction.lsn, expiry(ts, body.get("ttl"), self._default_ttl))
        transaction.writes[(key.json, str(body["id"]))] = stored
        return stored.copy()

    def _existing(self, transaction: Transaction, item_id: str, partition_key: PartitionKey) -> StoredVersion:
        stored = transaction.get((self._key(partition_key).json, str(item_id)))
        if stored is None:
            raise NotFound(f"no document {item_id!r} in partition {partition_key!r}")
        return stored

    @staticmethod
    def _check_etag(stored: StoredVersion, if_match: str | None) -> None:
        if if_match is not None and stored.document["_etag"] != if_match:
            raise PreconditionFailed(f"ETag {if_match} is stale for {stored.document['id']!r}")

    def _put(
        self,
        transaction: Transaction,
        kind: BatchOperationKind,
        document: Document,
        partition_key: PartitionKey,
        if_match: str | None = None,
        item_id: str | None = None,
    ) -> tuple[Document, bool]:
        """Create (``Conflict`` if the id exists), replace (``NotFound`` if it does not, ``item_id`` the id the
        body must keep) or upsert a document; return the written document and whether it is new."""
        key = self._key(partition_key)
        body = self._body(document, key)
        if item_id is not None and body["id"] != item_id:
            raise BadRequest(f"the body's id {body['id']!r} differs from the replaced id {item_id!r}")
        previous = transaction.get((key.json, body["id"]))
        if previous is not None and kind is BatchOperationKind.CREATE:
            raise Conflict(f"a document with id {body['id']!r} already exists in partition {partition_key!r}")
        if previous is None and kind is BatchOperationKind.REPLACE:
            raise NotFound(f"no document {body['id']!r} in partition {partition_key!r}")
        if previous is None and if_match is not None:
            raise PreconditionFailed(f"if_match given but {body['id']!r} does not exist")
        if previous is not None:
            self._check_etag(previous, if_match)
        return self._write(transaction, body, key, previous), previous is None

    def _delete(
        self, transaction: Transaction, item_id: str, partition_key: PartitionKey, if_match: str | None
    ) -> None:
        stored = self._existing(transaction, item_id, partition_key)
        self._check_etag(stored, if_match)
        transaction.writes[(stored.key.json, item_id)] = None

    def _patch(
        self,
        transaction: Transaction,
        item_id: str,
        partition_key: PartitionKey,
        operations: Sequence[PatchOperation],
        if_match: str | None,
        filter_predicate: str | None,
    ) -> Document:
        check_patch_targets(operations, self._paths)
        predicate = parse_filter_predicate(filter_predicate) if filter_predicate is not None else None
        stored = self._existing(transaction, item_id, partition_key)
        self._check_etag(stored, if_match)
        if predicate is not None and run_query(predicate, [stored.document], {}) == []:
            raise PreconditionFailed("condition specified in the patch request is not satisfied")
        # A copy with the system properties still in, so the 2 MB check measures what a reader gets back.
        body = copy.deepcopy(stored.document)
        apply_patch(body, operations)
        return self._write(transaction, self._body(body, stored.key), stored.key, stored)

    # -- batch ----------------------------------------------------------------------------------------------

    def _batch(
        self, transaction: Transaction, partition_key: PartitionKey, operations: Sequence[BatchOperation]
    ) -> list[BatchOperationResult]:
        if not 1 <= len(operations) <= MAX_BATCH_OPERATIONS:
            raise BadRequest(f"a batch takes 1 to {MAX_BATCH_OPERATIONS} operations, not {len(operations)}")
        self._key(partition_key)
        results: list[BatchOperationResult] = []
        for index, operation in enumerate(operations):
            try:
                results.append(self._batch_operation(transaction, partition_key, operation))
            except ContainerError as error:
                # INVARIANT: the transaction is never committed, so nothing of the batch is written
                # (test_batch_is_all_or_nothing_when_an_operation_fails); committing per operation breaks it.
                statuses = [424] * len(operations)
                statuses[index] = error.status_code
                raise BatchFailed(
                    f"batch operation {index} ({operation.kind.value} {operation.id!r}) failed: {error}",
                    failed_index=index,
                    status_code=error.status_code,
                    operation_statuses=statuses,
                ) from error
        return results

    def _batch_operation(
        self, transaction: Transaction, partition_key: PartitionKey, operation: BatchOperation
    ) -> BatchOperationResult:
        kind, if_match = operation.kind, operation.if_match
        if kind in _PUTS:
            if operation.body is None:
                raise BadRequest(f"a batch {kind.value} needs a body")
            replaced = operation.id if kind is BatchOperationKind.REPLACE else None
            document, created = self._put(transaction, kind, operation.body, partition_key, if_match, replaced)
            return BatchOperationResult(201 if created else 200, etag=document["_etag"], body=document)
        if kind is BatchOperationKind.DELETE:
            self._delete(transaction, operation.id, partition_key, if_match)
            return BatchOperationResult(204)
        if kind is BatchOperationKind.READ:
            document = self._existing(transaction, operation.id, partition_key).copy()
        else:
            operations, predicate = operation.patch_operations, operation.filter_predicate
            document = self._patch(transaction, operation.id, partition_key, operations, if_match, predicate)
        return BatchOperationResult(200, etag=document["_etag"], body=document)

    # -- query ----------------------------------------------------------------------------------------------

    def _query(
        self,
        transaction: Transaction,
        sql: str,
        parameters: Mapping[str, Any] | None,
        partition_key: PartitionKey | None,
    ) -> list[Any]:
        parsed = parse_query(sql)
        scope = None if partition_key is None else self._key(partition_key, allow_prefix=True)
        documents = [
            stored.document
            for stored in self._items.values()
            if stored.alive_at(transaction.now) and (scope is None or stored.key.starts_with(scope))
        ]
        return copy.deepcopy(run_query(parsed, documents, normalise_parameters(parameters)))

    # -- change feed ----------------------------------------------------------------------------------------

    def _change_feed(
        self,
        transaction: Transaction,
        feed_range: FeedRange,
        continuation: str | None,
        start: ChangeFeedStart | datetime,
        max_item_count: int,
    ) -> ChangeFeedPage:
        if max_item_count < 1:
            raise BadRequest("max_item_count must be at least 1")
        requested = EpkRange.parse(feed_range)
        if not any(current.covers(requested) for current in self._ranges):
            # NOTE: a range wider than one physical partition no longer exists after a split; the reader must
            # re-read the ranges and carry its continuation onto the children.
            raise FeedRangeGone(f"feed range {feed_range.token} is gone (split); re-read the feed ranges")
        after_lsn, since_ts = self._position(requested, continuation, start)
        page: list[StoredVersion] = []
        for stored in self._items.values():  # in _lsn order
            if page and len(page) >= max_item_count and stored.lsn != page[-1].lsn:
                break  # a full page, and never a batch split across two
            if (
                stored.lsn > after_lsn
                and stored.alive_at(transaction.now)
                and requested.contains(stored.key.epk)
                and (since_ts is None or stored.document["_ts"] >= since_ts)
            ):
                page.append(stored)
        # An empty page from a time on: everything written so far is behind the reader.
        next_lsn = page[-1].lsn if page else self._lsn if since_ts is not None else after_lsn
        token = Continuation(self._rid, requested, next_lsn).encode()
        return ChangeFeedPage(tuple(stored.copy(_lsn=stored.lsn) for stored in page), token)

    def _position(
        self, requested: EpkRange, continuation: str | None, start: ChangeFeedStart | datetime
    ) -> tuple[int, float | None]:
        """Return (read changes after this ``_lsn``, only those with ``_ts`` at or after this time)."""
        if continuation is None and isinstance(start, datetime):
            return 0, (start if start.tzinfo is not None else start.replace(tzinfo=UTC)).timestamp()
        if continuation is None:
            return (self._lsn if start is ChangeFeedStart.NOW else 0), None
        position = Continuation.decode(continuation)
        if position.container_rid != self._rid:
            raise BadRequest("the continuation belongs to another container")
        if not position.feed_range.covers(requested):
            raise BadRequest("the continuation belongs to a feed range that does not contain this one")
        return position.lsn, None


def _id_of(document: Any) -> str | None:
    return str(document["id"]) if isinstance(document, dict) and "id" in document else None


__all__ = ["MemoryDocumentContainer"]

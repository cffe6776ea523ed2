"""The document-container port: documents, partition keys, the change feed, batches and the errors of each."""

from __future__ import annotations

import abc
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any, Literal

#: A JSON object as stored in a container.
Document = dict[str, Any]

#: One component of a partition key: a JSON scalar. ``None`` is JSON null (an absent value).
PartitionKeyComponent = str | int | float | bool | None

#: A partition key value: a single component, or a list of components for a hierarchical key.
PartitionKey = PartitionKeyComponent | list[PartitionKeyComponent]


# --------------------------------------------------------------------------------------------
# Errors. Every adapter raises exactly these; the status code mirrors Cosmos DB's HTTP status.
# --------------------------------------------------------------------------------------------


class ContainerError(Exception):
    """A document-container operation failed. ``status_code`` mirrors the Cosmos HTTP status."""

    status_code: int = 500

    def __init__(self, message: str = "", *, status_code: int | None = None) -> None:
        super().__init__(message or self.__class__.__name__)
        if status_code is not None:
            self.status_code = status_code


class BadRequest(ContainerError):
    status_code = 400


class NotFound(ContainerError):
    status_code = 404


class RequestTimeout(ContainerError):
    status_code = 408


class Conflict(ContainerError):
    status_code = 409


class FeedRangeGone(ContainerError):
    """The feed range no longer exists (it split or merged); re-read the feed ranges."""

    status_code = 410


class PreconditionFailed(ContainerError):
    """An ETag (``if_match``) or a patch filter predicate did not hold."""

    status_code = 412


class Throttled(ContainerError):
    status_code = 429

    def __init__(self, message: str = "", *, retry_after_ms: int | None = None) -> None:
        super().__init__(message)
        self.retry_after_ms = retry_after_ms

    @property
    def retry_after_seconds(self) -> int:
        """The server's retry-after in whole seconds, at least 1: what an HTTP ``Retry-After`` header says."""
        return max(1, math.ceil((self.retry_after_ms or 0) / 1000))


class ServiceUnavailable(ContainerError):
    status_code = 503


class BatchFailed(ContainerError):
    """A transactional batch did not commit. Nothing of it was written.

    ``failed_index`` names the operation that failed with ``status_code``; every other operation
    reports 424 (failed dependency) in ``operation_statuses``.
    """

    def __init__(
        self,
        message: str,
        *,
        failed_index: int,
        status_code: int,
        operation_statuses: Sequence[int],
    ) -> None:
        super().__init__(message, status_code=status_code)
        self.failed_index = failed_index
        self.operation_statuses = tuple(operation_statuses)


# --------------------------------------------------------------------------------------------
# Value types.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ContainerProperties:
    """What the drain verifies at start (CNT rules) and what source identity is built from."""

    account_endpoint: str
    database_id: str
    container_id: str
    partition_key_paths: tuple[str, ...]
    #: ``None`` when the container has no ``defaultTtl`` (TTL off); ``-1`` on, no default expiry.
    default_ttl: int | None


@dataclass(frozen=True)
class PatchOperation:
    """One Cosmos partial-document-update operation. ``path`` is a JSON pointer."""

    op: Literal["set", "replace", "add", "remove", "incr"]
    path: str
    value: Any = None

    def as_cosmos(self) -> dict[str, Any]:
        if self.op == "remove":
            return {"op": "remove", "path": self.path}
        return {"op": self.op, "path": self.path, "value": self.value}


class BatchOperationKind(str, Enum):
    CREATE = "create"
    UPSERT = "upsert"
    READ = "read"
    REPLACE = "replace"
    DELETE = "delete"
    PATCH = "patch"


@dataclass(frozen=True)
class BatchOperation:
    """One operation of a transactional batch. All operations share the batch's partition key."""

    kind: BatchOperationKind
    id: str
    body: Document | None = None
    if_match: str | None = None
    patch_operations: tuple[PatchOperation, ...] = ()
    filter_predicate: str | None = None

    @classmethod
    def create(cls, body: Document) -> BatchOperation:
        return cls(BatchOperationKind.CREATE, str(body["id"]), body=body)

    @classmethod
    def upsert(cls, body: Document, *, if_match: str | None = None) -> BatchOperation:
        return cls(BatchOperationKind.UPSERT, str(body["id"]), body=body, if_match=if_match)

    @classmethod
    def replace(cls, body: Document, *, if_match: str | None = None) -> BatchOperation:
        return cls(BatchOperationKind.REPLACE, str(body["id"]), body=body, if_match=if_match)

    @classmethod
    def read(cls, item_id: str) -> BatchOperation:
        return cls(BatchOperationKind.READ, item_id)

    @classmethod
    def delete(cls, item_id: str, *, if_match: str | None = None) -> BatchOperation:
        return cls(BatchOperationKind.DELETE, item_id, if_match=if_match)

    @classmethod
    def patch(
        cls,
        item_id: str,
        operations: Sequence[PatchOperation],
        *,
        if_match: str | None = None,
        filter_predicate: str | None = None,
    ) -> BatchOperation:
        return cls(
            BatchOperationKind.PATCH,
            item_id,
            patch_operations=tuple(operations),
            if_match=if_match,
            filter_predicate=filter_predicate,
        )


@dataclass(frozen=True)
class BatchOperationResult:
    status_code: int
    etag: str | None = None
    body: Document | None = None


@dataclass(frozen=True)
class FeedRange:
    """A feed range; ``token`` is what a lease document stores (and, hashed, its id).

    The token format, the one definition both adapters write and the drain reads: a JSON object
    ``{"Range": {"min": <EPK>, "max": <EPK>, "isMinInclusive": true, "isMaxInclusive": false}}``, the half-open
    interval ``[min, max)`` of effective partition keys, as azure-cosmos writes a feed range. EPK strings order
    as strings (as the SDK's routing ranges compare them), so ranges of one container compare without a request.
    The drain compares tokens as text (lease ids), so an adapter writes a range's token the same way every time:
    ``from_epk_bounds`` does. Other tokens stay opaque: ``epk_bounds`` is ``None`` for them.
    """

    token: str

    @classmethod
    def from_epk_bounds(cls, low: str, high: str) -> FeedRange:
        """The feed range ``[low, high)`` in the token format."""
        return cls(json.dumps({"Range": epk_range(low, high)}, sort_keys=True))

    def epk_bounds(self) -> tuple[str, str] | None:
        """``(min, max)`` of a token in the format; ``None`` for any other token (opaque to the drain)."""
        try:
            body = json.loads(self.token)
        except ValueError:
            return None
        return epk_bounds(body.get("Range")) if isinstance(body, dict) else None


def epk_range(low: str, high: str) -> dict[str, Any]:
    """The ``Range`` object of the feed-range token format for ``[low, high)`` (also how SDK continuations name
    their ranges)."""
    return {"min": low, "max": high, "isMinInclusive": True, "isMaxInclusive": False}


def epk_bounds(span: object) -> tuple[str, str] | None:
    """``(min, max)`` of a ``Range`` object that is a non-empty ``[min, max)`` of EPK strings; else ``None``.

    ``isMinInclusive`` defaults to true and ``isMaxInclusive`` to false when absent, as the SDK reads them.
    """
    if not isinstance(span, dict):
        return None
    low, high = span.get("min"), span.get("max")
    if not isinstance(low, str) or not isinstance(high, str) or not low < high:
        return None
    if span.get("isMinInclusive", True) is not True or span.get("isMaxInclusive", False) is not False:
        return None
    return low, high


class ChangeFeedStart(str, Enum):
    BEGINNING = "beginning"
    NOW = "now"


@dataclass(frozen=True)
class ChangeFeedPage:
    """One page of the change feed of one feed range.

    ``continuation`` resumes *after* this page. It is returned even when ``documents`` is empty
    (a "no changes" answer), and it is read per page, never from state shared with other readers.
    """

    documents: tuple[Document, ...]
    continuation: str


# --------------------------------------------------------------------------------------------
# The document-container port.
# --------------------------------------------------------------------------------------------


class DocumentContainer(abc.ABC):
    """The document operations the product needs, and nothing more.

    Every returned document carries ``_etag`` and ``_ts``; change-feed documents also carry
    ``_lsn``. ETags are opaque strings. Errors are the ``ContainerError`` subclasses above.
    """

    @abc.abstractmethod
    def properties(self) -> ContainerProperties:
        """Read the container's metadata (one read)."""

    @abc.abstractmethod
    def create(self, document: Document, partition_key: PartitionKey) -> Document:
        """Create a document; ``Conflict`` if its id exists in that partition."""

    @abc.abstractmethod
    def read(self, item_id: str, partition_key: PartitionKey) -> Document:
        """Point-read a document; ``NotFound`` if absent (or expired)."""

    @abc.abstractmethod
    def replace(
        self,
        item_id: str,
        partition_key: PartitionKey,
        document: Document,
        *,
        if_match: str | None = None,
    ) -> Document:
        """Replace a document; ``PreconditionFailed`` on a stale ``if_match``."""

    @abc.abstractmethod
    def upsert(self, document: Document, partition_key: PartitionKey, *, if_match: str | None = None) -> Document:
        """Create or replace a document."""

    @abc.abstractmethod
    def delete(self, item_id: str, partition_key: PartitionKey, *, if_match: str | None = None) -> None:
        """Delete a document; ``NotFound`` if absent, ``PreconditionFailed`` on a stale ETag."""

    @abc.abstractmethod
    def patch(
        self,
        item_id: str,
        partition_key: PartitionKey,
        operations: Sequence[PatchOperation],
        *,
        if_match: str | None = None,
        filter_predicate: str | None = None,
    ) -> Document:
        """Apply patch operations atomically; ``PreconditionFailed`` if ETag or filter fails."""

    @abc.abstractmethod
    def execute_batch(
        self, partition_key: PartitionKey, operations: Sequence[BatchOperation]
    ) -> list[BatchOperationResult]:
        """Run operations all-or-nothing in one partition; ``BatchFailed`` names the culprit."""

    @abc.abstractmethod
    def query(
        self,
        sql: str,
        parameters: Mapping[str, Any] | None = None,
        *,
        partition_key: PartitionKey | None = None,
    ) -> Iterator[Any]:
        """Run a parameterised query, scoped to ``partition_key`` when given.

        ``parameters`` maps names to values; a name may be given with or without its ``@``. Rows are
        documents, or bare values for ``SELECT VALUE`` queries (e.g. ``SELECT VALUE COUNT(1)``).
        """

    @abc.abstractmethod
    def read_feed_ranges(self, *, force_refresh: bool = False) -> list[FeedRange]:
        """List the container's current feed ranges (one per physical partition)."""

    @abc.abstractmethod
    def is_feed_range_subset(self, parent: FeedRange, child: FeedRange) -> bool:
        """Whether ``child`` lies inside ``parent`` (how split children are found)."""

    @abc.abstractmethod
    def feed_range_overlap(self, a: FeedRange, b: FeedRange) -> FeedRange | None:
        """The part of the key space ``a`` and ``b`` share, as a feed range of this container, or ``None``.

        ``a`` (or ``b``) itself, token for token, when it lies inside the other. How a lease whose range now spans
        several current ranges (a split, or a merged range split again at another boundary) is replaced by exactly
        its share of each. ``BadRequest`` for a token that is not a feed range of this container.
        """

    @abc.abstractmethod
    def read_change_feed(
        self,
        feed_range: FeedRange,
        *,
        continuation: str | None = None,
        start: ChangeFeedStart | datetime = ChangeFeedStart.BEGINNING,
        max_item_count: int = 100,
    ) -> ChangeFeedPage:
        """Read one page of changes for a feed range after a continuation (or from ``start``).

        Latest-version mode: each changed document once, in modification order per partition key;
        deleted and expired documents do not appear. ``FeedRangeGone`` if the range has split.

        The page holds changes inside ``feed_range`` only, whatever range ``continuation`` was read from: a
        continuation of a range that contains ``feed_range`` resumes on it from the same position (how a split's
        children and a merge's parts carry on, F-04); ``BadRequest`` if its range does not contain ``feed_range``.
        """


__all__ = [
    "BadRequest",
    "BatchFailed",
    "BatchOperation",
    "BatchOperationKind",
    "BatchOperationResult",
    "ChangeFeedPage",
    "ChangeFeedStart",
    "Conflict",
    "ContainerError",
    "ContainerProperties",
    "Document",
    "DocumentContainer",
    "FeedRange",
    "FeedRangeGone",
    "NotFound",
    "PartitionKey",
    "PartitionKeyComponent",
    "PatchOperation",
    "PreconditionFailed",
    "RequestTimeout",
    "ServiceUnavailable",
    "Throttled",
    "epk_bounds",
    "epk_range",
]

"""``DelegatingContainer``: a ``DocumentContainer`` that forwards every method to an inner container, so a wrapper
overrides only what it changes.

Every request to the inner container passes through one hook, :meth:`DelegatingContainer.forward`, named by the
operation: a wrapper that does the same around all of them (metering, pacing, recording, refusing) overrides that
hook alone. The two feed-range computations (``is_feed_range_subset``, ``feed_range_overlap``) are no requests and
skip it. A query's pages are requested while its rows are iterated, so ``query`` reads them all inside the hook.

Nothing here imports an SDK or Airflow.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from typing_extensions import override

from airflow_chatter.ports.container import (
    BatchOperation,
    BatchOperationResult,
    ChangeFeedPage,
    ChangeFeedStart,
    ContainerProperties,
    Document,
    DocumentContainer,
    FeedRange,
    PartitionKey,
    PatchOperation,
)

_T = TypeVar("_T")


class DelegatingContainer(DocumentContainer):
    """Forwards every ``DocumentContainer`` method to ``inner``; see the module docstring."""

    def __init__(self, inner: DocumentContainer) -> None:
        self.inner = inner

    def forward(self, operation: str, call: Callable[[], _T]) -> _T:
        """Run one request to the inner container; ``operation`` is the port method's name. Override it to wrap
        every request at once."""
        return call()

    @override
    def properties(self) -> ContainerProperties:
        return self.forward("properties", self.inner.properties)

    @override
    def create(self, document: Document, partition_key: PartitionKey) -> Document:
        return self.forward("create", lambda: self.inner.create(document, partition_key))

    @override
    def read(self, item_id: str, partition_key: PartitionKey) -> Document:
        return self.forward("read", lambda: self.inner.read(item_id, partition_key))

    @override
    def replace(
        self, item_id: str, partition_key: PartitionKey, document: Document, *, if_match: str | None = None
    ) -> Document:
        return self.forward("replace", lambda: self.inner.replace(item_id, partition_key, document, if_match=if_match))

    @override
    def upsert(self, document: Document, partition_key: PartitionKey, *, if_match: str | None = None) -> Document:
        return self.forward("upsert", lambda: self.inner.upsert(document, partition_key, if_match=if_match))

    @override
    def delete(self, item_id: str, partition_key: PartitionKey, *, if_match: str | None = None) -> None:
        self.forward("delete", lambda: self.inner.delete(item_id, partition_key, if_match=if_match))

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
        return self.forward(
            "patch",
            lambda: self.inner.patch(
                item_id, partition_key, operations, if_match=if_match, filter_predicate=filter_predicate
            ),
        )

    @override
    def execute_batch(
        self, partition_key: PartitionKey, operations: Sequence[BatchOperation]
    ) -> list[BatchOperationResult]:
        return self.forward("execute_batch", lambda: self.inner.execute_batch(partition_key, operations))

    @override
    def query(
        self, sql: str, parameters: Mapping[str, Any] | None = None, *, partition_key: PartitionKey | None = None
    ) -> Iterator[Any]:
        return iter(self.forward("query", lambda: list(self.inner.query(sql, parameters, partition_key=partition_key))))

    @override
    def read_feed_ranges(self, *, force_refresh: bool = False) -> list[FeedRange]:
        return self.forward("read_feed_ranges", lambda: self.inner.read_feed_ranges(force_refresh=force_refresh))

    @override
    def is_feed_range_subset(self, parent: FeedRange, child: FeedRange) -> bool:
        return self.inner.is_feed_range_subset(parent, child)

    @override
    def feed_range_overlap(self, a: FeedRange, b: FeedRange) -> FeedRange | None:
        return self.inner.feed_range_overlap(a, b)

    @override
    def read_change_feed(
        self,
        feed_range: FeedRange,
        *,
        continuation: str | None = None,
        start: ChangeFeedStart | datetime = ChangeFeedStart.BEGINNING,
        max_item_count: int = 100,
    ) -> ChangeFeedPage:
        return self.forward(
            "read_change_feed",
            lambda: self.inner.read_change_feed(
                feed_range, continuation=continuation, start=start, max_item_count=max_item_count
            ),
        )


__all__ = ["DelegatingContainer"]

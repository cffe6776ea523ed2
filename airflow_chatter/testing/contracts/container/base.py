"""The container contract's hooks, capabilities and shared helpers (see the package docstring)."""

from __future__ import annotations

import abc
import time
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pytest

from airflow_chatter.ports import (
    ChangeFeedPage,
    ChangeFeedStart,
    ContainerError,
    Document,
    DocumentContainer,
    FeedRange,
    NotFound,
    PartitionKey,
)

#: Cosmos DB's limits, mirrored by every adapter: ten operations per patch, a hundred per batch.
MAX_PATCH_OPERATIONS = 10
MAX_BATCH_OPERATIONS = 100

#: A change-feed drain in these tests never needs more pages than this; more means the feed never settles.
MAX_PAGES = 1_000


def unique(prefix: str) -> str:
    """Return a name unique to this test run, so tests never see each other's documents."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def feed_ids(documents: Sequence[Document]) -> list[str]:
    """Return the ids of change-feed or query documents, in order."""
    return [str(document["id"]) for document in documents]


class FeedDrain:
    """What one drain of every feed range saw: documents, non-empty page sizes, and where to resume."""

    def __init__(self) -> None:
        self.documents: list[Document] = []
        self.page_sizes: list[int] = []
        self.continuations: dict[str, str] = {}

    @property
    def ids(self) -> list[str]:
        return feed_ids(self.documents)


class ContainerContractBase(abc.ABC):
    """The hooks a backend implements and the helpers the contract tests share."""

    # Capabilities: plain attributes, so a subclass may also decide per instance (e.g. emulator vs real account).
    supports_clock_control: bool = False
    supports_splits: bool = False
    supports_sub_ranges: bool = False
    supports_fault_injection: bool = False
    supports_hierarchical_prefix_queries: bool = True

    #: How long a real-time TTL test polls for an expiry before it fails (real Cosmos deletes in the background).
    ttl_poll_deadline_seconds: float = 30.0
    ttl_poll_interval_seconds: float = 0.25

    # ----------------------------------------------------------------------------------------------------------
    # Hooks.
    # ----------------------------------------------------------------------------------------------------------

    @abc.abstractmethod
    def make_container(
        self, partition_key_paths: Sequence[str] = ("/pk",), default_ttl: int | None = -1
    ) -> DocumentContainer:
        """Return a fresh, empty container with these partition key paths and ``defaultTtl``."""

    def advance_clock(self, seconds: float) -> None:
        """Move the clock of every container this test made forward (``supports_clock_control``)."""
        raise NotImplementedError("set supports_clock_control and implement advance_clock")

    def split_feed_range(self, container: DocumentContainer, feed_range: FeedRange) -> tuple[FeedRange, FeedRange]:
        """Split a feed range into two children (``supports_splits``)."""
        raise NotImplementedError("set supports_splits and implement split_feed_range")

    def halve_feed_range(self, container: DocumentContainer, feed_range: FeedRange) -> tuple[FeedRange, FeedRange]:
        """Two feed ranges that together are ``feed_range``, edge to edge, without splitting it
        (``supports_sub_ranges``). Each half of a new container's first feed range must hold some of the keys
        ``k0``..``k39``."""
        raise NotImplementedError("set supports_sub_ranges and implement halve_feed_range")

    def inject_fault(self, container: DocumentContainer, operation: str, error: ContainerError) -> None:
        """Make the next call of ``operation`` (a port method name) fail with ``error`` before it applies."""
        raise NotImplementedError("set supports_fault_injection and implement inject_fault")

    def let_time_pass(self, seconds: float) -> None:
        """Let ``seconds`` pass on the backend's clock: advance it when controllable, otherwise wait."""
        if self.supports_clock_control:
            self.advance_clock(seconds)
        else:
            time.sleep(seconds)

    # ----------------------------------------------------------------------------------------------------------
    # Helpers.
    # ----------------------------------------------------------------------------------------------------------

    def _doc(self, pk: PartitionKey = "p", item_id: str | None = None, **fields: Any) -> Document:
        document: Document = {"id": item_id or unique("doc"), "pk": pk}
        document.update(fields)
        return document

    def _drain(
        self,
        container: DocumentContainer,
        *,
        start: ChangeFeedStart | datetime = ChangeFeedStart.BEGINNING,
        continuations: dict[str, str] | None = None,
        max_item_count: int = 100,
    ) -> FeedDrain:
        """Read every feed range until it answers an empty page; resume from ``continuations`` when given."""
        drain = FeedDrain()
        for feed_range in container.read_feed_ranges():
            continuation = (continuations or {}).get(feed_range.token)
            for _ in range(MAX_PAGES):
                page = container.read_change_feed(
                    feed_range, continuation=continuation, start=start, max_item_count=max_item_count
                )
                assert isinstance(page, ChangeFeedPage)
                assert page.continuation, "a page always carries a continuation, even an empty one"
                continuation = page.continuation
                if not page.documents:
                    break
                drain.documents.extend(page.documents)
                drain.page_sizes.append(len(page.documents))
            else:
                pytest.fail(f"the change feed of {feed_range.token} never answered an empty page")
            drain.continuations[feed_range.token] = continuation
        return drain

    def _read_to_end(
        self, container: DocumentContainer, feed_range: FeedRange, continuation: str | None, max_item_count: int
    ) -> tuple[list[str], str | None]:
        """The ids of the changes of one range after ``continuation`` (``None``: from the beginning), read until
        an empty page, and where that leaves the reader."""
        ids: list[str] = []
        for _ in range(MAX_PAGES):
            page = container.read_change_feed(feed_range, continuation=continuation, max_item_count=max_item_count)
            continuation = page.continuation
            if not page.documents:
                return ids, continuation
            ids.extend(feed_ids(page.documents))
        pytest.fail(f"the change feed of {feed_range.token} never answered an empty page")

    def _wait_until_expired(
        self, container: DocumentContainer, item_id: str, pk: PartitionKey, ttl_seconds: int
    ) -> None:
        """Wait for a document's TTL to elapse and prove it is gone from point reads."""
        if self.supports_clock_control:
            self.advance_clock(ttl_seconds)
            with pytest.raises(NotFound):
                container.read(item_id, pk)
            return
        deadline = time.monotonic() + ttl_seconds + self.ttl_poll_deadline_seconds
        while time.monotonic() < deadline:
            try:
                container.read(item_id, pk)
            except NotFound:
                return
            time.sleep(self.ttl_poll_interval_seconds)
        pytest.fail(f"{item_id} did not expire within {ttl_seconds}s + the poll deadline")

    def _require(self, capability: str) -> None:
        if not getattr(self, capability):
            pytest.skip(f"backend does not declare {capability}")

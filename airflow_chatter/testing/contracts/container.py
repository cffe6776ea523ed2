"""The abstract conformance suite every ``DocumentContainer`` must pass.

It ships inside the package (like eventsourcing's ``tests/persistence.py``) so a user can prove their own
backend against exactly the behaviour the drain relies on. Subclass it in a module whose class name starts with
``Test`` and implement :meth:`DocumentContainerContract.make_container`::

    class TestMyContainer(DocumentContainerContract):
        def make_container(self, partition_key_paths=("/pk",), default_ttl=-1):
            return MyContainer(...)

The base class has no ``Test`` prefix, so pytest never collects it on its own.

Optional capabilities are opt-in through class attributes; a test that needs a capability the backend lacks is
skipped with the reason:

* ``supports_clock_control`` with :meth:`advance_clock`: TTL and point-in-time tests move the backend's clock
  instead of waiting. Without it they wait for real time and *poll* with a bounded deadline, because real Cosmos DB
  expires documents asynchronously.
* ``supports_splits`` with :meth:`split_feed_range`: feed-range split tests.
* ``supports_sub_ranges`` with :meth:`halve_feed_range`: reading a feed range's halves with its continuation, which
  is what a split's children and a merge's parts do (F-04).
* ``supports_fault_injection`` with :meth:`inject_fault`: transient-error tests.
* ``supports_hierarchical_prefix_queries``: queries scoped to a prefix of a hierarchical key (the Node emulator
  cannot route them).

Every test asks for a fresh, empty container through :meth:`make_container` (change-feed tests read "from the
beginning" and count what they see). A subclass that must clean up (a real account) records what it made and
deletes it in its own ``teardown_method``.

This module imports pytest; import it only from tests.
"""

from __future__ import annotations

import abc
import threading
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from airflow_chatter.ports import (
    BadRequest,
    BatchFailed,
    BatchOperation,
    ChangeFeedPage,
    ChangeFeedStart,
    Conflict,
    ContainerError,
    Document,
    DocumentContainer,
    FeedRange,
    FeedRangeGone,
    NotFound,
    PartitionKey,
    PatchOperation,
    PreconditionFailed,
    RequestTimeout,
    ServiceUnavailable,
    Throttled,
)

#: Cosmos DB's limits, mirrored by every adapter: ten operations per patch, a hundred per batch.
MAX_PATCH_OPERATIONS = 10
MAX_BATCH_OPERATIONS = 100

#: A change-feed drain in these tests never needs more pages than this; more means the feed never settles.
_MAX_PAGES = 1_000


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


class DocumentContainerContract(abc.ABC):
    """Every behaviour of the ``DocumentContainer`` port, as a test. Subclass it; see the module docstring."""

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
            for _ in range(_MAX_PAGES):
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
        for _ in range(_MAX_PAGES):
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

    # ----------------------------------------------------------------------------------------------------------
    # Create and read.
    # ----------------------------------------------------------------------------------------------------------

    def test_create_returns_the_document_with_system_properties(self) -> None:
        container = self.make_container()
        created = container.create(self._doc(item_id="a", n=1), "p")
        assert created["id"] == "a" and created["n"] == 1, "the body comes back as written"
        assert isinstance(created["_etag"], str) and created["_etag"], "every document carries an opaque ETag"
        assert isinstance(created["_ts"], int), "_ts is whole seconds since the epoch"

    def test_create_rejects_duplicate_id_in_same_partition_with_409(self) -> None:
        container = self.make_container()
        container.create(self._doc(item_id="a", n=1), "p")
        with pytest.raises(Conflict) as caught:
            container.create(self._doc(item_id="a", n=2), "p")
        assert caught.value.status_code == 409
        assert container.read("a", "p")["n"] == 1, "a rejected create must not overwrite the original"

    def test_create_allows_the_same_id_in_another_partition(self) -> None:
        container = self.make_container()
        container.create(self._doc("p1", "a", n=1), "p1")
        container.create(self._doc("p2", "a", n=2), "p2")
        assert container.read("a", "p1")["n"] == 1, "an id is unique per partition key only"
        assert container.read("a", "p2")["n"] == 2

    def test_create_rejects_a_document_whose_partition_key_differs_from_the_argument_with_400(self) -> None:
        """Real Cosmos DB answers 400 ("PartitionKey extracted from document doesn't match")."""
        container = self.make_container()
        with pytest.raises(BadRequest):
            container.create(self._doc("p1", "a"), "p2")

    def test_read_returns_what_was_created(self) -> None:
        container = self.make_container()
        created = container.create(self._doc(item_id="a", nested={"x": [1, 2]}), "p")
        read = container.read("a", "p")
        assert read["nested"] == {"x": [1, 2]}
        assert read["_etag"] == created["_etag"], "a read does not change the ETag"

    def test_read_of_a_missing_id_raises_404(self) -> None:
        container = self.make_container()
        with pytest.raises(NotFound) as caught:
            container.read("missing", "p")
        assert caught.value.status_code == 404

    def test_read_with_the_wrong_partition_key_raises_404(self) -> None:
        container = self.make_container()
        container.create(self._doc("p1", "a"), "p1")
        with pytest.raises(NotFound):
            container.read("a", "p2")

    def test_returned_documents_are_copies_the_caller_may_mutate(self) -> None:
        container = self.make_container()
        created = container.create(self._doc(item_id="a", tags=["x"]), "p")
        created["tags"].append("mutated")
        read = container.read("a", "p")
        read["tags"].append("mutated")
        assert container.read("a", "p")["tags"] == ["x"], "only a write changes a stored document"

    # ----------------------------------------------------------------------------------------------------------
    # Replace, upsert, delete and ETags.
    # ----------------------------------------------------------------------------------------------------------

    def test_every_write_changes_the_etag(self) -> None:
        container = self.make_container()
        etags = [container.create(self._doc(item_id="a", n=0), "p")["_etag"]]
        etags.append(container.replace("a", "p", self._doc(item_id="a", n=1))["_etag"])
        etags.append(container.upsert(self._doc(item_id="a", n=2), "p")["_etag"])
        etags.append(container.patch("a", "p", [PatchOperation("set", "/n", 3)])["_etag"])
        assert len(set(etags)) == len(etags), "an unchanged ETag would let a stale writer win"

    def test_replace_with_the_current_etag_succeeds(self) -> None:
        container = self.make_container()
        created = container.create(self._doc(item_id="a", n=0), "p")
        replaced = container.replace("a", "p", self._doc(item_id="a", n=1), if_match=created["_etag"])
        assert replaced["n"] == 1 and container.read("a", "p")["n"] == 1

    def test_replace_with_a_stale_etag_raises_412_and_keeps_the_document(self) -> None:
        container = self.make_container()
        stale = container.create(self._doc(item_id="a", n=0), "p")["_etag"]
        container.replace("a", "p", self._doc(item_id="a", n=1))
        with pytest.raises(PreconditionFailed) as caught:
            container.replace("a", "p", self._doc(item_id="a", n=2), if_match=stale)
        assert caught.value.status_code == 412
        assert container.read("a", "p")["n"] == 1, "a refused replace writes nothing"

    def test_replace_of_a_missing_document_raises_404(self) -> None:
        container = self.make_container()
        with pytest.raises(NotFound):
            container.replace("a", "p", self._doc(item_id="a"))

    def test_upsert_creates_then_replaces(self) -> None:
        container = self.make_container()
        container.upsert(self._doc(item_id="a", n=1), "p")
        assert container.read("a", "p")["n"] == 1, "upsert of a new id creates it"
        container.upsert(self._doc(item_id="a", n=2), "p")
        assert container.read("a", "p")["n"] == 2, "upsert of an existing id replaces it"

    def test_upsert_with_a_stale_etag_raises_412_and_current_etag_works(self) -> None:
        container = self.make_container()
        stale = container.create(self._doc(item_id="a", n=0), "p")["_etag"]
        current = container.upsert(self._doc(item_id="a", n=1), "p")["_etag"]
        with pytest.raises(PreconditionFailed):
            container.upsert(self._doc(item_id="a", n=2), "p", if_match=stale)
        container.upsert(self._doc(item_id="a", n=3), "p", if_match=current)
        assert container.read("a", "p")["n"] == 3

    def test_delete_with_a_stale_etag_raises_412_and_keeps_the_document(self) -> None:
        container = self.make_container()
        stale = container.create(self._doc(item_id="a", n=0), "p")["_etag"]
        container.patch("a", "p", [PatchOperation("set", "/n", 1)])
        with pytest.raises(PreconditionFailed):
            container.delete("a", "p", if_match=stale)
        assert container.read("a", "p")["n"] == 1, "a refused delete deletes nothing"

    def test_delete_with_the_current_etag_removes_the_document(self) -> None:
        container = self.make_container()
        current = container.create(self._doc(item_id="a"), "p")["_etag"]
        container.delete("a", "p", if_match=current)
        with pytest.raises(NotFound):
            container.read("a", "p")

    def test_delete_of_a_missing_document_raises_404(self) -> None:
        container = self.make_container()
        with pytest.raises(NotFound):
            container.delete("a", "p")

    def test_create_after_delete_reuses_the_id(self) -> None:
        container = self.make_container()
        container.create(self._doc(item_id="a", n=1), "p")
        container.delete("a", "p")
        container.create(self._doc(item_id="a", n=2), "p")
        assert container.read("a", "p")["n"] == 2

    # ----------------------------------------------------------------------------------------------------------
    # Patch.
    # ----------------------------------------------------------------------------------------------------------

    def test_patch_set_adds_and_overwrites_fields_including_nested_paths(self) -> None:
        container = self.make_container()
        container.create(self._doc(item_id="a", status="pending", meta={"attempts": 0}), "p")
        patched = container.patch(
            "a",
            "p",
            [
                PatchOperation("set", "/status", "delivered"),
                PatchOperation("set", "/meta/attempts", 1),
                PatchOperation("set", "/meta/receipt", {"offset": 7}),
                PatchOperation("set", "/new", True),
            ],
        )
        assert patched["status"] == "delivered" and patched["new"] is True
        assert patched["meta"] == {"attempts": 1, "receipt": {"offset": 7}}
        assert container.read("a", "p") == patched, "the returned document is what was stored"

    def test_patch_replace_overwrites_an_existing_field(self) -> None:
        container = self.make_container()
        container.create(self._doc(item_id="a", status="pending"), "p")
        patched = container.patch("a", "p", [PatchOperation("replace", "/status", "delivered")])
        assert patched["status"] == "delivered"

    def test_patch_replace_of_an_absent_path_raises_400(self) -> None:
        container = self.make_container()
        container.create(self._doc(item_id="a"), "p")
        with pytest.raises(BadRequest):
            container.patch("a", "p", [PatchOperation("replace", "/absent", 1)])

    def test_patch_add_appends_with_dash_and_inserts_at_an_index(self) -> None:
        container = self.make_container()
        container.create(self._doc(item_id="a", tags=["b"]), "p")
        patched = container.patch(
            "a",
            "p",
            [
                PatchOperation("add", "/tags/-", "c"),
                PatchOperation("add", "/tags/0", "a"),
                PatchOperation("add", "/extra", {"k": 1}),
            ],
        )
        assert patched["tags"] == ["a", "b", "c"], "'-' appends; an index inserts before that element"
        assert patched["extra"] == {"k": 1}, "add on an object member creates it"

    def test_patch_remove_deletes_a_field(self) -> None:
        container = self.make_container()
        container.create(self._doc(item_id="a", gone=1, tags=["x", "y"]), "p")
        patched = container.patch("a", "p", [PatchOperation("remove", "/gone"), PatchOperation("remove", "/tags/0")])
        assert "gone" not in patched and patched["tags"] == ["y"]

    def test_patch_remove_of_an_absent_path_raises_400(self) -> None:
        container = self.make_container()
        container.create(self._doc(item_id="a"), "p")
        with pytest.raises(BadRequest):
            container.patch("a", "p", [PatchOperation("remove", "/absent")])

    def test_patch_incr_increments_and_creates_a_missing_counter(self) -> None:
        container = self.make_container()
        container.create(self._doc(item_id="a", attempts=2), "p")
        patched = container.patch(
            "a", "p", [PatchOperation("incr", "/attempts", 1), PatchOperation("incr", "/fresh", 5)]
        )
        assert patched["attempts"] == 3 and patched["fresh"] == 5

    def test_patch_applies_all_operations_or_none(self) -> None:
        container = self.make_container()
        container.create(self._doc(item_id="a", n=0), "p")
        with pytest.raises(BadRequest):
            container.patch("a", "p", [PatchOperation("set", "/n", 1), PatchOperation("replace", "/absent", 1)])
        assert container.read("a", "p")["n"] == 0, "a failed patch must not leave its first operation applied"

    def test_patch_with_more_than_ten_operations_raises_400(self) -> None:
        container = self.make_container()
        container.create(self._doc(item_id="a"), "p")
        operations = [PatchOperation("set", f"/f{i}", i) for i in range(MAX_PATCH_OPERATIONS + 1)]
        with pytest.raises(BadRequest):
            container.patch("a", "p", operations)
        container.patch("a", "p", operations[:MAX_PATCH_OPERATIONS])  # exactly ten is allowed

    def test_patch_with_a_stale_etag_raises_412_and_current_etag_works(self) -> None:
        container = self.make_container()
        stale = container.create(self._doc(item_id="a", n=0), "p")["_etag"]
        current = container.patch("a", "p", [PatchOperation("set", "/n", 1)])["_etag"]
        with pytest.raises(PreconditionFailed):
            container.patch("a", "p", [PatchOperation("set", "/n", 2)], if_match=stale)
        container.patch("a", "p", [PatchOperation("set", "/n", 3)], if_match=current)
        assert container.read("a", "p")["n"] == 3

    def test_patch_with_a_true_filter_predicate_applies(self) -> None:
        container = self.make_container()
        container.create(self._doc(item_id="a", status="pending"), "p")
        patched = container.patch(
            "a",
            "p",
            [PatchOperation("set", "/status", "delivered")],
            filter_predicate="FROM c WHERE c.status = 'pending'",
        )
        assert patched["status"] == "delivered"

    def test_patch_with_a_false_filter_predicate_raises_412_and_changes_nothing(self) -> None:
        container = self.make_container()
        etag = container.create(self._doc(item_id="a", status="delivered"), "p")["_etag"]
        with pytest.raises(PreconditionFailed) as caught:
            container.patch(
                "a",
                "p",
                [PatchOperation("set", "/status", "pending")],
                filter_predicate="from c where c.status = 'pending'",
            )
        assert caught.value.status_code == 412
        assert container.read("a", "p")["_etag"] == etag, "a refused conditional patch writes nothing"

    def test_patch_of_a_missing_document_raises_404(self) -> None:
        container = self.make_container()
        with pytest.raises(NotFound):
            container.patch("a", "p", [PatchOperation("set", "/n", 1)])

    # ----------------------------------------------------------------------------------------------------------
    # Transactional batch.
    # ----------------------------------------------------------------------------------------------------------

    def test_batch_runs_every_operation_kind_and_reports_their_statuses(self) -> None:
        container = self.make_container()
        for item_id in ("read-me", "replace-me", "upsert-me", "delete-me", "patch-me"):
            container.create(self._doc(item_id=item_id, n=0), "p")
        results = container.execute_batch(
            "p",
            [
                BatchOperation.create(self._doc(item_id="new", n=1)),
                BatchOperation.upsert(self._doc(item_id="upsert-new", n=1)),
                BatchOperation.upsert(self._doc(item_id="upsert-me", n=1)),
                BatchOperation.read("read-me"),
                BatchOperation.replace(self._doc(item_id="replace-me", n=1)),
                BatchOperation.delete("delete-me"),
                BatchOperation.patch("patch-me", [PatchOperation("incr", "/n", 1)]),
            ],
        )
        assert [r.status_code for r in results] == [201, 201, 200, 200, 200, 204, 200]
        assert results[3].body is not None and results[3].body["id"] == "read-me", "a read returns its body"
        for item_id in ("new", "upsert-new", "upsert-me", "replace-me", "patch-me"):
            assert container.read(item_id, "p")["n"] == 1, f"{item_id} was written by the batch"
        with pytest.raises(NotFound):
            container.read("delete-me", "p")

    def test_batch_is_all_or_nothing_when_an_operation_fails(self) -> None:
        container = self.make_container()
        container.create(self._doc(item_id="exists"), "p")
        operations = [
            BatchOperation.create(self._doc(item_id="first")),
            BatchOperation.create(self._doc(item_id="second")),
            BatchOperation.create(self._doc(item_id="exists")),
            BatchOperation.create(self._doc(item_id="fourth")),
        ]
        with pytest.raises(BatchFailed) as caught:
            container.execute_batch("p", operations)
        assert caught.value.failed_index == 2 and caught.value.status_code == 409
        assert caught.value.operation_statuses == (424, 424, 409, 424), "every other op is a failed dependency"
        for item_id in ("first", "second", "fourth"):
            with pytest.raises(NotFound):
                container.read(item_id, "p")  # nothing before or after the culprit was persisted

    def test_failed_batch_writes_nothing_to_the_change_feed(self) -> None:
        container = self.make_container()
        container.create(self._doc(item_id="exists"), "p")
        with pytest.raises(BatchFailed):
            container.execute_batch(
                "p",
                [
                    BatchOperation.create(self._doc(item_id="ghost")),
                    BatchOperation.create(self._doc(item_id="exists")),
                ],
            )
        assert self._drain(container).ids == ["exists"], "a rolled-back write must never reach the feed"

    def test_batch_reports_412_for_a_stale_etag_at_its_index(self) -> None:
        container = self.make_container()
        stale = container.create(self._doc(item_id="a", n=0), "p")["_etag"]
        container.patch("a", "p", [PatchOperation("set", "/n", 1)])
        with pytest.raises(BatchFailed) as caught:
            container.execute_batch(
                "p",
                [
                    BatchOperation.create(self._doc(item_id="b")),
                    BatchOperation.replace(self._doc(item_id="a", n=2), if_match=stale),
                ],
            )
        assert caught.value.failed_index == 1 and caught.value.status_code == 412
        assert caught.value.operation_statuses == (424, 412)
        assert container.read("a", "p")["n"] == 1

    def test_batch_patch_with_a_false_filter_fails_the_batch_with_412(self) -> None:
        container = self.make_container()
        container.create(self._doc(item_id="a", status="delivered"), "p")
        with pytest.raises(BatchFailed) as caught:
            container.execute_batch(
                "p",
                [
                    BatchOperation.patch(
                        "a",
                        [PatchOperation("set", "/status", "x")],
                        filter_predicate="FROM c WHERE c.status = 'pending'",
                    ),
                    BatchOperation.create(self._doc(item_id="b")),
                ],
            )
        assert caught.value.failed_index == 0 and caught.value.operation_statuses == (412, 424)
        assert container.read("a", "p")["status"] == "delivered"

    def test_batch_with_more_than_100_operations_raises_400(self) -> None:
        """The service refuses it; an adapter may refuse it client-side, as ``BadRequest`` or a 400 batch."""
        container = self.make_container()
        operations = [BatchOperation.create(self._doc(item_id=f"d{i}")) for i in range(MAX_BATCH_OPERATIONS + 1)]
        with pytest.raises((BadRequest, BatchFailed)) as caught:
            container.execute_batch("p", operations)
        assert caught.value.status_code == 400
        with pytest.raises(NotFound):
            container.read("d0", "p")

    # ----------------------------------------------------------------------------------------------------------
    # Feed ranges and the change feed.
    # ----------------------------------------------------------------------------------------------------------

    def test_feed_ranges_are_listed_and_each_is_a_subset_of_itself(self) -> None:
        container = self.make_container()
        ranges = container.read_feed_ranges()
        assert ranges and all(isinstance(r, FeedRange) and r.token for r in ranges)
        assert len({r.token for r in ranges}) == len(ranges), "ranges are distinct"
        for feed_range in ranges:
            assert container.is_feed_range_subset(feed_range, feed_range)
        for left in ranges:
            for right in ranges:
                if left != right:
                    assert not container.is_feed_range_subset(left, right), "siblings do not overlap"
        assert [r.token for r in container.read_feed_ranges(force_refresh=True)] == [r.token for r in ranges]

    def test_f04_a_feed_range_overlaps_itself_as_itself_and_no_sibling(self) -> None:
        container = self.make_container()
        ranges = container.read_feed_ranges()
        for feed_range in ranges:
            assert container.feed_range_overlap(feed_range, feed_range) == feed_range
        for left in ranges:
            for right in ranges:
                if left != right:
                    assert container.feed_range_overlap(left, right) is None, "siblings share no key"

    def test_f04_the_overlap_of_nested_ranges_is_the_inner_one_token_for_token_and_halves_share_nothing(self) -> None:
        self._require("supports_sub_ranges")
        container = self.make_container()
        whole = container.read_feed_ranges()[0]
        left, right = self.halve_feed_range(container, whole)
        assert container.feed_range_overlap(whole, left) == left and container.feed_range_overlap(right, whole) == right
        assert container.feed_range_overlap(left, right) is None
        inner_left, inner_right = self.halve_feed_range(container, right)
        assert container.feed_range_overlap(left, inner_left) is None
        assert container.feed_range_overlap(inner_right, whole) == inner_right

    def test_change_feed_from_beginning_returns_every_document_once_with_system_properties(self) -> None:
        container = self.make_container()
        for i in range(3):
            container.create(self._doc(f"p{i}", f"d{i}"), f"p{i}")
        drain = self._drain(container)
        assert sorted(drain.ids) == ["d0", "d1", "d2"]
        for document in drain.documents:
            assert isinstance(document["_etag"], str) and isinstance(document["_ts"], int)
            assert "_lsn" in document, "change-feed documents carry _lsn"

    def test_change_feed_pages_are_bounded_by_max_item_count(self) -> None:
        container = self.make_container()
        for i in range(5):
            container.create(self._doc("p", f"d{i}"), "p")
        drain = self._drain(container, max_item_count=2)
        assert drain.page_sizes == [2, 2, 1], "five changes in pages of two; none lost after the first page"
        assert drain.ids == [f"d{i}" for i in range(5)], "one partition key's changes come in write order"

    def test_change_feed_lsn_increases_in_modification_order(self) -> None:
        container = self.make_container()
        for i in range(3):
            container.create(self._doc("p", f"d{i}"), "p")
        container.patch("d0", "p", [PatchOperation("set", "/touched", True)])
        drain = self._drain(container)
        assert drain.ids == ["d1", "d2", "d0"], "the update moved d0 behind the later creates"
        lsns = [document["_lsn"] for document in drain.documents]
        assert lsns == sorted(lsns) and len(set(lsns)) == len(lsns)

    def test_change_feed_resumes_from_a_continuation_with_only_newer_changes(self) -> None:
        container = self.make_container()
        container.create(self._doc("p", "old"), "p")
        first = self._drain(container)
        container.create(self._doc("p", "new"), "p")
        resumed = self._drain(container, continuations=first.continuations)
        assert resumed.ids == ["new"], "a continuation is a bookmark after everything already read"

    def test_change_feed_with_no_changes_returns_an_empty_page_whose_continuation_still_works(self) -> None:
        container = self.make_container()
        container.create(self._doc("p", "old"), "p")
        first = self._drain(container)
        idle = self._drain(container, continuations=first.continuations)
        assert idle.ids == [], "nothing changed"
        assert set(idle.continuations) == set(first.continuations), "an empty page still hands back a position"
        container.create(self._doc("p", "later"), "p")
        assert self._drain(container, continuations=idle.continuations).ids == ["later"]

    def test_change_feed_reading_the_same_continuation_twice_returns_the_same_changes(self) -> None:
        container = self.make_container()
        first = self._drain(container)
        for i in range(3):
            container.create(self._doc("p", f"d{i}"), "p")
        once = self._drain(container, continuations=first.continuations)
        twice = self._drain(container, continuations=first.continuations)
        assert once.ids == twice.ids == ["d0", "d1", "d2"], "a retried page must see the same changes"

    def test_change_feed_from_now_skips_existing_documents(self) -> None:
        container = self.make_container()
        container.create(self._doc("p", "before"), "p")
        now = self._drain(container, start=ChangeFeedStart.NOW)
        assert now.ids == [], "'now' starts after every existing change"
        container.create(self._doc("p", "after"), "p")
        assert self._drain(container, continuations=now.continuations).ids == ["after"]

    def test_change_feed_from_a_point_in_time_returns_changes_since_then(self) -> None:
        container = self.make_container()
        before = container.create(self._doc("p", "before"), "p")
        self.let_time_pass(2)
        container.create(self._doc("p", "after"), "p")
        since = datetime.fromtimestamp(before["_ts"] + 1, tz=UTC)
        assert self._drain(container, start=since).ids == ["after"]

    def test_change_feed_returns_an_updated_document_once_in_its_latest_version(self) -> None:
        container = self.make_container()
        container.create(self._doc("p", "a", n=0), "p")
        for n in (1, 2, 3):
            container.patch("a", "p", [PatchOperation("set", "/n", n)])
        drain = self._drain(container)
        assert drain.ids == ["a"] and drain.documents[0]["n"] == 3, "latest-version mode: one entry, newest body"

    def test_change_feed_omits_deleted_documents(self) -> None:
        container = self.make_container()
        container.create(self._doc("p", "kept"), "p")
        container.create(self._doc("p", "deleted"), "p")
        container.delete("deleted", "p")
        assert self._drain(container).ids == ["kept"], "deletes do not appear in latest-version mode"

    def test_change_feed_continuations_of_two_containers_are_independent(self) -> None:
        left, right = self.make_container(), self.make_container()
        left.create(self._doc("p", "left-1"), "p")
        right.create(self._doc("p", "right-1"), "p")
        left_first = self._drain(left)
        right.create(self._doc("p", "right-2"), "p")  # a write on the other container between the two reads
        right_first = self._drain(right)
        left.create(self._doc("p", "left-2"), "p")
        assert left_first.ids == ["left-1"] and right_first.ids == ["right-1", "right-2"]
        assert self._drain(left, continuations=left_first.continuations).ids == ["left-2"]
        assert self._drain(right, continuations=right_first.continuations).ids == []

    def _round_robin(
        self, container: DocumentContainer, ranges: Sequence[FeedRange], continuations: dict[str, str]
    ) -> dict[str, list[str]]:
        """Read every range a page at a time, in turn, until each answers empty; update ``continuations``."""
        seen: dict[str, list[str]] = {feed_range.token: [] for feed_range in ranges}
        active = list(ranges)
        for _ in range(_MAX_PAGES):
            if not active:
                return seen
            for feed_range in list(active):
                page = container.read_change_feed(
                    feed_range, continuation=continuations.get(feed_range.token), max_item_count=2
                )
                continuations[feed_range.token] = page.continuation
                if page.documents:
                    seen[feed_range.token].extend(feed_ids(page.documents))
                else:
                    active.remove(feed_range)
        pytest.fail("the change feed never answered an empty page")

    def test_change_feed_continuations_of_interleaved_feed_range_readers_are_independent(self) -> None:
        container = self.make_container()
        ranges = container.read_feed_ranges()
        if len(ranges) == 1 and self.supports_splits:
            self.split_feed_range(container, ranges[0])
            ranges = container.read_feed_ranges()
        continuations: dict[str, str] = {}
        for batch in ("one", "two"):
            ids = [f"{batch}-{i}" for i in range(12)]
            for i, item_id in enumerate(ids):
                container.create(self._doc(f"key-{i}", item_id), f"key-{i}")
            seen = self._round_robin(container, ranges, continuations)
            everything = [item_id for per_range in seen.values() for item_id in per_range]
            assert sorted(everything) == sorted(ids), "each reader resumes from its own range's continuation"
            for token, per_range in seen.items():
                assert len(set(per_range)) == len(per_range), f"{token} delivered a change twice"

    def test_concurrent_readers_of_two_containers_each_get_their_own_continuation(self) -> None:
        """Two threads write and read their own container's feed at once (Azure SDK issue #35328)."""
        containers = [self.make_container(), self.make_container()]
        rounds = 8
        seen: dict[int, list[str]] = {}
        errors: list[BaseException] = []
        barrier = threading.Barrier(len(containers))

        def write_and_read(index: int) -> None:
            try:
                container = containers[index]
                continuations = self._drain(container).continuations
                ids: list[str] = []
                barrier.wait(timeout=60)
                for round_number in range(rounds):
                    container.create(self._doc("p", f"c{index}-{round_number}"), "p")
                    drain = self._drain(container, continuations=continuations)
                    continuations = drain.continuations
                    ids.extend(drain.ids)
                seen[index] = ids
            except BaseException as error:  # noqa: BLE001 - re-raised in the test thread below
                errors.append(error)

        threads = [threading.Thread(target=write_and_read, args=(i,)) for i in range(len(containers))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
        if errors:
            raise errors[0]
        for index in range(len(containers)):
            expected = [f"c{index}-{r}" for r in range(rounds)]
            assert seen[index] == expected, "a reader saw another reader's position or lost its own"

    # ----------------------------------------------------------------------------------------------------------
    # Properties.
    # ----------------------------------------------------------------------------------------------------------

    @pytest.mark.parametrize("default_ttl", [None, -1, 3600])
    def test_properties_report_partition_key_paths_and_default_ttl(self, default_ttl: int | None) -> None:
        container = self.make_container(partition_key_paths=("/pk",), default_ttl=default_ttl)
        properties = container.properties()
        assert properties.partition_key_paths == ("/pk",)
        assert properties.default_ttl == default_ttl
        assert properties.container_id and properties.database_id and properties.account_endpoint

    def test_properties_report_hierarchical_partition_key_paths(self) -> None:
        container = self.make_container(partition_key_paths=("/tenant", "/user"))
        assert container.properties().partition_key_paths == ("/tenant", "/user")

    # ----------------------------------------------------------------------------------------------------------
    # Time to live.
    # ----------------------------------------------------------------------------------------------------------

    def test_document_expires_after_the_container_default_ttl(self) -> None:
        container = self.make_container(default_ttl=1)
        container.create(self._doc("p", "a"), "p")
        self._wait_until_expired(container, "a", "p", 1)

    def test_item_ttl_overrides_the_container_default(self) -> None:
        container = self.make_container(default_ttl=3600)
        container.create(self._doc("p", "short", ttl=1), "p")
        container.create(self._doc("p", "control"), "p")
        self._wait_until_expired(container, "short", "p", 1)
        assert container.read("control", "p"), "the control follows the hour-long default"

    def test_item_ttl_minus_one_never_expires(self) -> None:
        container = self.make_container(default_ttl=1)
        container.create(self._doc("p", "forever", ttl=-1), "p")
        container.create(self._doc("p", "barrier"), "p")
        self._wait_until_expired(container, "barrier", "p", 1)
        assert container.read("forever", "p"), "ttl -1 outlives the default that expired the barrier"

    def test_patched_ttl_starts_expiry(self) -> None:
        container = self.make_container(default_ttl=-1)
        container.create(self._doc("p", "a"), "p")
        container.create(self._doc("p", "control"), "p")
        container.patch("a", "p", [PatchOperation("set", "/ttl", 1)])
        self._wait_until_expired(container, "a", "p", 1)
        assert container.read("control", "p"), "no ttl under default -1 never expires"

    def test_item_ttl_is_ignored_when_container_ttl_is_off(self) -> None:
        container = self.make_container(default_ttl=None)
        container.create(self._doc("p", "a", ttl=1), "p")
        self.let_time_pass(3)
        assert container.read("a", "p")["ttl"] == 1, "without a container defaultTtl, item ttl means nothing"

    def test_expired_documents_vanish_from_queries_and_the_change_feed(self) -> None:
        container = self.make_container(default_ttl=-1)
        container.create(self._doc("p", "expiring", ttl=1), "p")
        container.create(self._doc("p", "control"), "p")
        self._wait_until_expired(container, "expiring", "p", 1)
        assert feed_ids(list(container.query("SELECT * FROM c"))) == ["control"]
        assert self._drain(container).ids == ["control"], "expiries do not appear in latest-version mode"
        container.create(self._doc("p", "expiring"), "p")  # the id is free again

    # ----------------------------------------------------------------------------------------------------------
    # Hierarchical partition keys.
    # ----------------------------------------------------------------------------------------------------------

    def _hierarchical_doc(self, tenant: str, user: str, item_id: str, **fields: Any) -> Document:
        document: Document = {"id": item_id, "tenant": tenant, "user": user}
        document.update(fields)
        return document

    def test_hierarchical_keys_allow_the_same_id_under_two_full_keys(self) -> None:
        container = self.make_container(partition_key_paths=("/tenant", "/user"))
        container.create(self._hierarchical_doc("t1", "u1", "a", n=1), ["t1", "u1"])
        container.create(self._hierarchical_doc("t1", "u2", "a", n=2), ["t1", "u2"])
        assert container.read("a", ["t1", "u1"])["n"] == 1, "identity is the full key, not its first level"
        assert container.read("a", ["t1", "u2"])["n"] == 2
        with pytest.raises(Conflict):
            container.create(self._hierarchical_doc("t1", "u1", "a"), ["t1", "u1"])

    def test_hierarchical_read_needs_the_full_key(self) -> None:
        container = self.make_container(partition_key_paths=("/tenant", "/user"))
        container.create(self._hierarchical_doc("t1", "u1", "a"), ["t1", "u1"])
        with pytest.raises(NotFound):
            container.read("a", ["t1", "u3"])

    def test_query_scoped_to_a_hierarchical_prefix_returns_every_full_key_under_it(self) -> None:
        self._require("supports_hierarchical_prefix_queries")
        container = self.make_container(partition_key_paths=("/tenant", "/user"))
        container.create(self._hierarchical_doc("t1", "u1", "a"), ["t1", "u1"])
        container.create(self._hierarchical_doc("t1", "u2", "b"), ["t1", "u2"])
        container.create(self._hierarchical_doc("t2", "u1", "c"), ["t2", "u1"])
        found = container.query("SELECT * FROM c", partition_key=["t1"])
        assert sorted(feed_ids(list(found))) == ["a", "b"]

    # ----------------------------------------------------------------------------------------------------------
    # Queries.
    # ----------------------------------------------------------------------------------------------------------

    def _seed_query_documents(self, container: DocumentContainer) -> None:
        rows = [
            ("p1", "a", {"status": "pending", "n": 1, "meta": {"kind": "order"}}),
            ("p1", "b", {"status": "delivered", "n": 2, "meta": {"kind": "order"}}),
            ("p2", "c", {"status": "pending", "n": 3, "meta": {"kind": "invoice"}}),
            ("p2", "d", {"status": "pending", "n": 4}),
        ]
        for pk, item_id, fields in rows:
            container.create(self._doc(pk, item_id, **fields), pk)

    def _query_ids(self, container: DocumentContainer, sql: str, **kwargs: Any) -> list[str]:
        return feed_ids(list(container.query(sql, **kwargs)))

    def test_query_with_parameters_filters_documents(self) -> None:
        container = self.make_container()
        self._seed_query_documents(container)
        found = self._query_ids(
            container,
            "SELECT * FROM c WHERE c.status = @status AND c.n >= @n",
            parameters={"@status": "pending", "@n": 3},
        )
        assert sorted(found) == ["c", "d"]

    def test_query_scoped_to_a_partition_key_returns_only_that_partition(self) -> None:
        container = self.make_container()
        self._seed_query_documents(container)
        found = self._query_ids(
            container, "SELECT * FROM c WHERE c.status = @s", parameters={"@s": "pending"}, partition_key="p1"
        )
        assert found == ["a"], "c and d are pending too, but in p2"

    def test_query_order_by_sorts_ascending_and_descending(self) -> None:
        container = self.make_container()
        self._seed_query_documents(container)
        assert self._query_ids(container, "SELECT * FROM c ORDER BY c.n") == ["a", "b", "c", "d"]
        assert self._query_ids(container, "SELECT * FROM c ORDER BY c.n DESC") == ["d", "c", "b", "a"]
        by_ts = [document["_ts"] for document in container.query("SELECT * FROM c ORDER BY c._ts ASC")]
        assert by_ts == sorted(by_ts) and len(by_ts) == 4

    def test_query_count_returns_the_number_of_matching_documents(self) -> None:
        container = self.make_container()
        self._seed_query_documents(container)
        # The port types query rows as documents; a VALUE query yields bare values.
        count: list[Any] = list(
            container.query("SELECT VALUE COUNT(1) FROM c WHERE c.status = @s", parameters={"@s": "pending"})
        )
        assert count == [3]
        none: list[Any] = list(container.query("SELECT VALUE COUNT(1) FROM c WHERE c.n > 100"))
        assert none == [0], "COUNT answers 0, not an empty result"

    def test_query_is_defined_and_startswith(self) -> None:
        container = self.make_container()
        self._seed_query_documents(container)
        assert sorted(self._query_ids(container, "SELECT * FROM c WHERE IS_DEFINED(c.meta)")) == ["a", "b", "c"]
        assert self._query_ids(container, "SELECT * FROM c WHERE NOT IS_DEFINED(c.meta)") == ["d"]
        found = self._query_ids(
            container, "SELECT * FROM c WHERE STARTSWITH(c.meta.kind, @prefix)", parameters={"@prefix": "inv"}
        )
        assert found == ["c"]

    def test_query_boolean_logic_with_not_or_and_parentheses(self) -> None:
        container = self.make_container()
        self._seed_query_documents(container)
        found = self._query_ids(
            container,
            "SELECT * FROM c WHERE (c.n = 1 OR c.n = 4) AND NOT (c.status != 'pending') ORDER BY c.n",
        )
        assert found == ["a", "d"]
        assert self._query_ids(container, "SELECT * FROM c WHERE c.n <> 2 AND c.n < 3") == ["a"]

    def test_query_bracket_and_nested_paths(self) -> None:
        container = self.make_container()
        self._seed_query_documents(container)
        assert sorted(self._query_ids(container, "SELECT * FROM c WHERE c[\"meta\"].kind = 'order'")) == ["a", "b"]
        assert self._query_ids(container, "SELECT * FROM c WHERE c.meta[\"kind\"] = 'invoice'") == ["c"]

    def test_query_comparison_between_types_matches_nothing(self) -> None:
        container = self.make_container()
        self._seed_query_documents(container)
        assert self._query_ids(container, "SELECT * FROM c WHERE c.n = '1'") == [], "1 and '1' differ"
        assert self._query_ids(container, "SELECT * FROM c WHERE c.missing = null") == [], "undefined is not null"

    def test_query_does_not_return_deleted_documents(self) -> None:
        container = self.make_container()
        self._seed_query_documents(container)
        container.delete("a", "p1")
        assert "a" not in self._query_ids(container, "SELECT * FROM c")

    def test_query_with_a_syntax_error_raises_400(self) -> None:
        container = self.make_container()
        with pytest.raises(BadRequest):
            list(container.query("SELECT * FROM c WHERE"))

    # ----------------------------------------------------------------------------------------------------------
    # Optional: transient faults.
    # ----------------------------------------------------------------------------------------------------------

    @pytest.mark.parametrize(
        "error",
        [Throttled(retry_after_ms=10), ServiceUnavailable(), RequestTimeout()],
        ids=["429", "503", "408"],
    )
    def test_an_injected_transient_error_surfaces_with_its_status_and_writes_nothing(
        self, error: ContainerError
    ) -> None:
        self._require("supports_fault_injection")
        container = self.make_container()
        self.inject_fault(container, "create", error)
        with pytest.raises(type(error)) as caught:
            container.create(self._doc("p", "a"), "p")
        assert caught.value.status_code == error.status_code
        with pytest.raises(NotFound):
            container.read("a", "p")
        container.create(self._doc("p", "a"), "p")  # the fault was for one call only

    def test_an_injected_412_on_patch_leaves_the_document_unchanged(self) -> None:
        self._require("supports_fault_injection")
        container = self.make_container()
        etag = container.create(self._doc("p", "a", n=0), "p")["_etag"]
        self.inject_fault(container, "patch", PreconditionFailed())
        with pytest.raises(PreconditionFailed):
            container.patch("a", "p", [PatchOperation("set", "/n", 1)])
        assert container.read("a", "p")["_etag"] == etag

    # ----------------------------------------------------------------------------------------------------------
    # Optional: feed-range splits.
    # ----------------------------------------------------------------------------------------------------------

    def test_a_split_parent_raises_gone_and_its_children_are_its_subsets(self) -> None:
        self._require("supports_splits")
        container = self.make_container()
        parent = container.read_feed_ranges()[0]
        left, right = self.split_feed_range(container, parent)
        current = container.read_feed_ranges(force_refresh=True)
        assert parent not in current and left in current and right in current
        assert container.is_feed_range_subset(parent, left) and container.is_feed_range_subset(parent, right)
        assert not container.is_feed_range_subset(left, parent), "a child does not contain its parent"
        with pytest.raises(FeedRangeGone) as caught:
            container.read_change_feed(parent)
        assert caught.value.status_code == 410

    # ----------------------------------------------------------------------------------------------------------
    # Optional: sub-ranges of a feed range, resumed from its continuation.
    # ----------------------------------------------------------------------------------------------------------

    def test_f04_halves_resumed_from_the_whole_range_continuation_see_only_their_own_changes_once(self) -> None:
        """What a split's children do with their parent's continuation: each reads its own half from there on.

        A backend that reads the continuation's whole range instead (azure-cosmos does, unless the adapter narrows
        the token) hands every later change to both halves.
        """
        self._require("supports_sub_ranges")
        container = self.make_container()
        keys = [f"k{i}" for i in range(40)]
        for key in keys:
            container.create(self._doc(key, f"before-{key}"), key)
        whole = container.read_feed_ranges()[0]
        _, continuation = self._read_to_end(container, whole, None, 100)
        for key in keys:
            container.create(self._doc(key, f"after-{key}"), key)
        halves = self.halve_feed_range(container, whole)
        read = [self._read_to_end(container, half, continuation, 7)[0] for half in halves]

        # Which keys each range holds, read a second way: from the beginning.
        def keys_in(feed_range: FeedRange) -> set[str]:
            ids = feed_ids(container.read_change_feed(feed_range, max_item_count=1_000).documents)
            return {i.removeprefix("before-") for i in ids if i.startswith("before-")}

        own = [keys_in(half) for half in halves]
        assert own[0] and own[1] and not own[0] & own[1], f"the halves split the keys: {own}"
        assert own[0] | own[1] == keys_in(whole), "the halves together are the whole range"
        for ids, keys_of_half in zip(read, own, strict=True):
            assert sorted(ids) == sorted(f"after-{key}" for key in keys_of_half), "a half reads its own changes only"
        assert len(read[0] + read[1]) == len(set(read[0] + read[1])), "no change reaches both halves"

    def test_f04_a_continuation_does_not_resume_on_a_range_outside_its_own(self) -> None:
        self._require("supports_sub_ranges")
        container = self.make_container()
        container.create(self._doc("k0", "one"), "k0")
        left, right = self.halve_feed_range(container, container.read_feed_ranges()[0])
        page = container.read_change_feed(left, max_item_count=10)
        with pytest.raises(BadRequest):
            container.read_change_feed(right, continuation=page.continuation)

    def test_split_children_resumed_from_the_parent_continuation_see_every_change_exactly_once(self) -> None:
        self._require("supports_splits")
        container = self.make_container()
        keys = [f"k{i}" for i in range(40)]
        for key in keys:
            container.create(self._doc(key, f"before-{key}"), key)
        parent = container.read_feed_ranges()[0]
        page = container.read_change_feed(parent, max_item_count=5)
        seen = feed_ids(page.documents)
        children = self.split_feed_range(container, parent)
        for key in keys:
            container.create(self._doc(key, f"after-{key}"), key)
        for child in children:
            seen.extend(self._read_to_end(container, child, page.continuation, 7)[0])
        # What the parent's key space holds now, read a second way: each child from the beginning.
        expected: list[str] = []
        for child in children:
            expected.extend(feed_ids(container.read_change_feed(child, max_item_count=1_000).documents))
        assert len(seen) == len(set(seen)), "no change is delivered twice across the split"
        assert sorted(seen) == sorted(expected), "the children together resume exactly where the parent stopped"
        assert any(i.startswith("after-") for i in seen), "the test wrote into the split range"

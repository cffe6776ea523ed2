"""F-10 read-ahead (batched mode): the next page of the change feed is read while a page is published and stamped.

Every test drives a real ``DrainEngine`` against the in-memory container and asserts what the drain leaves behind:
document state, published messages, the lease's checkpoint, the summary's counts and request units. Reading ahead
must be invisible: a page read ahead and not consumed is never counted, gated or published; its error surfaces at
the page it belongs to; the checkpoint never passes an unconfirmed document (F-04).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from airflow_chatter.adapters.memory.container import MemoryDocumentContainer
from airflow_chatter.drain.read_ahead import FeedReader, FeedRequest
from airflow_chatter.ports import (
    BatchOperationResult,
    ChangeFeedPage,
    ChangeFeedStart,
    Document,
    FeedRange,
    PartitionKey,
    ServiceUnavailable,
)
from airflow_chatter.ports.request_charges import report
from airflow_chatter.testing.fakes import FakePublisher

from ._drain_support import Rig, calls, fail_operation, outbox_doc

BATCHED: dict[str, Any] = {"stamp_mode": "batched", "stamp_concurrency": 4, "max_batch_size": 3}
#: How long a test waits for the other thread before it records that it did not come (never asserted as a time).
PATIENCE_SECONDS = 10.0


def seed(rig: Rig, count: int) -> list[Document]:
    """``count`` pending documents, each on its own key (every stamp is a plain point patch)."""
    return rig.seed(*(outbox_doc(f"m-{i}", f"t{i}") for i in range(count)))


def published(rig: Rig) -> list[str]:
    return [dict(m.headers)["message-id"].decode() for m in rig.publisher.sent]


def statuses(rig: Rig, docs: list[Document]) -> list[str]:
    return [rig.current(doc)["status"] for doc in docs]


class ReadsAhead(MemoryDocumentContainer):
    """Records, when a page's first stamp is written, whether the next page's read had already been made."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.second_read = threading.Event()
        self.read_before_first_stamp: bool | None = None

    def read_change_feed(self, feed_range: FeedRange, **kwargs: Any) -> ChangeFeedPage:
        page = super().read_change_feed(feed_range, **kwargs)
        if self.calls["read_change_feed"] == 2:
            self.second_read.set()
        return page

    def patch(self, item_id: str, partition_key: PartitionKey, operations: Any, **kwargs: Any) -> Document:
        if self.read_before_first_stamp is None:
            self.read_before_first_stamp = self.second_read.wait(PATIENCE_SECONDS)
        return super().patch(item_id, partition_key, operations, **kwargs)


def test_f10_behind_a_full_page_the_next_page_is_read_before_the_page_is_stamped() -> None:
    rig = Rig()
    rig.monitored = ReadsAhead(partition_key_paths=rig.paths, clock=rig.clock)
    docs = seed(rig, 6)
    summary = rig.drain(rig.engine(**BATCHED))
    summary.raise_for_error()
    assert rig.monitored.read_before_first_stamp is True, "page 2 was read while page 1 was being stamped"
    assert statuses(rig, docs) == ["delivered"] * 6
    assert published(rig) == [f"m-{i}" for i in range(6)], "each document once, in feed order"


def test_f10_sequential_mode_reads_no_page_ahead() -> None:
    rig = Rig()
    seed(rig, 6)
    fail_operation(rig.monitored, "patch", ServiceUnavailable("stamp down"), on_call=1)
    summary = rig.drain(rig.engine(**{**BATCHED, "stamp_mode": "sequential"}))
    assert summary.error_type == "ServiceUnavailable"
    assert calls(rig.monitored, "read_change_feed") == 1, "one page read, none ahead"


def test_f04_a_page_read_ahead_is_dropped_unseen_when_the_page_before_it_fails() -> None:
    rig = Rig()
    docs = seed(rig, 6)
    fail_operation(rig.monitored, "patch", ServiceUnavailable("stamp down"), on_call=2)
    engine = rig.engine(**BATCHED)
    summary = rig.drain(engine)
    assert summary.error_type == "ServiceUnavailable" and summary.confirmation_failures == 1
    assert calls(rig.monitored, "read_change_feed") == 2, "page 2 was read ahead"
    assert (summary.pages, summary.documents) == (1, 3), "the page read ahead is not counted"
    assert published(rig) == ["m-0", "m-1", "m-2"], "nothing of the page read ahead is published"
    assert rig.lease(engine).continuation is None, "no checkpoint past the page's unconfirmed document"
    page_1, page_2 = statuses(rig, docs[:3]), statuses(rig, docs[3:])
    assert sorted(page_1) == ["delivered", "delivered", "pending"], "the one failed stamp stays pending"
    assert page_2 == ["pending"] * 3
    (unstamped,) = [f"m-{i}" for i, status in enumerate(page_1) if status == "pending"]
    again = rig.drain(engine)
    again.raise_for_error()
    assert statuses(rig, docs) == ["delivered"] * 6, "nothing lost"
    assert published(rig)[3:] == [unstamped, "m-3", "m-4", "m-5"], "the unstamped one goes out again, then page 2"


def test_f10_an_error_of_the_read_ahead_surfaces_at_the_page_it_belongs_to() -> None:
    rig = Rig()
    docs = seed(rig, 6)
    fail_operation(rig.monitored, "read_change_feed", ServiceUnavailable("feed down"), on_call=2)
    engine = rig.engine(**BATCHED)
    summary = rig.drain(engine)
    assert summary.error_type == "ServiceUnavailable"
    assert (summary.pages, summary.delivered) == (1, 3), "page 1 was finished before page 2's read failed"
    continuation = rig.lease(engine).continuation
    assert continuation is not None, "page 1 is checkpointed"
    rest = rig.monitored.read_change_feed(rig.lease(engine).feed_range, continuation=continuation, max_item_count=3)
    assert [d["id"] for d in rest.documents] == [d["id"] for d in docs[3:]], "resumes exactly after page 1"
    rig.drain(engine).raise_for_error()
    assert statuses(rig, docs) == ["delivered"] * 6
    assert published(rig) == [f"m-{i}" for i in range(6)], "nothing published twice"


class SplitsOnSecondRead(MemoryDocumentContainer):
    """The feed range splits just before the second read (the one made ahead): that read answers FeedRangeGone."""

    def read_change_feed(self, feed_range: FeedRange, **kwargs: Any) -> ChangeFeedPage:
        if self.calls["read_change_feed"] == 1 and feed_range in self.read_feed_ranges():
            self.split_feed_range(feed_range)
        return super().read_change_feed(feed_range, **kwargs)


def test_f10_a_split_met_by_the_read_ahead_hands_the_lease_over_after_the_page_is_checkpointed() -> None:
    rig = Rig()
    rig.monitored = SplitsOnSecondRead(partition_key_paths=rig.paths, clock=rig.clock)
    docs = seed(rig, 12)
    engine = rig.engine(**BATCHED)
    summaries = engine.drain_all()
    first = summaries[0]
    assert first.error is None and first.delivered == 3, "page 1 delivered before the split was seen"
    assert len(first.split_into) == 2, "the split is reported by the parent's drain"
    assert all(s.error is None for s in summaries)
    assert statuses(rig, docs) == ["delivered"] * 12
    assert sorted(published(rig)) == sorted(f"m-{i}" for i in range(12)), "each document once across the split"


def test_f04_the_budget_sizes_the_page_read_ahead_and_nothing_crosses_it() -> None:
    rig = Rig()
    seed(rig, 10)
    engine = rig.engine(**BATCHED)
    first = rig.drain(engine, max_documents=5)
    assert (first.documents, first.pages, first.published) == (5, 2, 5), "pages of 3 then 2"
    second = rig.drain(engine)
    assert second.published == 5
    assert sorted(published(rig)) == sorted(f"m-{i}" for i in range(10)), "nothing published twice"


class SlowPublisher(FakePublisher):
    """Its first batch outlasts the drain's ``max_seconds``."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    def send_batch(self, messages: Any) -> Any:
        if self.send_batch_calls == 0:
            time.sleep(self.delay)
        return super().send_batch(messages)


def test_f04_a_page_read_ahead_is_not_counted_when_the_time_budget_stops_the_drain() -> None:
    rig = Rig()
    rig.publisher = SlowPublisher(delay=1.5)
    seed(rig, 6)
    engine = rig.engine(**BATCHED)
    summary = rig.drain(engine, max_seconds=1.0)
    assert summary.error is None
    assert calls(rig.monitored, "read_change_feed") == 2, "page 2 was read ahead"
    assert (summary.pages, summary.documents, summary.published) == (1, 3, 3), "and dropped, uncounted"
    rest = rig.drain(engine)
    assert rest.published == 3
    assert sorted(published(rig)) == sorted(f"m-{i}" for i in range(6))


class Charging(MemoryDocumentContainer):
    """2.5 RU per feed read and 10 RU per patch, reported on the calling thread as an adapter does."""

    def read_change_feed(self, feed_range: FeedRange, **kwargs: Any) -> ChangeFeedPage:
        page = super().read_change_feed(feed_range, **kwargs)
        report(2.5)
        return page

    def patch(self, item_id: str, partition_key: PartitionKey, operations: Any, **kwargs: Any) -> Document:
        written = super().patch(item_id, partition_key, operations, **kwargs)
        report(10.0)
        return written

    def execute_batch(self, partition_key: PartitionKey, operations: Any) -> list[BatchOperationResult]:
        results = super().execute_batch(partition_key, operations)
        report(10.0 * len(operations))
        return results


def test_f11_the_read_ahead_is_charged_to_its_own_drain_even_when_dropped() -> None:
    rig = Rig()
    rig.monitored = Charging(partition_key_paths=rig.paths, clock=rig.clock)
    seed(rig, 6)
    fail_operation(rig.monitored, "patch", ServiceUnavailable("stamp down"), on_call=3)
    engine = rig.engine(**BATCHED)
    failed = rig.drain(engine)
    assert failed.error_type == "ServiceUnavailable"
    assert failed.request_units_by_kind["feed"] == 2.5 * 2, "page 1 and the page read ahead, both charged"
    assert failed.request_units_by_kind["stamps"] == 20.0, "the two stamps that landed"
    reads = calls(rig.monitored, "read_change_feed")
    again = rig.drain(engine)
    again.raise_for_error()
    assert again.request_units_by_kind["feed"] == 2.5 * (calls(rig.monitored, "read_change_feed") - reads)


def test_feed_reader_hands_a_page_read_ahead_only_to_the_exact_same_request() -> None:
    rig = Rig()
    docs = [d["id"] for d in seed(rig, 6)]
    (feed_range,) = rig.monitored.read_feed_ranges()
    reader = FeedReader(rig.monitored, read_ahead=True)
    try:
        reader.prefetch(FeedRequest(feed_range, None, ChangeFeedStart.BEGINNING, 3))
        smaller = reader.read(FeedRequest(feed_range, None, ChangeFeedStart.BEGINNING, 2))
        assert [d["id"] for d in smaller.documents] == docs[:2], "a different request is read afresh"
        assert calls(rig.monitored, "read_change_feed") == 2
        reader.prefetch(FeedRequest(feed_range, smaller.continuation, ChangeFeedStart.BEGINNING, 3))
        same = reader.read(FeedRequest(feed_range, smaller.continuation, ChangeFeedStart.BEGINNING, 3))
        assert [d["id"] for d in same.documents] == docs[2:5]
        assert calls(rig.monitored, "read_change_feed") == 3, "the page read ahead was handed out, not re-read"
    finally:
        reader.close()


def _drain_threads(before: set[threading.Thread]) -> list[str]:
    """The stamp-lane and read-ahead threads alive now that were not in ``before`` (other tests' engines)."""
    return sorted(
        t.name
        for t in threading.enumerate()
        if t not in before and t.name.startswith(("chatter-stamp", "chatter-read-ahead"))
    )


def test_f10_closing_the_engine_stops_its_stamp_lanes_and_read_ahead_and_a_later_drain_starts_them_again() -> None:
    before = set(threading.enumerate())
    rig = Rig()
    first = seed(rig, 9)
    engine = rig.engine(**BATCHED)
    with engine:
        rig.drain(engine).raise_for_error()
        assert _drain_threads(before), "a batched drain of several keys ran stamps in lanes and read ahead"
    assert _drain_threads(before) == [], "close() stopped every thread the drain started"
    later = rig.seed(*(outbox_doc(f"later-{i}", f"u{i}") for i in range(3)))
    rig.drain(engine).raise_for_error()
    assert statuses(rig, first + later) == ["delivered"] * 12, "a closed engine drains again"
    engine.close()
    assert _drain_threads(before) == []

"""The pending-outbox stream of one container (``airflow_chatter.operations.pending_stream``): what it announces,
and when its stored position moves. Memory containers, a hand-moved clock; no Airflow."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from airflow_chatter.operations.pending_stream import PendingStream, PositionStore, StreamPosition
from airflow_chatter.outbox.document import MESSAGE_ID_FIELD
from airflow_chatter.ports import Document, ServiceUnavailable
from airflow_chatter.ports.resolution import Resolution
from airflow_chatter.testing.clock import ManualClock
from tests.unit.drain._drain_support import fail_operation, memory_container, outbox_doc, split

HANDLED = Resolution(accepted=2, failed=0)
#: The triggerer died (or the persist never confirmed) for one of the two sources.
FAILED = Resolution(accepted=1, failed=1)
NOBODY = Resolution(accepted=0, failed=0)


class Rig:
    def __init__(self) -> None:
        self.clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
        self.monitored = memory_container(self.clock)
        self.leases = memory_container(self.clock, paths=("/id",), container_id="leases")
        self.now = 0.0

    def stream(self, **kwargs: float) -> PendingStream:
        """A new reader, as after a triggerer restart: it starts from the stored position."""
        return PendingStream(self.monitored, PositionStore(self.leases, "orders"), clock=lambda: self.now, **kwargs)

    def write(self, n: int) -> list[str]:
        ids = []
        for _ in range(n):
            document = self.monitored.create(outbox_doc(), "t1")
            ids.append(str(document[MESSAGE_ID_FIELD]))
        return ids

    def stamp(self, message_ids: list[str]) -> None:
        for document in self.monitored.query("SELECT * FROM c"):
            if document.get(MESSAGE_ID_FIELD) in message_ids:
                self.monitored.replace(document["id"], "t1", {**document, "status": "delivered"})


def announced(found: tuple[object, StreamPosition] | None) -> list[str]:
    assert found is not None, "the poll announced nothing"
    batch = found[0]
    documents: tuple[Document, ...] = batch.all_documents  # type: ignore[attr-defined]
    return [str(d[MESSAGE_ID_FIELD]) for d in documents]


def test_pnd01_pending_documents_are_announced_once_and_an_idle_feed_announces_nothing() -> None:
    rig = Rig()
    stream = rig.stream()
    first = stream.poll()
    assert first is None or first[0].all_documents == (), "an empty container announces nothing"
    assert stream.poll() is None, "an idle feed: no position moved, nothing handed out"
    written = rig.write(3)
    assert announced(stream.poll()) == written
    assert stream.poll() is None, "the same documents are not announced on every poll"


def test_pnd04_stamps_move_the_position_and_announce_nothing_no_phantom_events() -> None:
    rig = Rig()
    stream = rig.stream()
    written = rig.write(2)
    first = stream.poll()
    assert first is not None and stream.advance([(first[1], HANDLED)])
    rig.stamp(written)
    found = stream.poll()
    assert found is not None, "the stamps moved the feed: a position to store"
    batch, position = found
    assert batch.all_documents == () and position.announced == 0, "a drain's own stamps announce nothing (PND-04)"
    assert stream.advance([(position, NOBODY)]), "a batch that announced nothing moves with nobody subscribed"


def test_a_batch_not_handled_leaves_the_stored_position_and_a_restarted_reader_announces_it_again() -> None:
    rig = Rig()
    written = rig.write(2)
    first = rig.stream()
    batch = first.poll()
    assert announced(batch) == written
    # The triggerer dies before Airflow confirmed the events: advance is never called.
    assert PositionStore(rig.leases, "orders").load() is None, "nothing was stored"
    assert announced(rig.stream().poll()) == written, "the restarted reader reads them again: none lost"


def test_a_handled_batch_stores_the_position_and_a_restarted_reader_does_not_announce_it_again() -> None:
    rig = Rig()
    rig.write(2)
    stream = rig.stream()
    found = stream.poll()
    assert found is not None and stream.advance([(found[1], HANDLED)])
    assert rig.stream().poll() is None, "after a restart the handled batch does not come again"
    more = rig.write(1)
    assert announced(rig.stream().poll()) == more, "only what came after the stored position"


def test_an_unhandled_batch_stops_the_advance_there_and_the_reader_reads_it_and_the_later_ones_again() -> None:
    rig = Rig()
    stream = rig.stream()
    first_ids = rig.write(1)
    first = stream.poll()
    second_ids = rig.write(1)
    second = stream.poll()
    assert first is not None and second is not None
    stored = stream.advance([(first[1], FAILED), (second[1], HANDLED)])
    assert not stored, "nothing after an unhandled batch is stored, though the later one was handled"
    assert announced(stream.poll()) == first_ids + second_ids, "the reader rewound to the stored position"
    assert not stream.advance([(second[1], HANDLED)]), "a position from before the rewind is never stored"


def test_a_pending_batch_nobody_was_subscribed_for_is_not_handled() -> None:
    rig = Rig()
    stream = rig.stream()
    written = rig.write(1)
    found = stream.poll()
    assert found is not None
    assert not stream.advance([(found[1], NOBODY)]), "no trigger took it: storing past it would lose it"
    assert announced(stream.poll()) == written


def test_documents_still_pending_are_announced_again_after_refire_after_seconds_and_stamped_ones_are_not() -> None:
    rig = Rig()
    stream = rig.stream(refire_after_seconds=300)
    stuck, drained = rig.write(1), rig.write(1)
    assert announced(stream.poll()) == stuck + drained
    rig.stamp(drained)
    rig.now += 299
    found = stream.poll()
    assert found is not None and found[0].all_documents == (), "the stamp moved the feed; nothing is due yet"
    rig.now += 1
    again = stream.poll()
    assert announced(again) == stuck, "a failed drain does not leave its documents waiting for the next write"
    assert again is not None and again[0].documents == () and len(again[0].refired) == 1


def test_a_read_that_fails_half_way_drops_nothing() -> None:
    rig = Rig()
    stream = rig.stream()
    written = rig.write(2)
    fail_operation(rig.monitored, "read_change_feed", ServiceUnavailable("503"), on_call=2)
    with pytest.raises(ServiceUnavailable):
        stream.poll()
    assert announced(stream.poll()) == written, "the first page read before the failure is read again"


def test_f04_after_a_split_the_children_resume_from_the_stored_continuation_of_their_parent() -> None:
    rig = Rig()
    rig.write(3)
    stream = rig.stream()
    found = stream.poll()
    assert found is not None and stream.advance([(found[1], HANDLED)])
    split(rig.monitored, rig.monitored.read_feed_ranges()[0])
    restarted = rig.stream().poll()
    assert restarted is None or restarted[0].all_documents == (), "nothing already handled comes again"
    more = rig.write(2)
    assert sorted(announced(stream.poll())) == sorted(more), "the running reader carries on across the split"


def test_the_position_document_is_no_lease() -> None:
    rig = Rig()
    rig.write(1)
    stream = rig.stream()
    found = stream.poll()
    assert found is not None and stream.advance([(found[1], HANDLED)])
    [document] = list(rig.leases.query("SELECT * FROM c"))
    assert document["id"] == "chatter-pending-stream.orders" and "processor" not in document, (
        "lease listings select on processor: the position document is never taken for a lease"
    )

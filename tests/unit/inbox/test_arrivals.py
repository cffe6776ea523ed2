"""The arrivals stream of one topic (``airflow_chatter.inbox.arrivals``) over the in-memory message source: a batch
per poll, offsets committed only past handled batches."""

from __future__ import annotations

from airflow_chatter.adapters.memory.source import MemoryMessageSource
from airflow_chatter.inbox.arrivals import ArrivalBatch, ArrivalPosition, TopicArrivals
from airflow_chatter.ports.resolution import Resolution

HANDLED = Resolution(accepted=1, failed=0)
FAILED = Resolution(accepted=0, failed=1)
NOBODY = Resolution(accepted=0, failed=0)


def _source(records: int) -> MemoryMessageSource:
    source = MemoryMessageSource()
    for n in range(records):
        source.append("orders.events", b"{}", partition=n % 2)
    return source


def _poll(arrivals: TopicArrivals) -> tuple[ArrivalBatch, ArrivalPosition]:
    found = arrivals.poll()
    assert found is not None, "records were there to read"
    return found


def test_one_poll_is_one_batch_counting_records_per_partition_and_an_idle_topic_gives_none() -> None:
    source = _source(5)
    arrivals = TopicArrivals(lambda: source, "orders.events")
    batch, _ = _poll(arrivals)
    assert (batch.partitions, batch.records) == (((0, 3), (1, 2)), 5)
    assert arrivals.poll() is None


def test_a_handled_batch_commits_its_offsets_and_a_restarted_reader_does_not_announce_it_again() -> None:
    source = _source(3)
    arrivals = TopicArrivals(lambda: source, "orders.events")
    _, position = _poll(arrivals)
    assert arrivals.advance([(position, HANDLED)])
    assert source.committed == {("orders.events", 0): 2, ("orders.events", 1): 1}
    arrivals.close()
    assert TopicArrivals(lambda: source, "orders.events").poll() is None, "nothing handled comes again"


def test_a_batch_never_acknowledged_is_read_again_after_a_restart() -> None:
    source = _source(3)
    TopicArrivals(lambda: source, "orders.events").poll()
    # The triggerer dies before Airflow persisted the event: advance never runs; its consumer leaves.
    source.close()
    assert source.committed == {}, "nothing was committed"
    batch, _ = _poll(TopicArrivals(lambda: source, "orders.events"))
    assert batch.records == 3, "every record is announced again: none lost"


def test_an_unhandled_batch_commits_the_handled_ones_before_it_and_reads_it_again() -> None:
    source = _source(1)
    arrivals = TopicArrivals(lambda: source, "orders.events")
    _, first = _poll(arrivals)
    source.append("orders.events", b"{}", partition=0)
    _, second = _poll(arrivals)
    assert arrivals.advance([(first, HANDLED), (second, FAILED)])
    assert source.committed == {("orders.events", 0): 1}, "committed up to the failed batch, not past it"
    batch, _ = _poll(arrivals)
    assert batch.records == 1, "the failed batch comes again"
    assert not arrivals.advance([(second, HANDLED)]), "a position from before the rewind is never committed"


def test_records_nobody_was_subscribed_for_are_not_committed() -> None:
    source = _source(1)
    arrivals = TopicArrivals(lambda: source, "orders.events")
    _, position = _poll(arrivals)
    assert not arrivals.advance([(position, NOBODY)])
    assert source.committed == {}
    assert _poll(arrivals)[0].records == 1

"""Follow mode (drain/follow.py): a caught-up drain keeps its lease and polls; every short-drain rule still holds.

Each test scripts what happens while the drain waits between polls (writes arriving, a lease stolen, a split, a stop
request) through the ``Follow``'s injected sleep, so nothing here depends on wall-clock timing.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from airflow_chatter.adapters.memory.faults import OperationCall
from airflow_chatter.drain.follow import FOLLOW_FIELD, Follow, StopRequest
from airflow_chatter.drain.leases import LeaseLostError
from airflow_chatter.drain.suspension import SuspensionState
from airflow_chatter.drain.telemetry import ATTR_LEASE_TOKEN, EMPTY_POLL_REQUEST_UNITS, EMPTY_POLLS, POLLS
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.ports import FeedRange, Throttled
from airflow_chatter.ports.request_charges import report

from ._drain_support import Rig, outbox_doc, split
from ._follow_script import Script, steal


def _script(rig: Rig, at_poll: dict[int, Callable[[], None]] | None = None) -> Script:
    """A scripted wait over the memory rig: its feed reads counted by the monitored container, its clock advanced."""
    return Script(lambda: rig.monitored.calls["read_change_feed"], rig.clock.advance, at_poll or {})


def _published(rig: Rig) -> list[str]:
    return [dict(m.headers)["message-id"].decode() for m in rig.publisher.sent]


def _lease_id(rig: Rig) -> str:
    return rig.engine().ensure_leases()[0].id


def test_follow_publishes_writes_arriving_after_catch_up_and_ends_at_max_documents() -> None:
    rig = Rig()
    rig.seed(outbox_doc("msg-0"))
    script = _script(rig, {2: lambda: rig.seed(outbox_doc("msg-1")), 4: lambda: rig.seed(outbox_doc("msg-2"))})
    engine = rig.engine()
    summary = engine.drain_lease(_lease_id(rig), max_documents=5, follow=script.follow())
    summary.raise_for_error()
    assert _published(rig) == ["msg-0", "msg-1", "msg-2"]
    assert summary.delivered == 3
    assert summary.empty_polls >= 3 and summary.polls > summary.empty_polls  # polls that found pages count too
    assert summary.last_poll_at is not None
    lease = rig.lease(engine)
    assert lease.owner is None  # released: the next run takes over at once
    assert lease.document[FOLLOW_FIELD]["published"] >= 1  # live counts on the lease document, for a UI


def test_follow_ends_at_max_seconds_with_the_lease_released() -> None:
    rig = Rig()
    rig.seed(outbox_doc("msg-0"))
    engine = rig.engine()
    summary = engine.drain_lease(_lease_id(rig), max_seconds=0.3, follow=Follow(0.05))
    summary.raise_for_error()
    assert _published(rig) == ["msg-0"]
    assert summary.empty_polls >= 1
    assert rig.lease(engine).owner is None


def test_follow_stops_at_a_page_boundary_on_request_and_the_next_run_takes_over() -> None:
    rig = Rig()
    stop = StopRequest()
    script = _script(rig, {2: lambda: rig.seed(*(outbox_doc(f"msg-{i}") for i in range(3))), 3: stop.request})
    engine = rig.engine()
    summary = engine.drain_lease(_lease_id(rig), follow=script.follow(stop))
    summary.raise_for_error()
    assert _published(rig) == ["msg-0", "msg-1", "msg-2"]
    assert rig.lease(engine).owner is None
    rig.seed(outbox_doc("msg-3"))
    after = rig.engine(owner="drain-b").drain_all()
    assert [s.lease_held_by for s in after] == [None]
    assert _published(rig) == ["msg-0", "msg-1", "msg-2", "msg-3"]  # nothing lost, nothing published twice


def test_f04_a_lease_stolen_while_following_is_noticed_before_the_next_publish() -> None:
    rig = Rig()
    rig.seed(outbox_doc("msg-0"))
    engine = rig.engine()
    lease_id = _lease_id(rig)

    def steal_and_write() -> None:
        steal(rig.leases, lease_id, "drain-b")
        rig.seed(outbox_doc("msg-1"))

    summary = engine.drain_lease(lease_id, follow=_script(rig, {2: steal_and_write}).follow())
    assert isinstance(summary.error, LeaseLostError)
    assert _published(rig) == ["msg-0"]  # msg-1 is the new owner's to publish
    assert rig.lease(engine).owner == "drain-b"


def test_sus_04_a_suspended_lease_while_following_publishes_nothing_until_its_probe() -> None:
    rig = Rig()
    engine = rig.engine()
    lease_id = _lease_id(rig)
    engine.store.save_suspension(engine.store.get(lease_id), SuspensionState(5, True, rig.clock(), False))
    rig.seed(outbox_doc("msg-0"))
    suspended_at = rig.clock()
    stop = StopRequest()
    script = _script(rig)
    seen: list[tuple[timedelta, int]] = []

    def sleep(seconds: float) -> None:
        seen.append((rig.clock() - suspended_at, len(rig.publisher.sent)))
        if rig.publisher.sent:
            stop.request()
        script.sleep(seconds)

    follow = Follow(0.25, should_stop=stop, sleep=sleep, monotonic=script.monotonic)
    summary = engine.drain_lease(lease_id, follow=follow)
    summary.raise_for_error()
    assert _published(rig) == ["msg-0"]  # the probe batch went out, once
    assert seen and all(sent == 0 for elapsed, sent in seen if elapsed < timedelta(seconds=60))
    assert summary.refused_batches >= 1
    # no busy loop: waiting out the window is a handful of page reads, not one per slice
    assert rig.monitored.calls["read_change_feed"] < 12
    assert not rig.lease(engine).suspension.suspended  # the probe's receipt closed it
    assert rig.lease(engine).owner is None


def test_f04_a_split_while_following_hands_over_to_the_children_and_delivers_everything_once() -> None:
    rig = Rig()
    rig.seed(*(outbox_doc(f"msg-{i}", tenant=f"t{i}") for i in range(4)))
    engine = rig.engine()
    lease_id = _lease_id(rig)

    def split_and_write() -> None:
        split(rig.monitored, FeedRange(engine.store.get(lease_id).feed_range.token))
        rig.seed(*(outbox_doc(f"msg-{i}", tenant=f"t{i}") for i in range(4, 10)))

    summary = engine.drain_lease(lease_id, follow=_script(rig, {2: split_and_write}).follow())
    summary.raise_for_error()
    assert len(summary.split_into) == 2
    for child in summary.split_into:
        rig.engine().drain_lease(child).raise_for_error()
    assert sorted(_published(rig)) == sorted(f"msg-{i}" for i in range(10))  # each once


def test_a_short_drain_counts_no_polls() -> None:
    rig = Rig()
    rig.seed(outbox_doc("msg-0"))
    summary = rig.drain()
    assert (summary.polls, summary.empty_polls, summary.last_poll_at) == (0, 0, None)
    assert [rig.metrics.points(name) for name in (POLLS, EMPTY_POLLS, EMPTY_POLL_REQUEST_UNITS)] == [[], [], []]


def test_follow_records_its_polls_empty_polls_and_their_request_units_as_the_summary_counts_them() -> None:
    rig = Rig()
    rig.seed(outbox_doc("msg-0"))
    stop = StopRequest()
    script = _script(rig, {2: lambda: rig.seed(outbox_doc("msg-1")), 5: stop.request})
    engine = rig.engine()
    lease = engine.ensure_leases()[0]
    summary = engine.drain_lease(lease.id, follow=script.follow(stop))
    summary.raise_for_error()
    assert _published(rig) == ["msg-0", "msg-1"]
    assert summary.empty_polls >= 2 and summary.polls == summary.empty_polls + 1  # the poll that found msg-1
    on_lease = {ATTR_LEASE_TOKEN.replace(".", "__"): lease.token}
    assert rig.metrics.counter(POLLS, **on_lease) == summary.polls
    assert rig.metrics.counter(EMPTY_POLLS, **on_lease) == summary.empty_polls
    # The memory adapter charges no request units (the emulator test charges some): none recorded, as summed.
    units = rig.metrics.points(EMPTY_POLL_REQUEST_UNITS)
    assert round(sum(p.value for p in units), 2) == summary.empty_poll_request_units


def test_f04_a_stop_during_the_wait_after_a_renewal_releases_the_renewed_lease() -> None:
    rig = Rig()
    stop = StopRequest()
    rig.seed(outbox_doc("msg-0"))
    engine = rig.engine(lease_duration_seconds=0.2)

    def slow_read(call: OperationCall) -> None:
        if call.operation == "read_change_feed" and not call.applied:
            rig.clock.advance(0.15)  # a slow read: the lease needs renewing again by the time it was empty

    rig.monitored.handler = slow_read

    def stop_after_a_write() -> None:
        rig.seed(outbox_doc("msg-1"))
        stop.request()

    summary = engine.drain_lease(_lease_id(rig), follow=_script(rig, {3: stop_after_a_write}).follow(stop))
    summary.raise_for_error()  # not LeaseLostError: the lease renewed during the poll is the one released
    assert rig.lease(engine).owner is None
    assert _published(rig) == ["msg-0"]
    rig.engine(owner="drain-b").drain_all()
    assert _published(rig) == ["msg-0", "msg-1"]


def test_f11_the_request_units_of_empty_polls_include_the_lease_renewals_they_wrote() -> None:
    rig = Rig()
    lease_writes: list[str] = []

    def charge_reads(call: OperationCall) -> None:
        if call.operation == "read_change_feed":
            if call.applied:
                report(1.0)
            else:
                rig.clock.advance(0.2)  # a read takes time: a lease may need renewing by the time it comes back

    def charge_writes(call: OperationCall) -> None:
        if call.applied and call.operation == "replace":
            lease_writes.append(call.operation)
            report(10.0)

    rig.monitored.handler = charge_reads
    rig.leases.handler = charge_writes
    stop = StopRequest()
    engine = rig.engine(lease_duration_seconds=1.0)  # renewed every half second: every other poll of 0.25 s
    summary = engine.drain_lease(_lease_id(rig), follow=_script(rig, {12: stop.request}).follow(stop))
    summary.raise_for_error()
    renewals = len(lease_writes) - 2  # the rest are the take and the release
    assert renewals >= 3 and summary.empty_polls == rig.monitored.calls["read_change_feed"] == 12
    assert summary.request_units_by_kind["leases"] == 10.0 * len(lease_writes)
    # Every charge of an idle follow is an empty poll's (its feed read, the renewal it wrote), but the take and the
    # release of the lease.
    assert summary.empty_poll_request_units == 1.0 * summary.empty_polls + 10.0 * renewals
    units = rig.metrics.points(EMPTY_POLL_REQUEST_UNITS)
    assert round(sum(p.value for p in units), 2) == summary.empty_poll_request_units


def _throttled_reads(rig: Rig, *, every: int, after: int = 0) -> None:
    """From the ``after``-th change-feed request on, each read answers 429 (20 ms retry-after) until its
    ``every``-th attempt: ``every - 1`` throttled waits per read."""

    def throttle(call: OperationCall) -> BaseException | None:
        if call.operation != "read_change_feed" or call.applied or call.number <= after:
            return None
        return None if (call.number - after) % every == 0 else Throttled("busy", retry_after_ms=20)

    rig.monitored.handler = throttle


def test_f11_max_throttle_wait_seconds_bounds_each_poll_of_a_following_drain_not_all_of_its_polls() -> None:
    rig = Rig()
    rig.seed(outbox_doc("msg-0"))
    # 20 ms of 429 waits per read: a poll (or the catch-up) reads its page, the page's own stamps echoed back and an
    # empty page, 60 ms: within 70 ms per poll, far over it in all.
    _throttled_reads(rig, every=2)
    stop = StopRequest()
    script = _script(rig, {6: lambda: rig.seed(outbox_doc("msg-1")), 15: stop.request})
    engine = rig.engine(max_throttle_wait_seconds=0.07)
    summary = engine.drain_lease(_lease_id(rig), follow=script.follow(stop))
    summary.raise_for_error()
    assert _published(rig) == ["msg-0", "msg-1"]
    assert summary.polls >= 10 and summary.throttled == summary.pages and not summary.throttle_limit_reached
    assert rig.lease(engine).owner is None


def test_f11_a_poll_that_waits_out_max_throttle_wait_seconds_stops_the_following_drain_nothing_lost() -> None:
    rig = Rig()
    rig.seed(outbox_doc("msg-0"))
    # After the catch-up (msg-0's page, its stamp echoed back, an empty page), each read waits 4 x 20 ms: over 70 ms
    # in one poll.
    _throttled_reads(rig, every=5, after=3)
    script = _script(rig, {1: lambda: rig.seed(outbox_doc("msg-1"))})
    engine = rig.engine(max_throttle_wait_seconds=0.07)
    summary = engine.drain_lease(_lease_id(rig), follow=script.follow())
    assert isinstance(summary.error, Throttled) and summary.throttle_limit_reached
    assert "max_throttle_wait_seconds=0.07" in str(summary.error)
    assert _published(rig) == ["msg-0"]
    assert rig.lease(engine).owner is None, "released: the next run takes over at once"
    rig.monitored.handler = None
    rig.engine(owner="drain-b").drain_all()[0].raise_for_error()
    assert _published(rig) == ["msg-0", "msg-1"], "msg-1 waited for the next run, once"


def test_f_12_a_source_with_follow_true_follows_in_drain_all_polling_until_its_bounds() -> None:
    """F-12: ``SourceOptions(follow=True)`` is honoured by the core: ``drain_all`` keeps the lease once caught up and
    polls every ``follow_poll_seconds`` (it used to return at once, 0 polls), then releases it at ``max_seconds``."""
    rig = Rig()
    rig.seed(outbox_doc("msg-0"))
    engine = rig.engine(follow=True, follow_poll_seconds=0.05)

    (summary,) = engine.drain_all(max_seconds=1.0)

    summary.raise_for_error()
    assert _published(rig) == ["msg-0"]
    assert summary.polls >= 1 and summary.empty_polls >= 1, summary.log_line()
    assert rig.lease(engine).owner is None, "released at its bounds"


def test_f_12_a_short_source_polls_nothing_and_follow_none_overrides_a_following_source() -> None:
    rig = Rig()
    rig.seed(outbox_doc("msg-0"))
    (short,) = rig.engine().drain_all()
    following = rig.engine(follow=True, follow_poll_seconds=0.05)
    rig.seed(outbox_doc("msg-1"))
    overridden = following.drain_lease(_lease_id(rig), follow=Follow.none())
    assert (short.polls, overridden.polls) == (0, 0)
    assert _published(rig) == ["msg-0", "msg-1"]


def test_f_12_drain_all_refuses_to_follow_several_leases_naming_follow_and_takes_none() -> None:
    rig = Rig()
    rig.seed(*(outbox_doc(f"msg-{i}", tenant=f"t{i}") for i in range(4)))
    engine = rig.engine(follow=True, follow_poll_seconds=0.05)
    split(rig.monitored, FeedRange(engine.store.get(_lease_id(rig)).feed_range.token))
    engine.ensure_leases()

    with pytest.raises(ConfigurationError, match="follow=True follows one lease per drain; drain_all found 2"):
        engine.drain_all()

    assert rig.publisher.sent == [] and all(lease.owner is None for lease in engine.store.list_leases())

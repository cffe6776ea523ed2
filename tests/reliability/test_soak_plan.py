"""The soak's fault plan follows the writers' progress, not the clock (tests/reliability/soak.py ``next_step``): a
fault starts once its share of the run is written and the writers are on schedule, the run ends only when every
planned fault has run, and a run that cannot get there stops at its bound instead of passing with faults missing;
a thread of its own that dies fails it."""

from __future__ import annotations

from typing import Any

from tests.reliability.soak import BOUND, ON_SCHEDULE_S, Report, _threads, next_step, schedule

RATE = 4.0
SECONDS = 180.0
PLAN = schedule(SECONDS)
#: A report of a run that kept every promise.
_REPORT: dict[str, Any] = {
    "writes": 10,
    "lost_kafka": 0,
    "lost_effects": 0,
    "kafka_records": 10,
    "max_copies": 1,
    "duplicated_ids": 0,
    "effects_twice": 0,
    "stuck_leases": 0,
    "late_leases": 0,
    "windows": [],
    "rss": [],
    "counts": [],
    "duplicates": [],
    "unexplained": {},
    "faults": [],
    "failures": [],
    "write_errors": {},
    "receiver_errors": {},
    "writer_behind_max": 0,
    "t0": 0.0,
}


def _step(plan: list[tuple[float, str]], attempted: float, behind: float = 0, idle_passes: int = 0) -> str:
    return next_step(plan, int(attempted), int(behind), rate=RATE, seconds=SECONDS, idle_passes=idle_passes)


def test_a_fault_starts_once_its_share_of_the_run_is_written() -> None:
    offset = PLAN[0][0]
    assert _step(PLAN, offset * RATE - 1) == "wait", "one Unit of Work short of its place in the plan"
    assert _step(PLAN, offset * RATE) == "fault", "its place in the plan reached, the writers on schedule"


def test_a_fault_waits_while_the_writers_are_behind_their_schedule() -> None:
    late = PLAN[0][0] * RATE + 100
    assert _step(PLAN, late, behind=ON_SCHEDULE_S * RATE + 1) == "wait", "the writers are still catching up"
    assert _step(PLAN, late, behind=ON_SCHEDULE_S * RATE) == "fault", "within the on-schedule margin"


def test_the_run_goes_on_past_its_planned_writes_until_every_fault_has_run() -> None:
    # A stretched fault (a 30 s broker stop taking 47 s) leaves the last faults due after the planned writes: on the
    # clock they were dropped; here they still run, and only then is the run done.
    last = PLAN[-1:]
    assert _step(last, SECONDS * RATE * 1.5) == "fault", "a fault still planned keeps the run going"
    assert _step([], SECONDS * RATE * 1.5) == "done", "every fault ran and the planned writes are in"
    assert _step([], SECONDS * RATE - 1) == "wait", "every fault ran, but the planned writes are not all in"


def test_a_run_that_cannot_place_its_faults_stops_at_its_bound() -> None:
    last = PLAN[-1:]
    assert _step(last, BOUND * SECONDS * RATE, behind=10_000) == "bound", "the writers never got back on schedule"
    assert _step(last, 0, idle_passes=int(BOUND * SECONDS)) == "bound", "the writers made no progress at all"
    assert _step(last, BOUND * SECONDS * RATE - 1, behind=10_000) == "wait", "under the bound it waits"


def test_a_writer_or_receiver_thread_that_dies_is_named_and_fails_the_run() -> None:
    """A thread of the soak that raises (a writer whose sleep was handed a negative length, once) is named in the
    report, which then fails: its share of the schedule would otherwise fall to the other writers unnoticed."""
    died: list[str] = []

    def fails() -> None:
        raise ValueError("sleep length must be non-negative")

    with _threads(died, fails, lambda: None) as threads:
        for thread in threads:
            thread.join(10)
    assert died == ["ValueError: sleep length must be non-negative"]
    report = Report(**{**_REPORT, "died": died})
    assert not report.passed
    assert "A THREAD DIED: ValueError: sleep length must be non-negative" in report.table()
    assert Report(**_REPORT).passed, "the same run without the dead thread passes"

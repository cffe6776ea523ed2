"""The soak's fault plan follows the writers' progress, not the clock (tests/reliability/soak.py ``next_step``): a
fault starts once its share of the run is written and the writers are on schedule, the run ends only when every
planned fault has run, and a run that cannot get there stops at its bound instead of passing with faults missing."""

from __future__ import annotations

from tests.reliability.soak import BOUND, ON_SCHEDULE_S, next_step, schedule

RATE = 4.0
SECONDS = 180.0
PLAN = schedule(SECONDS)


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

"""The soak's report arithmetic (tests/reliability/soak_report.py): the least-squares RSS slope, series restarted
by a fault, document counts per window, and duplicates attributed to the fault that caused them."""

from __future__ import annotations

import pytest

from tests.reliability.soak_report import (
    NONE,
    FaultWindow,
    Sample,
    attribute_duplicates,
    count_rows,
    fault_kind,
    rss_rows,
    slope_per_hour,
)


def _sample(at: float, rss: dict[str, tuple[int, int, float]], **counts: int) -> Sample:
    values = {"leases": 4, "markers": 0, "effects": 0, "stuck": 0} | counts
    return Sample(at, rss=rss, **values)


def test_slope_is_the_least_squares_fit_in_mib_per_hour() -> None:
    # 1 MiB per minute exactly, then the same with noise symmetric around the line.
    assert slope_per_hour([(0, 100), (60, 101), (120, 102)]) == pytest.approx(60)
    assert slope_per_hour([(0, 100.5), (60, 100.5), (120, 102.5), (180, 102.5)]) == pytest.approx(48)
    assert slope_per_hour([(0, 5), (600, 5)]) == 0
    assert slope_per_hour([(0, 5)]) == 0
    assert slope_per_hour([(30, 5), (30, 9)]) == 0


def test_a_restarted_process_starts_a_new_series_and_the_longest_is_reported() -> None:
    t0 = 1000.0
    mib = 1024
    samples = [
        _sample(t0 + 0, {"worker1": (10, 500 * mib, 1), "scheduler": (20, 200 * mib, 10)}),
        _sample(t0 + 60, {"worker1": (10, 600 * mib, 50), "scheduler": (20, 200 * mib, 22)}),
        _sample(t0 + 120, {"worker1": (11, 300 * mib, 2), "scheduler": (20, 201 * mib, 34)}),
        _sample(t0 + 180, {"worker1": (11, 301 * mib, 32), "scheduler": (20, 202 * mib, 46)}),
        _sample(t0 + 240, {"worker1": (11, 302 * mib, 62), "scheduler": (20, 203 * mib, 58)}),
    ]
    scheduler, worker = rss_rows(samples, t0)
    assert (scheduler.name, scheduler.restarts, scheduler.from_min, scheduler.to_min) == ("scheduler", (), 0, 4)
    assert (scheduler.start_mib, scheduler.end_mib) == (200, 203)
    # 48 CPU seconds in 240 s: 20 % of a core.
    assert scheduler.cpu_percent == pytest.approx(20)
    assert worker.restarts == (2.0,)
    # The longest single-pid series is the one after the restart (2 min against 1): 300 -> 302 MiB, 1 MiB/min.
    assert (worker.from_min, worker.to_min, worker.start_mib, worker.end_mib) == (2, 4, 300, 302)
    assert worker.slope_mib_per_hour == pytest.approx(60)
    assert worker.cpu_percent == pytest.approx(50)


def test_counts_per_window_take_the_last_documents_and_the_largest_backlogs() -> None:
    t0 = 0.0
    samples = [
        Sample(30, leases=4, markers=10, effects=10, stuck=0, written=40, writer_behind=2),
        Sample(50, leases=6, markers=20, effects=20, stuck=0, written=50, writer_behind=0),
        Sample(70, leases=5, markers=60, effects=60, stuck=0, written=70, writer_behind=1),
    ]
    first, second = count_rows(samples, t0, 60)
    assert first.window == "0–1 min"
    assert (first.written, first.leases_max, first.markers, first.effects) == (50, 6, 20, 20)
    assert (first.receiver_behind_max, first.writer_behind_max) == (30, 2)
    assert (second.window, second.markers, second.receiver_behind_max) == ("1–2 min", 60, 10)


def test_each_extra_copy_goes_to_the_first_fault_between_the_copy_before_it_and_it() -> None:
    faults = [
        FaultWindow("worker SIGKILL", 100, 110),
        FaultWindow("broker outage", 200, 260),
        FaultWindow("429 burst", 300, 315),
    ]
    copies = {
        "once": [50.0],
        # published at 95, the run killed at 100: republished at 170 by a run the outage failed: again at 290
        "killed": [95.0, 170.0, 290.0],
        # published in the outage's run, republished after it
        "outage": [199.0, 275.0],
        # a stamp refused in the burst: the copy published during it and again after it
        "burst": [305.0, 370.0],
        # two copies with no fault between them
        "quiet": [120.0, 180.0],
        # a later copy long after every fault
        "late": [400.0, 460.0],
    }
    rows, unexplained = attribute_duplicates(copies, faults)
    table = {row.kind: (row.ids, row.extra_copies) for row in rows}
    assert table == {
        "worker SIGKILL": (1, 1),
        "broker outage": (2, 2),
        "429 burst": (1, 1),
        "range split": (0, 0),
        "scheduler restart": (0, 0),
        NONE: (2, 2),
    }
    assert unexplained == {"quiet": [120.0, 180.0], "late": [400.0, 460.0]}


def test_a_copy_no_fault_explains_goes_to_a_drain_run_that_failed_by_itself_in_between() -> None:
    faults = [FaultWindow("broker outage", 200, 260)]
    copies = {
        "throttled": [120.0, 180.0],
        # the outage comes first: a run failing in it is the outage's doing
        "outage": [199.0, 275.0],
        "late": [400.0, 460.0],
    }
    failures = [(150.0, "ThrottleLimitExceeded"), (230.0, "KafkaPublishError")]
    rows, unexplained = attribute_duplicates(copies, faults, failures)
    table = {row.kind: (row.ids, row.extra_copies) for row in rows}
    assert table["drain run failed: ThrottleLimitExceeded"] == (1, 1)
    assert "drain run failed: KafkaPublishError" not in table
    assert (table["broker outage"], table[NONE]) == ((1, 1), (1, 1))
    assert list(unexplained) == ["late"]


def test_fault_kinds_come_from_the_schedule_and_an_unknown_entry_is_named() -> None:
    assert fault_kind("kill worker2") == "worker SIGKILL"
    assert fault_kind("broker stop 60s") == "broker outage"
    assert fault_kind("restart scheduler") == "scheduler restart"
    with pytest.raises(ValueError, match="'reboot'"):
        fault_kind("reboot")

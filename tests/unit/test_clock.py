"""F-05: the default clock is aware UTC wall-clock time."""

from __future__ import annotations

from datetime import timedelta

from airflow_chatter.clock import Clock, utc_now


def test_f_05_utc_now_is_aware_utc() -> None:
    now = utc_now()
    assert now.tzinfo is not None and now.utcoffset() == timedelta(0), "persisted lease state compares UTC instants"


def test_f_05_utc_now_is_a_clock() -> None:
    clock: Clock = utc_now
    assert clock() <= utc_now()

"""F-11: where a drain's 429 limits come from: the source's own, else the Cosmos connection's, else 30 s of wait
and no retry count (a drain's default bound is time alone)."""

from __future__ import annotations

import pytest

from airflow_chatter.adapters.memory.faults import fail
from airflow_chatter.drain.options import SourceOptions
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.ports import Throttled
from airflow_chatter.ports.throttle import ThrottleLimits
from airflow_chatter.testing.handlers import first_of

from ._drain_support import Rig, outbox_doc


def test_f11_a_source_that_sets_no_limit_takes_the_connections_and_without_one_the_defaults() -> None:
    rig = Rig()
    assert rig.engine().throttle_limits == ThrottleLimits(None, 30.0), "unset: time alone"
    from_connection = ThrottleLimits(2, 4.0)
    engine = rig.engine_with(throttle_limits=from_connection)
    assert engine.throttle_limits == from_connection
    assert rig.engine_with(throttle_limits=from_connection, max_throttle_retries=0).throttle_limits == (
        ThrottleLimits(0, 4.0)
    ), "the source's value wins, one limit at a time"


def test_f11_the_connections_retry_limit_is_the_one_a_drain_stops_on() -> None:
    rig = Rig()
    rig.seed(outbox_doc("m-1"))
    rig.monitored.handler = first_of(
        rig.monitored.handler, fail("read_change_feed", error=Throttled("busy", retry_after_ms=1), times=2)
    )
    summary = rig.drain(rig.engine_with(throttle_limits=ThrottleLimits(1, 30.0)))
    with pytest.raises(Throttled, match="max_throttle_retries=1"):
        summary.raise_for_error()
    assert summary.throttle_limit_reached and summary.published == 0


@pytest.mark.parametrize(
    ("option", "value"),
    [("max_throttle_retries", -1), ("max_throttle_retries", 1.5), ("max_throttle_wait_seconds", -0.5)],
)
def test_f11_a_bad_source_limit_is_refused_naming_it_and_none_means_unset(option: str, value: object) -> None:
    with pytest.raises(ConfigurationError, match=f"^{option}="):
        SourceOptions("orders", ("/pk",), **{option: value})  # type: ignore[arg-type]
    unset = SourceOptions("orders", ("/pk",))
    assert (unset.max_throttle_retries, unset.max_throttle_wait_seconds) == (None, None)

"""F-10 / F-11 knobs in the sources file: refused at parse time naming the field; good values reach the drain."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_chatter.adapters.memory.faults import fail
from airflow_chatter.airflow.sources import SourcesConfigError, parse_sources
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.testing.handlers import first_of

from .test_dags import dagbag, valid


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"stamp_concurrency": 0}, "sources[0] (orders).stamp_concurrency"),
        ({"stamp_mode": "parallel"}, "sources[0] (orders).stamp_mode"),
        ({"max_request_units_per_second": -5}, "sources[0] (orders).max_request_units_per_second"),
        ({"max_throttle_retries": -1}, "sources[0] (orders).max_throttle_retries"),
        ({"request_priority": "urgent"}, "sources[0] (orders).request_priority"),
    ],
)
def test_f10_f11_a_bad_throughput_knob_is_refused_by_the_sources_parser_naming_it(
    change: dict[str, Any], named: str
) -> None:
    with pytest.raises(SourcesConfigError, match=named.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        parse_sources({"sources": [valid(**change)]}, path="chatter_sources.yaml")


def test_f10_a_zero_stamp_concurrency_is_a_dag_import_error_naming_the_field(sources_file: Any) -> None:
    sources_file({"sources": [valid(stamp_concurrency=0)]})
    message = "\n".join(str(e) for e in dagbag().import_errors.values())
    assert "sources[0] (orders).stamp_concurrency" in message, message


def test_f10_f11_the_knobs_reach_the_source_options() -> None:
    config = parse_sources(
        {
            "sources": [
                valid(
                    stamp_mode="sequential",
                    stamp_concurrency=3,
                    max_request_units_per_second=400,
                    max_throttle_retries=2,
                    max_throttle_wait_seconds=5,
                    request_priority="high",
                )
            ]
        }
    )
    options = config.get("orders").to_options()
    assert (options.stamp_mode, options.stamp_concurrency) == ("sequential", 3)
    assert options.max_request_units_per_second == 400
    assert (options.max_throttle_retries, options.max_throttle_wait_seconds) == (2, 5)
    assert options.request_priority == "high"
    defaults = parse_sources({"sources": [valid()]}).get("orders").to_options()
    assert (defaults.stamp_mode, defaults.stamp_concurrency, defaults.max_request_units_per_second) == (
        "batched",
        8,
        None,
    )
    assert defaults.request_priority is None, "unset: the Cosmos connection's priority, else low (F-11)"


def test_f10_the_core_options_refuse_the_same_bad_knobs_naming_them() -> None:
    from airflow_chatter.drain.options import SourceOptions

    for option, value in (("stamp_concurrency", 0), ("stamp_mode", "x"), ("max_request_units_per_second", -1.0)):
        with pytest.raises(ConfigurationError, match=f"^{option}="):
            SourceOptions("orders", ("/pk",), **{option: value})


# -- F-11: the 429 limits on the Cosmos connection; the source's own win -----------------------------------------


def _cosmos_connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, **extra: Any) -> str:
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{conn_id.upper()}",
        json.dumps({"conn_type": "chattercosmos", "host": "https://127.0.0.1:8081/", "extra": extra}),
    )
    return conn_id


def test_f11_the_cosmos_connection_s_429_limits_are_read_from_its_extras(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_chatter.airflow.hooks.cosmos import ChatterCosmosHook
    from airflow_chatter.ports.throttle import ThrottleLimits

    conn = _cosmos_connection(monkeypatch, "cosmos_limits", max_throttle_retries="3", max_throttle_wait_seconds=12.5)
    assert ChatterCosmosHook(conn).throttle_limits() == ThrottleLimits(3, 12.5), "a form's text or a JSON number"
    zero = _cosmos_connection(monkeypatch, "cosmos_zero", max_throttle_retries=0, max_throttle_wait_seconds=0)
    assert ChatterCosmosHook(zero).throttle_limits() == ThrottleLimits(0, 0.0), "0: no retry, no wait"
    unset = _cosmos_connection(monkeypatch, "cosmos_unset", max_throttle_retries="")
    assert ChatterCosmosHook(unset).throttle_limits() == ThrottleLimits(None, 30.0), "unset: 30 s, no retry count"


@pytest.mark.parametrize(
    ("extra", "value"),
    [
        ("max_throttle_retries", -1),
        ("max_throttle_retries", "many"),
        ("max_throttle_retries", 2.5),
        ("max_throttle_wait_seconds", -1),
        ("max_throttle_wait_seconds", "soon"),
        ("max_throttle_wait_seconds", "inf"),
    ],
)
def test_f11_a_bad_429_limit_on_the_connection_is_refused_naming_the_connection_and_the_extra(
    monkeypatch: pytest.MonkeyPatch, extra: str, value: Any
) -> None:
    from airflow_chatter.airflow.hooks.cosmos import ChatterCosmosHook

    conn = _cosmos_connection(monkeypatch, "cosmos_bad", **{extra: value})
    with pytest.raises(ConfigurationError, match=rf"^connection 'cosmos_bad' extra {extra}="):
        ChatterCosmosHook(conn).throttle_limits()


def test_f11_the_429_limits_form_fields_are_declared_for_the_connection_type() -> None:
    from airflow_chatter.airflow.get_provider_info import get_provider_info

    types = {t["connection-type"]: t for t in get_provider_info()["connection-types"]}
    for conn_type in ("chattercosmos",):
        fields = types[conn_type]["conn-fields"]
        assert fields["max_throttle_retries"]["schema"] == {"type": ["integer", "null"], "minimum": 0}
        assert fields["max_throttle_wait_seconds"]["schema"] == {"type": ["number", "null"], "minimum": 0}


@pytest.mark.parametrize(
    ("source_limits", "expected"),
    [
        ({}, (5, 7.0)),
        ({"max_throttle_retries": 2}, (2, 7.0)),
        ({"max_throttle_retries": 2, "max_throttle_wait_seconds": 1}, (2, 1.0)),
        ({"max_throttle_wait_seconds": 0}, (5, 0.0)),
    ],
)
def test_f11_the_source_s_429_limits_override_the_connection_s_each_on_its_own(
    monkeypatch: pytest.MonkeyPatch, source_limits: dict[str, Any], expected: tuple[int, float]
) -> None:
    from airflow_chatter.airflow.operators.drain import ChatterDrainOperator
    from airflow_chatter.ports.throttle import ThrottleLimits
    from airflow_chatter.testing.fakes import FakePublisher
    from tests.airflow._support import install_world, source

    install_world(monkeypatch, cosmos_extras={"max_throttle_retries": 5, "max_throttle_wait_seconds": 7})
    operator = ChatterDrainOperator(task_id="drain", source=source(**source_limits), lease_id="unused")
    assert operator.engine({}, FakePublisher()).throttle_limits == ThrottleLimits(*expected)


@pytest.mark.parametrize(("source_retries", "stops"), [(None, True), (3, False)])
def test_f11_a_drain_task_stops_on_the_connection_s_retry_limit_unless_the_source_allows_more(
    monkeypatch: pytest.MonkeyPatch, source_retries: int | None, stops: bool
) -> None:
    from airflow_chatter.airflow.operators.drain import ChatterDrainOperator
    from airflow_chatter.airflow.operators.list_leases import ChatterListLeasesOperator
    from airflow_chatter.ports import Throttled
    from tests.airflow._support import install_world, source

    world = install_world(monkeypatch, cosmos_extras={"max_throttle_retries": 1})
    world.write(tenants=2, per_tenant=3)
    config = source() if source_retries is None else source(max_throttle_retries=source_retries)
    [lease_id] = ChatterListLeasesOperator(task_id="list", source=config).execute(context={})
    world.monitored.handler = first_of(
        world.monitored.handler, fail("read_change_feed", error=Throttled("busy", retry_after_ms=1), times=2)
    )
    drain = ChatterDrainOperator(task_id="drain", source=config, lease_id=lease_id)
    if stops:
        with pytest.raises(Throttled, match=r"max_throttle_retries=1.*stops at this page, nothing lost"):
            drain.execute(context={})
        assert world.statuses() == {"pending": 6}, "stopped before its first page: nothing stamped, nothing lost"
    else:
        summary = drain.execute(context={})
        assert summary["throttled"] == 2 and summary["delivered"] == 6


def test_f11_test_connection_refuses_a_bad_429_limit_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from unittest import mock

    from airflow_chatter.airflow.hooks.cosmos import ChatterCosmosHook

    conn = _cosmos_connection(monkeypatch, "cosmos_bad_test", max_throttle_wait_seconds="soon")
    with mock.patch("airflow_chatter.adapters.cosmos.client.CosmosClient") as client:
        ok, message = ChatterCosmosHook(conn).test_connection()
    assert not ok and "extra max_throttle_wait_seconds='soon'" in message, message
    assert not client.called, "refused before any network I/O"


@pytest.mark.parametrize(
    "change",
    [{"follow_poll_seconds": 0}, {"follow_poll_seconds": "fast"}, {"follow_poll_seconds": 120}, {"follow": "yes"}],
)
def test_cfg_a_bad_follow_setting_is_refused_by_the_sources_parser_naming_it(change: dict[str, Any]) -> None:
    (field,) = change
    with pytest.raises(SourcesConfigError, match=rf"sources\[0\] \(orders\)\.{field}"):
        parse_sources({"sources": [valid(**change)]}, path="chatter_sources.yaml")


def test_follow_settings_reach_the_source_options() -> None:
    config = parse_sources({"sources": [valid(schedule="@continuous", follow=True, follow_poll_seconds=1)]})
    options = config.get("orders").to_options()
    assert (options.follow, options.follow_poll_seconds) == (True, 1.0)
    defaults = parse_sources({"sources": [valid()]}).get("orders").to_options()
    assert defaults.follow is False and defaults.follow_poll_seconds == 0.25

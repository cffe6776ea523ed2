"""F-10 / F-11 knobs in the sources file: refused at parse time naming the field; good values reach the drain."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_chatter.airflow.config import SourcesConfigError, parse_sources
from airflow_chatter.errors import ConfigurationError

from .test_dags import dagbag, valid


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"stamp_concurrency": 0}, "sources[0] (orders).stamp_concurrency"),
        ({"stamp_mode": "parallel"}, "sources[0] (orders).stamp_mode"),
        ({"max_request_units_per_second": -5}, "sources[0] (orders).max_request_units_per_second"),
        ({"max_throttle_retries": -1}, "sources[0] (orders).max_throttle_retries"),
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
                )
            ]
        }
    )
    options = config.get("orders").to_options()
    assert (options.stamp_mode, options.stamp_concurrency) == ("sequential", 3)
    assert options.max_request_units_per_second == 400
    assert (options.max_throttle_retries, options.max_throttle_wait_seconds) == (2, 5)
    defaults = parse_sources({"sources": [valid()]}).get("orders").to_options()
    assert (defaults.stamp_mode, defaults.stamp_concurrency, defaults.max_request_units_per_second) == (
        "batched",
        8,
        None,
    )


def test_f10_the_core_options_refuse_the_same_bad_knobs_naming_them() -> None:
    from airflow_chatter.drain.options import SourceOptions

    for option, value in (("stamp_concurrency", 0), ("stamp_mode", "x"), ("max_request_units_per_second", -1.0)):
        with pytest.raises(ConfigurationError, match=f"^{option}="):
            SourceOptions("orders", ("/pk",), **{option: value})

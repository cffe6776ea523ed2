"""The one value parser of the Airflow layer: templated strings and connection extras coerce the same way."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from airflow_chatter.airflow.utils.values import as_bool, as_datetime, as_int, as_list
from airflow_chatter.errors import ConfigurationError


@pytest.mark.parametrize(
    ("text", "expected"),
    [("True", True), ("false", False), ("YES", True), ("no", False), ("on", True), ("off", False), ("1", True)],
)
def test_a_rendered_boolean_is_read_in_any_spelling_the_ui_or_a_template_produces(text: str, expected: bool) -> None:
    assert as_bool(text, "plan_only") is expected
    assert as_bool(expected, "plan_only") is expected


@pytest.mark.parametrize("unset", [None, "", "None", "  "])
def test_an_unset_boolean_is_its_default(unset: Any) -> None:
    assert as_bool(unset, "verify", default=True) is True
    assert as_bool(unset, "reset") is False


def test_a_boolean_that_is_not_one_names_the_option() -> None:
    with pytest.raises(ConfigurationError, match=r"plan_only='maybe' must be true or false"):
        as_bool("maybe", "plan_only")


def test_an_integer_below_its_minimum_names_the_option() -> None:
    assert as_int("10", "max_documents") == 10
    with pytest.raises(ConfigurationError, match=r"max_documents='0' must be at least 1"):
        as_int("0", "max_documents")
    with pytest.raises(ConfigurationError, match=r"max_documents='lots' must be an integer"):
        as_int("lots", "max_documents")


def test_a_naive_timestamp_is_utc_and_a_word_is_refused() -> None:
    assert as_datetime("2026-01-31T00:00:00", "since") == datetime(2026, 1, 31, tzinfo=UTC)
    assert as_datetime("2026-01-31T00:00:00Z", "since") == datetime(2026, 1, 31, tzinfo=UTC)
    assert as_datetime("beginning", "since") is None
    with pytest.raises(ConfigurationError, match=r"since='yesterday' must be an ISO 8601 timestamp"):
        as_datetime("yesterday", "since")


def test_a_list_is_read_from_json_or_commas_and_non_strings_are_refused() -> None:
    assert as_list('["a", "b"]', "feed_ranges") == ["a", "b"]
    assert as_list("a, b,", "feed_ranges") == ["a", "b"]
    with pytest.raises(ConfigurationError, match="feed_ranges"):
        as_list("[1, 2]", "feed_ranges")

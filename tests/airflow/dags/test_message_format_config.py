"""F-13 in the sources file: ``message_format`` is refused at parse time naming it; a good value reaches the drain."""

from __future__ import annotations

import pytest

from airflow_chatter.airflow.sources import SourcesConfigError, parse_sources

from .test_dags import valid


def test_f_13_a_bad_message_format_is_refused_by_the_sources_parser_naming_it() -> None:
    with pytest.raises(SourcesConfigError, match=r"sources\[0\] \(orders\)\.message_format: Input should be 'chatter'"):
        parse_sources({"sources": [valid(message_format="avro")]}, path="chatter_sources.yaml")


def test_f_13_message_format_reaches_the_source_options_and_defaults_to_chatter() -> None:
    chosen = parse_sources({"sources": [valid(message_format="cloudevents")]}).get("orders").to_options()
    assert chosen.message_format == "cloudevents"
    assert parse_sources({"sources": [valid()]}).get("orders").to_options().message_format == "chatter"

"""``guarantee`` and ``checkpoint_topic`` in the sources file: refused at parse time naming the field; a good value
reaches the drain's source options."""

from __future__ import annotations

import pytest

from airflow_chatter.airflow.sources import SourcesConfigError, parse_sources

from .test_dags import valid


def test_a_bad_guarantee_is_refused_by_the_sources_parser_naming_it() -> None:
    with pytest.raises(
        SourcesConfigError, match=r"sources\[0\] \(orders\)\.guarantee: Input should be 'at_least_once'"
    ):
        parse_sources({"sources": [valid(guarantee="exactly-once")]}, path="chatter_sources.yaml")


def test_a_bad_checkpoint_topic_is_refused_by_the_sources_parser_naming_it() -> None:
    with pytest.raises(SourcesConfigError, match=r"\(orders\)\.checkpoint_topic: .*is not a Kafka topic name"):
        parse_sources({"sources": [valid(checkpoint_topic="chatter checkpoints")]}, path="chatter_sources.yaml")


def test_exactly_once_reaches_the_source_options_and_at_least_once_is_the_default() -> None:
    chosen = parse_sources({"sources": [valid(guarantee="exactly_once", checkpoint_topic="shop.ckpt")]}).get("orders")
    options = chosen.to_options()
    assert (options.guarantee, options.checkpoint_topic) == ("exactly_once", "shop.ckpt")
    assert parse_sources({"sources": [valid()]}).get("orders").to_options().guarantee == "at_least_once"

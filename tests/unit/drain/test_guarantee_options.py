"""The ``guarantee`` and ``checkpoint_topic`` source fields: validated where the source is built (CFG)."""

from __future__ import annotations

import pytest

from airflow_chatter.drain.options import DEFAULT_CHECKPOINT_TOPIC, SourceOptions
from airflow_chatter.errors import ConfigurationError


def test_guarantee_defaults_to_at_least_once_with_the_shared_checkpoint_topic() -> None:
    source = SourceOptions("orders", "/tenantId")

    assert source.guarantee == "at_least_once", "today's behaviour stays the default"
    assert source.checkpoint_topic == DEFAULT_CHECKPOINT_TOPIC == "chatter.checkpoints"


def test_exactly_once_and_a_named_checkpoint_topic_are_kept() -> None:
    source = SourceOptions("orders", "/tenantId", guarantee="exactly_once", checkpoint_topic="shop.checkpoints")

    assert (source.guarantee, source.checkpoint_topic) == ("exactly_once", "shop.checkpoints")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("guarantee", "exactly-once"),
        ("guarantee", True),
        ("checkpoint_topic", "chatter checkpoints"),
        ("checkpoint_topic", ""),
        ("checkpoint_topic", "x" * 250),
        ("checkpoint_topic", 7),
    ],
)
def test_a_bad_guarantee_or_checkpoint_topic_is_refused_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ConfigurationError) as refused:
        SourceOptions("orders", "/tenantId", **{field: value})

    assert refused.value.option == field, "the error names the field the source got wrong"


def test_exactly_once_with_a_publisher_that_cannot_run_transactions_is_refused_when_the_engine_is_built() -> None:
    """Only a TransactionalPublisher can keep exactly once; a plain one (or several) is refused naming guarantee,
    before any lease is taken."""
    from airflow_chatter.testing.fakes import FakePublisher

    from ._drain_support import Rig

    rig = Rig()
    with pytest.raises(ConfigurationError, match="Kafka transactions") as refused:
        rig.engine(FakePublisher(), guarantee="exactly_once")
    assert refused.value.option == "guarantee"
    assert rig.engine(FakePublisher()).source.guarantee == "at_least_once", "at least once takes any publisher"

"""What a requeue selects (``operations.requeue.requeue_selection``): ids and/or a condition, or every undeliverable
document; a request that selects nothing, or two ways at once, is refused naming the field."""

from __future__ import annotations

import pytest

from airflow_chatter.errors import ConfigurationError
from airflow_chatter.operations.requeue import EVERY_DOCUMENT, requeue_selection


def test_ids_and_a_condition_select_together_and_a_blank_condition_is_none() -> None:
    assert requeue_selection(["a"], " c.x = 1 ") == (["a"], "c.x = 1")
    assert requeue_selection(["a"], "  ") == (["a"], None), "a blank condition selects nothing more"


def test_all_undeliverable_selects_every_undeliverable_document() -> None:
    assert requeue_selection([], None, all_undeliverable=True) == ([], EVERY_DOCUMENT)


@pytest.mark.parametrize(("ids", "where"), [(["a"], None), ([], "c.x = 1")])
def test_all_undeliverable_with_another_selection_is_refused(ids: list[str], where: str | None) -> None:
    with pytest.raises(ConfigurationError, match=r"^all_undeliverable=True cannot be combined"):
        requeue_selection(ids, where, all_undeliverable=True)


def test_a_requeue_that_selects_nothing_is_refused_naming_the_fields() -> None:
    with pytest.raises(ConfigurationError, match=r"^message_ids/document_ids/where=None select documents"):
        requeue_selection([], " ")

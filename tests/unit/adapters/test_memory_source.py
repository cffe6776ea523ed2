"""``MemoryMessageSource``: the message-source contract, run without a broker."""

from __future__ import annotations

from collections.abc import Sequence

from airflow_chatter.adapters.memory import MemoryMessageSource
from airflow_chatter.ports import MessageSource
from airflow_chatter.testing.contracts.message_source import MessageSourceContract, Record


class TestMemoryMessageSource(MessageSourceContract):
    read_seconds = 1.0

    def make_source(self, records: Sequence[Record]) -> MessageSource:
        source = MemoryMessageSource()
        for record in records:
            source.append("orders", record.value, key=record.key, headers=record.headers)
        return source

    def reopen(self, source: MessageSource) -> MessageSource:
        source.close()
        return source


def test_an_empty_source_is_caught_up_at_once() -> None:
    assert MemoryMessageSource().caught_up(timeout=0)

"""``KafkaMessageSource``: the message-source contract against the real broker."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pytest

from airflow_chatter.adapters.kafka.admin import ensure_topics
from airflow_chatter.adapters.kafka.consumer import consumer_config
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.adapters.kafka.source import KafkaMessageSource
from airflow_chatter.ports import MessageSource, OutgoingMessage
from airflow_chatter.testing.contracts.message_source import MessageSourceContract, Record

pytestmark = [pytest.mark.kafka]


class TestKafkaMessageSource(MessageSourceContract):
    @pytest.fixture(autouse=True)
    def _broker(self, kafka_bootstrap: str) -> None:
        self.settings = KafkaSettings(bootstrap_servers=kafka_bootstrap, max_block_ms=15_000)

    def _open(self) -> KafkaMessageSource:
        from kafka import KafkaConsumer

        return KafkaMessageSource(KafkaConsumer(self.topic, **consumer_config(self.settings, group_id=self.group)))

    def make_source(self, records: Sequence[Record]) -> MessageSource:
        # One source per test: its topic and group are the test's.
        self.topic = topic = f"chatter-source-{uuid.uuid4().hex[:10]}"
        self.group = f"chatter-source-group-{uuid.uuid4().hex[:10]}"
        ensure_topics(self.settings, [topic], partitions=1)
        publisher = KafkaPublisher(self.settings)
        try:
            outcomes = publisher.send_batch(
                [OutgoingMessage(topic=topic, value=r.value, key=r.key, headers=r.headers) for r in records]
            )
        finally:
            publisher.close()
        assert all(o.confirmed for o in outcomes), outcomes
        return self._open()

    def reopen(self, source: MessageSource) -> MessageSource:
        source.close()
        return self._open()

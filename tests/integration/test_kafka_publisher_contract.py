"""The Publisher contract on ``KafkaPublisher`` against the real broker (the kafka tests' broker fixture)."""

from __future__ import annotations

import pytest

from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.ports import Publisher
from airflow_chatter.testing.contracts.publisher import PublisherContract

pytestmark = pytest.mark.kafka


class TestKafkaPublisher(PublisherContract):
    @pytest.fixture(autouse=True)
    def _broker(self, kafka_bootstrap: str, kafka_topic: str, kafka_unreachable_address: str) -> None:
        self.bootstrap = kafka_bootstrap
        self.topic = kafka_topic
        self.unreachable_address = kafka_unreachable_address

    def make_publisher(self) -> Publisher:
        return KafkaPublisher(
            KafkaSettings(
                bootstrap_servers=self.bootstrap,
                client_id="chatter-test-contract",
                max_block_ms=15_000,
                request_timeout_ms=10_000,
                delivery_timeout_ms=30_000,
            )
        )

    def make_unreachable_publisher(self) -> Publisher:
        return KafkaPublisher(
            KafkaSettings(
                bootstrap_servers=self.unreachable_address,
                max_block_ms=2_000,
                request_timeout_ms=1_000,
                delivery_timeout_ms=3_000,
            )
        )

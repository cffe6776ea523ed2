"""The Publisher contract on ``KafkaPublisher`` against the real broker (the kafka tests' broker fixture)."""

from __future__ import annotations

import pytest

from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.ports import Publisher
from airflow_chatter.testing.contracts.publisher import PublisherContract
from tests.fixtures.kafka import OnTheBroker

pytestmark = pytest.mark.kafka


class TestKafkaPublisher(OnTheBroker, PublisherContract):
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

"""The Publisher contract on the fake publisher and the core's wrapper around a publisher."""

from __future__ import annotations

from airflow_chatter.operations.engines import TopicMappingPublisher
from airflow_chatter.ports import MessageRejected, Publisher
from airflow_chatter.testing.contracts.publisher import ILLEGAL_TOPIC, PublisherContract
from airflow_chatter.testing.fakes import FakePublisher, fail_topic, unreachable


def fake_broker(*, partitions: int = 3) -> FakePublisher:
    """A fake that refuses what Kafka would refuse of the contract's messages: an illegal topic name."""
    return FakePublisher(fail_topic(ILLEGAL_TOPIC, MessageRejected("illegal topic name")), partitions=partitions)


class TestFakePublisher(PublisherContract):
    def make_publisher(self) -> Publisher:
        return fake_broker()

    def make_unreachable_publisher(self) -> Publisher:
        return FakePublisher(unreachable())


class TestTopicMappingPublisher(PublisherContract):
    def make_publisher(self) -> Publisher:
        return TopicMappingPublisher(fake_broker(), {self.topic: "orders.v2"})

    def make_unreachable_publisher(self) -> Publisher:
        return TopicMappingPublisher(FakePublisher(unreachable()), {self.topic: "orders.v2"})

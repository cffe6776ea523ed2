"""The Publisher contract on ``ConfirmedTopics``, the drain operator's per-topic counting wrapper."""

from __future__ import annotations

from airflow_chatter.airflow.operators.topic_events import ConfirmedTopics
from airflow_chatter.ports import MessageRejected, Publisher
from airflow_chatter.testing.contracts.publisher import ILLEGAL_TOPIC, PublisherContract
from airflow_chatter.testing.fakes import FakePublisher, fail_topic, unreachable


class TestConfirmedTopics(PublisherContract):
    def make_publisher(self) -> Publisher:
        return ConfirmedTopics(FakePublisher(fail_topic(ILLEGAL_TOPIC, MessageRejected("illegal")), partitions=3))

    def make_unreachable_publisher(self) -> Publisher:
        return ConfirmedTopics(FakePublisher(unreachable()))

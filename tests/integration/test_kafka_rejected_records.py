"""KafkaPublisher reports a record kafka-python refuses by itself as ``MessageRejected`` (CTR-04): the drain stamps
that document undeliverable instead of failing its page on every run. A broker failure never is one (RLY-05)."""

from __future__ import annotations

import pytest

from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.ports import MessageRejected, OutgoingMessage


@pytest.mark.parametrize("topic", ["x" * 300, "a b", "\ud800", ""])
def test_ctr_04_a_record_with_an_illegal_topic_name_is_rejected_not_retriable(kafka_bootstrap: str, topic: str) -> None:
    publisher = KafkaPublisher(KafkaSettings(bootstrap_servers=kafka_bootstrap, client_id="rejected"))
    try:
        [outcome] = publisher.send_batch([OutgoingMessage(topic, b"{}", b"k", (("message-id", b"m-1"),))])
    finally:
        publisher.close()
    assert isinstance(outcome.error, MessageRejected)
    assert "not acknowledged" in str(outcome.error)
    assert len(str(outcome.error)) < 1200, "a huge topic name is not copied whole into the error"


def test_rly_05_an_unreachable_broker_is_not_a_rejection() -> None:
    # 127.0.0.1:9 (discard) has no broker: the send fails for want of metadata, a host concern.
    settings = KafkaSettings(bootstrap_servers="127.0.0.1:9", client_id="rejected", max_block_ms=500)
    publisher = KafkaPublisher(settings)
    try:
        [outcome] = publisher.send_batch([OutgoingMessage("orders", b"{}", b"k", (("message-id", b"m-1"),))])
    finally:
        publisher.close()
    assert outcome.error is not None
    assert not isinstance(outcome.error, MessageRejected)

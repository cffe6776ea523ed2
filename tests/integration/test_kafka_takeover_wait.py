"""F-16, a lease taken over from an owner that left a transaction open, against the real broker: opening the new
owner's transactional producer waits while the transaction coordinator is still aborting that transaction, and is
never reported as a broker or account that cannot run transactions (that refusal is pinned, unchanged, by
tests/unit/adapters/test_kafka_transactions_refused.py and tests/integration/test_kafka_sasl.py).

The abandoned transaction is real (a kafka-python producer that began one, sent, and was left). How long the
coordinator takes to finish aborting it is the injected fault: on this quiet single-node broker the abort takes one
``CONCURRENT_TRANSACTIONS`` answer (measured: init_transactions returns in about 0.4 s), shorter than any timeout,
so the coordinator's answers to ``InitProducerId`` are handed to kafka-python's own ``CONCURRENT_TRANSACTIONS`` path
(re-enqueued) until the test releases them, as a loaded broker answers while its abort is under way.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.producer.transaction_manager import InitProducerIdHandler

from airflow_chatter.adapters.kafka import transactions as kafka_transactions
from airflow_chatter.adapters.kafka.admin import CHECKPOINT_TOPIC_CONFIGS, ensure_topics
from airflow_chatter.adapters.kafka.errors import KafkaPublishError
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.ports import CheckpointRecord, CheckpointStamp, LeaseTransactions, OutgoingMessage
from tests.fixtures.kafka import consume_records

pytestmark = pytest.mark.kafka

#: Each ``init_transactions`` wait; the first one ends while the coordinator is still busy.
MAX_BLOCK_MS = 1_500
DEADLINE_S = 30.0


def _settings(bootstrap: str) -> KafkaSettings:
    return KafkaSettings(
        bootstrap_servers=bootstrap,
        client_id="chatter-test-takeover",
        max_block_ms=MAX_BLOCK_MS,
        request_timeout_ms=5_000,
        delivery_timeout_ms=30_000,
    )


@pytest.fixture
def checkpoint_topic(kafka_bootstrap: str) -> str:
    name = f"chatter-test.checkpoints.{uuid.uuid4().hex[:12]}"
    ensure_topics(_settings(kafka_bootstrap), [name], partitions=1, configs=CHECKPOINT_TOPIC_CONFIGS)
    return name


@pytest.fixture
def abandoned(kafka_bootstrap: str, kafka_topic: str) -> Iterator[str]:
    """A transactional id whose owner began a transaction, sent a message in it and was left, never committing."""
    transactional_id = f"lease-{uuid.uuid4().hex}"
    owner = KafkaProducer(
        bootstrap_servers=kafka_bootstrap, transactional_id=transactional_id, transaction_timeout_ms=5_000
    )
    owner.init_transactions()
    owner.begin_transaction()
    owner.send(kafka_topic, b"abandoned").get(timeout=10)
    owner.flush()
    yield transactional_id
    owner.close(timeout=0)


@pytest.fixture
def coordinator_busy(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Until the event is set, every answer to ``InitProducerId`` takes kafka-python's ``CONCURRENT_TRANSACTIONS``
    path (re-enqueued, asked again): the coordinator still aborting the previous owner's transaction."""
    released = threading.Event()
    answer = InitProducerIdHandler.handle_response

    def handle_response(self: Any, response: Any) -> None:
        if released.is_set():
            answer(self, response)
        else:
            self.reenqueue()

    monkeypatch.setattr(InitProducerIdHandler, "handle_response", handle_response)
    yield released
    released.set()


def _waiting(caplog: pytest.LogCaptureFixture) -> bool:
    return any("still being aborted" in r.getMessage() for r in caplog.records)


def test_a_takeover_waits_for_the_previous_owners_abort_and_then_publishes_its_page(
    kafka_bootstrap: str,
    kafka_topic: str,
    checkpoint_topic: str,
    abandoned: str,
    coordinator_busy: threading.Event,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """F-16: the new owner's first ``init_transactions`` times out while the coordinator is still aborting the
    abandoned transaction; that is waited for (logged), not refused as ``guarantee`` that cannot be kept, and once the
    coordinator answers the new owner's page is committed; the abandoned message is never read committed."""
    caplog.set_level(logging.WARNING, logger=kafka_transactions.__name__)
    factory = KafkaPublisher(_settings(kafka_bootstrap))
    opened: list[LeaseTransactions | BaseException] = []

    def take_over() -> None:
        try:
            opened.append(factory.lease_transactions(abandoned, checkpoint_topic))
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            opened.append(exc)

    opener = threading.Thread(target=take_over, daemon=True)
    opener.start()
    deadline = time.monotonic() + DEADLINE_S
    while not _waiting(caplog) and not opened and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not opened, f"opening ended while the coordinator was busy: {opened}"
    assert _waiting(caplog), "the wait for the previous owner's abort is logged"
    coordinator_busy.set()
    opener.join(DEADLINE_S)

    (transactions,) = opened
    assert not isinstance(transactions, BaseException), f"the takeover was reported as {transactions!r}"
    transactions.begin()
    message = OutgoingMessage(kafka_topic, b"new-owner", b"k", (("message-id", b"new-owner"),))
    assert transactions.send_batch([message])[0].confirmed
    record = CheckpointRecord("lease-t", None, "c1", (CheckpointStamp("new-owner", "tenant-1", "delivered"),))
    transactions.commit(record)
    records = consume_records(kafka_bootstrap, kafka_topic, 1, timeout_s=30, isolation_level="read_committed")
    assert [r.value for r in records] == [b"new-owner"], "the page is published, the abandoned message never"
    assert transactions.last_checkpoint() == record
    transactions.close()
    factory.close()


def test_a_takeover_still_in_progress_past_the_wait_fails_retriable_never_as_a_refusal(
    kafka_bootstrap: str,
    checkpoint_topic: str,
    abandoned: str,
    coordinator_busy: threading.Event,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """F-16: a coordinator still aborting the previous owner's transaction when the wait ends fails the drain with
    a retriable error saying so, not with the ``guarantee`` refusal meant for a broker without transactions."""
    monkeypatch.setattr(kafka_transactions, "TAKEOVER_WAIT_S", 2.0)
    factory = KafkaPublisher(_settings(kafka_bootstrap))

    with pytest.raises(KafkaPublishError, match="still being aborted") as failed:
        factory.lease_transactions(abandoned, checkpoint_topic)

    assert not isinstance(failed.value, ConfigurationError)
    assert failed.value.retriable, "a takeover in progress passes: the next drain opens the lease again"
    assert abandoned in str(failed.value), "it names the transactional id"
    factory.close()

"""A broker or account that cannot run transactions is refused when a lease's transactional producer is opened: one
``ConfigurationError`` naming ``guarantee`` and the cause, within ``max_block_ms``, before anything is sent.

kafka-python's ``KafkaProducer`` is replaced by a stand-in whose ``init_transactions`` fails as a broker without
transactions or an ACL without ``TransactionalId`` rights makes it fail; the adapter's own code runs unchanged."""

from __future__ import annotations

from typing import Any

import pytest
from kafka import errors as ke

from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.adapters.kafka.transactions import KafkaLeaseTransactions
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.ports import CheckpointRecord, PublishError


class _Metadata:
    def __init__(self, connected: bool) -> None:
        self._connected = connected

    def brokers(self) -> list[str]:
        return ["broker-1"] if self._connected else []


def _producer(error: BaseException, *, connected: bool = True) -> Any:
    built: list[Any] = []

    class StandIn:
        def __init__(self, **config: Any) -> None:
            self.config = config
            self.sent: list[Any] = []
            self.closed = False
            self._metadata = _Metadata(connected)
            built.append(self)

        def partitions_for(self, topic: str) -> set[int]:
            return {0}

        def init_transactions(self) -> None:
            raise error

        def send(self, *args: Any, **kwargs: Any) -> None:
            self.sent.append(args)

        def close(self, timeout: float | None = None) -> None:
            self.closed = True

    StandIn.built = built  # type: ignore[attr-defined]
    return StandIn


@pytest.mark.parametrize(
    ("error", "cause"),
    [
        (ke.TransactionalIdAuthorizationFailedError(), "TransactionalIdAuthorizationFailedError"),
        (ke.UnsupportedVersionError("InitProducerId"), "UnsupportedVersionError"),
        (ke.KafkaTimeoutError("Timeout expired while initializing transactional state"), "KafkaTimeoutError"),
    ],
)
def test_a_broker_or_account_without_transactions_is_refused_naming_guarantee_and_the_cause(
    monkeypatch: pytest.MonkeyPatch, error: BaseException, cause: str
) -> None:
    stand_in = _producer(error)
    monkeypatch.setattr("kafka.KafkaProducer", stand_in)
    transactions = KafkaLeaseTransactions(KafkaSettings(bootstrap_servers="b1:9092"), "chatter.lease-1", "ckpt")

    with pytest.raises(ConfigurationError, match=cause) as refused:
        transactions.open()

    assert refused.value.option == "guarantee", "the error names the field whose promise cannot be kept"
    assert "TransactionalId" in str(refused.value), "it names the ACL an operator would check"
    (producer,) = stand_in.built
    assert producer.config["transactional_id"] == "chatter.lease-1"
    assert producer.sent == [] and producer.closed, "nothing was sent, and the producer was closed"


def test_an_unreachable_broker_is_reported_unreachable_not_as_missing_transactions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("kafka.KafkaProducer", _producer(ke.KafkaTimeoutError("timeout"), connected=False))
    transactions = KafkaLeaseTransactions(KafkaSettings(bootstrap_servers="b1:9092"), "chatter.lease-1", "ckpt")

    with pytest.raises(PublishError, match="unreachable"):
        transactions.open()


class _Failed:
    """The future of a record kafka-python gave up on (its batch expired while the broker was away)."""

    exception = ke.KafkaTimeoutError("Expiring 1 record(s) for ckpt-0: 8001 ms has passed since batch creation")
    is_done = True

    def failed(self) -> bool:
        return True


def test_a_checkpoint_record_that_failed_is_never_committed(monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka-python 3.0.12 would commit a transaction whose checkpoint record expired (a retriable error leaves it
    committable): the page's messages would be visible without the record that lets the next drain finish the page
    instead of publishing it again. The commit is not asked for, the error names the record, and the producer is
    dropped without an abort that would wait for the broker."""
    calls: list[str] = []

    class Producer:
        def __init__(self, **config: Any) -> None:
            self._metadata = _Metadata(True)

        def partitions_for(self, topic: str) -> set[int]:
            return {0}

        def init_transactions(self) -> None:
            calls.append("init")

        def begin_transaction(self) -> None:
            calls.append("begin")

        def send(self, *args: Any, **kwargs: Any) -> _Failed:
            calls.append("send")
            return _Failed()

        def flush(self, timeout: float | None = None) -> None:
            calls.append("flush")

        def commit_transaction(self) -> None:
            calls.append("commit")

        def abort_transaction(self) -> None:
            calls.append("abort")

        def close(self, timeout: float | None = None) -> None:
            calls.append("close")

    monkeypatch.setattr("kafka.KafkaProducer", Producer)
    transactions = KafkaLeaseTransactions(KafkaSettings(bootstrap_servers="b1:9092"), "chatter.lease-1", "ckpt")
    transactions.open()
    transactions.begin()

    with pytest.raises(PublishError, match="checkpoint record not written"):
        transactions.commit(CheckpointRecord("lease-1", None, "after", ()))
    transactions.abort()  # what the drain does next: nothing more is asked of the broker

    assert calls == ["init", "begin", "send", "flush", "close"], "never committed, never left waiting on an abort"


def _busy_then_ready(busy_answers: int) -> Any:
    """A producer whose coordinator answers ``CONCURRENT_TRANSACTIONS`` ``busy_answers`` times, then a producer id."""
    calls: list[str] = []

    class Producer:
        def __init__(self, **config: Any) -> None:
            self._metadata = _Metadata(True)

        def partitions_for(self, topic: str) -> set[int]:
            return {0}

        def init_transactions(self) -> None:
            calls.append("init")
            if len(calls) <= busy_answers:
                raise ke.ConcurrentTransactionsError()

        def close(self, timeout: float | None = None) -> None:
            calls.append("close")

    Producer.calls = calls  # type: ignore[attr-defined]
    return Producer


def test_a_coordinator_still_aborting_the_previous_owners_transaction_is_waited_for_not_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """F-16: ``CONCURRENT_TRANSACTIONS`` is a takeover in progress: ``init_transactions`` is asked again until the
    coordinator hands out the producer id, and the lease's producer opens."""
    producer = _busy_then_ready(2)
    monkeypatch.setattr("kafka.KafkaProducer", producer)
    transactions = KafkaLeaseTransactions(KafkaSettings(bootstrap_servers="b1:9092"), "chatter.lease-1", "ckpt")

    transactions.open()

    assert producer.calls == ["init", "init", "init"], "asked again while busy, then opened, never closed"


def test_a_takeover_still_in_progress_when_the_wait_ends_is_retriable_not_a_refusal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """F-16: a coordinator busy for the whole wait fails the open with a retriable error saying the previous
    owner's transaction is still being aborted, not the ``guarantee`` refusal; the producer is closed."""
    producer = _busy_then_ready(10**6)
    monkeypatch.setattr("kafka.KafkaProducer", producer)
    monkeypatch.setattr("airflow_chatter.adapters.kafka.transactions.TAKEOVER_WAIT_S", 0.2)
    transactions = KafkaLeaseTransactions(KafkaSettings(bootstrap_servers="b1:9092"), "chatter.lease-1", "ckpt")

    with pytest.raises(PublishError, match="still being aborted") as failed:
        transactions.open()

    assert not isinstance(failed.value, ConfigurationError)
    assert getattr(failed.value, "retriable", False), "the next drain may open the lease again"
    assert producer.calls[-1] == "close" and producer.calls.count("init") > 1

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
from airflow_chatter.ports import PublishError


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

"""``KafkaLeaseTransactions``: one lease's transactional kafka-python producer (the ``LeaseTransactions`` port).

Why it looks the way it does:

* **One producer per lease, opened once.** ``init_transactions`` on the lease's transactional id fences any earlier
  producer of that id (Kafka's epoch) and aborts its open transaction. It is called once, when the drain opens the
  lease; after that the producer is never rebuilt within the drain: a rebuild would call ``init_transactions`` again
  and could fence a drain that took the lease over meanwhile. A producer-wide failure leaves this object broken, and
  the next drain (which first takes the lease again, ETag-checked) opens a fresh one.
* **Fenced is sticky.** Once the broker says ``ProducerFencedError`` (or the producer is in that error state), every
  call raises ``ProducerFenced``: the drain stops at once and publishes nothing more.
* **Refused at open, within ``max_block_ms``.** A broker or account that cannot run transactions (an endpoint
  without them, an ACL missing ``TransactionalId`` rights) fails ``init_transactions``; that is one
  ``ConfigurationError`` naming ``guarantee`` and the cause, before anything is sent.
* **The checkpoint record is read ``read_committed``, up to a settled end.** Records of the lease's id are read from
  the partition its key hashes to, up to the high watermark taken first, once the last stable offset has passed it
  (an open transaction of another lease on that partition hides what follows it; it ends within the transaction
  timeout). So an earlier committed record of this lease is never missed because of someone else's transaction.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from typing_extensions import override

from airflow_chatter.adapters.kafka.errors import KafkaPublishError, describe
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.ports import (
    CheckpointRecord,
    LeaseTransactions,
    MessageRejected,
    OutgoingMessage,
    ProducerFenced,
    PublishError,
    PublishOutcome,
)

log = logging.getLogger(__name__)

#: How long the coordinator lets a transaction stay open before aborting it. A page's publish must fit in it; a
#: drain killed mid-commit holds back ``read_committed`` readers of the partitions it wrote for at most this long.
TRANSACTION_TIMEOUT_MS = 30_000
#: How long reading a checkpoint record waits for the partition to settle (past the transaction timeout).
_SETTLE_SLACK_S = 5.0


def _is_fenced(error: BaseException | None) -> bool:
    """Whether ``error`` (or what it wraps) says another producer took this transactional id."""
    from kafka import errors as ke

    while error is not None:
        if isinstance(error, ke.ProducerFencedError | ke.InvalidProducerEpochError):
            return True
        if "ProducerFenced" in str(error) or "InvalidProducerEpoch" in str(error):
            return True
        error = error.__cause__
    return False


class KafkaLeaseTransactions(KafkaPublisher, LeaseTransactions):
    """The transactions of ``transactional_id``, with checkpoint records on ``checkpoint_topic``; see the module."""

    def __init__(self, settings: KafkaSettings, transactional_id: str, checkpoint_topic: str) -> None:
        super().__init__(settings)
        self.transactional_id = transactional_id
        self._checkpoint_topic = checkpoint_topic
        self._opened = False
        self._in_transaction = False
        self._fenced: ProducerFenced | None = None

    def __repr__(self) -> str:
        return f"KafkaLeaseTransactions({self.transactional_id!r}, {self._settings!r})"

    # -- the producer ---------------------------------------------------------------------------

    def open(self) -> None:
        """Build the producer and ``init_transactions`` (fencing earlier holders); raise as the module says."""
        with self._lock:
            self._ensure_producer()

    @override
    def _build_producer(self) -> Any:
        from kafka import KafkaProducer

        config = self._settings.producer_config()
        config.update(transactional_id=self.transactional_id, transaction_timeout_ms=TRANSACTION_TIMEOUT_MS)
        producer = KafkaProducer(**config)
        try:
            producer.init_transactions()
        except Exception as exc:  # noqa: BLE001 - translated into the one refusal below
            connected = _bootstrapped(producer)
            producer.close(timeout=0)
            raise self._refusal(exc, connected) from exc
        self._opened = True
        return producer

    def _refusal(self, exc: BaseException, connected: bool) -> Exception:
        servers = self._settings.servers
        if not connected:
            return KafkaPublishError(f"Kafka at {servers} unreachable: transactions not initialised ({describe(exc)})")
        return ConfigurationError(
            "guarantee",
            "exactly_once",
            f"cannot be kept by Kafka at {servers}: initialising transactional id {self.transactional_id!r} failed "
            f"within {self._settings.max_block_ms} ms ({describe(exc)}); the broker must support transactions and "
            "the principal needs Write and Describe on the TransactionalId",
        )

    @override
    def _ensure_producer(self) -> Any:
        if self._fenced is not None:
            raise self._fenced
        if self._opened and (self._producer is None or self._needs_rebuild):
            raise KafkaPublishError(
                f"the transactional producer {self.transactional_id!r} failed and is not rebuilt within a drain "
                "(a rebuild could fence the lease's new owner); the next drain opens it again"
            )
        if self._producer is None:
            self._producer = self._build_producer()
        return self._producer

    def _fence(self, error: BaseException) -> ProducerFenced:
        if self._fenced is None:
            self._fenced = ProducerFenced(
                f"transactional id {self.transactional_id!r} was taken by another producer (a drain that took the "
                f"lease over): this drain publishes and stamps nothing more ({describe(error)})"
            )
            self._fenced.__cause__ = error
            self._discard_producer()
        return self._fenced

    def _call(self, method: str, *args: Any) -> Any:
        producer = self._ensure_producer()
        try:
            return getattr(producer, method)(*args)
        except Exception as exc:
            if _is_fenced(exc):
                raise self._fence(exc) from exc
            raise

    # -- the port -------------------------------------------------------------------------------

    @override
    def send_batch(self, messages: Sequence[OutgoingMessage]) -> list[PublishOutcome]:
        with self._lock:
            if self._closed:
                raise PublishError("KafkaLeaseTransactions is closed")
            if self._in_transaction:
                return self._checked(self._send_batch(messages))
            if not messages:
                return []
            return self._send_committed(messages)

    def _checked(self, outcomes: list[PublishOutcome]) -> list[PublishOutcome]:
        fenced = next((o.error for o in outcomes if _is_fenced(o.error)), None)
        if fenced is not None:
            raise self._fence(fenced)
        return outcomes

    def _send_committed(self, messages: Sequence[OutgoingMessage]) -> list[PublishOutcome]:
        """A batch in a transaction of its own: confirmed only once committed; an unconfirmed message aborts it."""
        self._call("begin_transaction")
        self._in_transaction = True
        try:
            outcomes = self._checked(self._send_batch(messages))
            failed = [o for o in outcomes if o.error is not None and not isinstance(o.error, MessageRejected)]
            if failed:
                self._abort()
                return [_not_committed(o, failed[0].error) for o in outcomes]
            self._call("commit_transaction")
            self._in_transaction = False
            return outcomes
        except ProducerFenced:
            raise
        except Exception as exc:  # noqa: BLE001 - the commit failed: nothing of the batch is visible
            self._abort()
            return [_not_committed(o, exc) for o in self._sent_as_failed(messages, exc)]

    @staticmethod
    def _sent_as_failed(messages: Sequence[OutgoingMessage], error: BaseException) -> list[PublishOutcome]:
        return [PublishOutcome(message=m, error=error) for m in messages]

    def begin(self) -> None:
        with self._lock:
            self._call("begin_transaction")
            self._in_transaction = True

    def commit(self, record: CheckpointRecord) -> None:
        with self._lock:
            key = self.transactional_id.encode("utf-8")
            future = self._call("send", self._checkpoint_topic, record.to_bytes(), key)
            self._call("flush")
            if future.failed() and _is_fenced(future.exception):
                raise self._fence(future.exception)
            if future.failed():
                # kafka-python 3.0.12 still commits a transaction one of whose records failed with a retriable error
                # (a batch expired while the broker was away), where the Java client only aborts: the page would be
                # committed without its record and published again. So no commit is asked for. No abort either (it
                # waits for the broker): the producer is dropped, and the coordinator aborts the transaction on its
                # timeout or when the next drain opens the lease.
                # INVARIANT: tests/unit/adapters/test_kafka_transactions_refused.py::
                # test_a_checkpoint_record_that_failed_is_never_committed fails if this commits.
                self._in_transaction = False
                self._discard_producer()
                raise KafkaPublishError(
                    f"checkpoint record not written, page not committed: {describe(future.exception)}"
                )
            self._call("commit_transaction")
            self._in_transaction = False

    def abort(self) -> None:
        with self._lock:
            self._abort()

    def _abort(self) -> None:
        if not self._in_transaction or self._fenced is not None:
            self._in_transaction = False
            return
        self._in_transaction = False
        try:
            self._call("abort_transaction")
        except ProducerFenced:
            raise
        except Exception as exc:  # noqa: BLE001 - the coordinator aborts it on its timeout or the next open
            log.warning("aborting the transaction of %s failed: %s", self.transactional_id, describe(exc))
            self._discard_producer()

    def last_checkpoint(self, transactional_id: str | None = None) -> CheckpointRecord | None:
        return read_checkpoint(self._settings, self._checkpoint_topic, transactional_id or self.transactional_id)


def _not_committed(outcome: PublishOutcome, error: BaseException | None) -> PublishOutcome:
    if isinstance(outcome.error, MessageRejected):
        return outcome
    failure = KafkaPublishError(f"not committed: its transaction was aborted ({error})")
    failure.__cause__ = error
    return PublishOutcome(message=outcome.message, error=failure)


def _bootstrapped(producer: Any) -> bool:
    """Whether the producer ever heard from a broker (it knows one from metadata); ``bootstrap_connected()`` says
    True for a refused connection in kafka-python 3.0.12."""
    try:
        return bool(producer._metadata.brokers())
    except Exception:  # noqa: BLE001 - a producer that cannot say was not connected
        return False


def read_checkpoint(settings: KafkaSettings, topic: str, transactional_id: str) -> CheckpointRecord | None:
    """The last committed record keyed ``transactional_id`` on ``topic``, read as the module says."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.partitioner.default import murmur2

    key = transactional_id.encode("utf-8")
    config = settings.client_config()
    config.update(enable_auto_commit=False, auto_offset_reset="earliest")
    deadline = time.monotonic() + TRANSACTION_TIMEOUT_MS / 1000 + _SETTLE_SLACK_S
    committed = KafkaConsumer(isolation_level="read_committed", **config)
    uncommitted = KafkaConsumer(isolation_level="read_uncommitted", **config)
    try:
        partitions = committed.partitions_for_topic(topic)
        if not partitions:
            raise ConfigurationError("checkpoint_topic", topic, f"does not exist on Kafka at {settings.servers}")
        count = len(partitions)
        tp = TopicPartition(topic, (murmur2(key) & 0x7FFFFFFF) % count)
        high = uncommitted.end_offsets([tp])[tp]
        while committed.end_offsets([tp])[tp] < high:  # the last stable offset, behind an open transaction
            if time.monotonic() > deadline:
                raise KafkaPublishError(f"checkpoint topic {topic!r} partition {tp.partition} did not settle in time")
            time.sleep(0.05)
        committed.assign([tp])
        committed.seek_to_beginning(tp)
        last: bytes | None = None
        while committed.position(tp) < high:
            if time.monotonic() > deadline:
                raise KafkaPublishError(f"reading checkpoint topic {topic!r} did not reach offset {high} in time")
            for records in committed.poll(timeout_ms=200).values():
                last = next((r.value or b"" for r in reversed(records) if r.key == key), last)
        return CheckpointRecord.from_bytes(last) if last else None  # b"": a tombstone
    finally:
        committed.close()
        uncommitted.close()


__all__ = ["TRANSACTION_TIMEOUT_MS", "KafkaLeaseTransactions", "read_checkpoint"]

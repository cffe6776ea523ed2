"""``KafkaPublisher``: the ``Publisher`` port over kafka-python (spec F-02).

Why it looks the way it does:

* **Confirmed means acknowledged by the broker with ``acks=all`` from an idempotent producer.**
  Both are forced here, not left to defaults: kafka-python silently *disables* idempotence when
  another setting conflicts with it (``acks`` other than all, ``retries=0``, more than 5 requests
  in flight). ``KafkaSettings`` (``settings.py``) therefore refuses any
  setting that would weaken them with a ``ValueError`` naming the setting, and
  the producer is always built with ``acks="all", enable_idempotence=True`` passed explicitly (so a
  conflict raises instead of degrading quietly).
* **Every future is inspected.** ``KafkaProducer.flush()`` returns once every record has
  *completed*, successfully or not; it does not raise for failed records. ``send_batch`` sends the
  whole batch, flushes once, then reads each record's own future and reports one
  ``PublishOutcome`` per message, in input order: a ``PublishConfirmation`` carrying the broker's
  topic, partition and offset, or the error. A record is never reported confirmed unless its future
  resolved with a real offset.
* **Bounded waits.** With ``api_version`` left at ``None`` kafka-python bootstraps in the producer
  constructor and an unreachable broker blocks it for 30 s. The version is pinned by default (Kafka
  4 needs at least (2, 1)), so constructing the producer does no network I/O; the producer is also
  created lazily, on the first ``send_batch``. An unreachable broker then costs at most
  ``max_block_ms`` (the metadata wait of the first send); the remaining messages of that batch are
  not sent (sending them after an earlier one failed could only reorder a key) and are reported
  failed at once. Once records are in flight, every one completes within ``delivery_timeout_ms``.
* **Rebuild after a fatal error.** After a failure that is not local to one record (timeouts,
  lost connections, producer-id/sequence errors, a closed or fenced producer) the producer is
  closed and a fresh one is built on the next call, with fresh metadata and a new producer id;
  it is decided once per batch, from its outcomes. Which failures are record-local, which retriable
  and which a refusal of the record itself (``KafkaMessageRejected``) is one table:
  ``errors.CLASSIFICATION``.
* **kafka-python picks the partition.** Each record is sent once, with its key; the producer's own
  partitioner puts one key on one partition, so per-key order holds.
* **Say why a connection failed.** kafka-python raises only a timeout when a broker refuses the
  handshake (SASL against a plain listener, a wrong password, TLS against a plain port); the cause
  is in its log. ``diagnosis.ConnectionFailures`` reads it during the call, and the error names it.
* **Secrets stay out of logs.** ``sasl_password`` is a ``SecretStr``, masked in ``repr`` and never logged.

Nothing here imports Airflow; the core never imports this module's ``kafka`` dependency.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow_chatter.adapters.kafka.diagnosis import ConnectionFailures
from airflow_chatter.adapters.kafka.errors import (
    KafkaMessageRejected,
    KafkaPublishError,
    classify,
    describe,
)
from airflow_chatter.adapters.kafka.settings import MIN_API_VERSION, KafkaSettings
from airflow_chatter.ports import (
    LeaseTransactions,
    OutgoingMessage,
    PublishConfirmation,
    PublishError,
    PublishOutcome,
    TransactionalPublisher,
)

log = logging.getLogger(__name__)

__all__ = [
    "MIN_API_VERSION",
    "KafkaMessageRejected",
    "KafkaPublishError",
    "KafkaPublisher",
]

#: Extra seconds ``send_batch`` waits past ``delivery_timeout_ms`` before giving up on a future.
_FLUSH_SLACK_S = 5.0


@dataclass
class _Sent:
    """One message of a batch on its way: its future once handed to the producer, or why it was not."""

    index: int
    message: OutgoingMessage
    future: Any = None
    error: BaseException | None = None


class KafkaPublisher(TransactionalPublisher):
    """Publishes ``OutgoingMessage`` batches with an idempotent ``acks=all`` kafka-python producer.

    Thread-safe (one batch at a time). The producer is created on the first ``send_batch``. For an exactly-once
    drain it also opens each lease's transactional producer (``lease_transactions``, ``transactions.py``).
    """

    def __init__(self, settings: KafkaSettings, *, producer_factory: Any = None) -> None:
        self._settings = settings
        self._factory = producer_factory
        self._producer: Any = None
        self._needs_rebuild = False
        self._closed = False
        self._lock = threading.Lock()
        self._verified_topics: set[str] = set()

    @property
    def settings(self) -> KafkaSettings:
        return self._settings

    def __repr__(self) -> str:
        return f"KafkaPublisher({self._settings!r})"

    # -- producer lifecycle ---------------------------------------------------------------------

    def _build_producer(self) -> Any:
        if self._factory is not None:
            return self._factory(**self._settings.producer_config())
        from kafka import KafkaProducer

        return KafkaProducer(**self._settings.producer_config())

    def _discard_producer(self) -> None:
        producer, self._producer = self._producer, None
        if producer is None:
            return
        try:
            # Every future of the last batch has completed (or was given up on); do not wait.
            producer.close(timeout=0)
        except Exception:  # noqa: BLE001 - close(0) raises when records are still pending
            sender = getattr(producer, "_sender", None)
            if sender is not None:
                try:
                    sender.force_close()
                except Exception:  # noqa: BLE001
                    log.debug("force-closing the discarded Kafka producer failed", exc_info=True)

    def _ensure_producer(self) -> Any:
        if self._producer is not None and self._needs_rebuild:
            log.info("rebuilding the Kafka producer after a failed batch")
            self._discard_producer()
        if self._producer is None:
            try:
                self._producer = self._build_producer()
            except Exception as exc:
                if classify(exc).rejected:  # wrong settings, not a broker away
                    raise PublishError(
                        f"cannot create a Kafka producer for {self._settings.servers}: {describe(exc)}"
                    ) from exc
                raise
        return self._producer

    def close(self) -> None:
        with self._lock:
            self._closed = True
            producer, self._producer = self._producer, None
            if producer is not None:
                try:
                    producer.close(timeout=max(1.0, self._settings.request_timeout_ms / 1000))
                except Exception:  # noqa: BLE001
                    log.warning("closing the Kafka producer failed", exc_info=True)
                    self._producer = producer
                    self._discard_producer()

    def __enter__(self) -> KafkaPublisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def lease_transactions(self, transactional_id: str, checkpoint_topic: str) -> LeaseTransactions:
        """Open ``transactional_id``'s producer (fencing earlier ones) once ``checkpoint_topic`` is found compacted
        (checked once per publisher)."""
        from airflow_chatter.adapters.kafka.admin import verify_checkpoint_topic
        from airflow_chatter.adapters.kafka.transactions import KafkaLeaseTransactions

        if checkpoint_topic not in self._verified_topics:
            verify_checkpoint_topic(self._settings, checkpoint_topic, timeout_s=self._settings.max_block_ms / 1000)
            self._verified_topics.add(checkpoint_topic)
        transactions = KafkaLeaseTransactions(self._settings, transactional_id, checkpoint_topic)
        transactions.open()
        return transactions

    # -- publishing -----------------------------------------------------------------------------

    def send_batch(self, messages: Sequence[OutgoingMessage]) -> list[PublishOutcome]:
        with self._lock:
            if self._closed:
                raise PublishError("KafkaPublisher is closed")
            return self._send_batch(messages)

    def _send_batch(self, messages: Sequence[OutgoingMessage]) -> list[PublishOutcome]:
        """Send every message, flush once, then read every future: one outcome per message, in input order."""
        if not messages:
            return []
        with ConnectionFailures.listening(self._settings) as failures:
            try:
                producer = self._ensure_producer()
            except PublishError:
                raise
            except Exception as exc:  # noqa: BLE001 - e.g. NoBrokersAvailable with api_version=None
                return self._unavailable(messages, exc, failures)
            sent = self._send_each(producer, messages, failures)
            flush_error = self._flush(producer)
        outcomes = [self._outcome(item, len(messages), flush_error, failures) for item in sent]
        self._needs_rebuild = any(_producer_wide(outcome.error) for outcome in outcomes)
        self._report(outcomes)
        return outcomes

    def _unavailable(
        self, messages: Sequence[OutgoingMessage], exc: BaseException, failures: ConnectionFailures
    ) -> list[PublishOutcome]:
        """Every message failed alike: no producer could be built (the broker is unreachable or refuses us)."""
        why = failures.explain()
        unavailable = KafkaPublishError(
            f"Kafka at {self._settings.servers} unavailable, batch of {len(messages)} not sent: {describe(exc)}"
            + (f"; {why}" if why else ""),
            retriable=classify(exc).retriable,
        )
        unavailable.__cause__ = exc
        return [PublishOutcome(message=m, error=unavailable) for m in messages]

    def _send_each(
        self, producer: Any, messages: Sequence[OutgoingMessage], failures: ConnectionFailures
    ) -> list[_Sent]:
        """Hand each message to the producer; after the first message it refuses, send no more.

        The drain stamps nothing after a failed message (fail closed), so a later message sent anyway would be
        acknowledged, stay pending and go out again on every run while the failed one blocks the lease; and a later
        message with the same key would overtake it. The rest is reported failed at once ("not sent"). The exception
        is a record kafka-python rejects for itself (``KafkaMessageRejected``): the drain stamps that document
        undeliverable and carries on, it is never published, so the rest of the batch goes on. Only a failure that
        is not the record's own (metadata, a closed producer) also rebuilds the producer.
        """
        total = len(messages)
        sent: list[_Sent] = []
        aborted: BaseException | None = None
        for index, message in enumerate(messages):
            if aborted is not None:
                sent.append(_Sent(index, message, error=aborted))
                continue
            try:
                sent.append(_Sent(index, message, future=_send(producer, message)))
            except Exception as exc:  # noqa: BLE001 - record-local refusals, metadata timeout, closed producer, ...
                sent.append(_Sent(index, message, error=self._wrap(exc, index, total, message, failures)))
                if classify(exc).rejected:
                    continue  # its document is stamped undeliverable: nothing after it waits for it
                aborted = KafkaPublishError(
                    f"not sent: message {index + 1} of {total} of this batch failed first ({describe(exc)})"
                )
                aborted.__cause__ = exc
        return sent

    def _flush_timeout_s(self) -> float:
        return self._settings.delivery_timeout_ms / 1000 + _FLUSH_SLACK_S

    def _flush(self, producer: Any) -> BaseException | None:
        """Wait for every record; ``flush`` does not raise for failed records, only when some are still pending."""
        try:
            producer.flush(timeout=self._flush_timeout_s())
        except Exception as exc:  # noqa: BLE001 - KafkaTimeoutError: some records still pending
            return exc
        return None

    def _outcome(
        self, item: _Sent, total: int, flush_error: BaseException | None, failures: ConnectionFailures
    ) -> PublishOutcome:
        """What the future says: confirmed only with a real offset from the broker."""
        message, future, index = item.message, item.future, item.index
        if future is None:
            return PublishOutcome(message=message, error=item.error)
        if not future.is_done:
            from kafka import errors as ke

            # Only after a flush timeout; the record may still be delivered later, so it is reported
            # failed (a retry may duplicate it, it can never be lost).
            timeout = ke.KafkaTimeoutError(
                f"no acknowledgement within {self._flush_timeout_s():.0f} s"
                + (f" ({describe(flush_error)})" if flush_error else "")
            )
            return PublishOutcome(message=message, error=self._wrap(timeout, index, total, message, failures))
        if future.failed():
            failure = future.exception
            return PublishOutcome(message=message, error=self._wrap(failure, index, total, message, failures))
        metadata = future.value
        offset = getattr(metadata, "offset", -1)
        if offset is None or offset < 0:
            error = KafkaPublishError(
                f"message {index + 1} of {total} to topic {message.topic!r}: the broker returned no offset ({offset!r})"
            )
            return PublishOutcome(message=message, error=error)
        confirmation = PublishConfirmation(topic=metadata.topic, partition=int(metadata.partition), offset=int(offset))
        return PublishOutcome(message=message, confirmation=confirmation)

    def _report(self, outcomes: list[PublishOutcome]) -> None:
        """One warning per failed batch, naming the first failure (which names a refused handshake, if seen)."""
        failed = [o.error for o in outcomes if o.error is not None]
        if not failed:
            return
        log.warning(
            "Kafka batch to %s: %d of %d messages not acknowledged (first: %s)%s",
            self._settings.servers,
            len(failed),
            len(outcomes),
            failed[0],
            "; the producer will be rebuilt" if self._needs_rebuild else "",
        )

    def _wrap(
        self, exc: BaseException, index: int, total: int, message: OutgoingMessage, failures: ConnectionFailures
    ) -> KafkaPublishError:
        """The message's error; a failure that is not the record's own also says why a handshake failed, if known."""
        why = None if classify(exc).record_local else failures.explain()
        text = (
            f"message {index + 1} of {total} to topic {message.topic[:120]!r} not acknowledged by "
            f"{self._settings.servers}: "
        )
        error: KafkaPublishError
        if classify(exc).rejected:
            # The record itself is at fault (an illegal topic name, a value kafka-python cannot serialise): the drain
            # stamps the document undeliverable instead of failing its page on every run (CTR-04).
            error = KafkaMessageRejected(text + describe(exc)[:500])
        else:
            error = KafkaPublishError(
                text + describe(exc) + (f"; {why}" if why else ""), retriable=classify(exc).retriable
            )
        error.__cause__ = exc
        return error


def _send(producer: Any, message: OutgoingMessage) -> Any:
    """``producer.send`` of one message; kafka-python picks the partition (by the key's hash when there is one)."""
    headers = [(name, value) for name, value in message.headers]
    return producer.send(message.topic, value=message.value, key=message.key, headers=headers)


def _producer_wide(error: BaseException | None) -> bool:
    """Whether a message's failure is not its record's own, so the producer is rebuilt before the next batch.

    Each failure carries what kafka-python raised as its cause; a message not sent because an earlier one failed
    carries that earlier failure, and a future still pending after the flush a timeout.
    """
    cause = None if error is None else error.__cause__
    return cause is not None and not classify(cause).record_local

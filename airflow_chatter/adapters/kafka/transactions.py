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
* **A takeover in progress is waited for, never refused.** Taking a lease over whose previous owner left a
  transaction open, ``init_transactions`` makes the coordinator abort it, and the coordinator answers
  ``CONCURRENT_TRANSACTIONS`` (``COORDINATOR_LOAD_IN_PROGRESS`` while it loads its log) until that is done;
  kafka-python retries those answers itself and raises ``KafkaTimeoutError`` after ``max_block_ms``. Such a timeout,
  with the transaction coordinator found and still answering, is the broker finishing the previous owner's
  transaction, not a broker without transactions: ``init_transactions`` is waited on again (the same request, not a
  new one) for up to ``TAKEOVER_WAIT_S`` in all, and past that the drain fails with the retriable
  ``TakeoverInProgress``; the next drain opens the lease again.
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

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_delay, wait_exponential
from typing_extensions import override

from airflow_chatter.adapters.kafka.diagnosis import ConnectionFailures
from airflow_chatter.adapters.kafka.errors import KafkaPublishError, describe
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher, _producer_wide, _Sent
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.ports import (
    CheckpointRecord,
    LeaseTransactions,
    MessageRejected,
    OutgoingMessage,
    ProducerFenced,
    PublishConfirmation,
    PublishError,
    PublishOutcome,
)

log = logging.getLogger(__name__)

#: How long the coordinator lets a transaction stay open before aborting it. A page's publish must fit in it; a
#: drain killed mid-commit holds back ``read_committed`` readers of the partitions it wrote for at most this long.
TRANSACTION_TIMEOUT_MS = 30_000
#: How long reading a checkpoint record waits for the partition to settle (past the transaction timeout).
_SETTLE_SLACK_S = 5.0
#: The transactional producer's ``retry_backoff_ms`` at most. kafka-python's sender waits this long between the
#: coordinator requests of ``init_transactions`` even when none failed (after queueing FindCoordinator, and again
#: until the coordinator's connection is up), so the default 100 ms made most of the time opening a lease's producer
#: took (its debug log). Retries of a failing broker stay bounded by ``max_block_ms`` and ``delivery_timeout_ms``.
_TRANSACTIONAL_RETRY_BACKOFF_MS = 10
#: How long opening a lease's producer waits, in all, for the coordinator to finish the previous owner's open
#: transaction: it aborts it as soon as asked, and no transaction stays open longer than its timeout anyway.
TAKEOVER_WAIT_S = TRANSACTION_TIMEOUT_MS / 1000


class TakeoverInProgress(KafkaPublishError):
    """The transaction coordinator was still aborting the previous owner's open transaction of this transactional
    id when the wait for it ended: a lease takeover in progress, transient (retriable), not a refusal."""


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
        self._held: list[list[_Sent]] = []  # the open transaction's batches, not waited for yet

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
        config.update(
            transactional_id=self.transactional_id,
            transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
            retry_backoff_ms=min(config["retry_backoff_ms"], _TRANSACTIONAL_RETRY_BACKOFF_MS),
        )
        producer = KafkaProducer(**config)
        try:
            # NOTE: asked for before anything else, the checkpoint topic's metadata comes with the producer's
            # bootstrap; asked for at the first commit, kafka-python waits a fixed 100 ms to refresh its metadata.
            producer.partitions_for(self._checkpoint_topic)
            self._initialise(producer)
        except TakeoverInProgress:
            producer.close(timeout=0)
            raise
        except Exception as exc:  # noqa: BLE001 - translated into the one refusal below
            connected = _bootstrapped(producer)
            producer.close(timeout=0)
            raise self._refusal(exc, connected) from exc
        self._opened = True
        return producer

    def _initialise(self, producer: Any) -> None:
        """``init_transactions``, waited on again while the coordinator is busy with the previous owner's transaction
        (the module says why); any other failure is raised as it came."""
        retrying = Retrying(
            retry=retry_if_exception(lambda exc: _coordinator_busy(producer, exc)),
            stop=stop_after_delay(TAKEOVER_WAIT_S),
            wait=wait_exponential(multiplier=0.05, max=1.0),
            before_sleep=self._log_wait,
            reraise=True,
        )
        started = time.monotonic()
        try:
            retrying(producer.init_transactions)
        except Exception as exc:
            if not _coordinator_busy(producer, exc):
                raise
            raise TakeoverInProgress(
                f"transactional id {self.transactional_id!r}: the previous owner's open transaction was still being "
                f"aborted by the transaction coordinator of Kafka at {self._settings.servers} after "
                f"{time.monotonic() - started:.0f} s (a lease takeover in progress, not a refusal); the lease's next "
                f"drain opens it again ({describe(exc)})"
            ) from exc

    def _log_wait(self, state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        log.warning(
            "transactional id %s: the previous owner's open transaction is still being aborted by the transaction "
            "coordinator (%s); waiting, %.1f s so far",
            self.transactional_id,
            describe(error) if error is not None else "busy",
            state.seconds_since_start or 0.0,
        )

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
                return self._checked(self._hold(messages))
            if not messages:
                return []
            return self._send_committed(messages)

    def _hold(self, messages: Sequence[OutgoingMessage]) -> list[PublishOutcome]:
        """Hand a batch to the open transaction without waiting: ``commit`` waits for it, with the checkpoint record,
        in one flush. Held means sent, offset unknown; a message the producer refused at once carries its error."""
        if not messages:
            return []
        with ConnectionFailures.listening(self._settings) as failures:
            sent = self._send_each(self._ensure_producer(), messages, failures)
        self._held.append(sent)
        outcomes = [_held_outcome(item) for item in sent]
        self._needs_rebuild = any(_producer_wide(outcome.error) for outcome in outcomes)
        return outcomes

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
            self._held = []

    def commit(self, record: CheckpointRecord) -> list[PublishOutcome]:
        """Send ``record`` behind the held messages, flush them together (the page's one produce round trip), and
        commit only once every one of them is acknowledged.

        INVARIANT: ``commit_transaction`` runs only after every held future succeeded: kafka-python would commit a
        transaction whose batch expired (``classify_batch_error`` leaves a retriable failure committable), and its
        documents would be stamped for messages no consumer ever reads. A refused message raises its own error
        before the commit: ``test_a_message_the_broker_refuses_commits_nothing_of_its_page`` in
        tests/integration/test_kafka_transactions.py (raising something else, or committing first, fails it).
        """
        with self._lock:
            key = self.transactional_id.encode("utf-8")
            future: Any = None
            try:
                future = self._call("send", self._checkpoint_topic, record.to_bytes(), key)
            except ProducerFenced:
                raise
            except Exception as exc:  # noqa: BLE001 - a held message failed first (its error is raised below)
                record_error: BaseException | None = exc
            else:
                record_error = None
            batches, self._held = self._held, []
            with ConnectionFailures.listening(self._settings) as failures:
                flush_error = self._flush(self._ensure_producer())
                outcomes = [
                    self._outcome(item, len(batch), flush_error, failures) for batch in batches for item in batch
                ]
            self._needs_rebuild = any(_producer_wide(outcome.error) for outcome in outcomes)
            self._checked(outcomes)
            failed = next((o.error for o in outcomes if o.error and not isinstance(o.error, MessageRejected)), None)
            if failed is not None:
                self._report(outcomes)
                raise failed
            if future is None or not future.is_done or future.failed():
                error = record_error or (future.exception if future.is_done else flush_error)
                if error is not None and _is_fenced(error):
                    raise self._fence(error)
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
                    f"checkpoint record not written, page not committed: {describe(error) if error else 'no ack'}"
                )
            try:
                self._call("commit_transaction")
            except ProducerFenced:
                raise
            except Exception as exc:  # noqa: BLE001 - translated here, once: the caller aborts
                raise KafkaPublishError(f"transaction not committed: {describe(exc)}") from exc
            self._in_transaction = False
            return outcomes

    def abort(self) -> None:
        with self._lock:
            self._abort()

    def _abort(self) -> None:
        self._held = []
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


def _held_outcome(item: _Sent) -> PublishOutcome:
    """A message handed to the open transaction: held (offset not known before the commit), or refused at once."""
    if item.error is not None:
        return PublishOutcome(message=item.message, error=item.error)
    return PublishOutcome(message=item.message, confirmation=PublishConfirmation(item.message.topic, -1, -1))


def _not_committed(outcome: PublishOutcome, error: BaseException | None) -> PublishOutcome:
    if isinstance(outcome.error, MessageRejected):
        return outcome
    failure = KafkaPublishError(f"not committed: its transaction was aborted ({error})")
    failure.__cause__ = error
    return PublishOutcome(message=outcome.message, error=failure)


def _coordinator_busy(producer: Any, error: BaseException) -> bool:
    """Whether ``error`` from ``init_transactions`` says the coordinator is finishing an earlier transaction: a
    busy answer raised as such, or a timeout while the transaction coordinator is known (kafka-python forgets it on
    a lost connection or a "not coordinator" answer, and never learns it from a broker without transactions)."""
    from kafka import errors as ke
    from kafka.protocol.metadata.find_coordinator import CoordinatorType

    if isinstance(error, ke.ConcurrentTransactionsError | ke.CoordinatorLoadInProgressError):
        return True
    if not isinstance(error, ke.KafkaTimeoutError):
        return False
    manager = getattr(producer, "_transaction_manager", None)
    try:
        return manager is not None and manager.coordinator(CoordinatorType.TRANSACTION) is not None
    except Exception:  # noqa: BLE001 - a producer that cannot say shows no coordinator
        return False


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
    # NOTE: each consumer is built just before its first call, which names the topic: a kafka-python consumer that
    # bootstrapped without the topic waits a fixed 100 ms before it may fetch its metadata again.
    uncommitted = KafkaConsumer(isolation_level="read_uncommitted", **config)
    committed: Any = None
    try:
        partitions = uncommitted.partitions_for_topic(topic)
        if not partitions:
            raise ConfigurationError("checkpoint_topic", topic, f"does not exist on Kafka at {settings.servers}")
        count = len(partitions)
        tp = TopicPartition(topic, (murmur2(key) & 0x7FFFFFFF) % count)
        high = uncommitted.end_offsets([tp])[tp]
        committed = KafkaConsumer(isolation_level="read_committed", **config)
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
        if committed is not None:
            committed.close()
        uncommitted.close()


__all__ = [
    "TAKEOVER_WAIT_S",
    "TRANSACTION_TIMEOUT_MS",
    "KafkaLeaseTransactions",
    "TakeoverInProgress",
    "read_checkpoint",
]

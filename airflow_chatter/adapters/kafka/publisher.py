"""``KafkaPublisher``: the ``Publisher`` port over kafka-python (spec F-02).

Why it looks the way it does:

* **Confirmed means acknowledged by the broker with ``acks=all`` from an idempotent producer.**
  Both are forced here, not left to defaults: kafka-python silently *disables* idempotence when
  another setting conflicts with it (``acks`` other than all, ``retries=0``, more than 5 requests
  in flight). ``KafkaPublisherSettings`` therefore refuses any setting that would weaken them with a
  ``ValueError`` naming the setting, and the producer is always built with
  ``acks="all", enable_idempotence=True`` passed explicitly (so a conflict raises instead of
  degrading quietly).
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
  closed and a fresh one is built on the next call, with fresh metadata and a new producer id.
* **Keyed partitions computed once per key.** kafka-python's ``DefaultPartitioner`` hashes every keyed
  record's key with a pure-Python murmur2 (several microseconds a record), although the drain's keys
  repeat (one per partition key). ``_KeyPartitions`` makes exactly the same choice (kafka-python's own
  ``murmur2``, ``& 0x7fffffff``, modulo the number of the topic's partitions, indexing their sorted ids,
  read from the producer's metadata at every send just as the partitioner reads it), remembers it per
  (topic, key) and passes it as ``partition=``. Only for a producer that uses the default partitioner
  without a key serializer (settings cannot configure either; a ``producer_factory`` could); keyless
  records get no ``partition=``, so kafka-python still chooses theirs.
* **Secrets stay out of logs.** ``sasl_password`` is masked in ``repr`` and never logged.

Nothing here imports Airflow; the core never imports this module's ``kafka`` dependency.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_chatter.ports import (
    MessageRejected,
    OutgoingMessage,
    PublishConfirmation,
    Publisher,
    PublishError,
    PublishOutcome,
)

log = logging.getLogger(__name__)

__all__ = [
    "KafkaPublishError",
    "KafkaPublisher",
    "KafkaPublisherSettings",
    "check_connectivity",
    "ensure_topics",
]

#: Lowest ``api_version`` a Kafka 4.x broker still speaks to (KIP-896 removed older protocols).
MIN_API_VERSION: tuple[int, ...] = (2, 1)
_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_COMPRESSION_TYPES = (None, "gzip", "snappy", "lz4", "zstd")
#: Extra seconds ``send_batch`` waits past ``delivery_timeout_ms`` before giving up on a future.
_FLUSH_SLACK_S = 5.0
#: Keys whose partition ``_KeyPartitions`` remembers per topic; above it that topic's table starts over.
_PARTITION_CACHE_KEYS = 4096
#: Topics ``_KeyPartitions`` keeps tables for; above it every table starts over.
_PARTITION_CACHE_TOPICS = 64


class KafkaPublishError(PublishError):
    """One message was not acknowledged. ``retriable`` says whether resending may succeed."""

    def __init__(self, message: str, *, retriable: bool = True) -> None:
        super().__init__(message)
        self.retriable = retriable


class KafkaMessageRejected(KafkaPublishError, MessageRejected):
    """kafka-python refused the record itself before sending it (an illegal topic name, a value it cannot
    serialise): never retriable, and the drain stamps the document undeliverable."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retriable=False)


@dataclass(frozen=True, repr=False)
class KafkaPublisherSettings:
    """How to reach Kafka and how long to wait. Validated on construction.

    ``acks`` and ``enable_idempotence`` exist only so that a configuration asking for anything
    weaker than ``"all"`` / ``True`` is refused loudly instead of being ignored.
    """

    bootstrap_servers: str | tuple[str, ...]
    client_id: str = "airflow-chatter"
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    ssl_cafile: str | None = None
    ssl_check_hostname: bool = True
    #: Pinned so the producer constructor does no I/O. ``None`` probes the broker (blocking).
    api_version: tuple[int, ...] | None = (2, 8, 0)
    #: Longest a send waits for topic metadata (broker unreachable: the bound of a batch).
    max_block_ms: int = 10_000
    request_timeout_ms: int = 15_000
    #: Upper bound for one record from send to acknowledgement or error, retries included.
    delivery_timeout_ms: int = 60_000
    linger_ms: int = 5
    max_in_flight: int = 5
    #: Upper bound of one record batch per partition (bytes). Not Kafka's 16 KiB default: a drain sends a page of up
    #: to 1,000 records and then flushes, and with kafka-python every batch costs a wake-up of its sender thread and
    #: a share of a request in Python, which at 16 KiB (~13 records of 1 KB) is paid again and again per page. 128 KiB
    #: raised the drain from ~4,900 to ~7,000-8,800 msg/s (benchmarks/drain_throughput.py, docs/benchmarks.md).
    #: It is a cap, not an allocation: kafka-python grows each batch's buffer as records arrive.
    batch_size: int = 131_072
    max_request_size: int = 1_048_576
    compression_type: str | None = None
    retry_backoff_ms: int = 100
    acks: str | int = "all"
    enable_idempotence: bool = True

    def __post_init__(self) -> None:
        servers = self.bootstrap_servers
        if isinstance(servers, str):
            servers = tuple(s.strip() for s in servers.split(",") if s.strip())
        else:
            servers = tuple(str(s).strip() for s in servers if str(s).strip())
        if not servers:
            raise ValueError("bootstrap_servers: at least one host:port is required")
        object.__setattr__(self, "bootstrap_servers", servers)

        if self.acks not in ("all", -1, "-1"):
            raise ValueError(
                f"acks={self.acks!r} would weaken delivery: KafkaPublisher always publishes with "
                "acks='all' (a message is confirmed only when every in-sync replica has it)"
            )
        object.__setattr__(self, "acks", "all")
        if self.enable_idempotence is not True:
            raise ValueError(
                f"enable_idempotence={self.enable_idempotence!r} would weaken delivery: "
                "KafkaPublisher always uses an idempotent producer"
            )
        if not isinstance(self.max_in_flight, int) or not 1 <= self.max_in_flight <= 5:
            raise ValueError(
                f"max_in_flight={self.max_in_flight!r}: must be 1..5; more than 5 requests in "
                "flight disables idempotence"
            )
        if self.api_version is not None:
            version = tuple(self.api_version)
            if not version or not all(isinstance(p, int) for p in version):
                raise ValueError(f"api_version={self.api_version!r}: must be a tuple of ints or None")
            if version < MIN_API_VERSION:
                raise ValueError(f"api_version={version!r}: Kafka 4.x brokers need at least {MIN_API_VERSION!r}")
            object.__setattr__(self, "api_version", version)
        for name in (
            "max_block_ms",
            "request_timeout_ms",
            "delivery_timeout_ms",
            "batch_size",
            "max_request_size",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name}={value!r}: must be a positive integer")
        for name in ("linger_ms", "retry_backoff_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name}={value!r}: must be a non-negative integer")
        if self.delivery_timeout_ms < self.linger_ms + self.request_timeout_ms:
            raise ValueError(
                f"delivery_timeout_ms={self.delivery_timeout_ms}: must be at least linger_ms + "
                f"request_timeout_ms ({self.linger_ms + self.request_timeout_ms})"
            )
        if self.compression_type not in _COMPRESSION_TYPES:
            raise ValueError(f"compression_type={self.compression_type!r}: one of {_COMPRESSION_TYPES!r}")
        if self.security_protocol not in _SECURITY_PROTOCOLS:
            raise ValueError(f"security_protocol={self.security_protocol!r}: one of {_SECURITY_PROTOCOLS!r}")
        if self.security_protocol.startswith("SASL_"):
            if self.sasl_mechanism not in _SASL_MECHANISMS:
                raise ValueError(
                    f"sasl_mechanism={self.sasl_mechanism!r}: {self.security_protocol} needs one "
                    f"of {_SASL_MECHANISMS!r}"
                )
            if not self.sasl_username:
                raise ValueError(f"sasl_username: required with {self.security_protocol}")
            if not self.sasl_password:
                raise ValueError(f"sasl_password: required with {self.security_protocol}")
        elif self.sasl_mechanism or self.sasl_username or self.sasl_password:
            raise ValueError(
                f"sasl_mechanism/sasl_username/sasl_password are set but security_protocol="
                f"{self.security_protocol!r} does not use SASL (use SASL_SSL or SASL_PLAINTEXT)"
            )
        if not self.client_id:
            raise ValueError("client_id: must not be empty")

    def __repr__(self) -> str:
        parts = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "sasl_password":
                shown = "'***'" if value else "None"
            else:
                shown = repr(value)
            parts.append(f"{f.name}={shown}")
        return f"{type(self).__name__}({', '.join(parts)})"

    __str__ = __repr__

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> KafkaPublisherSettings:
        """Build settings from a plain mapping (e.g. connection extras), refusing unknown keys.

        Accepts the kafka-python spellings ``max_in_flight_requests_per_connection`` and
        ``sasl_plain_username`` / ``sasl_plain_password``. ``retries`` is accepted only when it does
        not weaken delivery (``retries=0`` disables idempotence) and is otherwise ignored: the
        delivery bound is ``delivery_timeout_ms``. ``transactional_id`` is refused.
        """
        aliases = {
            "max_in_flight_requests_per_connection": "max_in_flight",
            "sasl_plain_username": "sasl_username",
            "sasl_plain_password": "sasl_password",
        }
        known = {f.name for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {}
        for raw_key, value in values.items():
            key = aliases.get(raw_key, raw_key)
            if raw_key == "retries":
                if value is not None and float(value) <= 0:
                    raise ValueError(f"retries={value!r} would weaken delivery: it disables idempotence")
                continue
            if raw_key == "transactional_id":
                raise ValueError("transactional_id: KafkaPublisher does not use transactions")
            if key not in known:
                raise ValueError(f"{raw_key}: not a Kafka publisher setting")
            if key == "api_version" and isinstance(value, str):
                value = tuple(int(p) for p in value.split("."))
            elif key == "api_version" and isinstance(value, list):
                value = tuple(value)
            kwargs[key] = value
        if "bootstrap_servers" not in kwargs:
            raise ValueError("bootstrap_servers: at least one host:port is required")
        return cls(**kwargs)

    def client_config(self) -> dict[str, Any]:
        """The connection and security keyword arguments shared by kafka-python clients."""
        config: dict[str, Any] = {
            "bootstrap_servers": list(self.bootstrap_servers),
            "client_id": self.client_id,
            "security_protocol": self.security_protocol,
            "request_timeout_ms": self.request_timeout_ms,
            "retry_backoff_ms": self.retry_backoff_ms,
            "api_version": self.api_version,
            # Only used when api_version is None; keep it inside the configured bound.
            "bootstrap_timeout_ms": self.max_block_ms,
        }
        if self.security_protocol in ("SSL", "SASL_SSL"):
            config["ssl_check_hostname"] = self.ssl_check_hostname
            if self.ssl_cafile:
                config["ssl_cafile"] = self.ssl_cafile
        if self.security_protocol.startswith("SASL_"):
            config["sasl_mechanism"] = self.sasl_mechanism
            config["sasl_plain_username"] = self.sasl_username
            config["sasl_plain_password"] = self.sasl_password
        return config

    def producer_config(self) -> dict[str, Any]:
        """Keyword arguments for ``kafka.KafkaProducer``. Contains the password: never log it."""
        config = self.client_config()
        config.update(
            acks="all",
            enable_idempotence=True,
            max_in_flight_requests_per_connection=self.max_in_flight,
            max_block_ms=self.max_block_ms,
            delivery_timeout_ms=self.delivery_timeout_ms,
            linger_ms=self.linger_ms,
            batch_size=self.batch_size,
            max_request_size=self.max_request_size,
            compression_type=self.compression_type,
        )
        return config


def _record_local_errors() -> tuple[type[BaseException], ...]:
    """Errors that concern one record only and leave the producer healthy."""
    from kafka import errors as ke

    return (
        TypeError,
        ValueError,
        ke.MessageSizeTooLargeError,
        ke.RecordListTooLargeError,
        ke.InvalidTopicError,
        ke.TopicAuthorizationFailedError,
        ke.InvalidRecordError,
        ke.CorruptRecordError,
    )


def _is_rejected_record(exc: BaseException) -> bool:
    """kafka-python's own checks of one record, before any I/O: an illegal topic name (``ValueError``), a key or value
    it cannot serialise (``TypeError``), a topic the broker calls invalid. The record itself is at fault."""
    from kafka import errors as ke

    return isinstance(exc, (TypeError, ValueError, ke.InvalidTopicError))


def _is_retriable(exc: BaseException) -> bool:
    from kafka import errors as ke

    if isinstance(exc, (TypeError, ValueError)):
        return False
    if isinstance(
        exc,
        (
            ke.MessageSizeTooLargeError,
            ke.RecordListTooLargeError,
            ke.InvalidTopicError,
            ke.AuthorizationError,
            ke.InvalidRecordError,
        ),
    ):
        return False
    return True


def _describe(exc: BaseException) -> str:
    text = str(exc)
    name = type(exc).__name__
    if not text or text == name:
        return name
    return text if text.startswith(name) else f"{name}: {text}"


class _KeyPartitions:
    """The partition kafka-python's ``DefaultPartitioner`` picks for a keyed record, remembered per key.

    ``DefaultPartitioner.partition`` returns ``sorted(partitions)[(murmur2(key) & 0x7fffffff) % len(partitions)]``
    for a serialized key, with ``partitions = cluster.partitions_for_topic(topic)``. ``partition`` reads that same set
    from the producer's metadata on every call (one small set: a metadata update that changes it, e.g. added
    partitions, starts the topic's table over at once, as the partitioner would follow it) and hashes a key only the
    first time it is seen with that set. Memory stays bounded: a topic's table starts over above
    ``_PARTITION_CACHE_KEYS`` keys, all tables above ``_PARTITION_CACHE_TOPICS`` topics.
    """

    __slots__ = ("_metadata", "_murmur2", "_tables")

    def __init__(self, metadata: Any) -> None:
        from kafka.partitioner.default import murmur2

        self._metadata = metadata
        self._murmur2 = murmur2
        # topic -> (the partition set the table is for, those partitions sorted, key -> partition)
        self._tables: dict[str, tuple[set[int], list[int], dict[bytes, int]]] = {}

    @classmethod
    def for_producer(cls, producer: Any) -> _KeyPartitions | None:
        """A cache for ``producer``, or ``None`` unless it partitions keyed records with the default partitioner."""
        from kafka.partitioner import DefaultPartitioner

        config = getattr(producer, "config", None)
        metadata = getattr(producer, "_metadata", None)
        if not isinstance(config, Mapping) or not hasattr(metadata, "partitions_for_topic"):
            return None
        if type(config.get("partitioner")) is not DefaultPartitioner or config.get("key_serializer") is not None:
            return None
        return cls(metadata)

    def partition(self, topic: str, key: bytes) -> int | None:
        """The default partitioner's choice for ``key``; ``None`` while the topic's partitions are unknown."""
        partitions = self._metadata.partitions_for_topic(topic)
        if not partitions:
            return None  # metadata not there yet (send waits for it) or no partitions: kafka-python decides
        table = self._tables.get(topic)
        if table is None or table[0] != partitions:
            if table is None and len(self._tables) >= _PARTITION_CACHE_TOPICS:
                self._tables.clear()
            table = self._tables[topic] = (partitions, sorted(partitions), {})
        chosen = table[2]
        partition = chosen.get(key)
        if partition is None:
            if len(chosen) >= _PARTITION_CACHE_KEYS:
                chosen.clear()
            ordered = table[1]
            partition = chosen[key] = ordered[(self._murmur2(key) & 0x7FFFFFFF) % len(ordered)]
        return partition

    def cached_keys(self) -> int:
        """How many (topic, key) choices are remembered (tests)."""
        return sum(len(table[2]) for table in self._tables.values())


class KafkaPublisher(Publisher):
    """Publishes ``OutgoingMessage`` batches with an idempotent ``acks=all`` kafka-python producer.

    Thread-safe (one batch at a time). The producer is created on the first ``send_batch``.
    """

    def __init__(self, settings: KafkaPublisherSettings, *, producer_factory: Any = None) -> None:
        self._settings = settings
        self._factory = producer_factory
        self._producer: Any = None
        self._partitions: _KeyPartitions | None = None
        self._needs_rebuild = False
        self._closed = False
        self._lock = threading.Lock()

    @property
    def settings(self) -> KafkaPublisherSettings:
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
        self._partitions = None
        self._needs_rebuild = False
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
                from kafka import errors as ke

                if isinstance(exc, (ke.KafkaConfigurationError, TypeError, ValueError)):
                    raise PublishError(
                        f"cannot create a Kafka producer for {self._servers()}: {_describe(exc)}"
                    ) from exc
                raise
            self._partitions = _KeyPartitions.for_producer(self._producer)
        return self._producer

    def _servers(self) -> str:
        return ",".join(self._settings.bootstrap_servers)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            producer, self._producer = self._producer, None
            self._partitions = None
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

    # -- publishing -----------------------------------------------------------------------------

    def send_batch(self, messages: Sequence[OutgoingMessage]) -> list[PublishOutcome]:
        with self._lock:
            if self._closed:
                raise PublishError("KafkaPublisher is closed")
            return self._send_batch(messages)

    def _send_batch(self, messages: Sequence[OutgoingMessage]) -> list[PublishOutcome]:
        from kafka import errors as ke

        record_local = _record_local_errors()
        servers = self._servers()
        results: list[tuple[OutgoingMessage, Any, BaseException | None]] = []
        total = len(messages)
        if total == 0:
            return []
        try:
            producer = self._ensure_producer()
        except PublishError:
            raise
        except Exception as exc:  # noqa: BLE001 - e.g. NoBrokersAvailable with api_version=None
            self._needs_rebuild = True
            unavailable = KafkaPublishError(
                f"Kafka at {servers} unavailable, batch of {total} not sent: {_describe(exc)}"
            )
            unavailable.__cause__ = exc
            return [PublishOutcome(message=m, error=unavailable) for m in messages]

        partitions = self._partitions
        aborted: BaseException | None = None
        for index, message in enumerate(messages):
            if aborted is not None:
                results.append((message, None, aborted))
                continue
            key = message.key
            try:
                future = _send(
                    producer,
                    message,
                    list(message.headers),
                    None if partitions is None or type(key) is not bytes else partitions.partition(message.topic, key),
                )
            except record_local as exc:
                results.append((message, None, self._wrap(exc, index, total, message, servers)))
                continue
            except Exception as exc:  # noqa: BLE001 - metadata timeout, closed producer, ...
                self._needs_rebuild = True
                results.append((message, None, self._wrap(exc, index, total, message, servers)))
                aborted = KafkaPublishError(
                    f"not sent: message {index + 1} of {total} of this batch failed first ({_describe(exc)})"
                )
                aborted.__cause__ = exc
                continue
            results.append((message, future, None))

        flush_timeout = self._settings.delivery_timeout_ms / 1000 + _FLUSH_SLACK_S
        flush_error: BaseException | None = None
        try:
            producer.flush(timeout=flush_timeout)
        except Exception as exc:  # noqa: BLE001 - KafkaTimeoutError: some records still pending
            flush_error = exc
            self._needs_rebuild = True

        outcomes: list[PublishOutcome] = []
        failures = 0
        for index, (message, future, send_error) in enumerate(results):
            error: BaseException | None = send_error
            if future is not None:
                error = None
                if not future.is_done:
                    # Only after a flush timeout; the record may still be delivered later, so it is
                    # reported failed (a retry may duplicate it, it can never be lost).
                    timeout = ke.KafkaTimeoutError(
                        f"no acknowledgement within {flush_timeout:.0f} s"
                        + (f" ({_describe(flush_error)})" if flush_error else "")
                    )
                    error = self._wrap(timeout, index, total, message, servers)
                    self._needs_rebuild = True
                elif future.failed():
                    failure = future.exception
                    error = self._wrap(failure, index, total, message, servers)
                    if not isinstance(failure, record_local):
                        self._needs_rebuild = True
                else:
                    metadata = future.value
                    offset = getattr(metadata, "offset", -1)
                    if offset is None or offset < 0:
                        error = KafkaPublishError(
                            f"message {index + 1} of {total} to topic {message.topic!r}: the broker "
                            f"returned no offset ({offset!r})"
                        )
                    else:
                        outcomes.append(
                            PublishOutcome(
                                message=message,
                                confirmation=PublishConfirmation(
                                    topic=metadata.topic,
                                    partition=int(metadata.partition),
                                    offset=int(offset),
                                ),
                            )
                        )
                        continue
            failures += 1
            outcomes.append(PublishOutcome(message=message, error=error))

        if failures:
            first = next(o.error for o in outcomes if o.error is not None)
            log.warning(
                "Kafka batch to %s: %d of %d messages not acknowledged (first: %s)%s",
                servers,
                failures,
                total,
                first,
                "; the producer will be rebuilt" if self._needs_rebuild else "",
            )
        return outcomes

    @staticmethod
    def _wrap(exc: BaseException, index: int, total: int, message: OutgoingMessage, servers: str) -> KafkaPublishError:
        text = f"message {index + 1} of {total} to topic {message.topic[:120]!r} not acknowledged by {servers}: "
        error: KafkaPublishError
        if _is_rejected_record(exc):
            error = KafkaMessageRejected(text + _describe(exc)[:500])
        else:
            error = KafkaPublishError(text + _describe(exc), retriable=_is_retriable(exc))
        error.__cause__ = exc
        return error


def _send(producer: Any, message: OutgoingMessage, headers: list[Any], partition: int | None) -> Any:
    """``producer.send`` of one message; what kafka-python would do with the headers unpacked into tuples and its
    own partition choice.

    ``headers`` is ``list(message.headers)``: the (name, value) tuples kafka-python wants, without unpacking and
    repacking each one. Should kafka-python refuse them because an item is not a 2-tuple (a list pair, say), the send
    is repeated with the items unpacked into tuples, as they always were. Should it refuse ``partition`` (only if the
    topic's partitions changed between ``_KeyPartitions.partition`` and the send), the send is repeated without it,
    leaving the choice to kafka-python. Both refusals come before the record is appended, so a repeat never sends a
    record twice.
    """
    try:
        if partition is None:
            return producer.send(message.topic, value=message.value, key=message.key, headers=headers)
        return producer.send(message.topic, value=message.value, key=message.key, headers=headers, partition=partition)
    except TypeError:
        if all(isinstance(item, tuple) and len(item) == 2 for item in headers):
            raise
        return _send(producer, message, [(name, value) for name, value in headers], partition)
    except ValueError:
        if partition is None:
            raise
        return _send(producer, message, headers, None)


# ------------------------------------------------------------------------------------------------
# Small admin helpers (tests, operators' pre-flight checks).
# ------------------------------------------------------------------------------------------------


def _admin_client(settings: KafkaPublisherSettings, timeout_s: float) -> Any:
    from kafka import KafkaAdminClient
    from kafka import errors as ke

    config = settings.client_config()
    # The admin client always bootstraps in its constructor, even with a pinned api_version.
    config["bootstrap_timeout_ms"] = int(timeout_s * 1000)
    config["request_timeout_ms"] = max(1000, min(settings.request_timeout_ms, int(timeout_s * 1000)))
    try:
        return KafkaAdminClient(**config)
    except ke.KafkaError as exc:
        raise PublishError(
            f"cannot reach Kafka at {','.join(settings.bootstrap_servers)} within {timeout_s:.0f} s: {_describe(exc)}"
        ) from exc


def check_connectivity(settings: KafkaPublisherSettings, *, timeout_s: float = 10.0) -> None:
    """Raise ``PublishError`` unless a broker answers (bootstrap + metadata) within ``timeout_s``."""
    admin = _admin_client(settings, timeout_s)
    try:
        admin.list_topics()  # one metadata round trip (describe_cluster trips on pinned versions)
    finally:
        admin.close()


def ensure_topics(
    settings: KafkaPublisherSettings,
    names: Iterable[str],
    *,
    partitions: int = 3,
    replication_factor: int = 1,
    timeout_s: float = 30.0,
) -> None:
    """Create the topics that do not exist yet and wait until every partition has a leader."""
    from kafka import errors as ke

    topics = list(dict.fromkeys(names))
    if not topics:
        return
    deadline = time.monotonic() + timeout_s
    admin = _admin_client(settings, timeout_s)
    try:
        result = admin.create_topics(
            {name: {"num_partitions": partitions, "replication_factor": replication_factor} for name in topics},
            timeout_ms=int(timeout_s * 1000),
            raise_errors=False,
        )
        for topic in result.get("topics", []):
            code = topic.get("error_code", 0)
            if code and code != ke.TopicAlreadyExistsError.errno:
                err = ke.for_code(code)
                raise PublishError(
                    f"creating topic {topic.get('name')!r} failed: {err.__name__} "
                    f"{topic.get('error_message') or ''}".rstrip()
                )
        left_ms = max(1000, int((deadline - time.monotonic()) * 1000))
        admin.wait_for_topics(topics, timeout_ms=left_ms)
    finally:
        admin.close()

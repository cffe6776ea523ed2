"""What a kafka-python failure means: the one classification the publisher (and its tests) read.

Three questions are asked of every failure, and all are answered by one table, ``CLASSIFICATION``:

* **Is it local to one record?** A record-local failure (too large, bad topic name, headers that are not pairs)
  leaves the producer healthy, so it is kept; any other failure (timeouts, lost connections, producer-id or sequence
  errors, SASL, a closed producer) makes the publisher close it and build a fresh one on the next batch.
* **May resending succeed?** ``KafkaPublishError.retriable``: false for a record the broker can never take and for a
  refusal that only a configuration change cures (authorization, SASL).
* **Did kafka-python refuse its input before any I/O?** ``rejected``: an illegal topic name (``ValueError``), a key,
  value or header it cannot serialise (``TypeError``), a topic the broker calls invalid. Raised by a send, the record
  itself is at fault and its document is stamped undeliverable (CTR-04); a too-large record is not among them (a
  broker setting decides it, so it stays a host concern and fails the page). Raised while building a producer
  (``KafkaConfigurationError`` too), the settings are wrong, not the broker away.

The table is read top to bottom and the first class the error is an instance of wins, so subclasses come before
their bases (``TopicAuthorizationFailedError`` before ``AuthorizationError``). Anything not listed is a producer-wide,
retriable failure: the safe side, since rebuilding a healthy producer costs one reconnect, and keeping a broken one
would fail every later batch. kafka-python's errors are named, not imported, so importing this module does not
import kafka.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from airflow_chatter.ports import MessageRejected, PublishError

__all__ = [
    "CLASSIFICATION",
    "Classification",
    "KafkaPublishError",
    "classify",
    "describe",
]


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


@dataclass(frozen=True)
class Classification:
    """What a failure says: ``record_local`` (the producer stays healthy), ``retriable`` (resending may work) and
    ``rejected`` (kafka-python refused its input before any I/O)."""

    record_local: bool
    retriable: bool
    rejected: bool = False


_REJECTED = Classification(record_local=True, retriable=False, rejected=True)
_RECORD_NEVER = Classification(record_local=True, retriable=False)
_RECORD_AGAIN = Classification(record_local=True, retriable=True)
_PRODUCER_NEVER = Classification(record_local=False, retriable=False)
_PRODUCER_AGAIN = Classification(record_local=False, retriable=True)
#: A producer's settings kafka-python refuses while building it; no send raises it.
_MISCONFIGURED = Classification(record_local=False, retriable=True, rejected=True)

#: (exception class name, classification), first match wins. Python's own ``TypeError``/``ValueError`` come from a
#: record kafka-python refused before appending it (headers that are not (str, bytes) pairs, a bad partition).
CLASSIFICATION: tuple[tuple[str, Classification], ...] = (
    ("TypeError", _REJECTED),
    ("ValueError", _REJECTED),
    ("InvalidTopicError", _REJECTED),
    ("KafkaConfigurationError", _MISCONFIGURED),
    ("MessageSizeTooLargeError", _RECORD_NEVER),
    ("RecordListTooLargeError", _RECORD_NEVER),
    ("TopicAuthorizationFailedError", _RECORD_NEVER),
    ("InvalidRecordError", _RECORD_NEVER),
    # A CRC mismatch on the way: that record only, and sending it again may well succeed.
    ("CorruptRecordError", _RECORD_AGAIN),
    # Cluster or transactional-id authorization: every record fails alike, and only an ACL change cures it.
    ("AuthorizationError", _PRODUCER_NEVER),
    # SASL: the connection itself is refused; only a configuration change cures it.
    ("SaslAuthenticationFailedError", _PRODUCER_NEVER),
    ("IllegalSaslStateError", _PRODUCER_NEVER),
    ("UnsupportedSaslMechanismError", _PRODUCER_NEVER),
)

_BUILTINS: dict[str, type[BaseException]] = {"TypeError": TypeError, "ValueError": ValueError}


@functools.cache
def _resolved() -> tuple[tuple[type[BaseException], Classification], ...]:
    from kafka import errors as ke

    return tuple((_BUILTINS.get(name) or getattr(ke, name), verdict) for name, verdict in CLASSIFICATION)


def classify(error: BaseException) -> Classification:
    """The classification of ``error``: the first row of ``CLASSIFICATION`` it is an instance of."""
    for cls, verdict in _resolved():
        if isinstance(error, cls):
            return verdict
    return _PRODUCER_AGAIN


def describe(error: BaseException) -> str:
    """``ClassName: text`` once (kafka-python's texts sometimes start with the class name, sometimes not)."""
    text = str(error)
    name = type(error).__name__
    if not text or text == name:
        return name
    return text if text.startswith(name) else f"{name}: {text}"

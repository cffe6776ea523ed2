"""Map a verified outbox document onto a Kafka record (F-02, RLY-01, RLY-09).

Only a ``Deliverable`` can be mapped, so a document the contract rejected can never reach the publisher.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from airflow_chatter.outbox.contract import Deliverable
from airflow_chatter.outbox.partition_keys import partition_key_to_kafka_key
from airflow_chatter.ports import MESSAGE_ID_HEADER, OutgoingMessage, PartitionKey

#: How the Kafka record key is chosen: the document's partition key (default, keeps one aggregate's messages in
#: one Kafka partition in feed order), the message id, or no key.
KeyStrategy = Literal["partition_key", "message_id", "none"]
KEY_STRATEGIES: frozenset[str] = frozenset({"partition_key", "message_id", "none"})

CONTENT_TYPE_HEADER = "content-type"
#: The W3C trace-context entries the drain's send span may overwrite when tracing is on (RLY-09).
TRACE_HEADERS: tuple[str, ...] = ("traceparent", "tracestate")

_RESERVED_HEADERS = frozenset({MESSAGE_ID_HEADER, CONTENT_TYPE_HEADER})
#: ``json.dumps(value, separators=(",", ":"), ensure_ascii=False)`` without building an encoder per header.
_COMPACT_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def header_value(value: Any) -> bytes:
    """Encode one context value as a header: a string as its UTF-8, anything else as compact JSON."""
    if isinstance(value, str):
        return value.encode("utf-8")
    return _COMPACT_JSON.encode(value).encode("utf-8")


def record_key(deliverable: Deliverable, partition_key: PartitionKey, key_strategy: KeyStrategy) -> bytes | None:
    """Return the Kafka record key for ``key_strategy``."""
    if key_strategy == "partition_key":
        return partition_key_to_kafka_key(partition_key)
    if key_strategy == "message_id":
        return deliverable.message_id.encode("utf-8")
    if key_strategy == "none":
        return None
    raise ValueError(f"key_strategy must be one of {sorted(KEY_STRATEGIES)}, not {key_strategy!r}")


def to_outgoing_message(
    deliverable: Deliverable,
    partition_key: PartitionKey,
    key_strategy: KeyStrategy = "partition_key",
    *,
    trace_headers: Mapping[str, str] | None = None,
) -> OutgoingMessage:
    """Build the Kafka record for a verified document.

    Topic is ``Destination``; value is the UTF-8 of ``MessageBody``. Headers are ``message-id`` and
    ``content-type`` first, then every context entry under its own name in context order. A context entry never
    overrides the two reserved headers (compared case-insensitively, since consumers often read header names that
    way). ``trace_headers`` is the send span's context when tracing is on: it replaces only ``traceparent`` and
    ``tracestate``; the persisted document is never changed.
    """
    context: Mapping[str, Any] = deliverable.context
    if trace_headers:
        context = dict(context)  # the deliverable's own context is never changed
        for name in TRACE_HEADERS:
            if name in trace_headers:
                context[name] = trace_headers[name]
    headers: list[tuple[str, bytes]] = [
        (MESSAGE_ID_HEADER, deliverable.message_id.encode("utf-8")),
        (CONTENT_TYPE_HEADER, deliverable.content_type.encode("utf-8")),
    ]
    for name, value in context.items():
        if name.lower() not in _RESERVED_HEADERS:
            headers.append((name, header_value(value)))
    key = record_key(deliverable, partition_key, key_strategy)
    return OutgoingMessage(
        topic=deliverable.destination, value=deliverable.body.encode("utf-8"), key=key, headers=tuple(headers)
    )


def with_trace_headers(message: OutgoingMessage, headers: Mapping[str, str] | None) -> OutgoingMessage:
    """``message`` (a resolver's record) with its send span's trace headers in place of any it carried."""
    if not headers:
        return message
    kept = tuple((k, v) for k, v in message.headers if k not in TRACE_HEADERS)
    added = tuple((k, v.encode("utf-8")) for k, v in headers.items() if k in TRACE_HEADERS)
    return OutgoingMessage(message.topic, message.value, message.key, kept + added)


__all__ = [
    "CONTENT_TYPE_HEADER",
    "KEY_STRATEGIES",
    "KeyStrategy",
    "MESSAGE_ID_HEADER",
    "TRACE_HEADERS",
    "header_value",
    "record_key",
    "to_outgoing_message",
    "with_trace_headers",
]

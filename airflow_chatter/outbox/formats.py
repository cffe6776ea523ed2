"""How a published document looks on Kafka: Chatter's own headers or a CloudEvent (F-02, F-13).

``chatter`` (the default) is F-02's record: ``message-id``, ``content-type`` and each context entry as a header.
``cloudevents`` is the CloudEvents Kafka protocol binding in binary mode, so Knative, Dapr, Event Grid or any
CloudEvents SDK reads the record as an event without knowing Chatter: the body stays the Kafka value, the
attributes travel as ``ce_``-prefixed headers, the Kafka key stays the one ``key_strategy`` chose. The format is
applied here, once, to the record ``to_outgoing_message`` built; the receiver reads either (``ReceivedMessage``).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Literal

from airflow_chatter.outbox.contract import Deliverable
from airflow_chatter.outbox.mapping import CONTENT_TYPE_HEADER, header_value
from airflow_chatter.ports import CLOUDEVENTS_ID_HEADER, OutgoingMessage

MessageFormat = Literal["chatter", "cloudevents"]
MESSAGE_FORMATS: frozenset[str] = frozenset({"chatter", "cloudevents"})

CE_PREFIX = "ce_"
SPEC_VERSION = "1.0"
#: The context entry a producer may name its event type in; without it ``ce_type`` is ``DEFAULT_EVENT_TYPE``.
MESSAGE_TYPE_CONTEXT_KEY = "Chatter.MessageType"
DEFAULT_EVENT_TYPE = "io.airflow-chatter.outbox.message"
#: The one extension that carries the context entries whose names are not valid CloudEvents attribute names.
CONTEXT_EXTENSION = "chattercontext"
#: CloudEvents 1.0: attribute names are lowercase ASCII letters or digits, at most 20 characters recommended.
_ATTRIBUTE_NAME = re.compile(r"[a-z0-9]{1,20}")
_RESERVED_ATTRIBUTES = frozenset(
    {"id", "source", "specversion", "type", "time", "datacontenttype", "partitionkey", "data", CONTEXT_EXTENSION}
)
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str)


def is_attribute_name(name: object) -> bool:
    """Whether ``name`` may be a CloudEvents extension attribute of its own."""
    return isinstance(name, str) and _ATTRIBUTE_NAME.fullmatch(name) is not None and name not in _RESERVED_ATTRIBUTES


def rfc3339(epoch_seconds: float) -> str:
    """``epoch_seconds`` as an RFC 3339 UTC timestamp (``2026-12-02T21:30:00Z``)."""
    return datetime.fromtimestamp(epoch_seconds, UTC).isoformat().replace("+00:00", "Z")


def to_cloudevent(message: OutgoingMessage, deliverable: Deliverable, source: str, now: float) -> OutgoingMessage:
    """The binary-mode CloudEvents record of ``message``, the Chatter record ``to_outgoing_message`` built.

    ``ce_id`` is the MessageId, ``ce_source`` the source's identity, ``ce_type`` the context's
    ``Chatter.MessageType`` (a string) or ``DEFAULT_EVENT_TYPE``, ``ce_time`` the document's ``_ts`` (``now`` when
    it has none), ``content-type`` the MessageContentType. Context entries with valid attribute names become
    ``ce_<name>`` extensions (so ``traceparent`` is the Distributed Tracing extension as it is); the rest travel
    together as the compact JSON object ``ce_chattercontext``. Trace headers the send span put on ``message`` win.
    """
    chatter_headers = dict(message.headers)
    event_type = deliverable.context.get(MESSAGE_TYPE_CONTEXT_KEY)
    if not isinstance(event_type, str) or not event_type.strip():
        event_type = DEFAULT_EVENT_TYPE
    written = deliverable.written_at
    headers: list[tuple[str, bytes]] = [
        (CE_PREFIX + "specversion", SPEC_VERSION.encode()),
        (CLOUDEVENTS_ID_HEADER, deliverable.message_id.encode("utf-8")),
        (CE_PREFIX + "source", source.encode("utf-8")),
        (CE_PREFIX + "type", event_type.encode("utf-8")),
        (CE_PREFIX + "time", rfc3339(written if written is not None else now).encode()),
        (CONTENT_TYPE_HEADER, deliverable.content_type.encode("utf-8")),
    ]
    others: dict[str, object] = {}
    for name, value in deliverable.context.items():
        if is_attribute_name(name):
            raw = chatter_headers.get(name)
            headers.append((CE_PREFIX + name, raw if raw is not None else header_value(value)))
        elif name != MESSAGE_TYPE_CONTEXT_KEY:
            others[name] = value
    for name in ("traceparent", "tracestate"):  # a send span's context, added when the document carried none
        if name in chatter_headers and name not in deliverable.context:
            headers.append((CE_PREFIX + name, chatter_headers[name]))
    if others:
        headers.append((CE_PREFIX + CONTEXT_EXTENSION, _COMPACT.encode(others).encode("utf-8")))
    return OutgoingMessage(message.topic, message.value, message.key, tuple(headers))


__all__ = [
    "CE_PREFIX",
    "CONTEXT_EXTENSION",
    "DEFAULT_EVENT_TYPE",
    "MESSAGE_FORMATS",
    "MESSAGE_TYPE_CONTEXT_KEY",
    "MessageFormat",
    "SPEC_VERSION",
    "is_attribute_name",
    "rfc3339",
    "to_cloudevent",
]

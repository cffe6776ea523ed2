"""The Outbox Document Contract: ``verify(document)`` turns an admitted document into a verdict (CTR-01..03, F-03).

A document that can never be published would otherwise fail the same way on every pass and wedge its lease, so
the drain verifies it first and stamps it ``undeliverable`` instead. A violation may only come from the document's
own bytes: anything a redeploy could fix (an unknown publisher name, a broker outage) is never a violation here.

``verify`` is pure and total: it never raises, whatever it is given, and the same input always yields the same
verdict, so there is no retry counter to keep.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from airflow_chatter.outbox.document import (
    DESTINATION_FIELD,
    MESSAGE_BODY_FIELD,
    MESSAGE_CONTENT_TYPE_FIELD,
    MESSAGE_CONTEXT_FIELD,
    MESSAGE_ID_FIELD,
)

#: Context key naming the content type when the document carries none of its own.
CONTEXT_CONTENT_TYPE = "Chatter.ContentType"
#: Context key naming the messaging infrastructure (publisher) the message is for.
CONTEXT_INFRASTRUCTURE_TYPE = "Chatter.Infrastructure.Type"


@dataclass(frozen=True)
class Deliverable:
    """Every document-derived value the publish needs; nothing else of the document is read after ``verify``."""

    message_id: str
    destination: str
    body: str
    content_type: str
    context: Mapping[str, Any]
    infrastructure: str | None
    #: The document's ``_ts`` (its last write, epoch seconds) when it has an integer one: CloudEvents' ``time``.
    written_at: int | None = None


@dataclass(frozen=True)
class Undeliverable:
    """The violated fields, in the contract's fixed order, and one message naming the MessageId and each of them."""

    message_id: str | None
    violations: tuple[str, ...]
    message: str


Verdict = Deliverable | Undeliverable


def _is_blank(value: object) -> bool:
    return not isinstance(value, str) or not value.strip()


def _utf8_encodable(text: str) -> bool:
    """Whether ``text`` has UTF-8 bytes; a lone surrogate (legal in JSON escapes) has none."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _reject_constant(name: str) -> NoReturn:
    # NaN and Infinity are not JSON; a context carrying them is not JSON that parses to an object.
    raise ValueError(f"{name} is not a JSON value")


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text} is out of range")
    return value


#: ``json.loads`` refusing what is not JSON: NaN, Infinity and numbers too large for a float.
_CONTEXT_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_parse_float)


def _parse_context(raw: object, present: bool) -> tuple[dict[str, Any] | None, str | None]:
    """Return ``(context, problem)``: exactly one is ``None``. Absent or blank text is the empty context."""
    if not present:
        return {}, None
    if raw is None:
        return None, "is JSON null, which is no message context at all"
    if not isinstance(raw, str):
        return None, f"is a JSON {_json_kind(raw)}, not a string holding a JSON object"
    if not raw.strip():
        return {}, None
    try:
        parsed = _CONTEXT_DECODER.decode(raw)
    except (ValueError, RecursionError) as exc:
        return None, f"is not JSON ({type(exc).__name__})"
    if not isinstance(parsed, dict):
        return None, f"is JSON {_json_kind(parsed)}, not a JSON object"
    # A lone surrogate (from a \u escape or the text itself) parses but has no UTF-8 bytes; deep nesting does not
    # serialise. Either would fail later, as a header.
    try:
        json.dumps(parsed, ensure_ascii=False).encode("utf-8")
    except (ValueError, RecursionError):
        return None, "holds text that is not valid Unicode, so its entries can never become Kafka headers"
    return parsed, None


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def verify(document: object) -> Deliverable | Undeliverable:
    """Verify one admitted document against the Outbox Document Contract; never raises (CTR-01, CTR-02).

    Every check runs, so one verdict names every violation: fixing them one redrain at a time would cost a wedged
    lease per violation.
    """
    try:
        return _verify_each_check(document)
    except Exception as exc:  # pragma: no cover - defence in depth for exotic Mapping implementations
        # INVARIANT: verify is total (test_ctr_02_never_raises_for_arbitrary_json). JSON-shaped input cannot get
        # here; a foreign Mapping whose lookups raise is reported as unverifiable rather than faulting the batch.
        return Undeliverable(None, (), f"The outbox document could not be read: {type(exc).__name__}")


def _verify_each_check(document: object) -> Deliverable | Undeliverable:
    fields: Mapping[str, Any] = document if isinstance(document, Mapping) else {}
    message_id = fields.get(MESSAGE_ID_FIELD)
    message_id = message_id if isinstance(message_id, str) else None
    destination = fields.get(DESTINATION_FIELD)
    body = fields.get(MESSAGE_BODY_FIELD)
    own_content_type = fields.get(MESSAGE_CONTENT_TYPE_FIELD)
    context, context_problem = _parse_context(fields.get(MESSAGE_CONTEXT_FIELD), MESSAGE_CONTEXT_FIELD in fields)

    problems: list[tuple[str, str]] = []
    # NOTE: text that cannot become UTF-8 bytes would fail the Kafka produce identically on every pass, so the
    # contract reports it here, under the field that carries it, rather than letting it wedge the lease.
    if _is_blank(destination) or not _utf8_encodable(str(destination)):
        problems.append(
            (DESTINATION_FIELD, "is absent, not a string, blank, or not valid Unicode, and a message needs a topic")
        )
    if not isinstance(body, str) or not _utf8_encodable(body):
        problems.append(
            (MESSAGE_BODY_FIELD, "is absent, not a string, or not valid Unicode, so there is no body to publish")
        )
    if context_problem is not None:
        problems.append((MESSAGE_CONTEXT_FIELD, context_problem))

    content_type: str | None = None
    if isinstance(own_content_type, str) and own_content_type.strip() and _utf8_encodable(own_content_type):
        content_type = own_content_type
    elif context is not None and not _is_blank(context.get(CONTEXT_CONTENT_TYPE)):
        content_type = context[CONTEXT_CONTENT_TYPE]
    if content_type is None:
        problems.append(
            (
                MESSAGE_CONTENT_TYPE_FIELD,
                f"is absent or blank and the context has no non-blank string {CONTEXT_CONTENT_TYPE!r}, "
                "so no content type is resolvable",
            )
        )

    infrastructure: str | None = None
    if context is not None and CONTEXT_INFRASTRUCTURE_TYPE in context:
        named = context[CONTEXT_INFRASTRUCTURE_TYPE]
        if named is not None and not isinstance(named, str):
            problems.append(
                (
                    CONTEXT_INFRASTRUCTURE_TYPE,
                    f"is a JSON {_json_kind(named)}, not a string, so it can never name a publisher",
                )
            )
        elif isinstance(named, str) and named.strip():
            infrastructure = named

    if problems:
        violations = tuple(name for name, _ in problems)
        details = "; and ".join(f"its {name!r} {why}" for name, why in problems)
        label = repr(message_id) if message_id is not None else "(no MessageId)"
        message = (
            f"Outbox document {label} cannot be published; violated fields: {', '.join(violations)}: {details}. "
            "Its own persisted fields prove this, so redraining would fail identically; correct the writer."
        )
        return Undeliverable(message_id, violations, message)

    # The checks above proved each of these is a string (content_type) and the context parsed.
    assert isinstance(destination, str) and isinstance(body, str) and context is not None
    assert content_type is not None
    return Deliverable(
        message_id=message_id if message_id is not None else "",
        destination=destination,
        body=body,
        content_type=content_type,
        context=context,
        infrastructure=infrastructure,
        written_at=ts if isinstance(document, dict) and type(ts := document.get("_ts")) is int else None,
    )


__all__ = [
    "CONTEXT_CONTENT_TYPE",
    "CONTEXT_INFRASTRUCTURE_TYPE",
    "Deliverable",
    "Undeliverable",
    "Verdict",
    "verify",
]

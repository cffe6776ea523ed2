"""The last Confirmation Failure's fault, as the lease's suspension state keeps it (for the UI and the runbook).

An operator looking at a suspended lease needs to know *why* its stamps fail (throttling, a revoked key, a
container that changed) without opening a task log. So the Drain Suspension state records the error's type and a
short message. Both end up on the lease document and on the UI page, so the message is cut down before it is
stored:

* one line: whitespace runs (the SDK's multi-line "Code: …\\nMessage: …") collapse to single spaces;
* no secrets: the value of anything labelled as a credential (``AccountKey=``, ``key=``, ``password=``, ``sig=``,
  ``token=``, ``Authorization:`` …) and any run of 40 or more base64 characters (a Cosmos DB account key is 88) are
  replaced by ``[redacted]``. The core never sees the connection's key, so it cannot look for that exact string:
  it removes what a key or a signature looks like;
* at most :data:`MAX_MESSAGE` characters, ending in ``…`` when cut.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

#: Characters of the fault's message kept on the lease document.
MAX_MESSAGE = 200
REDACTED = "[redacted]"

_LABELLED = re.compile(
    r"(?i)\b(account[_-]?key|shared[_-]?access[_-]?key|master[_-]?key|key|password|passwd|pwd|secret|token|sig|"
    r"signature|authorization|credential)(\s*[=:]\s*)(?:(?:type=\w+&ver=[\d.]+&sig=)?[^\s;,&\"']+)"
)
_LONG_BASE64 = re.compile(r"[A-Za-z0-9+/_-]{40,}={0,2}")


def redact(text: str) -> str:
    """``text`` on one line with credential-looking values replaced by ``[redacted]``, then truncated."""
    line = " ".join(text.split())
    line = _LABELLED.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", line)
    line = _LONG_BASE64.sub(REDACTED, line)
    if len(line) > MAX_MESSAGE:
        line = line[: MAX_MESSAGE - 1].rstrip() + "…"
    return line


@dataclass(frozen=True)
class RecordedFault:
    """A Confirmation Failure's error as stored on the lease: its class name, a redacted short message, when."""

    error_type: str
    message: str
    at: datetime

    @classmethod
    def of(cls, error: BaseException, at: datetime) -> RecordedFault:
        return cls(type(error).__name__, redact(str(error)), at.astimezone(UTC))

    def to_document(self) -> dict[str, Any]:
        return {"error_type": self.error_type, "message": self.message, "at": self.at.isoformat()}

    @classmethod
    def from_document(cls, value: object) -> RecordedFault | None:
        """The stored form, or ``None`` for a lease written before faults were recorded, or one whose fault field
        is unreadable: it is a diagnostic, never a reason to refuse the lease (and so the drain)."""
        if not isinstance(value, Mapping):
            return None
        error_type, message, at = value.get("error_type"), value.get("message"), value.get("at")
        if not isinstance(error_type, str) or not isinstance(message, str) or not isinstance(at, str):
            return None
        try:
            moment = datetime.fromisoformat(at)
        except ValueError:
            return None
        if moment.tzinfo is None:
            return None
        return cls(error_type, message, moment.astimezone(UTC))


__all__ = ["MAX_MESSAGE", "REDACTED", "RecordedFault", "redact"]

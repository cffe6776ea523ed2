"""How an existing entry is classified against a new reserve (IDM-C05, IDM-C06): one pure function for every store.

Order matters and is pinned by tests. A completed entry is first checked for expiry (an expired response is treated
as absent, so the key may be reused even with a new body), then by fingerprint. A reserved entry is first checked
by fingerprint (a different request is refused even after the timeout: takeover is only for the same request), then
for the reservation timeout.

Expiry is decided here, against the caller's clock, never by whether a backend's TTL sweep has run yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum

from airflow_chatter.ports.idempotency import (
    AlreadyInFlight,
    BodyHashMismatch,
    IdempotencyOptions,
    Replay,
    StoredResponse,
)


class Takeover(str, Enum):
    """The entry may be overwritten by a fresh reservation (by an atomic, conditional write)."""

    #: A reservation outlived the reservation timeout.
    TAKE_OVER = "take_over"
    #: A completed entry outlived the ttl; it is as if the key were free.
    TREAT_AS_ABSENT = "treat_as_absent"


@dataclass(frozen=True)
class Entry:
    """What a store knows about one key: its fingerprint, and either a reservation or a completed response."""

    fingerprint: str
    reserved_at: datetime
    reservation_id: str | None = None
    completed_at: datetime | None = None
    response: StoredResponse | None = None

    @property
    def completed(self) -> bool:
        return self.response is not None


Decision = Replay | BodyHashMismatch | AlreadyInFlight | Takeover


def retry_after(reserved_at: datetime, now: datetime, timeout: timedelta) -> timedelta:
    """``timeout − elapsed``, clamped into (0, timeout]: a ``reserved_at`` in the future (clock skew) yields exactly
    ``timeout``, never more (IDM-C06). The caller only asks while ``elapsed < timeout``, so the result is positive."""
    remaining = timeout - (now - reserved_at)
    return min(remaining, timeout)


def decide(entry: Entry, fingerprint: str, now: datetime, options: IdempotencyOptions) -> Decision:
    """Classify ``entry`` for a reserve with ``fingerprint`` at ``now`` (IDM-C05)."""
    if entry.response is not None:
        completed_at = entry.completed_at if entry.completed_at is not None else entry.reserved_at
        if now - completed_at >= options.ttl:
            return Takeover.TREAT_AS_ABSENT
        if entry.fingerprint == fingerprint:
            return Replay(entry.response)
        return BodyHashMismatch(entry.fingerprint)
    if entry.fingerprint != fingerprint:
        return BodyHashMismatch(entry.fingerprint)
    if now - entry.reserved_at >= options.reservation_timeout:
        return Takeover.TAKE_OVER
    return AlreadyInFlight(retry_after(entry.reserved_at, now, options.reservation_timeout))


#: Answers that say "try again later": replaying one would turn a passing condition into a permanent answer.
RETRYABLE_STATUSES = frozenset({408, 425, 429})


def should_store(status: int) -> bool:
    """The default of both sides (the HTTP guard and the Airflow hook): record an answer the API would give again,
    below 500 and not 408/425/429; anything else abandons the reservation, so a retry runs again."""
    return status < 500 and status not in RETRYABLE_STATUSES


__all__ = ["RETRYABLE_STATUSES", "Decision", "Entry", "Takeover", "decide", "retry_after", "should_store"]

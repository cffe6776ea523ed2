"""The values an idempotency store speaks: options, the stored response, and the four reservation outcomes.

A store answers ``reserve`` with exactly one of :class:`Reserved`, :class:`AlreadyInFlight`, :class:`Replay` or
:class:`BodyHashMismatch` (the spec's contract surface, section B). They are values, not exceptions, because every
one of them is an ordinary answer on the hot path: every retry of a completed request is a replay.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from airflow_chatter.idempotency.errors import InvalidIdempotencyRequestError

#: IDM-O02 defaults.
DEFAULT_TTL = timedelta(hours=24)
DEFAULT_RESERVATION_TIMEOUT = timedelta(seconds=30)


@dataclass(frozen=True)
class IdempotencyOptions:
    """How long a completed response is replayed (``ttl``) and how long a reservation holds (``reservation_timeout``).

    ``reservation_timeout`` is a liveness bound: after it, a retry may take over a reservation whose holder is slow
    or dead. Set it above the slowest handler plus the clock skew between hosts (they compare each other's times).
    """

    ttl: timedelta = DEFAULT_TTL
    reservation_timeout: timedelta = DEFAULT_RESERVATION_TIMEOUT

    def __post_init__(self) -> None:
        for name in ("ttl", "reservation_timeout"):
            value = getattr(self, name)
            if not isinstance(value, timedelta) or value <= timedelta(0):
                raise InvalidIdempotencyRequestError(name, f"must be a positive timedelta, got {value!r}")


def _normalised_headers(headers: Mapping[str, Iterable[str]] | Iterable[tuple[str, str]]) -> dict[str, tuple[str, ...]]:
    """Merge header names case-insensitively (the first spelling wins), keeping every value in order."""
    pairs: list[tuple[str, str]] = []
    if isinstance(headers, Mapping):
        for name, values in headers.items():
            if isinstance(values, str):
                raise InvalidIdempotencyRequestError(
                    f"response header {name!r}", "must map to a sequence of strings, not a single string"
                )
            pairs.extend((name, value) for value in values)
    else:
        pairs.extend(headers)
    merged: dict[str, list[str]] = {}
    spelling: dict[str, str] = {}
    for name, value in pairs:
        if not isinstance(name, str) or not name:
            raise InvalidIdempotencyRequestError("response header name", f"must be a non-empty string, got {name!r}")
        if not isinstance(value, str):
            raise InvalidIdempotencyRequestError(f"response header {name!r}", f"has a non-string value {value!r}")
        canonical = spelling.setdefault(name.lower(), name)
        merged.setdefault(canonical, []).append(value)
    return {name: tuple(values) for name, values in merged.items()}


@dataclass(frozen=True, eq=False)
class StoredResponse:
    """The snapshot a completed key replays: status, headers (names case-insensitive), body and fingerprint.

    ``fingerprint`` is the fingerprint of the request that produced it; a replay hands it back (IDM-C09).
    """

    status_code: int
    headers: Mapping[str, tuple[str, ...]]
    body: bytes
    fingerprint: str
    _lookup: dict[str, tuple[str, ...]] = field(init=False, repr=False)

    def __init__(
        self,
        status_code: int,
        headers: Mapping[str, Iterable[str]] | Iterable[tuple[str, str]],
        body: bytes,
        fingerprint: str,
    ) -> None:
        if isinstance(status_code, bool) or not isinstance(status_code, int) or not 100 <= status_code <= 599:
            raise InvalidIdempotencyRequestError(
                "response status_code", f"must be an int in 100..599, got {status_code!r}"
            )
        if not isinstance(body, bytes | bytearray | memoryview):
            raise InvalidIdempotencyRequestError("response body", f"must be bytes, got {type(body).__name__}")
        if not isinstance(fingerprint, str) or not fingerprint:
            raise InvalidIdempotencyRequestError(
                "response fingerprint", f"must be a non-empty string, got {fingerprint!r}"
            )
        normalised = _normalised_headers(headers)
        object.__setattr__(self, "status_code", status_code)
        object.__setattr__(self, "headers", normalised)
        object.__setattr__(self, "body", bytes(body))
        object.__setattr__(self, "fingerprint", fingerprint)
        object.__setattr__(self, "_lookup", {name.lower(): values for name, values in normalised.items()})

    def header(self, name: str) -> tuple[str, ...]:
        """Every value of header ``name`` (case-insensitive), or ``()``."""
        return self._lookup.get(name.lower(), ())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StoredResponse):
            return NotImplemented
        return (
            self.status_code == other.status_code
            and self._lookup == other._lookup
            and self.body == other.body
            and self.fingerprint == other.fingerprint
        )

    def __hash__(self) -> int:
        return hash((self.status_code, self.body, self.fingerprint))


@dataclass(frozen=True)
class Reserved:
    """The caller holds the key: run the operation, then ``complete`` (or ``abandon``) with this id."""

    reservation_id: str


@dataclass(frozen=True)
class AlreadyInFlight:
    """Another caller holds the key with the same fingerprint; retry after ``retry_after`` (0 < it ≤ the timeout)."""

    retry_after: timedelta


@dataclass(frozen=True)
class Replay:
    """The key completed with this fingerprint: answer with the stored response instead of running again."""

    response: StoredResponse


@dataclass(frozen=True)
class BodyHashMismatch:
    """The key is in use (in flight or completed) by a different request; ``stored_fingerprint`` is that request's."""

    stored_fingerprint: str


ReservationOutcome = Reserved | AlreadyInFlight | Replay | BodyHashMismatch


__all__ = [
    "DEFAULT_RESERVATION_TIMEOUT",
    "DEFAULT_TTL",
    "AlreadyInFlight",
    "BodyHashMismatch",
    "IdempotencyOptions",
    "Replay",
    "ReservationOutcome",
    "Reserved",
    "StoredResponse",
]


#: Answers that say "try again later": replaying one would turn a passing condition into a permanent answer.
RETRYABLE_STATUSES = frozenset({408, 425, 429})


def should_store(status: int) -> bool:
    """The default of both sides (the HTTP guard and the Airflow hook): record an answer the API would give again,
    below 500 and not 408/425/429; anything else abandons the reservation, so a retry runs again."""
    return status < 500 and status not in RETRYABLE_STATUSES

"""The idempotency-store port (spec section B): reserve, then complete or abandon; and the values it speaks.

A store answers ``reserve`` with exactly one of :class:`Reserved`, :class:`AlreadyInFlight`, :class:`Replay` or
:class:`BodyHashMismatch`. They are values, not exceptions, because every one of them is an ordinary answer on the
hot path: every retry of a completed request is a replay.

Keys and item ids (F-08, IDM-C02): a key is client-supplied text; it may hold ``/``, ``\\``, ``?`` or ``#``, none
of which Cosmos DB allows in an id, so the item id is the key's UTF-8 bytes in URL-safe base64 without padding:
reversible and collision-free, unlike a hash. Both limits are checked before any write, so a refused key leaves
nothing behind. Argument-shaped errors also subclass ``ValueError``; messages name the field and the limit at fault,
never the stored response (which may hold secrets).
"""

from __future__ import annotations

import abc
import base64
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from airflow_chatter.errors import ChatterError


class InvalidIdempotencyRequestError(ChatterError, ValueError):
    """A scope, key, fingerprint, reservation id or response refused before any write (F-08)."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field} {reason}")


class IdempotencyKeyTooLongError(InvalidIdempotencyRequestError):
    """A key over ``MAX_KEY_LENGTH`` characters, or whose encoded item id is over Cosmos DB's id limit (F-08)."""

    def __init__(self, reason: str, *, limit: int) -> None:
        self.limit = limit
        super().__init__("idempotency key", reason)


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


#: IDM-O03: the longest key, in characters (after an sf-string is unquoted).
MAX_KEY_LENGTH = 200
#: Cosmos DB's id limit, in bytes. 200 ASCII characters encode to 267; 200 four-byte characters would not fit.
MAX_ITEM_ID_BYTES = 1023
#: A scope is the partition key value; Cosmos DB allows 2 KB, this keeps well inside it.
MAX_SCOPE_BYTES = 1024


def new_reservation_id() -> str:
    """A fresh reservation id: 32 hex digits (a GUID without dashes, as IDM-C02 stores it)."""
    return uuid.uuid4().hex


def encode_item_id(key: str) -> str:
    """Return the item id of ``key``: Base64Url(UTF-8(key)), unpadded.

    ``idempotency-key`` → ``aWRlbXBvdGVuY3kta2V5``.
    """
    return base64.urlsafe_b64encode(key.encode("utf-8")).rstrip(b"=").decode("ascii")


def decode_item_id(item_id: str) -> str:
    """Return the key an item id encodes (the inverse of :func:`encode_item_id`)."""
    padded = item_id + "=" * (-len(item_id) % 4)
    return base64.urlsafe_b64decode(padded.encode("ascii")).decode("utf-8")


def validate_key(key: object) -> str:
    """Return ``key`` if it is a usable idempotency key; otherwise raise, naming the limit it breaks (F-08)."""
    if not isinstance(key, str):
        raise InvalidIdempotencyRequestError("idempotency key", f"must be a string, got {type(key).__name__}")
    if not key:
        raise InvalidIdempotencyRequestError("idempotency key", "must not be empty")
    if len(key) > MAX_KEY_LENGTH:
        raise IdempotencyKeyTooLongError(
            f"is {len(key)} characters long, over the limit of {MAX_KEY_LENGTH} characters", limit=MAX_KEY_LENGTH
        )
    try:
        encoded = encode_item_id(key)
    except UnicodeEncodeError as error:
        raise InvalidIdempotencyRequestError("idempotency key", "is not encodable as UTF-8") from error
    if len(encoded) > MAX_ITEM_ID_BYTES:
        raise IdempotencyKeyTooLongError(
            f"encodes to an item id of {len(encoded)} bytes, over the Cosmos DB id limit of {MAX_ITEM_ID_BYTES} "
            "bytes; use fewer non-ASCII characters",
            limit=MAX_ITEM_ID_BYTES,
        )
    return key


def validate_scope(scope: object) -> str:
    """Return ``scope`` if it is a usable scope (the partition key value); otherwise raise naming why."""
    if not isinstance(scope, str):
        raise InvalidIdempotencyRequestError("idempotency scope", f"must be a string, got {type(scope).__name__}")
    if not scope:
        raise InvalidIdempotencyRequestError("idempotency scope", "must not be empty")
    size = len(scope.encode("utf-8", "surrogatepass"))
    if size > MAX_SCOPE_BYTES:
        raise InvalidIdempotencyRequestError(
            "idempotency scope", f"is {size} bytes long, over the limit of {MAX_SCOPE_BYTES} bytes"
        )
    return scope


def validate_token(field: str, value: object) -> str:
    """Return ``value`` if it is a non-empty string (a fingerprint or a reservation id); otherwise raise."""
    if not isinstance(value, str) or not value:
        raise InvalidIdempotencyRequestError(field, f"must be a non-empty string, got {value!r}")
    return value


class IdempotencyStore(abc.ABC):
    """Reserve / complete / abandon idempotency keys. Thread-safe.

    A caller reserves ``(scope, key)`` with the request's fingerprint before running a non-idempotent operation.
    Only the caller that gets ``Reserved`` runs it; it then completes the key with the response (so every retry
    replays it) or abandons it (so an immediate retry may run). ``complete`` and ``abandon`` are conditional on the
    reservation id: a caller that lost its reservation (it timed out and someone took over) can never overwrite or
    release the new holder's slot.

    Every store validates its arguments the same way (``validate``) before any write (F-08). The conformance suite
    ``airflow_chatter.testing.contracts.idempotency`` pins the behaviour; run it against any implementation.
    """

    #: The ttl and reservation timeout this store applies.
    options: IdempotencyOptions

    @abc.abstractmethod
    def reserve(self, scope: str, key: str, fingerprint: str) -> ReservationOutcome:
        """Try to take ``key`` in ``scope`` for the request with ``fingerprint``; exactly one outcome, never raises
        for an ordinary answer (in flight, replay, mismatch)."""

    @abc.abstractmethod
    def complete(self, scope: str, key: str, reservation_id: str, response: StoredResponse) -> None:
        """Record ``response`` if ``reservation_id`` still holds ``key``; otherwise do nothing (IDM-10, IDM-14)."""

    @abc.abstractmethod
    def abandon(self, scope: str, key: str, reservation_id: str) -> None:
        """Release ``key`` if ``reservation_id`` still holds it and it is not completed; otherwise do nothing
        (IDM-11..13, IDM-15)."""

    @staticmethod
    def validate(scope: str, key: str, token_field: str, token: str) -> None:
        """Refuse a bad scope, key, fingerprint or reservation id before anything is written (F-08)."""
        validate_scope(scope)
        validate_key(key)
        validate_token(token_field, token)


__all__ = [
    "DEFAULT_RESERVATION_TIMEOUT",
    "DEFAULT_TTL",
    "MAX_ITEM_ID_BYTES",
    "MAX_KEY_LENGTH",
    "MAX_SCOPE_BYTES",
    "AlreadyInFlight",
    "BodyHashMismatch",
    "IdempotencyKeyTooLongError",
    "IdempotencyOptions",
    "IdempotencyStore",
    "InvalidIdempotencyRequestError",
    "Replay",
    "ReservationOutcome",
    "Reserved",
    "StoredResponse",
    "decode_item_id",
    "encode_item_id",
    "new_reservation_id",
    "validate_key",
    "validate_scope",
    "validate_token",
]

"""Drain Suspension (SUS-01..16, F-05): stop republishing a lease whose stamps keep failing.

A *Confirmation Failure* is a delivered stamp that raised after the message was published: the
message went out, the document stays ``pending`` and the next pass publishes it again. Five in a row
on one lease open a suspension; while suspended, batches on that lease are refused before any
document is looked at, except one probe batch per 60 s window. Only a *Confirmation Receipt* (a status
write that landed) closes it.

The gate is keyed by (source identity, lease token). Airflow runs every drain in a fresh process, so
the per-lease state lives on the lease document (F-05) and time is UTC wall clock from an injectable
clock; ``DrainGate`` itself is stateless and returns new ``SuspensionState`` values to persist.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow_chatter.drain.faults import RecordedFault
from airflow_chatter.drain.telemetry import DrainTelemetry
from airflow_chatter.ports import Document

#: Consecutive Confirmation Failures that open a suspension. A safety bound, not a setting: each
#: failure republished a message, so this caps the duplicates a stuck stamp can cause before the
#: lease stops (SUS-15: at most 5 republishes to open). The reference fixes it too (OutboxDrainGate).
THRESHOLD = 5

#: How long a suspended lease refuses batches before letting exactly one probe through. Also a
#: fixed bound: it caps the republish rate of a still-broken lease to one probe per minute (SUS-15).
WINDOW = timedelta(seconds=60)


@dataclass(frozen=True)
class SuspensionState:
    """The per-lease gate state persisted on the lease document (F-05).

    ``armed_at`` is when the current window started (opening, probe or re-arm), UTC.
    ``probe_consumed`` says the probe of the window that started at ``armed_at`` was handed out.
    ``last_fault`` is the newest counted Confirmation Failure's error (type, redacted short message, when), so the
    UI can say why a lease is suspended; a receipt clears it with the rest of the state.
    """

    consecutive_failures: int = 0
    suspended: bool = False
    armed_at: datetime | None = None
    probe_consumed: bool = False
    last_fault: RecordedFault | None = None

    def to_document(self) -> dict[str, Any]:
        """The JSON form stored under the lease's ``suspension`` field."""
        return {
            "consecutive_failures": self.consecutive_failures,
            "suspended": self.suspended,
            "armed_at": self.armed_at.isoformat() if self.armed_at is not None else None,
            "probe_consumed": self.probe_consumed,
            "last_fault": self.last_fault.to_document() if self.last_fault is not None else None,
        }

    @classmethod
    def from_document(cls, value: object) -> SuspensionState:
        """Parse the stored form; ``ValueError`` says what is wrong (the lease store names the lease)."""
        if value is None:
            return cls()
        if not isinstance(value, Mapping):
            raise ValueError(f"suspension must be an object, got {type(value).__name__}")  # noqa: TRY004 - stored data of the wrong shape is a bad value
        failures = value.get("consecutive_failures", 0)
        if isinstance(failures, bool) or not isinstance(failures, int) or failures < 0:
            raise ValueError(f"suspension.consecutive_failures must be a non-negative integer, got {failures!r}")
        suspended = value.get("suspended", False)
        probe = value.get("probe_consumed", False)
        for name, flag in (("suspended", suspended), ("probe_consumed", probe)):
            if not isinstance(flag, bool):
                raise ValueError(f"suspension.{name} must be a boolean, got {flag!r}")  # noqa: TRY004 - stored data of the wrong shape is a bad value
        armed_at = parse_utc(value.get("armed_at"), "suspension.armed_at")
        if suspended and armed_at is None:
            raise ValueError("suspension.armed_at is required while suspended")
        return cls(failures, suspended, armed_at, probe, RecordedFault.from_document(value.get("last_fault")))


@dataclass(frozen=True)
class GateDecision:
    """What ``DrainGate.consult`` decided, and the state to persist before draining."""

    permitted: bool
    probe: bool
    state: SuspensionState


class ConfirmationReceipt:
    """Evidence that a status write (delivered, drop or undeliverable) actually landed.

    It can only be minted from the document a successful patch returned, so a loop that merely
    finished, or a batch that wrote nothing, cannot lift a suspension (SUS-07/08/09).
    """

    __slots__ = ("etag", "item_id", "status")

    item_id: str
    status: str
    etag: str

    def __init__(self, *_args: object, **_kwargs: object) -> None:
        raise TypeError("a ConfirmationReceipt is minted only by ConfirmationReceipt.from_status_write")

    @classmethod
    def from_status_write(cls, written: Document, status: str) -> ConfirmationReceipt:
        """Mint a receipt from a patch response that carries the status just written."""
        if type(written) is not dict and not isinstance(written, Mapping):  # a dict skips the ABC check
            raise ValueError("a receipt needs the document the status write returned")  # noqa: TRY004 - stored data of the wrong shape is a bad value
        etag = written.get("_etag")
        if written.get("status") != status or not isinstance(etag, str) or not etag:
            raise ValueError(f"the status write did not land: status={written.get('status')!r}, _etag={etag!r}")
        receipt = object.__new__(cls)
        object.__setattr__(receipt, "item_id", str(written.get("id")))
        object.__setattr__(receipt, "status", status)
        object.__setattr__(receipt, "etag", etag)
        return receipt

    def __repr__(self) -> str:
        return f"ConfirmationReceipt(item_id={self.item_id!r}, status={self.status!r})"


class DrainGate:
    """The Drain Suspension gate of one source identity. Stateless: state in, state out.

    ``telemetry`` receives the opening metric/log (SUS-03) and the closing log (SUS-08).
    """

    def __init__(
        self,
        source_identity: str,
        *,
        clock: Callable[[], datetime],
        telemetry: DrainTelemetry,
    ) -> None:
        if not isinstance(source_identity, str) or not source_identity.strip():
            # SUS-16: suspensions are reported and keyed under the identity; without one two
            # sources sharing lease token "0" would suspend each other.
            raise ValueError("a DrainGate requires a source identity")
        self.source_identity = source_identity
        self._clock = clock
        self._telemetry = telemetry

    def consult(self, state: SuspensionState) -> GateDecision:
        """SUS-01/04/05: permit, refuse, or hand out the window's single probe (re-arming it)."""
        if not state.suspended:
            return GateDecision(True, False, state)
        now = self._now()
        assert state.armed_at is not None  # guaranteed by from_document / the transitions below
        # NOTE: wall clock across hosts; a clock that runs behind only lengthens the refusal.
        if now - state.armed_at < WINDOW:
            return GateDecision(False, False, state)
        return GateDecision(True, True, replace(state, armed_at=now, probe_consumed=True))

    def confirmation_failed(
        self, lease_token: str, state: SuspensionState, fault: BaseException, *, lease_id: str | None = None
    ) -> SuspensionState:
        """SUS-02/03/06: count a Confirmation Failure; open at the threshold, re-arm while open.

        ``lease_id`` names the lease in the opening log (its range, ``lease_token``, is the detail and the metric's
        attribute)."""
        now = self._now()
        count = state.consecutive_failures + 1
        recorded = RecordedFault.of(fault, now)
        if state.suspended:
            return SuspensionState(count, True, now, False, recorded)
        if count >= THRESHOLD:
            self._telemetry.record_suspension_opened(self.source_identity, lease_token, count, fault, lease_id=lease_id)
            return SuspensionState(count, True, now, False, recorded)
        return replace(state, consecutive_failures=count, last_fault=recorded)

    def present(
        self, lease_token: str, state: SuspensionState, receipt: ConfirmationReceipt, *, lease_id: str | None = None
    ) -> SuspensionState:
        """SUS-08/10/11: a receipt evicts the lease's state; log only if it was suspended (naming ``lease_id``)."""
        if not isinstance(receipt, ConfirmationReceipt):
            raise TypeError("present() needs a ConfirmationReceipt")
        if state.suspended:
            self._telemetry.log_suspension_closed(lease_token, lease_id=lease_id)
        return SuspensionState()

    def _now(self) -> datetime:
        now = self._clock()
        if now.tzinfo is None:
            raise ValueError("the drain clock must return timezone-aware UTC datetimes")
        return now.astimezone(UTC)


def parse_utc(value: object, name: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{name} must be an ISO-8601 string, got {value!r}")  # noqa: TRY004 - stored data of the wrong shape is a bad value
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{name} is not ISO-8601: {value!r}") from None
    if parsed.tzinfo is None:
        raise ValueError(f"{name} must carry a UTC offset: {value!r}")
    return parsed.astimezone(UTC)

"""What one drain of one lease counted and how it ended: ``DrainCounts`` while it runs, ``DrainSummary`` after.

The summary is what a drain task pushes to XCom (``to_dict``) and logs (``log_line``, F-09), and what
``raise_for_error`` re-raises (F-06). F-11 adds the drain's request units, by kind, and its 429s. Both are pydantic
models: the XCom form is the summary's ``model_dump``, and whoever reads it back (the monitoring read model) reads it
with ``DrainSummary.model_validate``, one schema both ways.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field, computed_field

from airflow_chatter.drain.telemetry import error_type
from airflow_chatter.drain.tries import TryCounts, TryRecord


class DrainCounts(TryCounts):
    """Everything one drain of one lease counts and notes as it runs: the one definition of those fields.

    The engine updates one ``DrainCounts`` while it drains (a mutable model, assignments not validated, no
    per-document copying); ``DrainSummary`` is these fields plus the outcome, built once at the end
    (``DrainSummary.of``).
    ``continuation_age_seconds`` is how long ago the lease's continuation last advanced, as of the end
    of the run (near 0 after a successful pass, growing while a lease is refused or failing).
    """

    lease: str
    lease_token: str | None = None
    source_identity: str | None = None
    #: The counts a try records (``TryCounts``: published, delivered, undeliverable, dropped, refused batches,
    #: Confirmation Failures), plus the skipped documents, which a try does not record.
    skipped: int = 0
    documents: int = 0
    pages: int = 0
    max_lag_seconds: float | None = None
    continuation_age_seconds: float | None = None
    continuation: str | None = None
    suspended: bool = False
    lease_held_by: str | None = None
    split_into: tuple[str, ...] = ()
    #: F-11: the charges of this drain's requests, in RU, in all and by kind (feed, stamps, leases, other).
    request_units: float = 0.0
    request_units_by_kind: dict[str, float] = Field(default_factory=dict)
    #: 429s answered to this drain's requests (each retried after its retry-after, or the limit reached), the
    #: wall-clock seconds it spent waiting on them (overlapping waits once), and the RU/s it paced itself to at its
    #: end (its cap, lower after 429s; ``None``: not paced, no cap and no 429).
    throttled: int = 0
    throttle_limit_reached: bool = False
    throttle_waited_seconds: float = 0.0
    paced_request_units_per_second: float | None = None
    #: Follow mode (follow.py): change-feed polls after the drain caught up, those that found nothing, what the
    #: empty ones cost in RU (feed reads and lease renewals), and when the last poll ran (ISO UTC).
    polls: int = 0
    empty_polls: int = 0
    empty_poll_request_units: float = 0.0
    last_poll_at: str | None = None
    #: Exactly-once drains (drain/exactly_once.py): the guarantee the drain kept, its page transactions committed and
    #: aborted, whether a takeover fenced it (it then stopped), and the committed pages it found unstamped on taking
    #: the lease and finished without republishing.
    guarantee: str = "at_least_once"
    transactions_committed: int = 0
    transactions_aborted: int = 0
    fenced: bool = False
    recovered_pages: int = 0
    #: Every try counts (``drain/tries.py``): the counts of this task run's earlier tries of this lease, as they
    #: recorded them on the lease, oldest first; empty for a first try or a drain the caller names no try of.
    earlier_tries: tuple[TryRecord, ...] = ()

    def lag(self, seconds: float) -> None:
        if self.max_lag_seconds is None or seconds > self.max_lag_seconds:
            self.max_lag_seconds = seconds


class DrainSummary(DrainCounts):
    """What one drain of one lease did: its ``DrainCounts`` and its outcome; ``to_dict()`` is its XCom form (F-09),
    and ``DrainSummary.model_validate`` reads that form back (keys it does not know, such as the operator's
    ``topics``, are ignored).

    A value: the engine builds it once, at the end of a run, and never changes it afterwards.
    ``error`` keeps the original exception for ``raise_for_error``; it is not part of ``to_dict``.
    """

    model_config = ConfigDict(frozen=True, extra="ignore", arbitrary_types_allowed=True)

    error_type: str | None = None
    error_message: str | None = None
    error: BaseException | None = Field(default=None, exclude=True, repr=False)

    @classmethod
    def of(cls, counts: DrainCounts, error: BaseException | None = None) -> DrainSummary:
        """The summary of a run that counted ``counts`` and ended with ``error`` (``None``: it succeeded)."""
        return cls(
            **{name: getattr(counts, name) for name in DrainCounts.model_fields},
            error_type=error_type(error) if error is not None else None,
            error_message=str(error) if error is not None else None,
            error=error,
        )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def request_units_per_delivered(self) -> float | None:
        """RU per delivered document (all of the drain's charges over its delivered stamps); ``None`` for none."""
        return None if not self.delivered else self.request_units / self.delivered

    @property
    def failed(self) -> bool:
        return self.error is not None

    def to_dict(self) -> dict[str, Any]:
        """The XCom form, JSON-able: plain numbers, strings, booleans, lists and ``None``."""
        return self.model_dump(mode="json")

    def raise_for_error(self) -> None:
        """Re-raise the original error of a failed drain (F-06); do nothing otherwise."""
        if self.error is not None:
            raise self.error

    def log_line(self) -> str:
        """One line for the task log."""
        outcome = f"failed with {self.error_type}: {self.error_message}" if self.failed else "ok"
        return (
            f"drain lease={self.lease} published={self.published} delivered={self.delivered} "
            f"undeliverable={self.undeliverable} skipped={self.skipped} dropped={self.dropped} "
            f"refused={self.refused_batches} confirmation_failures={self.confirmation_failures} "
            f"pages={self.pages} max_lag={self.max_lag_seconds} suspended={self.suspended} "
            f"ru={self.request_units:.1f} ru_per_delivered={_rounded(self.request_units_per_delivered)} "
            f"throttled={self.throttled} throttle_waited={self.throttle_waited_seconds:.1f}s "
            f"paced_ru_per_s={self.paced_request_units_per_second}{self._exactly_once()} {outcome}"
        )

    def _exactly_once(self) -> str:
        if self.guarantee != "exactly_once":
            return ""
        return (
            f" guarantee=exactly_once transactions={self.transactions_committed}/{self.transactions_aborted} "
            f"recovered_pages={self.recovered_pages} fenced={self.fenced}"
        )


def _rounded(value: float | None) -> str:
    return "None" if value is None else f"{value:.2f}"


__all__ = ["DrainCounts", "DrainSummary"]

"""The oldest Pending Outbox Document's age, per source, against its ``max_pending_age_seconds``: the one rule the
page, the dashboard tile, the OpenTelemetry gauge and the pending-age check (``check_pending_age``) share.

A source's age is the largest of its leases' (each: how long the oldest pending document after the lease's
checkpoint has waited, ``monitoring.LeaseView.pending_age_seconds``). Unknown stays unknown: a source with no lease,
or a lease whose estimate could not see its oldest pending document, has no age (``None``), never 0; a known age
over the limit is over it whatever the unknown leases hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from opentelemetry import metrics

from airflow_chatter.drain.telemetry import METER_NAME

Verdict = Literal["over", "within", "unknown", "no limit"]


@dataclass(frozen=True)
class PendingAge:
    """``seconds``: the oldest pending document's age (0: caught up; ``None``: unknown); ``limit_seconds``: the
    source's ``max_pending_age_seconds`` (``None``: not set); ``verdict``: the age against the limit (a field, so the
    API's answer carries it and the page and the tile only draw it)."""

    seconds: float | None
    limit_seconds: float | None
    #: The largest age among the leases whose age is known (a floor of ``seconds`` when some are unknown).
    known_floor_seconds: float | None = None
    verdict: Verdict = "no limit"

    @property
    def message(self) -> str:
        """One line for an alert, a log or the page."""
        shown = "unknown" if self.seconds is None else f"{self.seconds:.0f} s"
        if self.verdict == "over":
            return (
                f"the oldest Pending Outbox Document has waited {self.known_floor_seconds:.0f} s, over "
                f"max_pending_age_seconds {self.limit_seconds:g}"
            )
        if self.limit_seconds is None:
            return f"oldest pending age {shown} (no max_pending_age_seconds set)"
        return f"oldest pending age {shown}, limit {self.limit_seconds:g} s"


def oldest_pending_age(lease_ages: Sequence[float | None], limit_seconds: float | None) -> PendingAge:
    """A source's age from its leases' ages (``None``: unknown); no lease at all is unknown too."""
    known = [age for age in lease_ages if age is not None]
    floor = max(known) if known else None
    exact = floor if lease_ages and len(known) == len(lease_ages) else None
    return PendingAge(exact, limit_seconds, floor, _verdict(exact, floor, limit_seconds))


def _verdict(seconds: float | None, floor: float | None, limit: float | None) -> Verdict:
    if limit is None:
        return "no limit"
    if floor is not None and floor > limit:
        return "over"
    return "unknown" if seconds is None else "within"


#: The gauge of the oldest Pending Outbox Document's age, per source, in seconds (recorded by the pending-age check;
#: an unknown age records nothing, never 0).
PENDING_AGE_GAUGE = "chatter.messaging.outbox.pending.oldest_age"
ATTR_SOURCE = "chatter.messaging.outbox.source"


def record_pending_age(source: str, age: PendingAge, meter_provider: metrics.MeterProvider | None = None) -> None:
    """Set the gauge for ``source`` when its age is known (through the OpenTelemetry API: a no-op without an SDK)."""
    if age.seconds is None:
        return
    meter = (meter_provider or metrics.get_meter_provider()).get_meter(METER_NAME)
    gauge = meter.create_gauge(PENDING_AGE_GAUGE, unit="s", description="Age of the oldest Pending Outbox Document")
    gauge.set(age.seconds, {ATTR_SOURCE: source})

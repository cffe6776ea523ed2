"""Every try counts: each try of a drain task leaves its counts on its lease, so the next try's summary carries them.

Airflow clears a task's XCom when a new try starts, so the summary the page reads (the last try's) would count
that try alone while the tries before it published and failed too (a run tried three times: "published 18", Kafka
held 84 copies). The drain therefore records each try's counts on the lease document itself, in the write that releases
the lease (no extra request), under ``run_tries``: the task run it belongs to (an opaque key the caller gives, e.g.
``dag/run/task/map index``) and one small entry per try. The next try of the same task run reads them with the
lease it acquires and reports them in its summary as ``earlier_tries``; a try of another run starts a new record.
The record is one task run's worth (at most ``MAX_TRIES_KEPT`` entries), so the lease document stays small.

A try killed before it released its lease (SIGKILL, a lost worker) records nothing: its counts are missing.
Nothing here imports Airflow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

#: The lease document's field holding the current task run's tries.
RUN_TRIES_FIELD = "run_tries"
#: Entries kept per task run, the newest: far above any Airflow ``retries`` a drain is given.
MAX_TRIES_KEPT = 20


@dataclass(frozen=True)
class Attempt:
    """Which try this drain is: ``run`` names the task run (the same for all of its tries), ``number`` the try."""

    run: str
    number: int


class TryCounts(BaseModel):
    """The counts a task run's totals add up over its tries: declared once, for a try's record (``TryRecord``)
    and for a drain's running counts (``DrainCounts``), so the two cannot drift apart."""

    published: int = 0
    delivered: int = 0
    undeliverable: int = 0
    dropped: int = 0
    refused_batches: int = 0
    confirmation_failures: int = 0


class TryRecord(TryCounts):
    """One try's counts, as it records them on its lease and as a later try's summary reports them
    (``earlier_tries``): its number (``try``), the counts the run totals add up, its RU and its error type."""

    model_config = ConfigDict(frozen=True, extra="ignore", serialize_by_alias=True)

    number: int = Field(alias="try")
    request_units: float | None = None
    error_type: str | None = None


def try_entry(attempt: Attempt, counts: object, request_units: float, error_type: str | None) -> TryRecord:
    """One try's record: its number, the counts of ``counts`` (a ``DrainCounts``), its RU and error."""
    counted = {name: int(getattr(counts, name)) for name in TryCounts.model_fields}
    return TryRecord.model_validate(
        {"try": attempt.number, **counted, "request_units": round(request_units, 2), "error_type": error_type}
    )


def earlier_tries(document: Mapping[str, Any], attempt: Attempt) -> tuple[TryRecord, ...]:
    """The entries ``document`` (a lease) holds for ``attempt``'s task run, before this try, oldest first; an entry
    that is not a try's record is left out."""
    record = document.get(RUN_TRIES_FIELD)
    if not isinstance(record, Mapping) or record.get("run") != attempt.run:
        return ()
    entries = record.get("tries")
    if not isinstance(entries, Sequence):
        return ()
    kept = []
    for entry in entries:
        try:
            kept.append(TryRecord.model_validate(entry))
        except ValidationError:
            continue
    return tuple(e for e in kept if e.number < attempt.number)


def run_tries(attempt: Attempt, earlier: Sequence[TryRecord], entry: TryRecord) -> dict[str, Any]:
    """The lease's new ``run_tries`` value: the earlier tries and this one, the newest ``MAX_TRIES_KEPT``."""
    return {"run": attempt.run, "tries": [e.model_dump() for e in [*earlier, entry][-MAX_TRIES_KEPT:]]}


__all__ = [
    "MAX_TRIES_KEPT",
    "RUN_TRIES_FIELD",
    "Attempt",
    "TryCounts",
    "TryRecord",
    "earlier_tries",
    "run_tries",
    "try_entry",
]

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

#: The lease document's field holding the current task run's tries.
RUN_TRIES_FIELD = "run_tries"
#: Entries kept per task run, the newest: far above any Airflow ``retries`` a drain is given.
MAX_TRIES_KEPT = 20
#: The counts a try records (those the run totals add up), besides ``try``, ``request_units`` and ``error_type``.
TRY_COUNTS = ("published", "delivered", "undeliverable", "dropped", "refused_batches", "confirmation_failures")


@dataclass(frozen=True)
class Attempt:
    """Which try this drain is: ``run`` names the task run (the same for all of its tries), ``number`` the try."""

    run: str
    number: int


def try_entry(attempt: Attempt, counts: object, request_units: float, error_type: str | None) -> dict[str, Any]:
    """One try's record: its number, the ``TRY_COUNTS`` of ``counts`` (a ``DrainCounts``), its RU and error."""
    entry: dict[str, Any] = {"try": attempt.number}
    entry.update({name: int(getattr(counts, name)) for name in TRY_COUNTS})
    entry["request_units"] = round(request_units, 2)
    entry["error_type"] = error_type
    return entry


def earlier_tries(document: Mapping[str, Any], attempt: Attempt) -> tuple[dict[str, Any], ...]:
    """The entries ``document`` (a lease) holds for ``attempt``'s task run, before this try, oldest first."""
    record = document.get(RUN_TRIES_FIELD)
    if not isinstance(record, Mapping) or record.get("run") != attempt.run:
        return ()
    entries = record.get("tries")
    if not isinstance(entries, Sequence):
        return ()
    kept = [e for e in entries if isinstance(e, Mapping) and isinstance(e.get("try"), int)]
    return tuple(dict(e) for e in kept if e["try"] < attempt.number)


def run_tries(attempt: Attempt, earlier: Sequence[Mapping[str, Any]], entry: Mapping[str, Any]) -> dict[str, Any]:
    """The lease's new ``run_tries`` value: the earlier tries and this one, the newest ``MAX_TRIES_KEPT``."""
    return {"run": attempt.run, "tries": [*earlier, entry][-MAX_TRIES_KEPT:]}


__all__ = ["MAX_TRIES_KEPT", "RUN_TRIES_FIELD", "TRY_COUNTS", "Attempt", "earlier_tries", "run_tries", "try_entry"]

"""The soak's report arithmetic, pure (no services): RSS series with their least-squares slope, the document counts
per window, and the duplicates on Kafka attributed to the fault that caused them (tests/reliability/soak.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

#: The fault kinds of the soak's schedule, by the prefix of the schedule's entry, and 'none'.
FAULT_KINDS = (
    ("kill worker", "worker SIGKILL"),
    ("broker stop", "broker outage"),
    ("429 burst", "429 burst"),
    ("split range", "range split"),
    ("restart scheduler", "scheduler restart"),
)
NONE = "none"


@dataclass
class Sample:
    """What the sampler saw at ``at`` (epoch s)."""

    at: float
    leases: int
    markers: int
    effects: int
    stuck: int
    written: int = 0
    #: Units of Work the writers were behind their schedule (due but not yet attempted).
    writer_behind: int = 0
    #: process name -> (pid, RSS in KiB, CPU seconds so far), each of it and its descendants.
    rss: dict[str, tuple[int, int, float]] = field(default_factory=dict)


def slope_per_hour(points: Sequence[tuple[float, float]]) -> float:
    """The least-squares slope of ``(seconds, MiB)`` points, in MiB per hour (0.0 with under two distinct times)."""
    if len(points) < 2:
        return 0.0
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    var = sum((x - mean_x) ** 2 for x, _ in points)
    if var == 0:
        return 0.0
    cov = sum((x - mean_x) * (y - mean_y) for x, y in points)
    return cov / var * 3600


@dataclass(frozen=True)
class RssRow:
    name: str
    #: Minutes (from t0) at which the process had a new pid: restarted by a fault.
    restarts: tuple[float, ...]
    #: The series the row is over: the longest stretch with one pid (the whole run when never restarted).
    from_min: float
    to_min: float
    start_mib: float
    end_mib: float
    slope_mib_per_hour: float
    #: CPU over the series, in percent of one core.
    cpu_percent: float


def rss_rows(samples: Sequence[Sample], t0: float) -> list[RssRow]:
    """One row per process: its series is restarted whenever its pid changes (a fault restarted it), and the row
    reports the longest single-pid series: its first and last RSS and its least-squares slope."""
    series: dict[str, list[tuple[float, int, float, float]]] = {}
    for sample in samples:
        for name, (pid, kib, cpu) in sample.rss.items():
            series.setdefault(name, []).append((sample.at - t0, pid, kib / 1024, cpu))
    rows = []
    for name in sorted(series):
        points = series[name]
        segments: list[list[tuple[float, float, float]]] = []
        restarts: list[float] = []
        last_pid = None
        for at, pid, mib, cpu in points:
            if pid != last_pid:
                if last_pid is not None:
                    restarts.append(at / 60)
                segments.append([])
                last_pid = pid
            segments[-1].append((at, mib, cpu))
        longest = max(segments, key=lambda s: (s[-1][0] - s[0][0], len(s)))
        span = longest[-1][0] - longest[0][0]
        rows.append(
            RssRow(
                name,
                tuple(restarts),
                longest[0][0] / 60,
                longest[-1][0] / 60,
                longest[0][1],
                longest[-1][1],
                slope_per_hour([(at, mib) for at, mib, _ in longest]),
                100 * (longest[-1][2] - longest[0][2]) / span if span > 0 else 0.0,
            )
        )
    return rows


@dataclass(frozen=True)
class CountRow:
    """The samples of one window: documents at its end, the most leases and backlogs within it."""

    window: str
    written: int
    leases_max: int
    markers: int
    effects: int
    receiver_behind_max: int
    writer_behind_max: int


def count_rows(samples: Sequence[Sample], t0: float, window_s: float) -> list[CountRow]:
    """Per window of ``window_s`` from ``t0`` (samples after the last full window, e.g. the catch-up, form the
    last row): the ledger and inbox documents at the window's last sample, and the maxima within it."""
    groups: dict[int, list[Sample]] = {}
    for sample in samples:
        groups.setdefault(max(0, int((sample.at - t0) // window_s)), []).append(sample)
    rows = []
    for index in sorted(groups):
        group = groups[index]
        last = group[-1]
        rows.append(
            CountRow(
                f"{index * window_s / 60:.0f}–{(index + 1) * window_s / 60:.0f} min",
                last.written,
                max(s.leases for s in group),
                last.markers,
                last.effects,
                max(s.written - s.effects for s in group),
                max(s.writer_behind for s in group),
            )
        )
    return rows


@dataclass(frozen=True)
class FaultWindow:
    """A fault as it happened: its kind and the epoch seconds it started and ended (a kill: until the worker was
    started again; the outage: until the broker was back; a burst: until the RU/s were restored)."""

    kind: str
    start: float
    end: float


def fault_kind(what: str) -> str:
    """The kind of a schedule entry (``kill worker1`` -> ``worker SIGKILL``); ValueError naming it otherwise."""
    for prefix, kind in FAULT_KINDS:
        if what.startswith(prefix):
            return kind
    raise ValueError(f"fault: unknown schedule entry {what!r}")


@dataclass(frozen=True)
class Attribution:
    kind: str
    ids: int
    extra_copies: int


def attribute_duplicates(
    copies: Mapping[str, Sequence[float]],
    faults: Sequence[FaultWindow],
    failures: Sequence[tuple[float, str]] = (),
) -> tuple[list[Attribution], dict[str, list[float]]]:
    """Attribute each extra copy of a message id published more than once to the fault that caused it.

    ``copies``: message id -> the Kafka timestamps (epoch s) of its records. Each copy after the first exists
    because the run that published the copy before it did not get to stamp the document delivered. The fault
    blamed for an extra copy is the first one active between the previous copy and it (its window ``[start, end]``
    meets ``[previous, extra]``): the fault that interrupted that run. Failing that, the first drain run that
    failed by itself in between (``failures``: (epoch s, error type), e.g. a stamp throttled past the retry
    limits by the load alone), as ``drain run failed: <error type>``. ``none`` when neither happened in between.

    Returns one row per fault kind (in schedule order, then the drain failures, then ``none``; the scheduled kinds
    and ``none`` also without duplicates) with the
    ids that have at least one extra copy blamed on it and the number of such copies, and the ids blamed on
    ``none`` with their timestamps (to explain them).
    """
    ordered = sorted(faults, key=lambda f: f.start)
    ids: dict[str, set[str]] = {}
    extra: Counter[str] = Counter()
    unexplained: dict[str, list[float]] = {}
    for mid, stamps in copies.items():
        if len(stamps) < 2:
            continue
        ordered_stamps = sorted(stamps)
        for previous, at in zip(ordered_stamps, ordered_stamps[1:], strict=False):
            kind = next((f.kind for f in ordered if f.start <= at and f.end >= previous), None) or next(
                (f"drain run failed: {error}" for when, error in sorted(failures) if previous <= when <= at), NONE
            )
            ids.setdefault(kind, set()).add(mid)
            extra[kind] += 1
            if kind == NONE:
                unexplained[mid] = sorted(stamps)
    failed = sorted(k for k in ids if k.startswith("drain run failed"))
    kinds = [kind for _, kind in FAULT_KINDS] + failed + [NONE]
    return [Attribution(k, len(ids.get(k, ())), extra[k]) for k in kinds], unexplained

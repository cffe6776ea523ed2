"""The kill ledger: exactly once against at least once, under SIGKILLs, takeovers, 429 storms, a split and a broker
restart, side by side.

    .venv/bin/python -m tests.reliability.kill_ledger [--kills 52] [--short] [--seed 7]

For each guarantee, a ledger of pending Outbox Documents (unique message ids, 64 partition keys) in a fresh emulator
container, more of them written as the run goes on, drained by separate OS processes
(``devkit.drain_runner``, the real adapters) through the fault suite's proxy, under ``--kills``
faults taken in turn:

* **commit-kill**: a drain SIGKILLs itself right after a page's transaction committed, before its stamps (the
  runner's ``kill_after_commit`` hook, in the test path; in at-least-once mode, where there is no commit, the same
  slot is a kill at a random moment);
* **random kill**: a drain SIGKILLed at a random moment;
* **takeover**: a drain SIGSTOPped mid-run until its lease lapses, a second drain takes the lease over, then the
  first is let go again (exactly once: it is fenced; at least once: it carries on with its page);
* **429 storm**: every stamp answered 429 for a while, past the drain's retry limits, after Kafka took the page.

Two more faults are placed by the run's progress, never by the clock: at the first commit-kill from 40 % of the faults
on, the ledger's partition key range is **split** (``POST /_chatter/split``) as soon as that drain has stamped a page
or died (exactly once: often a parent with a page committed and not stamped, which its children must finish); from
70 % of the faults on, one extra slot **restarts the broker** (``scripts/kafka.sh stop``, then ``start`` with its log
kept) as soon as a drain has stamped a page, and starts it again once that drain has ended on the outage. The broker
restart needs a broker of the ledger's own (``KAFKA_PORT + 4``, controller ``+ 5``, stopped at the end); ``--short``
(the suite's version) runs on the shared project broker and leaves the restart out.

Then drains run until nothing is pending. Kafka is read back with a ``read_committed`` consumer of our own (every
message id counted) and the documents and leases are read back. It prints one table:

    guarantee | faults | documents | lost | duplicates seen by read_committed | max copies | delivered | leases stuck
    | processes killed | pages recovered | drains fenced | Confirmation Failures | verdict

The exactly-once row must show 0 lost, 0 duplicates, every document ``delivered`` and no lease stuck (suspended or
still owned), and no drain refused as if the broker could not run transactions (it can: such a refusal is a takeover
misreported); the at-least-once row must lose nothing and counts its duplicates. Exits 1 otherwise. Services as
tests/reliability/fault_suite.py says.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from airflow_chatter.adapters.kafka.admin import CHECKPOINT_TOPIC_CONFIGS, ensure_topics
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.drain.suspension import parse_utc
from devkit.services import PROJECT_KAFKA_PORT, KafkaBroker, machine
from tests.reliability.fault_suite import Ledger, RunResult, Services, message_id_counts, services, stamp_rule

PAGE = 50
LEASE_SECONDS = 4.0
#: Each fault's drain is slowed this much per emulator request, so that a kill lands mid-run.
LATENCY_MS = 10
KINDS = ("commit-kill", "random kill", "takeover", "429 storm")
#: After which share of the faults the split (with the commit-kill nearest) and the broker restart come.
SPLIT_AT, RESTART_AT = 0.4, 0.7
#: How long a fault waits for its drain to stamp a page (or end) before it splits or stops the broker anyway.
PROGRESS_TIMEOUT_S = 90.0
#: The longest the broker stays away waiting for the drain in flight to end on the outage.
OUTAGE_LIMIT_S = 45.0
#: The ledger's own broker, for the restart: clear of the fault suite's and the soak's (KAFKA_PORT + 2).
OWN_BROKER_OFFSET = 4


def committed_counts(ledger: Ledger) -> Counter[str]:
    """Every message id a read_committed consumer reads from the start of the topic to its end now."""
    return message_id_counts(ledger.bootstrap, ledger.topic, seconds=90, isolation_level="read_committed")


def stuck_leases(ledger: Ledger) -> int:
    """Leases left suspended, or still owned with an expiry ahead, once every drain has ended."""
    now = datetime.now(UTC)
    stuck = 0
    for lease in ledger.lease_documents():
        if "feed_range" not in lease:
            continue
        suspended = bool((lease.get("suspension") or {}).get("suspended"))
        expires = parse_utc(lease.get("expires_at"), "expires_at")
        owned = lease.get("owner") is not None and expires is not None and expires > now
        stuck += suspended or owned
    return stuck


def delivered(ledger: Ledger) -> int:
    return ledger.statuses().get("delivered", 0)


def await_progress(ledger: Ledger, process: subprocess.Popen[str], before: int) -> None:
    """Return once the drain has stamped a document past ``before`` delivered ones, or has ended (bounded)."""
    deadline = time.monotonic() + PROGRESS_TIMEOUT_S
    while process.poll() is None and time.monotonic() < deadline and delivered(ledger) <= before:
        time.sleep(0.2)


def split_range(env: Services, ledger: Ledger) -> str:
    """Split the ledger's first live partition key range; what happened, for the notes."""
    ranges = env.admin("GET", f"ranges?container={ledger.container_id}")["ranges"]
    pending = ledger.pending()
    answer = env.admin("POST", "split", {"container": ledger.container_id, "range_id": ranges[0]["id"]})
    return f"range {answer['parent']} split into {[c['id'] for c in answer['children']]} with {pending} pending"


def one_fault(
    ledger: Ledger, env: Services, kind: str, base: dict[str, Any], rng: random.Random, notes: list[str], split: bool
) -> list[RunResult]:
    """Run one drain (two for a takeover) under ``kind``, splitting the range under it when ``split`` (as soon as
    it stamped a page or died); waits for every process it started, returns their results."""
    started = time.monotonic()
    before = delivered(ledger) if split else 0
    if kind == "commit-kill" and base["guarantee"] == "exactly_once":
        process = ledger.start(kill_after_commit=0.5, seed=rng.random(), **base)
        if split:
            await_progress(ledger, process, before)
            notes.append(split_range(env, ledger) + f" (its drain {'alive' if process.poll() is None else 'dead'})")
        return [ledger.finish(process, started)]
    if kind in ("commit-kill", "random kill"):
        process = ledger.start(**base)
        if split:
            await_progress(ledger, process, before)
            notes.append(split_range(env, ledger) + f" (its drain {'alive' if process.poll() is None else 'dead'})")
            time.sleep(rng.uniform(0.2, 1.5))  # then killed a random moment after the split
        else:
            time.sleep(rng.uniform(1.2, 3.5))  # the interpreter and the clients start in about a second
        process.send_signal(signal.SIGKILL)
        return [ledger.finish(process, started, 30)]
    if kind == "takeover":
        ledger.add(PAGE * 6)  # enough work that the first drain is still publishing when it is stopped
        first = ledger.start(**base)
        time.sleep(rng.uniform(1.2, 2.2))
        first.send_signal(signal.SIGSTOP)
        time.sleep(LEASE_SECONDS + 0.5)  # its lease lapses while it is stopped
        second = ledger.start(**base)
        time.sleep(rng.uniform(1.0, 2.5))
        first.send_signal(signal.SIGCONT)
        first_result, second_result = ledger.finish(first, started), ledger.finish(second, started)
        first_result.takeover = True  # type: ignore[attr-defined]
        return [first_result, second_result]
    # 429 storm: every stamp throttled past the drain's limits (1 retry), after the publish or commit.
    env.rules(stamp_rule(ledger, status=429, retry_after_ms=25, substatus=3200, count=400))
    try:
        return [ledger.drain(max_throttle_retries=1, max_throttle_wait_seconds=1.0, **base)]
    finally:
        env.rules()


def broker_restart(ledger: Ledger, broker: KafkaBroker, base: dict[str, Any], notes: list[str]) -> RunResult:
    """Stop the broker once a drain has stamped a page, start it again once that drain has ended (at most
    ``OUTAGE_LIMIT_S`` later: a drain still blocked then is reported as such and finishes after the restart)."""
    ledger.add(PAGE * 6)  # enough work that the drain is still publishing when the broker goes
    started = time.monotonic()
    before = delivered(ledger)
    process = ledger.start(**base)
    await_progress(ledger, process, before)
    pending = ledger.pending()
    broker.stop()
    stopped = time.monotonic()
    deadline = stopped + OUTAGE_LIMIT_S
    while process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    ended_in_outage = process.poll() is not None
    outage = time.monotonic() - stopped
    broker.start()
    result = ledger.finish(process, started)
    ending = (result.errors() or ["no error"])[0].split(":")[0] if not result.hung else "hung"
    notes.append(
        f"broker stopped with {pending} pending for {outage:.0f} s; the drain in flight "
        f"{'ended in the outage' if ended_in_outage else 'was still blocked when the broker came back'} ({ending})"
    )
    return result


def run_guarantee(
    env: Services,
    guarantee: str,
    kills: int,
    n: int,
    rng: random.Random,
    checkpoints: str,
    bootstrap: str,
    broker: KafkaBroker | None,
    refill: tuple[int, int],
) -> dict[str, Any]:
    """One guarantee's run; ``refill``: (fewer pending than this before a fault, so many are written)."""
    ledger = Ledger(env, f"kl-{guarantee.split('_')[0]}", n, bootstrap=bootstrap)
    base = {
        "guarantee": guarantee,
        "checkpoint_topic": checkpoints,
        "max_batch_size": PAGE,
        "lease_duration_seconds": LEASE_SECONDS,
    }
    # Planned by the faults done (the run's progress): the split with a commit-kill, the restart as a slot of its own.
    split_at = min(kills - 1, len(KINDS) * round(kills * SPLIT_AT / len(KINDS)))
    restart_at = int(kills * RESTART_AT) if broker is not None else -1
    made: Counter[str] = Counter()
    results: list[RunResult] = []
    notes: list[str] = []
    try:
        env.admin("POST", "config", {"latency_ms": LATENCY_MS})
        try:
            for k in range(kills):
                if ledger.pending() < refill[0]:
                    ledger.add(refill[1])  # the writer keeps the ledger growing, so that a kill lands mid-drain
                if k == restart_at and broker is not None:
                    results.append(broker_restart(ledger, broker, base, notes))
                    made["broker restart"] += 1
                    time.sleep(LEASE_SECONDS + 0.2)
                kind = KINDS[k % len(KINDS)]
                results.extend(one_fault(ledger, env, kind, base, rng, notes, split=k == split_at))
                made[kind] += 1
                made["split"] += k == split_at
                print(f"({guarantee}: fault {k + 1} of {kills}, {kind}, done)", file=sys.stderr, flush=True)
                time.sleep(LEASE_SECONDS + 0.2)  # a killed drain's lease lapses before the next one starts
        finally:
            env.admin("POST", "config", {"latency_ms": 0})
        runs = ledger.drain_to_end(offset_step=61.0, **base)
        summaries = [summary for result in [*results, *runs] for summary in result.summaries]
        counts = committed_counts(ledger)
        lost = sum(1 for i in ledger.ids if counts.get(i, 0) == 0)
        duplicates = sum(max(0, counts.get(i, 0) - 1) for i in ledger.ids)
        statuses = ledger.statuses()
        return {
            "guarantee": guarantee,
            "faults": sum(made.values()),
            "by kind": dict(made),
            "documents": len(ledger.ids),
            "lost": lost,
            "duplicates": duplicates,
            "max copies": max((counts.get(i, 0) for i in ledger.ids), default=0),
            "delivered": statuses.get("delivered", 0) == len(ledger.ids),
            "stuck": stuck_leases(ledger),
            "runs to finish": len(runs),
            "killed": sum(1 for r in results if r.killed),
            "recovered": sum(int(s.get("recovered_pages", 0)) for s in summaries),
            "fenced": sum(1 for s in summaries if s.get("fenced")),
            "confirmation failures": sum(int(s.get("confirmation_failures", 0)) for s in summaries),
            "taken over": Counter(
                (r.errors() or ["finished without error"])[0].split(":")[0]
                for r in results
                if getattr(r, "takeover", False)
            ),
            "refused": sum(1 for r in [*results, *runs] for e in r.errors() if "cannot be kept" in e),
            "notes": notes,
            "leases": len([lease for lease in ledger.lease_documents() if "feed_range" in lease]),
        }
    finally:
        ledger.close()


@contextmanager
def ledger_broker(env: Services, restart: bool) -> Iterator[tuple[str, KafkaBroker | None]]:
    """(bootstrap servers, the broker to restart): a broker of the ledger's own for a run with the restart, else the
    shared project broker and none."""
    if not restart:
        yield env.bootstrap, None
        return
    broker = KafkaBroker(PROJECT_KAFKA_PORT + OWN_BROKER_OFFSET, keep_data=True)
    try:
        yield broker.start(), broker
    finally:
        broker.keep_data = False
        broker.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=52, help="faults per guarantee (taken in turn)")
    parser.add_argument("--n", type=int, default=600, help="documents seeded at the start (more are written)")
    parser.add_argument("--short", action="store_true", help="8 faults and 200 documents per guarantee")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    # Pending documents kept before each fault: six pages in the full run, so that a random kill lands mid-drain;
    # fewer in --short, whose duration is the suite's.
    refill = (PAGE * 6, PAGE * 6)
    if args.short:
        args.kills, args.n, refill = 8, 200, (PAGE * 2, PAGE * 4)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    print(f"machine: {machine()}")
    print(f"command: {' '.join(['python -m tests.reliability.kill_ledger', *(argv or sys.argv[1:])])}")
    rng = random.Random(args.seed)
    rows = []
    started = time.monotonic()
    with services() as env, ledger_broker(env, restart=not args.short) as (bootstrap, broker):
        checkpoints = f"chatter-faults.checkpoints.{uuid.uuid4().hex[:8]}"
        ensure_topics(KafkaSettings(bootstrap_servers=bootstrap), [checkpoints], configs=CHECKPOINT_TOPIC_CONFIGS)
        for guarantee in ("exactly_once", "at_least_once"):
            rows.append(run_guarantee(env, guarantee, args.kills, args.n, rng, checkpoints, bootstrap, broker, refill))
    print(f"wall time: {time.monotonic() - started:.0f} s; load average at the end: {os.getloadavg()}")
    print(
        "| guarantee | faults | documents | lost | duplicates seen by read_committed | max copies | delivered "
        "| leases stuck | processes killed | pages recovered | drains fenced | Confirmation Failures | verdict |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    ok = True
    for row in rows:
        good = row["lost"] == 0 and row["delivered"] and row["stuck"] == 0
        if row["guarantee"] == "exactly_once":
            good = good and row["duplicates"] == 0 and row["refused"] == 0
        ok = ok and good
        print(
            f"| {row['guarantee']} | {row['faults']} ({', '.join(f'{v} {k}' for k, v in row['by kind'].items())}) | "
            f"{row['documents']} | {row['lost']} | {row['duplicates']} | {row['max copies']} | "
            f"{'all' if row['delivered'] else 'NOT ALL'} | {row['stuck']} | {row['killed']} | {row['recovered']} | "
            f"{row['fenced']} | {row['confirmation failures']} | {'PASS' if good else 'FAIL'} |"
        )
    for row in rows:
        print(f"{row['guarantee']}: the drains taken over ended with {dict(row['taken over'])}")
        print(f"{row['guarantee']}: drains refused as if Kafka could not run transactions: {row['refused']}")
        for note in row["notes"]:
            print(f"{row['guarantee']}: {note}")
        print(f"{row['guarantee']}: {row['leases']} leases at the end, {row['runs to finish']} runs to finish")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

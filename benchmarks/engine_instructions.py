"""Issue 12's (e) in CPU instructions per document: a figure this machine's noise cannot move.

    .venv/bin/python benchmarks/engine_instructions.py [--small 2000] [--large 12000]

A script that prints ratios; not a test. Needs ``valgrind`` (Debian package). Wall-clock ratios of two CPU-bound
loops on a shared 2-vCPU machine swing by ±10 % from round to round (engine_overhead.py prints its rounds), more
than a change of the engine's per-document work moves them. Instructions do not: each side runs under cachegrind at
two sizes, and (instructions at the large size − at the small) ÷ (large − small) is its cost per document, start-up,
imports and the rest of the set-up cancelled out; with a fixed hash seed, two runs agree to within 0.1 %. Every
thread of the process is counted; time spent waiting (for the GIL) is not.

Sides, each in its own process:

* ``stub alone``: building the N documents of drain_throughput.py's ``PrebuiltSource`` (1 KB bodies, 64 keys) and
  nothing else: the stub's own work, which (e) is to leave out ("a container stub that does no work");
* ``bare relay``: drain_throughput's ``batched_bare_relay`` over that stub;
* ``drain, neither thread``: ``DrainEngine`` with no read-ahead and ``stamp_concurrency`` 1;
* ``drain``: as shipped (read-ahead, 8 stamp lanes).

Every side publishes to drain_throughput's ``NoWorkPublisher``, which confirms every message at once. Through
the real broker, kafka-python's sender thread wakes, polls and batches by the clock, so its instructions per
document depend on how the threads interleave (under valgrind, which runs one thread at a time, they moved by
10 % from run to run, a drain with more threads counting fewer): engine_overhead.py measures that in time.

Printed: each side's instructions per document, the engine's own work (drain − bare relay), and drain ÷ bare relay
as a rate ratio, against a stub that does no work ((bare − stub) ÷ (drain − stub)) and against one that builds
each page as it is read (bare ÷ drain: what ``SyntheticSource`` charges both sides).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import drain_throughput as base  # noqa: E402

from airflow_chatter.drain.engine import DrainEngine  # noqa: E402
from airflow_chatter.drain.options import SourceOptions  # noqa: E402

STUB, BARE, NEITHER, SHIPPED = "stub alone", "bare relay", "drain, neither thread", "drain"
#: Drain sides: (read-ahead, stamp_concurrency).
DRAINS = {NEITHER: (False, 1), SHIPPED: (True, 8)}


def run_side(side: str, n: int) -> None:
    stub, publisher = base.PrebuiltSource(n, "no-work"), base.NoWorkPublisher()
    if side == BARE:
        assert base.batched_bare_relay(stub, publisher, n) > 0
    elif side in DRAINS:
        read_ahead, concurrency = DRAINS[side]
        name = f"instr-{uuid.uuid4().hex[:6]}"
        options = SourceOptions(name, ("/tenantId",), max_batch_size=base.BATCH, stamp_concurrency=concurrency)
        with DrainEngine(options, stub, base.lease_container(), publisher, owner="bench") as engine:
            engine._feed.read_ahead = read_ahead
            engine.ensure_leases()
            delivered = sum(s.delivered for s in engine.drain_all())
        assert delivered == n, delivered


def instructions(side: str, n: int) -> int:
    command = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    command += [sys.executable, __file__, "--child", side, str(n)]
    # A fixed hash seed: with a random one, dict and set layouts differ per process and the counts by ~2 %.
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    result = subprocess.run(command, capture_output=True, text=True, check=False, cwd=REPO, env=env)
    found = re.search(r"I\s+refs:\s+([\d,]+)", result.stderr)
    if result.returncode != 0 or found is None:
        raise SystemExit(f"{side} n={n} under valgrind failed:\n{result.stdout}\n{result.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def measure(small: int, large: int) -> dict[str, float]:
    per_doc: dict[str, float] = {}
    for side in (STUB, BARE, *DRAINS):
        low, high = instructions(side, small), instructions(side, large)
        per_doc[side] = (high - low) / (large - small)
        print(f"{side:<22} {per_doc[side]:10,.0f} instructions per document ({small:,} → {large:,})", flush=True)
    return per_doc


def report(per_doc: dict[str, float]) -> list[str]:
    stub, bare = per_doc[STUB], per_doc[BARE]
    lines = [
        f"the engine's own work (drain, neither thread − bare relay): {per_doc[NEITHER] - bare:,.0f} instructions per"
        f" document; its threads: {per_doc[SHIPPED] - per_doc[NEITHER]:+,.0f}"
    ]
    for side in DRAINS:
        no_work, building = (bare - stub) / (per_doc[side] - stub), bare / per_doc[side]
        lines.append(
            f"{side} ÷ bare relay, in instructions (no Kafka): against a stub that does no work {no_work:.3f};"
            f" against one that builds its pages {building:.3f}"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=2000)
    parser.add_argument("--large", type=int, default=12000)
    parser.add_argument("--child", nargs=2, metavar=("SIDE", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        side, n = args.child
        run_side(side, int(n))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    for line in report(measure(args.small, args.large)):
        print(line)


if __name__ == "__main__":
    main()

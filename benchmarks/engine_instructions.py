"""The engine's own work per document, in CPU instructions: a figure this machine's noise cannot move.

    .venv/bin/python benchmarks/engine_instructions.py [--small 2000] [--large 12000]

A script that prints a ratio; not a test. Needs ``valgrind`` (Debian package). Wall-clock ratios of two CPU-bound
loops on a shared 2-vCPU machine swing by ±10 % from round to round (engine_overhead.py prints its rounds), more
than a change of the engine's per-document work moves them. Instructions do not: each side runs under cachegrind at
two sizes, and (instructions at the large size − at the small) ÷ (large − small) is its cost per document, start-up
and imports cancelled out. Both sides read the no-work container stub of drain_throughput.py and publish to a
publisher that does no work; the drain runs with neither of its threads (no read-ahead, ``stamp_concurrency`` 1),
whose cost is a matter of the GIL and the clock, not of instructions (engine_overhead.py measures that).
"""

from __future__ import annotations

import argparse
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

SIDES = ("bare relay", "drain")


def run_drain(n: int) -> None:
    stub = base.SyntheticSource(n, "no-work")
    options = SourceOptions(
        f"instr-{uuid.uuid4().hex[:6]}", ("/tenantId",), max_batch_size=base.BATCH, stamp_concurrency=1
    )
    with DrainEngine(options, stub, base.lease_container(), base.NoWorkPublisher(), owner="bench") as engine:
        engine._feed.read_ahead = False
        engine.ensure_leases()
        delivered = sum(s.delivered for s in engine.drain_all())
    assert delivered == n, delivered


def run_bare(n: int) -> None:
    rate = base.batched_bare_relay(base.SyntheticSource(n, "no-work"), base.NoWorkPublisher(), n)
    assert rate > 0


def instructions(side: str, n: int) -> int:
    result = subprocess.run(
        [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=no",
            "--cachegrind-out-file=/dev/null",
            sys.executable,
            __file__,
            "--child",
            side,
            str(n),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )
    found = re.search(r"I\s+refs:\s+([\d,]+)", result.stderr)
    if result.returncode != 0 or found is None:
        raise SystemExit(f"{side} n={n} under valgrind failed:\n{result.stdout}\n{result.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=2000)
    parser.add_argument("--large", type=int, default=12000)
    parser.add_argument("--child", nargs=2, metavar=("SIDE", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        side, n = args.child
        (run_bare if side == "bare relay" else run_drain)(int(n))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    per_doc: dict[str, float] = {}
    for side in SIDES:
        small, large = instructions(side, args.small), instructions(side, args.large)
        per_doc[side] = (large - small) / (args.large - args.small)
        print(f"{side:<11} {per_doc[side]:10,.0f} instructions per document ({args.small:,} → {args.large:,})")
    bare, drain = per_doc["bare relay"], per_doc["drain"]
    print(f"the engine's own work: {drain - bare:,.0f} instructions per document")
    print(f"bare relay ÷ drain, instructions per document (no threads, no Kafka) = {bare / drain:.3f}")


if __name__ == "__main__":
    main()

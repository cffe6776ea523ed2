"""The drain benchmark stays runnable: a tiny run against the session's broker prints every figure it promises.

Not a timed test: nothing here compares rates with targets. It fails when the script breaks (an engine or
adapter change it was not updated for), which a performance claim in docs/benchmarks.md would otherwise hide.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def test_benchmark_script_runs_and_prints_every_ratio(kafka_bootstrap: str) -> None:
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "drain_throughput.py"),
            *("--n", "300", "--naive-n", "20", "--rounds", "1", "--rss", "200,400", "--emulator-n", "0"),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=REPO,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert re.search(
        r"round 1: drain\(memory\) +[\d,]+ .*raw +[\d,]+ .*bare relay +[\d,]+ .*naive +[\d,]+ msg/s", out
    ), out
    for label in (
        "(a) drain ÷ raw produce",
        "publisher alone ÷ raw",
        "bare relay ÷ raw",
        "drain ÷ bare relay",
        "(b) drain ÷ naive loop",
        "(c) peak RSS 400 ÷ 200",
    ):
        assert re.search(re.escape(label) + r" += +\d+\.\d\d", out), (label, out)
    assert "emulator: skipped" in out


def test_receiver_benchmark_runs_and_prints_its_ratio(kafka_bootstrap: str, cosmos_endpoint: Any) -> None:
    """benchmarks/receiver_throughput.py stays runnable against the real broker and the emulator (not timed)."""
    verify = cosmos_endpoint.verify
    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "COSMOS_ENDPOINT": cosmos_endpoint.url,
        "COSMOS_KEY": cosmos_endpoint.key,
        "COSMOS_VERIFY": verify if isinstance(verify, str) else str(verify).lower(),
    }
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "receiver_throughput.py"), "--n", "20", "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=REPO,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert re.search(r"round 1: receiver +[\d,]+ msg/s +no inbox +[\d,]+ msg/s +ratio \d+\.\d\d", out), out
    assert re.search(r"receiver ÷ no inbox += \d+\.\d\d", out), out

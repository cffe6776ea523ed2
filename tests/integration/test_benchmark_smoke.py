"""The drain benchmark stays runnable: a tiny run against the session's broker prints every figure it promises.

Not a timed test: nothing here compares rates with targets. It fails when the script breaks (an engine or
adapter change it was not updated for), which a performance claim in docs/benchmarks.md would otherwise hide.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

import pytest

from tests.fixtures.modules import run_module


def run_benchmark(name: str, *args: str, env: Mapping[str, str] | None = None, timeout: int = 240) -> str:
    """Run ``benchmarks/<name>.py`` with ``args`` as a user would; its standard output, once it exited 0."""
    result = run_module(f"benchmarks.{name}", *args, env=env, timeout=timeout)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def services_env(kafka_bootstrap: str, cosmos_endpoint: Any | None = None) -> dict[str, str]:
    """This environment, pointed at the session's broker (and its Cosmos endpoint, when given)."""
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
    if cosmos_endpoint is not None:
        verify = cosmos_endpoint.verify
        env["COSMOS_ENDPOINT"] = cosmos_endpoint.url
        env["COSMOS_KEY"] = cosmos_endpoint.key
        env["COSMOS_VERIFY"] = verify if isinstance(verify, str) else str(verify).lower()
    return env


def test_benchmark_script_runs_and_prints_every_ratio(kafka_bootstrap: str) -> None:
    out = run_benchmark(
        "drain_throughput",
        *("--n", "300", "--naive-n", "20", "--rounds", "1", "--rss", "200,400", "--emulator-n", "0"),
        env=services_env(kafka_bootstrap),
    )
    assert re.search(r"round 1: drain\(stub\) +[\d,]+ .*raw +[\d,]+ .*bare relay +[\d,]+ .*naive +[\d,]+ msg/s", out), (
        out
    )
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


def test_stamp_benchmark_runs_and_prints_every_ratio(kafka_bootstrap: str, cosmos_endpoint: Any) -> None:
    if not cosmos_endpoint.is_emulator:
        pytest.skip("the stamp benchmark drives the project emulator's switches")
    out = run_benchmark(
        "stamp_throughput",
        *("--n", "40", "--ceiling-n", "60", "--rounds", "2"),
        *("--rss", "200,400"),
        env=services_env(kafka_bootstrap, cosmos_endpoint),
        timeout=600,
    )
    assert re.search(r"machine: nproc=\d+ cpu=", out), out
    # Both interleaved rounds ran, each with its own sequential and batched figures, and the (d) pair on its own N.
    assert re.search(r"round 2 drain 64 keys, 0 ms .* batched", out), out
    assert re.search(r"round 2 N=60, 5 ms: batched drain .* store ceiling", out), out
    for label in (
        "(a) batched ÷ sequential, 64 keys, 0 ms",
        "(b) batched ÷ sequential, 64 keys, 5 ms",
        "(c) batched ÷ sequential, own keys, 5 ms",
        "(c) batched own keys ÷ emulator point patches, 5 ms",
        "(d) drain ÷ store ceiling, 64 keys, 5 ms, N=60",
        "(f) paced RU/s ÷ cap",
        "(g) provisioned below the rate: delivered ÷ N",
        "(h) peak RSS 400 ÷ 200",
    ):
        assert re.search(re.escape(label) + r" += +\d+\.\d\d", out), (label, out)
    assert re.search(r"\(g\) .*= +1\.00 .*429s=\d+", out), "nothing lost under 429s"
    assert "0 ms, N=" not in out, "(d) is measured against a store with a round trip only"


def test_stamp_benchmark_measures_only_the_parts_it_is_asked_for(kafka_bootstrap: str, cosmos_endpoint: Any) -> None:
    """``--parts d``: the store-bound ratio alone, the one an optimisation must move (D-07)."""
    if not cosmos_endpoint.is_emulator:
        pytest.skip("the stamp benchmark drives the project emulator's switches")
    out = run_benchmark(
        "stamp_throughput",
        *("--ceiling-n", "60", "--rounds", "1", "--parts", "d"),
        env=services_env(kafka_bootstrap, cosmos_endpoint),
    )
    assert re.search(r"\(d\) drain ÷ store ceiling, 64 keys, 5 ms, N=60 += +\d+\.\d\d", out), out
    assert not re.search(r"\((a|b|c|f|g|h)\) ", out), out


def test_receiver_benchmark_runs_and_prints_its_ratio(kafka_bootstrap: str, cosmos_endpoint: Any) -> None:
    """benchmarks/receiver_throughput.py stays runnable against the real broker and the emulator (not timed)."""
    out = run_benchmark(
        "receiver_throughput", "--n", "20", "--rounds", "1", env=services_env(kafka_bootstrap, cosmos_endpoint)
    )
    assert re.search(r"round 1: receiver +[\d,]+ msg/s +no inbox +[\d,]+ msg/s +ratio \d+\.\d\d", out), out
    assert re.search(r"receiver ÷ no inbox += \d+\.\d\d", out), out


def test_follow_benchmark_runs_and_prints_every_figure(kafka_bootstrap: str, cosmos_endpoint: Any) -> None:
    """benchmarks/follow_latency.py stays runnable (not timed: no figure is compared with its target here)."""
    if not cosmos_endpoint.is_emulator:
        pytest.skip("the follow benchmark drives the project emulator's latency switch")
    out = run_benchmark(
        "follow_latency",
        *("--writes", "20", "--idle-seconds", "2"),
        env=services_env(kafka_bootstrap, cosmos_endpoint),
    )
    for label in ("(a) follow, no added latency", "(b) follow, 5 ms per request"):
        assert re.search(rf"{re.escape(label)} +writes=20 .*p50=[\d.]+ s +p99=[\d.]+ s", out), out
    assert re.search(r"RU per idle hour ≈ [\d,]+", out), out


def test_yield_benchmark_runs_and_prints_every_ratio_for_both_priorities(
    kafka_bootstrap: str, cosmos_endpoint: Any
) -> None:
    if not cosmos_endpoint.is_emulator:
        pytest.skip("the yield benchmark drives the project emulator's switches")
    out = run_benchmark(
        "yield_to_business",
        *("--backlog", "200", "--seconds", "3", "--writes-per-second", "5"),
        env=services_env(kafka_bootstrap, cosmos_endpoint),
        timeout=300,
    )
    assert re.search(r"writer: 5 Units of Work/s at [\d.]+ RU each", out), out
    assert "drain process: in its own process" in out, out  # as an Airflow worker runs it, by default
    for phase in ("priority on", "priority off"):
        assert re.search(phase + r": writer \d+ commits, 429s \d+, .*drain delivered \d+", out), (phase, out)
    for label in (
        "writer attempts per commit with the drain ÷ alone",
        "writer p99 latency with the drain ÷ alone",
        "drain served RU/s ÷ what the writer leaves",
    ):
        assert re.search(re.escape(label) + r" += +\d+\.\d\d +\d+\.\d\d", out), (label, out)

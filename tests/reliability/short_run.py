"""Run a reliability script with ``--short`` and read its result table: what the pytest wrappers of the fault suite
and the kill ledger share, so that both judge a script's run the same way."""

from __future__ import annotations

import os
import subprocess

from tests.fixtures.modules import run_module


def run_short(module: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``python -m <module> --short`` from the repository root. The services' variables are left out, so the script
    starts (or reuses) the project broker and emulator itself, from KAFKA_PORT and COSMOS_EMULATOR_PORT."""
    env = {k: v for k, v in os.environ.items() if k not in ("KAFKA_BOOTSTRAP_SERVERS", "COSMOS_ENDPOINT")}
    return run_module(module, "--short", env=env, timeout=timeout)


def table_rows(out: str, header: str) -> list[list[str]]:
    """The cells of every Markdown table row in ``out`` except the header row, whose first cell is ``header``."""
    return [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in out.splitlines()
        if line.startswith("| ") and not line.startswith(f"| {header} ")
    ]

"""The fault-injection suite, short version: every scenario of tests/reliability/fault_suite.py against the real
broker and the emulator, with separate drain processes, and every verdict PASS with nothing lost (docs/reliability.md).

The script is the judge (it checks the ledger against the topic and the documents' final states); this test runs
it with ``--short`` and reads its table, so a scenario that loses a message, or one that breaks, fails here.
"""

from __future__ import annotations

import pytest

from tests.fixtures.cosmos import CosmosEndpoint
from tests.reliability.short_run import run_short, table_rows

#: One row per entry of the script's SCENARIOS: its eight scenarios, with scenario 5 as two rows (429s and 503s).
ROWS = 9


#: Seconds the script is given; the test gets a minute more, as pytest's default per-test timeout (300 s) would cut
#: it short on a loaded machine, where the script runs longer but passes.
SCRIPT_TIMEOUT_S = 900
pytestmark = pytest.mark.timeout(SCRIPT_TIMEOUT_S + 60)


def test_every_fault_scenario_passes_with_nothing_lost(kafka_bootstrap: str, cosmos_endpoint: CosmosEndpoint) -> None:
    assert cosmos_endpoint.is_emulator, "the suite drives the project emulator's switches and its certificate"
    result = run_short("tests.reliability.fault_suite", timeout=SCRIPT_TIMEOUT_S)
    out = result.stdout
    rows = table_rows(out, "fault")
    assert rows, out + result.stderr[-3000:]
    for cells in rows:
        fault, lost, verdict = cells[0], cells[3], cells[-1]
        assert verdict == "PASS", f"{fault}: {cells}\n{out}"
        assert lost == "0", f"{fault} lost messages: {cells}"
    assert len(rows) == ROWS, out
    assert result.returncode == 0, out + result.stderr[-3000:]

"""The kill ledger, short version: exactly once beside at least once under commit-kills, random SIGKILLs, takeovers,
429 storms on the stamps and a split of the partition key range mid-run, against the real broker and the emulator
(tests/reliability/kill_ledger.py; the broker restart is in its full run only).

The script is the judge; this test runs it with ``--short`` and reads its table: the exactly-once row must show
nothing lost, no duplicate seen by a read_committed consumer, every document delivered and no lease stuck, with its
faults having done what they are there for (processes killed, committed pages recovered, the range split); the
at-least-once row must lose nothing.
"""

from __future__ import annotations

import pytest

from tests.fixtures.cosmos import CosmosEndpoint
from tests.reliability.short_run import run_short, table_rows

#: Seconds the script is given; the test gets a minute more, as pytest's default per-test timeout (300 s) would cut
#: it short on a loaded machine, where the script runs longer but passes.
SCRIPT_TIMEOUT_S = 1500
pytestmark = pytest.mark.timeout(SCRIPT_TIMEOUT_S + 60)


def test_exactly_once_loses_nothing_and_duplicates_nothing_where_at_least_once_duplicates(
    kafka_bootstrap: str, cosmos_endpoint: CosmosEndpoint
) -> None:
    assert cosmos_endpoint.is_emulator, "the ledger drives the project emulator's switches and its certificate"
    result = run_short("tests.reliability.kill_ledger", timeout=SCRIPT_TIMEOUT_S)
    out = result.stdout
    rows = {cells[0]: cells for cells in table_rows(out, "guarantee")}
    assert set(rows) == {"exactly_once", "at_least_once"}, out + result.stderr[-3000:]
    exactly = rows["exactly_once"]
    lost, duplicates, delivered, stuck = exactly[3], exactly[4], exactly[6], exactly[7]
    killed, recovered = int(exactly[8]), int(exactly[9])
    assert (lost, duplicates, delivered, stuck) == ("0", "0", "all", "0"), f"exactly once: {exactly}\n{out}"
    assert killed > 0 and recovered > 0, f"the faults must have bitten: {exactly}\n{out}"
    assert "1 split" in exactly[1] and "split into" in out, f"the range was split mid-run: {exactly}\n{out}"
    assert rows["at_least_once"][3] == "0", f"at least once loses nothing either: {rows['at_least_once']}"
    assert result.returncode == 0, out + result.stderr[-3000:]

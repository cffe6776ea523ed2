"""The last Confirmation Failure's fault on the lease's suspension state (F-05): what the gate records, that it is
redacted and short (the Cosmos key never reaches the lease document, hence the UI), that old leases still load, and
that the monitoring view shows it from the lease without any run summary."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from airflow_chatter.drain.faults import MAX_MESSAGE, REDACTED, RecordedFault, redact
from airflow_chatter.drain.suspension import THRESHOLD, DrainGate, SuspensionState
from airflow_chatter.operations.monitoring import monitor_store, source_overview
from airflow_chatter.ports import ServiceUnavailable

from ._drain_support import T0, ManualClock, Metrics, Rig, fail_operation, outbox_doc

#: The emulator's published account key: the shape of every Cosmos DB key (88 base64 characters).
COSMOS_KEY = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="
SIGNATURE = "type%3dmaster%26ver%3d1.0%26sig%3dZm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4"


def _gate(clock: ManualClock) -> DrainGate:
    return DrainGate("chatter:source-p", clock=clock, telemetry=Metrics().telemetry())


def test_sus_a_counted_confirmation_failure_records_its_type_message_and_time() -> None:
    clock = ManualClock(T0)
    state = _gate(clock).confirmation_failed("0", SuspensionState(), ServiceUnavailable("stamp down\n  retry later"))
    assert state.consecutive_failures == 1 and not state.suspended
    assert state.last_fault == RecordedFault("ServiceUnavailable", "stamp down retry later", T0)


def test_sus_the_opening_and_each_re_arm_keep_the_newest_fault() -> None:
    clock = ManualClock(T0)
    gate = _gate(clock)
    state = SuspensionState()
    for n in range(THRESHOLD):
        clock.advance(1)
        state = gate.confirmation_failed("0", state, ServiceUnavailable(f"fault {n}"))
    assert state.suspended and state.last_fault is not None and state.last_fault.message == f"fault {THRESHOLD - 1}"
    clock.advance(61)
    rearmed = gate.confirmation_failed("0", state, TimeoutError("probe failed too"))
    assert rearmed.last_fault == RecordedFault("TimeoutError", "probe failed too", clock.now)


@pytest.mark.parametrize(
    "message",
    [
        f"Forbidden: the key {COSMOS_KEY} was refused",
        f"AccountEndpoint=https://acct.documents.azure.com:443/;AccountKey={COSMOS_KEY};",
        f"request failed; Authorization: {SIGNATURE}",
        f"password={COSMOS_KEY[:12]} token: abc123secret",
    ],
)
def test_sus_the_recorded_fault_never_carries_the_cosmos_key_or_a_credential(message: str) -> None:
    state = _gate(ManualClock(T0)).confirmation_failed("0", SuspensionState(), PermissionError(message))
    stored = json.dumps(state.to_document())
    for secret in (COSMOS_KEY, COSMOS_KEY[:12], SIGNATURE, "abc123secret"):
        assert secret not in stored
    assert REDACTED in stored and state.last_fault is not None and state.last_fault.error_type == "PermissionError"


def test_sus_a_long_fault_message_is_cut_to_the_bound() -> None:
    message = redact("x " * 500)
    assert len(message) == MAX_MESSAGE and message.endswith("…")
    assert redact("short one") == "short one"


def test_sus_a_lease_written_before_faults_were_recorded_still_loads_without_one() -> None:
    old = {"consecutive_failures": 5, "suspended": True, "armed_at": T0.isoformat(), "probe_consumed": False}
    state = SuspensionState.from_document(old)
    assert (state.consecutive_failures, state.suspended, state.last_fault) == (5, True, None)
    garbled = SuspensionState.from_document({**old, "last_fault": {"error_type": 3}})
    assert garbled.last_fault is None, "an unreadable diagnostic never makes the lease (and the drain) fail"


def test_sus_the_recorded_fault_round_trips_through_the_lease_document() -> None:
    fault = RecordedFault("ServiceUnavailable", "stamp down", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    state = SuspensionState(5, True, T0, False, fault)
    assert SuspensionState.from_document(json.loads(json.dumps(state.to_document()))) == state


def test_sus_the_overview_shows_the_last_fault_from_the_lease_without_any_run_summary() -> None:
    rig = Rig()
    rig.seed(outbox_doc("m1"))
    fail_operation(rig.monitored, "patch", ServiceUnavailable(f"stamp down (key {COSMOS_KEY})"))
    engine = rig.engine()
    for _ in range(THRESHOLD):
        rig.drain(engine)
    (raw,) = [d for d in rig.leases.query("SELECT * FROM c", None) if "suspension" in d]
    assert raw["suspension"]["last_fault"]["error_type"] == "ServiceUnavailable"
    assert COSMOS_KEY not in json.dumps(raw), "the lease document never holds the key"

    store = monitor_store(rig.source(), rig.monitored, rig.leases, clock=rig.clock)
    (suspension,) = source_overview("orders", "chatter_drain_orders", store, rig.monitored, []).suspensions

    assert suspension.last_fault is not None and suspension.last_fault.recorded_in == "lease"
    assert suspension.last_fault.error_type == "ServiceUnavailable"
    assert suspension.last_fault.error_message == f"stamp down (key {REDACTED})"
    assert suspension.last_fault.at == rig.clock.now.isoformat() and suspension.last_fault.run_id is None

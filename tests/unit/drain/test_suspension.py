"""The Drain Suspension gate on its own (SUS-01..16, F-05): state in, state out, clock injected."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from airflow_chatter.drain.suspension import (
    THRESHOLD,
    WINDOW,
    ConfirmationReceipt,
    DrainGate,
    SuspensionState,
)
from airflow_chatter.drain.telemetry import ATTR_LEASE_TOKEN, ATTR_SOURCE_IDENTITY, SUSPENSIONS

from ._drain_support import T0, ManualClock, Metrics

P = "chatter-cosmos-outbox-relay:source-p"
L = "0"


def _gate(clock: ManualClock, metrics: Metrics) -> DrainGate:
    return DrainGate(P, clock=clock, telemetry=metrics.telemetry())


def _receipt() -> ConfirmationReceipt:
    return ConfirmationReceipt.from_status_write({"id": "outbox:x", "status": "delivered", "_etag": "e1"}, "delivered")


def _fail(gate: DrainGate, state: SuspensionState, times: int) -> SuspensionState:
    for _ in range(times):
        state = gate.confirmation_failed(L, state, OSError("stamp fault"))
    return state


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


def test_sus_constants_are_fixed_safety_bounds() -> None:
    assert THRESHOLD == 5, "the contract fixes the threshold at 5; it is not a setting"
    assert WINDOW == timedelta(seconds=60), "the contract fixes the window at 60 s"


def test_sus_01_a_lease_never_seen_is_permitted(clock: ManualClock, metrics: Metrics) -> None:
    decision = _gate(clock, metrics).consult(SuspensionState())
    assert decision.permitted and not decision.probe, "no failures recorded means nothing to refuse"


def test_sus_02_four_failures_keep_draining(clock: ManualClock, metrics: Metrics) -> None:
    gate = _gate(clock, metrics)
    state = _fail(gate, SuspensionState(), THRESHOLD - 1)
    assert state.consecutive_failures == 4 and not state.suspended
    assert gate.consult(state).permitted, "below the threshold the 5th batch is still processed"


def test_sus_03_fifth_failure_opens_with_metric_and_error_log(
    clock: ManualClock, metrics: Metrics, caplog: pytest.LogCaptureFixture
) -> None:
    gate = _gate(clock, metrics)
    state = _fail(gate, SuspensionState(), THRESHOLD - 1)
    with caplog.at_level(logging.ERROR, logger="airflow_chatter.drain"):
        state = gate.confirmation_failed(L, state, OSError("patch refused"))
    assert state.suspended and state.armed_at == clock.now and state.consecutive_failures == 5
    assert metrics.counter(SUSPENSIONS, **{ATTR_SOURCE_IDENTITY.replace(".", "__"): P}) == 1
    point = metrics.points(SUSPENSIONS)[0]
    assert dict(point.attributes) == {ATTR_SOURCE_IDENTITY: P, ATTR_LEASE_TOKEN: L}, "exactly the two lease tags"
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    text = errors[0].getMessage()
    assert L in text and "5" in text and "patch refused" in text, "log names lease, count and the stamp fault"


def test_sus_04_refuses_while_inside_the_window(clock: ManualClock, metrics: Metrics) -> None:
    gate = _gate(clock, metrics)
    state = _fail(gate, SuspensionState(), THRESHOLD)
    clock.advance(59)
    decision = gate.consult(state)
    assert not decision.permitted and decision.state == state, "a refusal changes nothing"


def test_sus_05_single_probe_after_window(clock: ManualClock, metrics: Metrics) -> None:
    gate = _gate(clock, metrics)
    state = _fail(gate, SuspensionState(), THRESHOLD)
    clock.advance(60)
    probe = gate.consult(state)
    assert probe.permitted and probe.probe, "once 60 s elapsed exactly the next batch probes"
    assert probe.state.armed_at == clock.now and probe.state.probe_consumed, "the window re-arms at the probe"
    second = gate.consult(probe.state)
    assert not second.permitted, "a second batch consulting right after the probe is refused"


def test_sus_06_failure_while_suspended_rearms_without_reporting_again(
    clock: ManualClock, metrics: Metrics, caplog: pytest.LogCaptureFixture
) -> None:
    gate = _gate(clock, metrics)
    state = _fail(gate, SuspensionState(), THRESHOLD)
    clock.advance(60)
    state = gate.consult(state).state
    clock.advance(1)
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="airflow_chatter.drain"):
        state = gate.confirmation_failed(L, state, OSError("again"))
    assert state.consecutive_failures == 6 and state.armed_at == clock.now
    clock.advance(59)
    assert not gate.consult(state).permitted, "another full 60 s from the failed probe"
    assert metrics.counter(SUSPENSIONS) == 1, "a re-arm is not a new suspension"
    assert not caplog.records, "no second opening log"


def test_sus_08_receipt_lifts_and_logs_information_only_for_a_suspended_lease(
    clock: ManualClock, metrics: Metrics, caplog: pytest.LogCaptureFixture
) -> None:
    gate = _gate(clock, metrics)
    suspended = _fail(gate, SuspensionState(), THRESHOLD)
    with caplog.at_level(logging.INFO, logger="airflow_chatter.drain"):
        lifted = gate.present(L, suspended, _receipt())
        assert lifted == SuspensionState(), "the lease's state is evicted"
        infos = [r for r in caplog.records if r.levelno == logging.INFO]
        assert len(infos) == 1 and L in infos[0].getMessage() and infos[0].exc_info is None
        caplog.clear()
        gate.present(L, _fail(gate, SuspensionState(), 2), _receipt())
    assert not caplog.records, "a lease that was never suspended closes nothing and logs nothing"
    assert metrics.counter(SUSPENSIONS) == 1, "closing emits no metric"


def test_sus_10_a_receipt_restarts_the_count(clock: ManualClock, metrics: Metrics) -> None:
    gate = _gate(clock, metrics)
    state = _fail(gate, SuspensionState(), 4)
    state = gate.present(L, state, _receipt())
    state = _fail(gate, state, 4)
    assert not state.suspended and gate.consult(state).permitted, "consecutive means reset on success"


def test_sus_16_a_gate_requires_a_source_identity(clock: ManualClock, metrics: Metrics) -> None:
    for identity in ("", "   ", None):
        with pytest.raises(ValueError):
            DrainGate(identity, clock=clock, telemetry=metrics.telemetry())  # type: ignore[arg-type]


def test_sus_receipt_is_minted_only_from_a_landed_status_write() -> None:
    with pytest.raises(TypeError):
        ConfirmationReceipt()
    with pytest.raises(ValueError):
        ConfirmationReceipt.from_status_write({"id": "x", "status": "pending", "_etag": "e"}, "delivered")
    with pytest.raises(ValueError):
        ConfirmationReceipt.from_status_write({"id": "x", "status": "delivered"}, "delivered")
    receipt = ConfirmationReceipt.from_status_write(
        {"id": "x", "status": "undeliverable", "_etag": "e"}, "undeliverable"
    )
    assert receipt.status == "undeliverable" and receipt.item_id == "x"


def test_f05_state_round_trips_through_its_document_form(clock: ManualClock, metrics: Metrics) -> None:
    state = _fail(_gate(clock, metrics), SuspensionState(), THRESHOLD)
    assert SuspensionState.from_document(state.to_document()) == state
    assert SuspensionState.from_document(None) == SuspensionState()


@pytest.mark.parametrize(
    "stored",
    [
        [],
        {"consecutive_failures": -1},
        {"consecutive_failures": "3"},
        {"suspended": "yes"},
        {"suspended": True, "armed_at": None},
        {"armed_at": "yesterday"},
        {"armed_at": "2026-11-30T06:00:00"},
    ],
)
def test_f05_malformed_state_is_refused(stored: object) -> None:
    with pytest.raises(ValueError):
        SuspensionState.from_document(stored)

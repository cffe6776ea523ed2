"""F-11 priority-based execution: every request of the relay (feed reads, stamps, lease writes, pending checks)
carries low priority by default, ``request_priority: high`` on the source sends the drain's high, and the Unit of
Work's business writes carry none (the client's default, high). Observed as the Cosmos adapter would read it: the
thread's ``current_priority()`` while each request runs."""

from __future__ import annotations

from collections import Counter

import pytest

from airflow_chatter.adapters.memory.faults import OperationCall
from airflow_chatter.operations.pending import peek_pending
from airflow_chatter.outbox.document import OutboxMessage
from airflow_chatter.outbox.unit_of_work import UnitOfWork
from airflow_chatter.ports.request_priority import current_priority

from ._drain_support import Rig, outbox_doc


def _record(rig: Rig) -> Counter[tuple[str, str, str | None]]:
    """Count every request of both containers by (container, operation, priority)."""
    seen: Counter[tuple[str, str, str | None]] = Counter()
    for name, container in (("monitored", rig.monitored), ("leases", rig.leases)):

        def handler(call: OperationCall, name: str = name) -> None:
            if not call.applied:
                seen[(name, call.operation, current_priority())] += 1

        container.handler = handler
    return seen


@pytest.mark.parametrize(("option", "expected"), [({}, "low"), ({"request_priority": "high"}, "high")])
def test_f11_every_request_of_a_drain_carries_the_sources_priority_low_by_default(
    option: dict[str, str], expected: str
) -> None:
    rig = Rig()
    rig.seed(*(outbox_doc(f"m-{i}", f"t{i % 3}") for i in range(9)))
    engine = rig.engine(stamp_mode="batched", stamp_concurrency=3, **option)
    seen = _record(rig)
    rig.drain(engine).raise_for_error()
    operations = {operation for _, operation, _ in seen}
    assert {"read_change_feed", "execute_batch", "replace"} <= operations, "feed reads, stamps and lease writes"
    assert {priority for _, _, priority in seen} == {expected}, seen


@pytest.mark.parametrize(
    ("connection", "source", "expected"),
    [("high", None, "high"), ("high", "low", "low"), (None, None, "low"), ("low", "high", "high")],
)
def test_f11_the_cosmos_connections_priority_applies_where_the_source_sets_none(
    connection: str | None, source: str | None, expected: str
) -> None:
    """The connection's ``request_priority`` extra is the drain's priority unless the source sets its own; with
    neither, the relay's requests are low."""
    rig = Rig()
    rig.seed(*(outbox_doc(f"m-{i}", f"t{i % 3}") for i in range(6)))
    engine = rig.engine_with(connection_priority=connection, request_priority=source)
    seen = _record(rig)
    rig.drain(engine).raise_for_error()
    assert seen and {priority for _, _, priority in seen} == {expected}, seen


def test_f11_pending_checks_are_low_priority_and_the_unit_of_works_writes_carry_none() -> None:
    rig = Rig()
    engine = rig.engine()
    (lease,) = engine.ensure_leases()
    seen = _record(rig)
    with UnitOfWork(rig.monitored, "/tenantId", "t1") as unit:
        unit.create({"id": "order-1", "tenantId": "t1"})
        unit.add_message(OutboxMessage("m-1", "orders", '{"n":1}', "application/json", {}))
    assert seen == Counter({("monitored", "execute_batch", None): 1}), "the business write: no priority, so high"
    seen.clear()
    peek = peek_pending(rig.monitored, rig.leases, lease.id)
    assert peek.pending == 1
    assert {priority for _, _, priority in seen} == {"low"} and seen[("leases", "read", "low")] == 1, seen

"""Operations (``airflow_chatter.operations``): lease resets go through ``LeaseStore`` and its clock."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from airflow_chatter.drain.leases import LeaseHeldError, LeaseLostError, LeaseStore
from airflow_chatter.drain.topology import LeaseTopology
from airflow_chatter.operations.plans import reset_leases
from airflow_chatter.testing.clock import ManualClock
from tests.unit.drain._drain_support import memory_container

PROCESSOR = "chatter-cosmos-outbox-relay:abc"
#: Far from the wall clock on both sides: a reset that read the wall clock instead of the store's would get these
#: leases' liveness backwards.
FUTURE = datetime(2100, 1, 1, tzinfo=UTC)
PAST = datetime(2000, 1, 1, tzinfo=UTC)


def _store_with_one_lease(clock: ManualClock, owner: str = "backfill") -> tuple[LeaseStore, str]:
    monitored = memory_container(clock)
    store = LeaseStore(
        memory_container(clock, paths=("/id",), container_id="leases"),
        PROCESSOR,
        owner=owner,
        lease_prefix="backfill-",
        lease_duration_seconds=60,
        clock=clock,
    )
    (lease,) = LeaseTopology(store, monitored).ensure_leases()
    return store, lease.id


def test_reset_deletes_a_lease_whose_hold_expired_by_the_stores_clock_though_not_by_the_wall_clock() -> None:
    clock = ManualClock(FUTURE)
    store, lease_id = _store_with_one_lease(clock)
    store.acquire(lease_id)  # held until FUTURE + 60 s: still ahead of the wall clock
    clock.advance(120)
    assert reset_leases(store) == [lease_id]
    assert store.find(lease_id) is None


def test_reset_keeps_a_lease_live_by_the_stores_clock_though_expired_by_the_wall_clock(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock(PAST)
    store, lease_id = _store_with_one_lease(clock)
    store.acquire(lease_id)  # held until PAST + 60 s: long gone by the wall clock, live by the store's
    with caplog.at_level(logging.WARNING, logger="airflow_chatter.operations.plans"):
        assert reset_leases(store) == []
    assert store.find(lease_id) is not None
    assert f"Lease {lease_id} is live (owner backfill); not reset" in caplog.text


def test_reset_deletes_a_lease_nobody_holds_and_the_next_listing_starts_it_afresh() -> None:
    clock = ManualClock(PAST)
    store, lease_id = _store_with_one_lease(clock)
    store.checkpoint(store.acquire(lease_id), "somewhere")
    store.release(store.get(lease_id))
    assert reset_leases(store) == [lease_id]
    monitored_again = memory_container(clock)
    (fresh,) = LeaseTopology(store, monitored_again).ensure_leases()
    assert fresh.id == lease_id and fresh.continuation is None, "recreated at the beginning, not 'somewhere'"


def test_lease_store_delete_refuses_a_live_lease_naming_its_owner() -> None:
    clock = ManualClock(PAST)
    store, lease_id = _store_with_one_lease(clock, owner="scheduled-worker")
    held = store.acquire(lease_id)
    with pytest.raises(LeaseHeldError, match=f"Lease '{lease_id}' is held by 'scheduled-worker'"):
        store.delete(held)
    assert store.find(lease_id) is not None


def test_lease_store_delete_keeps_a_lease_that_changed_since_it_was_read() -> None:
    clock = ManualClock(PAST)
    store, lease_id = _store_with_one_lease(clock)
    stale = store.get(lease_id)
    store.release(store.checkpoint(store.acquire(lease_id), "moved-on"))  # a drain ran meanwhile
    clock.advance(120)
    with pytest.raises(LeaseLostError, match=f"Lease '{lease_id}' was taken over by another drain before deleting it"):
        store.delete(stale)
    assert store.get(lease_id).continuation == "moved-on"


def test_requeue_reports_a_document_deleted_since_it_was_read_and_still_requeues_the_others() -> None:
    from airflow_chatter.operations.requeue import requeue_undeliverable

    clock = ManualClock(PAST)
    container = memory_container(clock)
    stored = [
        container.create({"id": f"outbox:{n}", "tenantId": "t", "status": "undeliverable"}, "t")
        for n in ("a", "b", "c")
    ]
    container.delete("outbox:b", "t")  # deleted between the selection and the requeue

    result = requeue_undeliverable(container, ("/tenantId",), stored, requested=["outbox:a", "outbox:b", "outbox:c"])

    assert result.requeued == ("outbox:a", "outbox:c")
    assert result.not_found == ("outbox:b",) and result.changed_meanwhile == ()
    assert [container.read(i, "t")["status"] for i in ("outbox:a", "outbox:c")] == ["pending", "pending"]

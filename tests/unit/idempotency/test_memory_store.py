"""The conformance suite against ``MemoryIdempotencyStore``, plus what only the in-memory store shows."""

from __future__ import annotations

from airflow_chatter.adapters.memory import MemoryIdempotencyStore
from airflow_chatter.clock import Clock
from airflow_chatter.idempotency import Reserved, StoredResponse
from airflow_chatter.ports import IdempotencyStore
from airflow_chatter.ports.idempotency import IdempotencyOptions
from airflow_chatter.testing.clock import ManualClock
from airflow_chatter.testing.contracts.idempotency import IdempotencyStoreContract


class TestMemoryIdempotencyStore(IdempotencyStoreContract):
    def make_store(self, clock: Clock) -> IdempotencyStore:
        return MemoryIdempotencyStore(self.options, clock=clock)


def test_expired_completed_entries_are_swept_so_a_long_lived_process_does_not_grow_forever() -> None:
    clock = ManualClock()
    store = MemoryIdempotencyStore(IdempotencyOptions(), clock=clock)
    for i in range(10):
        outcome = store.reserve("s", f"done-{i}", "fp")
        assert isinstance(outcome, Reserved)
        store.complete("s", f"done-{i}", outcome.reservation_id, StoredResponse(200, {}, b"", "fp"))
    clock.advance(store.options.ttl.total_seconds() + 1)
    for i in range(1024):
        store.reserve("s", f"fresh-{i}", "fp")
    assert len(store) == 1024, "the ten expired responses were dropped, the fresh reservations kept"

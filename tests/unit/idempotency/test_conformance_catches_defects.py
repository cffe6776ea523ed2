"""The meta-test: the conformance suite fails deliberately defective stores, each by a named rule.

Each defective store is the in-memory store with one protection removed. Its race windows are widened with a short
sleep, as a slow network widens them in production, so the suite catches the defect on every run. Each test also
runs the same rule against the correct store, so a rule that could never fail would show here.
"""

from __future__ import annotations

import time

import pytest

from airflow_chatter.adapters.memory import MemoryIdempotencyStore
from airflow_chatter.clock import Clock
from airflow_chatter.idempotency import Reserved, StoredResponse
from airflow_chatter.idempotency.decision import Entry, Takeover, decide
from airflow_chatter.ports import IdempotencyStore
from airflow_chatter.ports.idempotency import ReservationOutcome
from airflow_chatter.testing.contracts.idempotency import RULE_TESTS, IdempotencyStoreContract, run_rule

#: A read-to-write gap a network round trip easily has.
_WINDOW_SECONDS = 0.05


class ReadThenWriteStore(MemoryIdempotencyStore):
    """Reserves by a read, then a separate write: every concurrent caller sees the key free."""

    def reserve(self, scope: str, key: str, fingerprint: str) -> ReservationOutcome:
        with self._lock:
            existing = self._entries.get((scope, key))
            now = self._clock()
        if existing is not None:
            decision = decide(existing, fingerprint, now, self.options)
            if not isinstance(decision, Takeover):
                return decision
        time.sleep(_WINDOW_SECONDS)
        reservation_id = self._reservation_ids()
        with self._lock:
            self._entries[(scope, key)] = Entry(fingerprint, now, reservation_id=reservation_id)
        return Reserved(reservation_id)


class TrustsTheTtlSweepStore(MemoryIdempotencyStore):
    """Never re-checks a completed entry's age: it relies on a background sweep (which has not run) to remove it."""

    def reserve(self, scope: str, key: str, fingerprint: str) -> ReservationOutcome:
        with self._lock:
            existing = self._entries.get((scope, key))
            if existing is not None and existing.response is not None:
                timeless = Entry(
                    existing.fingerprint, existing.reserved_at, completed_at=self._clock(), response=existing.response
                )
                decision = decide(timeless, fingerprint, self._clock(), self.options)
                assert not isinstance(decision, Takeover)
                return decision
        return super().reserve(scope, key, fingerprint)


class CompletesWithoutTheETagStore(MemoryIdempotencyStore):
    """Checks ownership by a read, then writes the response unconditionally (no ETag / compare-and-set)."""

    def complete(self, scope: str, key: str, reservation_id: str, response: StoredResponse) -> None:
        with self._lock:
            existing = self._entries.get((scope, key))
        if existing is None or existing.completed or existing.reservation_id != reservation_id:
            return
        time.sleep(_WINDOW_SECONDS)
        with self._lock:
            self._entries[(scope, key)] = Entry(
                existing.fingerprint, existing.reserved_at, completed_at=self._clock(), response=response
            )


def _suite(store_class: type[MemoryIdempotencyStore]) -> IdempotencyStoreContract:
    class Suite(IdempotencyStoreContract):
        def make_store(self, clock: Clock) -> IdempotencyStore:
            return store_class(self.options, clock=clock)

    return Suite()


@pytest.mark.parametrize(
    ("defective", "test_name"),
    [
        (ReadThenWriteStore, RULE_TESTS["IDM-16"]),
        (TrustsTheTtlSweepStore, RULE_TESTS["IDM-09"]),
        (
            CompletesWithoutTheETagStore,
            "test_idm_10_b_a_stale_complete_racing_a_takeover_never_overwrites_the_new_holder",
        ),
    ],
    ids=[
        "read-then-write-reserve-fails-IDM-16",
        "trusting-the-ttl-sweep-fails-IDM-09",
        "etag-less-complete-fails-IDM-10",
    ],
)
def test_the_suite_fails_a_defective_store_by_the_named_rule(
    defective: type[MemoryIdempotencyStore], test_name: str
) -> None:
    run_rule(_suite(MemoryIdempotencyStore), test_name)  # control: the correct store passes this very rule
    with pytest.raises(AssertionError):
        run_rule(_suite(defective), test_name)


@pytest.mark.parametrize("defective", [ReadThenWriteStore, TrustsTheTtlSweepStore, CompletesWithoutTheETagStore])
def test_each_defective_store_still_passes_the_simple_rules_so_only_the_named_rule_catches_it(
    defective: type[MemoryIdempotencyStore],
) -> None:
    for rule in ("IDM-01", "IDM-04", "IDM-11"):
        run_rule(_suite(defective), RULE_TESTS[rule])

"""The conformance suite every ``IdempotencyStore`` must pass: the 17 rules of spec section B, and more.

It ships inside the package (like eventsourcing's abstract persistence test cases) so anyone can prove their own
store. Subclass :class:`IdempotencyStoreContract` in a test module, in a class whose name starts with ``Test``, and
implement :meth:`~IdempotencyStoreContract.make_store`::

    from airflow_chatter.testing.contracts.idempotency import IdempotencyStoreContract

    class TestMyStore(IdempotencyStoreContract):
        def make_store(self, clock):
            return MyStore(options=self.options, clock=clock)

The base class has no ``Test`` prefix, so pytest never collects it on its own. Each test gets a fresh
:class:`~airflow_chatter.testing.clock.ManualClock` (the store must read time only from it: expiry is advanced,
never waited for) and a scope of its own (``conformance-<hex>``), so one shared backend container serves every test.
The store is built lazily, on the first use inside a test, so a subclass's pytest fixtures have already run.

Each test's name carries the rule it pins (``test_idm_07_...`` is IDM-07); :data:`RULE_TESTS` maps rule ids to them.
Beyond the 17 rules: F-08 key limits, the retry-after bound shrinking with time, 32-way concurrent reserves of one
key (exactly one winner) and of distinct keys (all win), and a stale ``complete`` racing a takeover.

This module imports pytest; import it only from tests.
"""

from __future__ import annotations

import abc
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import TypeVar

import pytest

from airflow_chatter.clock import Clock
from airflow_chatter.ports import IdempotencyStore
from airflow_chatter.ports.idempotency import (
    AlreadyInFlight,
    BodyHashMismatch,
    IdempotencyKeyTooLongError,
    IdempotencyOptions,
    InvalidIdempotencyRequestError,
    Replay,
    ReservationOutcome,
    Reserved,
    StoredResponse,
)
from airflow_chatter.testing.clock import ManualClock

T = TypeVar("T")

#: The suite's defaults (the reference suite's): a 30 s reservation timeout and a 1 h ttl.
CONFORMANCE_OPTIONS = IdempotencyOptions(ttl=timedelta(hours=1), reservation_timeout=timedelta(seconds=30))
#: How long a concurrency test waits for its callers to line up before it fails (never hangs).
_BARRIER_TIMEOUT_SECONDS = 60.0

RULE_TESTS: dict[str, str] = {
    "IDM-01": "test_idm_01_reserve_on_a_free_key_returns_reserved_with_a_non_empty_reservation_id",
    "IDM-02": "test_idm_02_reserve_while_another_request_holds_the_key_returns_already_in_flight",
    "IDM-03": "test_idm_03_reserve_under_a_different_scope_does_not_collide",
    "IDM-04": "test_idm_04_reserve_after_complete_replays_the_snapshot_for_a_matching_fingerprint",
    "IDM-05": "test_idm_05_reserve_after_complete_with_a_different_fingerprint_returns_body_hash_mismatch",
    "IDM-06": "test_idm_06_reserve_while_in_flight_with_a_different_fingerprint_returns_body_hash_mismatch",
    "IDM-07": "test_idm_07_reserve_after_the_reservation_timeout_takes_over_with_a_new_reservation_id",
    "IDM-08": "test_idm_08_reserve_after_the_reservation_timeout_with_a_different_fingerprint_is_a_mismatch",
    "IDM-09": "test_idm_09_reserve_after_the_ttl_elapses_treats_a_completed_entry_as_absent",
    "IDM-10": "test_idm_10_complete_with_a_reservation_id_that_lost_the_slot_is_ignored",
    "IDM-11": "test_idm_11_abandon_releases_the_slot_for_an_immediate_retry",
    "IDM-12": "test_idm_12_abandon_with_a_reservation_id_that_lost_the_slot_is_ignored",
    "IDM-13": "test_idm_13_abandon_after_complete_must_not_delete_the_persisted_snapshot",
    "IDM-14": "test_idm_14_complete_on_a_key_that_was_never_reserved_is_ignored",
    "IDM-15": "test_idm_15_abandon_on_a_key_that_was_never_reserved_is_ignored",
    "IDM-16": "test_idm_16_concurrent_reservations_of_one_key_grant_exactly_one_winner",
    "IDM-17": "test_idm_17_an_in_flight_reservation_survives_traffic_on_other_keys",
}


def in_parallel(count: int, call: Callable[[int], T]) -> list[T]:
    """Run ``call(0..count-1)`` on ``count`` threads released together by a barrier; return results in order."""
    barrier = threading.Barrier(count, timeout=_BARRIER_TIMEOUT_SECONDS)

    def run(index: int) -> T:
        barrier.wait()
        return call(index)

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(run, range(count)))


class IdempotencyStoreContract(abc.ABC):
    """Every behaviour of the ``IdempotencyStore`` interface, as a test. Subclass it; see the module docstring."""

    #: Pass these to the store :meth:`make_store` builds. The suite reads the store's own ``options`` to move time.
    options: IdempotencyOptions = CONFORMANCE_OPTIONS
    #: How many callers the concurrency rules release at once.
    concurrency: int = 32
    #: How many rounds the stale-complete race runs (each on its own key).
    race_rounds: int = 16

    @abc.abstractmethod
    def make_store(self, clock: Clock) -> IdempotencyStore:
        """Return a store that reads time only from ``clock``, built with :attr:`options`."""

    # ----------------------------------------------------------------------------------------------------------
    # Per-test state and helpers.
    # ----------------------------------------------------------------------------------------------------------

    def setup_method(self, method: object = None) -> None:
        self.clock = ManualClock()
        self.scope = f"conformance-{uuid.uuid4().hex}"
        self._store: IdempotencyStore | None = None
        self._store_lock = threading.Lock()

    @property
    def store(self) -> IdempotencyStore:
        """The test's one store, built on first use (under a lock: the concurrency tests may get there first)."""
        with self._store_lock:
            if self._store is None:
                self._store = self.make_store(self.clock)
            return self._store

    def key(self, name: str = "key") -> str:
        return f"{name}-{uuid.uuid4().hex[:8]}"

    def snapshot(self, fingerprint: str, body: bytes = b"\x7b", status_code: int = 201) -> StoredResponse:
        return StoredResponse(status_code, {"Content-Type": ["application/json"]}, body, fingerprint)

    def reserve(self, key: str, fingerprint: str = "fp-1", scope: str | None = None) -> ReservationOutcome:
        return self.store.reserve(scope or self.scope, key, fingerprint)

    def reserved(self, key: str, fingerprint: str = "fp-1", scope: str | None = None) -> str:
        outcome = self.reserve(key, fingerprint, scope)
        assert isinstance(outcome, Reserved), f"expected Reserved, got {outcome!r}"
        return outcome.reservation_id

    def pass_the_reservation_timeout(self) -> None:
        self.clock.advance(self.store.options.reservation_timeout.total_seconds() + 1)

    def pass_the_ttl(self) -> None:
        self.clock.advance(self.store.options.ttl.total_seconds() + 1)

    @staticmethod
    def assert_replays(outcome: ReservationOutcome, expected: StoredResponse) -> None:
        assert isinstance(outcome, Replay), f"expected Replay, got {outcome!r}"
        got = outcome.response
        assert got.status_code == expected.status_code
        assert got.fingerprint == expected.fingerprint
        assert got.body == expected.body
        assert len(got.headers) == len(expected.headers), (got.headers, expected.headers)
        for name, values in expected.headers.items():
            assert got.header(name.lower()) == tuple(values), name
            assert got.header(name.upper()) == tuple(values), name

    # ----------------------------------------------------------------------------------------------------------
    # Reserving.
    # ----------------------------------------------------------------------------------------------------------

    def test_idm_01_reserve_on_a_free_key_returns_reserved_with_a_non_empty_reservation_id(self) -> None:
        outcome = self.reserve(self.key())
        assert isinstance(outcome, Reserved), outcome
        assert isinstance(outcome.reservation_id, str) and outcome.reservation_id.strip()

    def test_idm_02_reserve_while_another_request_holds_the_key_returns_already_in_flight(self) -> None:
        key = self.key()
        self.reserved(key)
        outcome = self.reserve(key)
        assert isinstance(outcome, AlreadyInFlight), outcome
        assert timedelta(0) < outcome.retry_after <= self.store.options.reservation_timeout

    def test_idm_02_b_the_retry_after_shrinks_as_the_reservation_ages(self) -> None:
        key = self.key()
        self.reserved(key)
        self.clock.advance(10)
        outcome = self.reserve(key)
        assert isinstance(outcome, AlreadyInFlight), outcome
        assert timedelta(0) < outcome.retry_after <= self.store.options.reservation_timeout - timedelta(seconds=10)

    def test_idm_03_reserve_under_a_different_scope_does_not_collide(self) -> None:
        key = self.key()
        self.reserved(key, scope=self.scope + "-a")
        assert isinstance(self.reserve(key, scope=self.scope + "-b"), Reserved)

    def test_idm_04_reserve_after_complete_replays_the_snapshot_for_a_matching_fingerprint(self) -> None:
        key = self.key()
        reservation = self.reserved(key, "fp-1")
        response = StoredResponse(
            201,
            {"Content-Type": ["application/json"], "X-Request-Trace": ["a", "b"], "location": ["/orders/1"]},
            b'{"id": 1}',
            "fp-1",
        )
        self.store.complete(self.scope, key, reservation, response)
        self.assert_replays(self.reserve(key, "fp-1"), response)

    def test_idm_05_reserve_after_complete_with_a_different_fingerprint_returns_body_hash_mismatch(self) -> None:
        key = self.key()
        reservation = self.reserved(key, "fp-original")
        self.store.complete(self.scope, key, reservation, self.snapshot("fp-original"))
        assert self.reserve(key, "fp-different") == BodyHashMismatch("fp-original")

    def test_idm_06_reserve_while_in_flight_with_a_different_fingerprint_returns_body_hash_mismatch(self) -> None:
        key = self.key()
        self.reserved(key, "fp-1")
        assert self.reserve(key, "fp-2") == BodyHashMismatch("fp-1")

    # ----------------------------------------------------------------------------------------------------------
    # Expiry.
    # ----------------------------------------------------------------------------------------------------------

    def test_idm_07_reserve_after_the_reservation_timeout_takes_over_with_a_new_reservation_id(self) -> None:
        key = self.key()
        first = self.reserved(key)
        self.pass_the_reservation_timeout()
        second = self.reserve(key)
        assert isinstance(second, Reserved), second
        assert second.reservation_id != first

    def test_idm_08_reserve_after_the_reservation_timeout_with_a_different_fingerprint_is_a_mismatch(self) -> None:
        key = self.key()
        self.reserved(key, "fp-1")
        self.pass_the_reservation_timeout()
        assert self.reserve(key, "fp-2") == BodyHashMismatch("fp-1")

    def test_idm_09_reserve_after_the_ttl_elapses_treats_a_completed_entry_as_absent(self) -> None:
        key = self.key()
        reservation = self.reserved(key)
        self.store.complete(self.scope, key, reservation, self.snapshot("fp-1"))
        self.pass_the_ttl()
        assert isinstance(self.reserve(key), Reserved)

    def test_idm_09_b_after_the_ttl_a_key_may_be_reused_with_another_request(self) -> None:
        key = self.key()
        reservation = self.reserved(key, "fp-1")
        self.store.complete(self.scope, key, reservation, self.snapshot("fp-1"))
        self.pass_the_ttl()
        assert isinstance(self.reserve(key, "fp-2"), Reserved)

    def test_idm_09_c_just_before_the_ttl_a_completed_entry_still_replays(self) -> None:
        key = self.key()
        reservation = self.reserved(key)
        self.store.complete(self.scope, key, reservation, self.snapshot("fp-1"))
        self.clock.advance(self.store.options.ttl.total_seconds() - 1)
        self.assert_replays(self.reserve(key), self.snapshot("fp-1"))

    # ----------------------------------------------------------------------------------------------------------
    # Completing and abandoning.
    # ----------------------------------------------------------------------------------------------------------

    def test_idm_10_complete_with_a_reservation_id_that_lost_the_slot_is_ignored(self) -> None:
        key = self.key()
        first = self.reserved(key)
        self.pass_the_reservation_timeout()
        second = self.reserved(key)
        self.store.complete(self.scope, key, first, self.snapshot("fp-1", b"\x01"))
        self.store.complete(self.scope, key, second, self.snapshot("fp-1", b"\x02"))
        self.assert_replays(self.reserve(key), self.snapshot("fp-1", b"\x02"))

    def test_idm_10_b_a_stale_complete_racing_a_takeover_never_overwrites_the_new_holder(self) -> None:
        """The stale holder's ``complete`` and a takeover run at once, round after round. Whoever the store lets win,
        the answers must agree: if the taker was told Reserved, the stale response was not recorded (the key is still
        in flight, then replays the taker's own response). A store that checks ownership by a read and then writes
        unconditionally lets the stale response land on top of the new holder's reservation."""
        for round_number in range(self.race_rounds):
            key = self.key("race")
            stale = self.reserved(key)
            self.pass_the_reservation_timeout()
            told: list[ReservationOutcome] = []
            # Threads leave a barrier in no fixed order (the last to arrive often runs first): swap the roles
            # every round so each side gets to start first.
            completer = round_number % 2

            def act(
                index: int,
                key: str = key,
                stale: str = stale,
                completer: int = completer,
                told: list[ReservationOutcome] = told,
            ) -> None:
                if index == completer:
                    self.store.complete(self.scope, key, stale, self.snapshot("fp-1", b"\x01"))
                else:
                    told.append(self.reserve(key))

            in_parallel(2, act)
            (taker,) = told
            if isinstance(taker, Reserved):
                after = self.reserve(key)
                assert isinstance(after, AlreadyInFlight), (
                    f"round {round_number}: the taker holds the key, got {after!r}"
                )
                self.store.complete(self.scope, key, taker.reservation_id, self.snapshot("fp-1", b"\x02"))
                self.assert_replays(self.reserve(key), self.snapshot("fp-1", b"\x02"))
            else:
                self.assert_replays(taker, self.snapshot("fp-1", b"\x01"))
                self.assert_replays(self.reserve(key), self.snapshot("fp-1", b"\x01"))

    def test_idm_11_abandon_releases_the_slot_for_an_immediate_retry(self) -> None:
        key = self.key()
        reservation = self.reserved(key)
        self.store.abandon(self.scope, key, reservation)
        assert isinstance(self.reserve(key), Reserved)

    def test_idm_12_abandon_with_a_reservation_id_that_lost_the_slot_is_ignored(self) -> None:
        key = self.key()
        first = self.reserved(key)
        self.pass_the_reservation_timeout()
        self.reserved(key)
        self.store.abandon(self.scope, key, first)
        assert isinstance(self.reserve(key), AlreadyInFlight)

    def test_idm_13_abandon_after_complete_must_not_delete_the_persisted_snapshot(self) -> None:
        key = self.key()
        reservation = self.reserved(key)
        self.store.complete(self.scope, key, reservation, self.snapshot("fp-1"))
        self.store.abandon(self.scope, key, reservation)
        self.assert_replays(self.reserve(key), self.snapshot("fp-1"))

    def test_idm_14_complete_on_a_key_that_was_never_reserved_is_ignored(self) -> None:
        key = self.key()
        self.store.complete(self.scope, key, "0" * 32, self.snapshot("fp-1"))
        assert isinstance(self.reserve(key), Reserved)

    def test_idm_15_abandon_on_a_key_that_was_never_reserved_is_ignored(self) -> None:
        key = self.key()
        self.store.abandon(self.scope, key, "0" * 32)
        assert isinstance(self.reserve(key), Reserved)

    # ----------------------------------------------------------------------------------------------------------
    # Concurrency.
    # ----------------------------------------------------------------------------------------------------------

    def test_idm_16_concurrent_reservations_of_one_key_grant_exactly_one_winner(self) -> None:
        key = self.key("contended")
        outcomes = in_parallel(self.concurrency, lambda _: self.reserve(key))
        winners = [o for o in outcomes if isinstance(o, Reserved)]
        waiting = [o for o in outcomes if isinstance(o, AlreadyInFlight)]
        assert len(winners) == 1, f"{len(winners)} callers were granted one key: {winners}"
        assert len(waiting) == self.concurrency - 1, outcomes

    def test_idm_16_b_concurrent_reservations_of_distinct_keys_all_win(self) -> None:
        keys = [self.key(f"distinct{i}") for i in range(self.concurrency)]
        outcomes = in_parallel(self.concurrency, lambda i: self.reserve(keys[i]))
        assert all(isinstance(o, Reserved) for o in outcomes), outcomes
        assert len({o.reservation_id for o in outcomes if isinstance(o, Reserved)}) == self.concurrency

    def test_idm_17_an_in_flight_reservation_survives_traffic_on_other_keys(self) -> None:
        slow, unrelated = self.key("slow"), self.key("unrelated")
        reservation = self.reserved(slow)
        self.reserved(unrelated)
        self.store.complete(self.scope, slow, reservation, self.snapshot("fp-1", b"slow"))
        self.assert_replays(self.reserve(slow), self.snapshot("fp-1", b"slow"))

    # ----------------------------------------------------------------------------------------------------------
    # F-08: bad input is refused before any write.
    # ----------------------------------------------------------------------------------------------------------

    def test_f08_a_key_of_200_characters_is_accepted(self) -> None:
        assert isinstance(self.reserve("k" * 200), Reserved)

    @pytest.mark.parametrize(
        ("key", "limit"),
        [("k" * 201, "200 characters"), ("\U0001f600" * 200, "1023 bytes")],
        ids=["201-characters", "200-emoji-over-the-id-limit"],
    )
    def test_f08_an_over_long_key_is_refused_naming_the_limit_and_nothing_is_held(self, key: str, limit: str) -> None:
        for call in (
            lambda: self.store.reserve(self.scope, key, "fp-1"),
            lambda: self.store.complete(self.scope, key, "0" * 32, self.snapshot("fp-1")),
            lambda: self.store.abandon(self.scope, key, "0" * 32),
        ):
            with pytest.raises(IdempotencyKeyTooLongError, match=limit):
                call()
        assert isinstance(self.reserve(key[:50]), Reserved), "a refused key held nothing"

    @pytest.mark.parametrize(
        ("scope", "key", "fingerprint", "field"),
        [
            ("", "k", "fp", "idempotency scope"),
            ("s", "", "fp", "idempotency key"),
            ("s", "k", "", "fingerprint"),
        ],
    )
    def test_f08_an_empty_scope_key_or_fingerprint_is_refused_naming_the_field(
        self, scope: str, key: str, fingerprint: str, field: str
    ) -> None:
        with pytest.raises(InvalidIdempotencyRequestError, match=field):
            self.store.reserve(scope, key, fingerprint)


def run_rule(suite: IdempotencyStoreContract, test_name: str, arguments: Sequence[object] = ()) -> None:
    """Run one test of a suite instance outside pytest (fresh clock and scope); raises whatever the test raises.

    How the meta-tests prove the suite fails a defective store by a named rule.
    """
    suite.setup_method()
    getattr(suite, test_name)(*arguments)


__all__ = ["CONFORMANCE_OPTIONS", "RULE_TESTS", "IdempotencyStoreContract", "in_parallel", "run_rule"]

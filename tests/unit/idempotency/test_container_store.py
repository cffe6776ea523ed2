"""``ContainerIdempotencyStore`` over the in-memory container: the conformance suite, the document shape and ttl values
(IDM-C02, IDM-C03), the retry protocol (IDM-C04, C07, C08), container verification (IDM-C01) and the meta-test
with defective Cosmos-protocol stores.

The emulator run of the same suite is tests/integration/test_idempotency_cosmos.py.
"""

from __future__ import annotations

import logging
import re
import time
from datetime import timedelta
from typing import Any

import pytest

from airflow_chatter.adapters.memory import MemoryDocumentContainer
from airflow_chatter.adapters.memory.faults import fail
from airflow_chatter.clock import Clock
from airflow_chatter.idempotency import (
    AlreadyInFlight,
    IdempotencyContainerError,
    IdempotencyKeyTooLongError,
    IdempotencyOptions,
    InvalidIdempotencyDocumentError,
    Reserved,
    StoredResponse,
)
from airflow_chatter.idempotency.container_store import MAX_ATTEMPTS, ContainerIdempotencyStore
from airflow_chatter.idempotency.decision import Takeover, decide
from airflow_chatter.idempotency.documents import completed_document, entry_of, reserved_document, unix_ms
from airflow_chatter.idempotency.errors import IdempotencyContentionError
from airflow_chatter.ports import Conflict, IdempotencyStore, NotFound, PreconditionFailed, ServiceUnavailable
from airflow_chatter.ports.idempotency import ReservationOutcome, encode_item_id
from airflow_chatter.testing.clock import ManualClock
from airflow_chatter.testing.contracts.idempotency import RULE_TESTS, IdempotencyStoreContract, run_rule
from airflow_chatter.testing.handlers import first_of

_SYSTEM = {"_etag", "_ts", "_rid", "_self", "_attachments", "_lsn"}


def idempotency_container(clock: Clock | None = None) -> MemoryDocumentContainer:
    if clock is None:
        return MemoryDocumentContainer(partition_key_paths=("/scope",), default_ttl=-1, container_id="idempotency")
    return MemoryDocumentContainer(
        partition_key_paths=("/scope",), default_ttl=-1, container_id="idempotency", clock=clock
    )


class TestContainerStoreWhoseContainerNeverSweeps(IdempotencyStoreContract):
    """The container expires on the wall clock, so within a test its TTL sweep never runs: expiry is all the store's."""

    def make_store(self, clock: Clock) -> IdempotencyStore:
        return ContainerIdempotencyStore(idempotency_container(), self.options, clock=clock)


class TestContainerStoreWhoseContainerSweepsOnTime(IdempotencyStoreContract):
    """The container shares the test's clock, so documents also vanish the moment their ttl passes."""

    def make_store(self, clock: Clock) -> IdempotencyStore:
        return ContainerIdempotencyStore(idempotency_container(clock), self.options, clock=clock)


# -- IDM-C02 / IDM-C03: the document and its ttl ----------------------------------------------------------------


def _stored(container: MemoryDocumentContainer, scope: str, key: str) -> dict[str, Any]:
    document = container.read(encode_item_id(key), scope)
    return {name: value for name, value in document.items() if name not in _SYSTEM}


def test_idm_c02_c03_a_reserved_document_has_the_reference_shape_and_never_expires() -> None:
    clock, container = ManualClock(), idempotency_container()
    outcome = ContainerIdempotencyStore(container, clock=clock).reserve("actor:user-1", "idempotency-key", "fp-1")
    assert isinstance(outcome, Reserved)
    assert re.fullmatch(r"[0-9a-f]{32}", outcome.reservation_id)
    assert _stored(container, "actor:user-1", "idempotency-key") == {
        "id": "aWRlbXBvdGVuY3kta2V5",
        "scope": "actor:user-1",
        "key": "idempotency-key",
        "fingerprint": "fp-1",
        "reservationId": outcome.reservation_id,
        "reservedAt": unix_ms(clock()),
        "ttl": -1,
    }
    assert unix_ms(clock()) == 1767225600000


@pytest.mark.parametrize(("ttl", "expected"), [(timedelta(hours=24), 86460), (timedelta(seconds=0.5), 61)])
def test_idm_c03_a_completed_document_expires_60_seconds_after_the_ceiled_ttl(ttl: timedelta, expected: int) -> None:
    clock, container = ManualClock(), idempotency_container()
    store = ContainerIdempotencyStore(container, IdempotencyOptions(ttl=ttl), clock=clock)
    outcome = store.reserve("s", "k", "fp-1")
    assert isinstance(outcome, Reserved)
    reserved_at = unix_ms(clock())
    clock.advance(2)
    store.complete("s", "k", outcome.reservation_id, StoredResponse(201, {"Content-Type": ["a/b"]}, b'{"}', "fp-1"))
    assert _stored(container, "s", "k") == {
        "id": "aw",
        "scope": "s",
        "key": "k",
        "fingerprint": "fp-1",
        "reservedAt": reserved_at,
        "completedAt": reserved_at + 2000,
        "snapshot": {"statusCode": 201, "headers": {"Content-Type": ["a/b"]}, "body": "eyJ9", "fingerprint": "fp-1"},
        "ttl": expected,
    }


def test_idm_c02_a_document_not_of_the_store_s_shape_is_refused_naming_the_field() -> None:
    container = idempotency_container()
    container.create({"id": encode_item_id("k"), "scope": "s", "fingerprint": "fp", "reservedAt": "yesterday"}, "s")
    with pytest.raises(InvalidIdempotencyDocumentError, match="'reservedAt' must be int"):
        ContainerIdempotencyStore(container).reserve("s", "k", "fp")


def test_documents_round_trip_through_entry_of() -> None:
    clock = ManualClock()
    reserved = reserved_document("s", "k", "fp", "r" * 32, clock())
    assert entry_of(reserved).reservation_id == "r" * 32 and not entry_of(reserved).completed
    response = StoredResponse(200, {"X": ["1", "2"]}, b"\x00\xff", "fp")
    completed = completed_document(reserved, response, clock(), IdempotencyOptions())
    assert entry_of(completed).response == response and entry_of(completed).completed_at == clock()


def test_f08_an_over_long_key_writes_nothing() -> None:
    container = idempotency_container()
    with pytest.raises(IdempotencyKeyTooLongError):
        ContainerIdempotencyStore(container).reserve("s", "k" * 201, "fp")
    assert container.calls["create"] == 0 and list(container.query("SELECT * FROM c")) == []


# -- IDM-C04 / C07 / C08: the retry protocol ---------------------------------------------------------------------


def test_idm_c04_a_read_404_after_a_409_creates_again() -> None:
    container = idempotency_container()
    store = ContainerIdempotencyStore(container, clock=ManualClock())
    store.reserve("s", "k", "fp")
    container.handler = first_of(container.handler, fail("read", error=NotFound("swept meanwhile"), times=1))
    assert isinstance(store.reserve("s", "k", "fp"), AlreadyInFlight)
    assert container.calls["create"] == 3, "first reserve, then the retried pair"


def test_idm_c04_a_takeover_that_loses_the_etag_race_re_reads_and_re_decides() -> None:
    clock, container = ManualClock(), idempotency_container()
    store = ContainerIdempotencyStore(container, clock=clock)
    store.reserve("s", "k", "fp")
    clock.advance(31)
    container.handler = first_of(container.handler, fail("replace", error=PreconditionFailed("etag moved"), times=1))
    assert isinstance(store.reserve("s", "k", "fp"), Reserved)
    assert container.calls["replace"] == 2


def test_idm_c04_other_container_errors_propagate() -> None:
    container = idempotency_container()
    container.handler = first_of(container.handler, fail("create", error=ServiceUnavailable("down")))
    with pytest.raises(ServiceUnavailable, match="down"):
        ContainerIdempotencyStore(container).reserve("s", "k", "fp")


def test_idm_c04_a_reserve_that_loses_every_race_gives_up_after_8_attempts() -> None:
    clock, container = ManualClock(), idempotency_container()
    store = ContainerIdempotencyStore(container, clock=clock)
    store.reserve("s", "k", "fp")
    clock.advance(31)
    container.handler = first_of(container.handler, fail("replace", error=PreconditionFailed("etag moved")))
    with pytest.raises(IdempotencyContentionError, match="reserve in scope 's' lost 8 races"):
        store.reserve("s", "k", "fp")
    assert container.calls["replace"] == MAX_ATTEMPTS


def test_idm_c07_a_complete_that_loses_every_race_raises_rather_than_dropping_the_response() -> None:
    container = idempotency_container()
    store = ContainerIdempotencyStore(container, clock=ManualClock())
    outcome = store.reserve("s", "k", "fp")
    assert isinstance(outcome, Reserved)
    container.handler = first_of(container.handler, fail("replace", error=PreconditionFailed("etag moved")))
    with pytest.raises(IdempotencyContentionError, match="complete"):
        store.complete("s", "k", outcome.reservation_id, StoredResponse(200, {}, b"", "fp"))


def test_idm_c08_an_abandon_that_loses_every_race_returns_quietly_and_the_reservation_times_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    container = idempotency_container()
    store = ContainerIdempotencyStore(container, clock=ManualClock())
    outcome = store.reserve("s", "k", "fp")
    assert isinstance(outcome, Reserved)
    container.handler = first_of(container.handler, fail("delete", error=PreconditionFailed("etag moved")))
    with caplog.at_level(logging.WARNING, logger="airflow_chatter.idempotency.container_store"):
        store.abandon("s", "k", outcome.reservation_id)
    assert "gave up after 8 lost races" in caplog.text
    assert container.calls["delete"] == MAX_ATTEMPTS
    assert isinstance(store.reserve("s", "k", "fp"), AlreadyInFlight)


def test_idm_c08_an_abandon_whose_document_vanished_before_the_delete_is_done() -> None:
    container = idempotency_container()
    store = ContainerIdempotencyStore(container, clock=ManualClock())
    outcome = store.reserve("s", "k", "fp")
    assert isinstance(outcome, Reserved)
    container.handler = first_of(container.handler, fail("delete", error=NotFound("gone"), times=1))
    store.abandon("s", "k", outcome.reservation_id)
    assert container.calls["delete"] == 1


# -- IDM-C01: the container --------------------------------------------------------------------------------------


def test_idm_c01_verify_container_names_every_difference_in_one_error() -> None:
    container = MemoryDocumentContainer(partition_key_paths=("/pk",), default_ttl=None, container_id="idem")
    with pytest.raises(IdempotencyContainerError) as caught:
        ContainerIdempotencyStore(container).verify_container()
    assert caught.value.differences == (
        "its partition key path is /pk, expected /scope",
        "its TTL is off (no defaultTtl), expected defaultTtl -1",
    )
    assert "'idem'" in str(caught.value)


def test_idm_c01_verify_container_names_a_positive_default_ttl() -> None:
    container = MemoryDocumentContainer(partition_key_paths=("/scope",), default_ttl=3600)
    with pytest.raises(IdempotencyContainerError, match="its defaultTtl is 3600 seconds, expected -1"):
        ContainerIdempotencyStore(container).verify_container()


def test_idm_c01_verify_container_accepts_the_provisioned_shape() -> None:
    ContainerIdempotencyStore(idempotency_container()).verify_container()


# -- The meta-test, with the Cosmos protocol's own defects -------------------------------------------------------

_WINDOW_SECONDS = 0.05


class ReadThenUpsertStore(ContainerIdempotencyStore):
    """Reserves by reading and then upserting, instead of an atomic create."""

    def reserve(self, scope: str, key: str, fingerprint: str) -> ReservationOutcome:
        try:
            existing = self.container.read(encode_item_id(key), scope)
            decision = decide(entry_of(existing), fingerprint, self._clock(), self.options)
            if not isinstance(decision, Takeover):
                return decision
        except NotFound:
            pass
        time.sleep(_WINDOW_SECONDS)
        reservation_id = self._reservation_ids()
        self.container.upsert(reserved_document(scope, key, fingerprint, reservation_id, self._clock()), scope)
        return Reserved(reservation_id)


class TrustsTheSweepStore(ContainerIdempotencyStore):
    """Replays any completed document it can still read, trusting Cosmos DB's TTL sweep to have removed old ones."""

    def reserve(self, scope: str, key: str, fingerprint: str) -> ReservationOutcome:
        try:
            self.container.create(
                reserved_document(scope, key, fingerprint, self._reservation_ids(), self._clock()), scope
            )
        except Conflict:
            entry = entry_of(self.container.read(encode_item_id(key), scope))
            if entry.response is not None:
                return decide(entry, fingerprint, entry.completed_at or self._clock(), self.options)  # type: ignore[return-value]
        return super().reserve(scope, key, fingerprint)


class ReplacesWithoutTheETagStore(ContainerIdempotencyStore):
    """Completes by a read, an ownership check and a replace without ``if_match``."""

    def complete(self, scope: str, key: str, reservation_id: str, response: StoredResponse) -> None:
        try:
            existing = self.container.read(encode_item_id(key), scope)
        except NotFound:
            return
        entry = entry_of(existing)
        if entry.completed or entry.reservation_id != reservation_id:
            return
        time.sleep(_WINDOW_SECONDS)
        completed = completed_document(existing, response, self._clock(), self.options)
        self.container.replace(encode_item_id(key), scope, completed)


def _suite(store_class: type[ContainerIdempotencyStore]) -> IdempotencyStoreContract:
    class Suite(IdempotencyStoreContract):
        def make_store(self, clock: Clock) -> IdempotencyStore:
            return store_class(idempotency_container(), self.options, clock=clock)

    return Suite()


@pytest.mark.parametrize(
    ("defective", "test_name"),
    [
        (ReadThenUpsertStore, RULE_TESTS["IDM-16"]),
        (TrustsTheSweepStore, RULE_TESTS["IDM-09"]),
        (
            ReplacesWithoutTheETagStore,
            "test_idm_10_b_a_stale_complete_racing_a_takeover_never_overwrites_the_new_holder",
        ),
    ],
    ids=["read-then-upsert-fails-IDM-16", "trusting-the-sweep-fails-IDM-09", "replace-without-etag-fails-IDM-10"],
)
def test_the_suite_fails_a_defective_cosmos_store_by_the_named_rule(
    defective: type[ContainerIdempotencyStore], test_name: str
) -> None:
    run_rule(_suite(ContainerIdempotencyStore), test_name)  # control: the real store passes this very rule
    with pytest.raises(AssertionError):
        run_rule(_suite(defective), test_name)


# -- What each request path costs, in Cosmos operations (docs/idempotency.md derives RU from these) --------------


def _operations(container: MemoryDocumentContainer) -> dict[str, int]:
    return {name: count for name, count in container.calls.items() if count}


def test_the_cosmos_operations_of_each_request_path() -> None:
    clock, container = ManualClock(), idempotency_container()
    store = ContainerIdempotencyStore(container, clock=clock)
    response = StoredResponse(201, {"Content-Type": ["application/json"]}, b"{}", "fp")

    first = store.reserve("s", "k", "fp")
    assert isinstance(first, Reserved)
    assert _operations(container) == {"create": 1}, "a fresh key: one create"
    container.calls.clear()
    store.complete("s", "k", first.reservation_id, response)
    assert _operations(container) == {"read": 1, "replace": 1}, "complete: a read and a conditional replace"
    container.calls.clear()
    store.reserve("s", "k", "fp")
    assert _operations(container) == {"create": 1, "read": 1}, "a replay: a refused create (409) and a read"

    container.calls.clear()
    held = store.reserve("s", "other", "fp")
    assert isinstance(held, Reserved)
    store.reserve("s", "other", "fp")
    assert _operations(container) == {"create": 2, "read": 1}, "in flight: the 409 and a read, after the grant"
    container.calls.clear()
    store.abandon("s", "other", held.reservation_id)
    assert _operations(container) == {"read": 1, "delete": 1}, "abandon: a read and a conditional delete"

    store.reserve("s", "slow", "fp")
    clock.advance(31)
    container.calls.clear()
    store.reserve("s", "slow", "fp")
    assert _operations(container) == {"create": 1, "read": 1, "replace": 1}, "a takeover: 409, read, replace"

"""The idempotency conformance suite against ``ContainerIdempotencyStore`` on the emulator (or a real account), with a
fake clock: takeover and ttl rules run in the time of ordinary round trips because the store, not Cosmos DB,
decides expiry. Plus the two ttl tests on the stored documents (IDM-C03) and the provisioning helper (IDM-C01).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest
from azure.cosmos import DatabaseProxy

from airflow_chatter.adapters.cosmos.provision import provision_idempotency_container as provision_container
from airflow_chatter.clock import Clock
from airflow_chatter.idempotency import (
    IdempotencyContainerError,
    IdempotencyOptions,
    Reserved,
    StoredResponse,
)
from airflow_chatter.idempotency.container_store import ContainerIdempotencyStore
from airflow_chatter.ports import DocumentContainer, IdempotencyStore
from airflow_chatter.ports.idempotency import encode_item_id
from airflow_chatter.testing.clock import ManualClock
from airflow_chatter.testing.contracts.idempotency import IdempotencyStoreContract
from tests.fixtures.cosmos import ContainerFactory

pytestmark = pytest.mark.cosmos


@pytest.fixture(scope="module")
def idempotency_container(cosmos_database: DatabaseProxy) -> Iterator[DocumentContainer]:
    """One provisioned container for the module: every conformance test has its own scope (partition)."""
    container_id = f"idempotency-{uuid.uuid4().hex[:12]}"
    container = provision_container(cosmos_database, container_id)
    yield container
    try:
        cosmos_database.delete_container(container_id)
    except Exception:  # noqa: BLE001 - cleanup must not mask the outcome
        pass


class TestContainerIdempotencyStoreOnTheEmulator(IdempotencyStoreContract):
    @pytest.fixture(autouse=True)
    def _use_container(self, idempotency_container: DocumentContainer) -> None:
        self._container = idempotency_container

    def make_store(self, clock: Clock) -> IdempotencyStore:
        return ContainerIdempotencyStore(self._container, self.options, clock=clock)


@pytest.mark.parametrize(("ttl", "expected_ttl"), [(timedelta(hours=1), 3660), (timedelta(hours=24), 86460)])
def test_idm_c03_the_stored_ttl_is_minus_one_while_reserved_and_ttl_plus_60_s_once_completed(
    idempotency_container: DocumentContainer, ttl: timedelta, expected_ttl: int
) -> None:
    scope, key = f"ttl-{uuid.uuid4().hex}", "order/42?#"
    store = ContainerIdempotencyStore(idempotency_container, IdempotencyOptions(ttl=ttl), clock=ManualClock())
    outcome = store.reserve(scope, key, "fp-1")
    assert isinstance(outcome, Reserved)
    reserved = idempotency_container.read(encode_item_id(key), scope)
    assert reserved["ttl"] == -1 and reserved["reservationId"] == outcome.reservation_id
    store.complete(scope, key, outcome.reservation_id, StoredResponse(201, {"Content-Type": ["a/b"]}, b"{", "fp-1"))
    completed = idempotency_container.read(encode_item_id(key), scope)
    assert completed["ttl"] == expected_ttl
    assert "reservationId" not in completed and completed["snapshot"]["body"] == "ew=="


def test_idm_c01_provisioning_creates_a_scope_partitioned_container_with_ttl_on(
    cosmos_database: DatabaseProxy,
) -> None:
    container_id = f"idempotency-{uuid.uuid4().hex[:12]}"
    try:
        provision_container(cosmos_database, container_id)
        raw = cosmos_database.get_container_client(container_id).read()
        assert raw["partitionKey"]["paths"] == ["/scope"] and raw["defaultTtl"] == -1
        again = provision_container(cosmos_database, container_id)
        assert again.properties().container_id == container_id, "provisioning twice verifies, and accepts"
    finally:
        cosmos_database.delete_container(container_id)


def test_idm_c01_provisioning_refuses_an_existing_container_that_differs_naming_every_difference(
    cosmos_database: DatabaseProxy, cosmos_container_factory: ContainerFactory
) -> None:
    existing = cosmos_container_factory(("/pk",), None)
    with pytest.raises(IdempotencyContainerError) as caught:
        provision_container(cosmos_database, existing.id)
    assert caught.value.differences == (
        "its partition key path is /pk, expected /scope",
        "its TTL is off (no defaultTtl), expected defaultTtl -1",
    )
    assert existing.id in str(caught.value)


def test_a_store_on_a_missing_container_says_which_container_and_database(cosmos_database: DatabaseProxy) -> None:
    """The emulator answers a missing container with ``404 {"message":""}``: the error must still name the
    container and its database, not just "404 … no message"."""
    from airflow_chatter.adapters.cosmos.container import CosmosDocumentContainer
    from airflow_chatter.ports import NotFound

    missing = f"no-such-{uuid.uuid4().hex[:8]}"
    store = ContainerIdempotencyStore(CosmosDocumentContainer(cosmos_database.get_container_client(missing)))
    with pytest.raises(NotFound) as raised:
        store.reserve("scope", "key-1", "fp-1")
    assert f"container '{missing}'" in str(raised.value) and f"database '{cosmos_database.id}'" in str(raised.value)

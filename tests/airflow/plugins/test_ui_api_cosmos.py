"""The UI plugin's actions over the Cosmos idempotency store on the emulator: two app instances stand for two
api-server workers (each with its own memory), so only a store they share can make a double click act once."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import pytest
from azure.cosmos import DatabaseProxy
from fastapi.testclient import TestClient

from airflow_chatter.adapters.cosmos.container import CosmosDocumentContainer
from airflow_chatter.adapters.cosmos.provision import provision_idempotency_container
from airflow_chatter.airflow.plugins.api.app import create_app
from airflow_chatter.ports import DocumentContainer
from tests.airflow.plugins.test_ui_api import SOURCE, FakeBackend, auth, drained_backend, key
from tests.fixtures.cosmos import ContainerFactory

pytestmark = pytest.mark.cosmos

REQUEUE = "/api/sources/orders/undeliverable/requeue"


@pytest.fixture
def backend() -> FakeBackend:
    return drained_backend()


@pytest.fixture(scope="module")
def idempotency_container(cosmos_database: DatabaseProxy) -> Iterator[DocumentContainer]:
    container_id = f"ui-idempotency-{uuid.uuid4().hex[:12]}"
    yield provision_idempotency_container(cosmos_database, container_id)
    try:
        cosmos_database.delete_container(container_id)
    except Exception:  # noqa: BLE001 - cleanup must not mask the outcome
        pass


def _workers(backend: FakeBackend) -> tuple[TestClient, TestClient]:
    """Two app instances over one backend: two api-server workers, each with its own process memory."""
    return TestClient(create_app(backend)), TestClient(create_app(backend))


def _requeue_body(client: TestClient) -> dict[str, object]:
    items = client.get("/api/sources/orders/undeliverable", headers=auth("admin")).json()["items"]
    return {"documents": [{"id": i["id"], "etag": i["etag"]} for i in items]}


def test_idm_a_double_submitted_requeue_on_two_workers_sharing_the_cosmos_store_acts_once(
    backend: FakeBackend, idempotency_container: DocumentContainer, caplog: pytest.LogCaptureFixture
) -> None:
    backend.orders = SOURCE.model_copy(update={"ui_idempotency_container": "ui-idempotency"})
    backend.idempotency = idempotency_container
    first_worker, second_worker = _workers(backend)
    body = _requeue_body(first_worker)
    headers = {**auth("admin"), **key(f"double-{uuid.uuid4().hex}")}
    with caplog.at_level(logging.INFO, logger="airflow_chatter.ui"):
        first = first_worker.post(REQUEUE, json=body, headers=headers)
        second = second_worker.post(REQUEUE, json=body, headers=headers)
    assert first.status_code == second.status_code == 200, (first.text, second.text)
    assert len(first.json()["requeued"]) == 2 and first.json()["idempotency"] == "cosmos"
    assert second.headers["idempotent-replayed"] == "true" and second.json() == first.json()
    assert caplog.text.count("UI requeue by admin") == 1, "the second worker replayed instead of acting"
    view = second_worker.get("/api/sources/orders", headers=auth("viewer")).json()
    assert view["idempotency"] == {
        "store": "cosmos",
        "shared_across_workers": True,
        "container": "db/ui-idempotency",
        "warning": None,
    }


def test_idm_without_a_shared_store_two_workers_both_act_on_one_key(
    backend: FakeBackend, caplog: pytest.LogCaptureFixture
) -> None:
    """The control: the memory fallback is per process, which is why a deployment with several workers needs the
    Cosmos store."""
    first_worker, second_worker = _workers(backend)
    body = _requeue_body(first_worker)
    headers = {**auth("admin"), **key("double")}
    with caplog.at_level(logging.INFO, logger="airflow_chatter.ui"):
        first_worker.post(REQUEUE, json=body, headers=headers)
        second = second_worker.post(REQUEUE, json=body, headers=headers)
    assert "idempotent-replayed" not in second.headers
    assert caplog.text.count("UI requeue by admin") == 2


def test_a_misshapen_idempotency_container_refuses_actions_naming_the_setting(
    backend: FakeBackend, cosmos_container_factory: ContainerFactory
) -> None:
    backend.orders = SOURCE.model_copy(update={"ui_idempotency_container": "wrong"})
    backend.idempotency = CosmosDocumentContainer(cosmos_container_factory(("/pk",)))
    client = TestClient(create_app(backend))
    response = client.post(REQUEUE, json=_requeue_body(client), headers={**auth("admin"), **key("k")})
    assert response.status_code == 503 and response.json()["field"] == "ui_idempotency_container"
    assert "cannot be the idempotency container" in response.json()["detail"]
    assert client.get("/api/sources/orders", headers=auth("viewer")).json()["undeliverable_count"] == 2

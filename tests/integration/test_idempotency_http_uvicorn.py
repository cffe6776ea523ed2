"""The FastAPI side behind a real uvicorn on loopback: 32 clients send one request with one key at once.

Exactly one handler call; every other client gets a 409 (still in flight) or the replayed 201. Run with the
in-memory store and with the Cosmos store on the emulator (the store a multi-replica API would use).
"""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from azure.cosmos import DatabaseProxy

from airflow_chatter.adapters.cosmos.provision import provision_idempotency_container as provision_container
from airflow_chatter.adapters.memory import MemoryIdempotencyStore
from airflow_chatter.idempotency.container_store import ContainerIdempotencyStore
from airflow_chatter.ports import IdempotencyStore
from airflow_chatter.testing.contracts.idempotency import in_parallel
from tests.unit.idempotency._http_app import Calls, make_app

CLIENTS = 32
_START_DEADLINE_SECONDS = 30.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class _Server:
    def __init__(self, store: IdempotencyStore) -> None:
        self.calls = Calls()
        self.port = _free_port()
        config = uvicorn.Config(
            make_app(store, self.calls, handler_delay=0.2), host="127.0.0.1", port=self.port, log_level="warning"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> _Server:
        self.thread.start()
        deadline = time.monotonic() + _START_DEADLINE_SECONDS
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError(f"uvicorn did not start on 127.0.0.1:{self.port}")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _one_key_from_32_clients(server: _Server) -> list[httpx.Response]:
    key = f'"order-{uuid.uuid4().hex}"'

    def send(_: int) -> httpx.Response:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            return client.post("/orders", json={"sku": "A-1"}, headers={"Idempotency-Key": key})

    return in_parallel(CLIENTS, send)


def _assert_exactly_one_execution(server: _Server, responses: list[httpx.Response]) -> None:
    assert server.calls.counts["orders"] == 1, "the handler ran exactly once"
    statuses = sorted(r.status_code for r in responses)
    assert set(statuses) <= {201, 409}, statuses
    originals = [r for r in responses if r.status_code == 201 and "idempotent-replayed" not in r.headers]
    replays = [r for r in responses if r.headers.get("idempotent-replayed") == "true"]
    conflicts = [r for r in responses if r.status_code == 409]
    assert len(originals) == 1
    assert len(replays) + len(conflicts) == CLIENTS - 1
    assert all(r.content == originals[0].content for r in replays), "every replay is the original response"
    assert all(int(r.headers["retry-after"]) >= 1 for r in conflicts)
    body: Any = json.loads(originals[0].content)
    assert body["order"] == 1


def test_32_concurrent_clients_with_one_key_run_the_handler_once_with_the_memory_store() -> None:
    with _Server(MemoryIdempotencyStore()) as server:
        responses = _one_key_from_32_clients(server)
        _assert_exactly_one_execution(server, responses)
        after = httpx.post(
            f"{server.url}/orders",
            json={"sku": "A-1"},
            headers={"Idempotency-Key": responses[0].request.headers["idempotency-key"]},
        )
        assert after.headers["idempotent-replayed"] == "true", "once completed, every retry is a replay"


@pytest.fixture
def cosmos_store(cosmos_database: DatabaseProxy) -> Iterator[IdempotencyStore]:
    container_id = f"idempotency-http-{uuid.uuid4().hex[:12]}"
    yield ContainerIdempotencyStore(provision_container(cosmos_database, container_id))
    cosmos_database.delete_container(container_id)


@pytest.mark.cosmos
def test_32_concurrent_clients_with_one_key_run_the_handler_once_with_the_cosmos_store(
    cosmos_store: IdempotencyStore,
) -> None:
    with _Server(cosmos_store) as server:
        _assert_exactly_one_execution(server, _one_key_from_32_clients(server))

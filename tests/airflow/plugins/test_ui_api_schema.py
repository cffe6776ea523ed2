"""The plugin API answers what its OpenAPI schema says: for inputs schemathesis generates from the schema, as an admin
and as a viewer, no 5xx, and every status, content type and body is one the schema declares. A viewer is refused every
action (403 on a source they may read) and a refused request changes nothing: no document written in any container, no
run triggered, and, for a viewer, the idempotency store not even asked (authorisation comes before the guard).
In-process over the app and the fake backend of ``test_ui_api``, no live Airflow."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from airflow_chatter.adapters.memory.idempotency import MemoryIdempotencyStore
from airflow_chatter.airflow.plugins.api.app import create_app
from airflow_chatter.ports.idempotency import ReservationOutcome, StoredResponse
from tests.airflow.plugins.test_ui_api import SOURCE, FakeBackend, auth, drained_backend


class CountingStore(MemoryIdempotencyStore):
    """The in-memory store, counting every call that could change it."""

    calls = 0

    def reserve(self, scope: str, key: str, fingerprint: str) -> ReservationOutcome:
        self.calls += 1
        return super().reserve(scope, key, fingerprint)

    def complete(self, scope: str, key: str, reservation_id: str, response: StoredResponse) -> None:
        self.calls += 1
        super().complete(scope, key, reservation_id, response)

    def abandon(self, scope: str, key: str, reservation_id: str) -> None:
        self.calls += 1
        super().abandon(scope, key, reservation_id)


@dataclass(frozen=True)
class State:
    """What an action could change: each container's latest write, the runs triggered, the idempotency store."""

    lsns: tuple[int, ...]
    triggered: int
    store_calls: int
    keys_held: int


BACKEND: FakeBackend = drained_backend()
STORE = CountingStore()
APP = create_app(BACKEND, idempotency_store=STORE)
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


def state() -> State:
    lsns = tuple(c.last_lsn for pair in BACKEND.stores.values() for c in pair)  # type: ignore[attr-defined]
    return State(lsns, len(BACKEND.triggered), STORE.calls, len(STORE))


@pytest.mark.parametrize("role", ["admin", "viewer"])
@schema.parametrize()
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_api_answers_what_its_schema_declares_and_refusals_change_nothing(case: Any, role: str) -> None:
    # The coverage phase also sends methods the path does not take (405): only a POST to an action is one.
    action = case.operation.method.upper() == "POST" and case.method.upper() == "POST"
    if action and role == "viewer":
        # On a source the viewer may read (an unknown one is a 404 for anybody, fuzzed as the admin).
        case.path_parameters = {**(case.path_parameters or {}), "source": SOURCE.name}
    before = state()
    response = case.call_and_validate(headers=auth(role))
    after = state()
    if action and role == "viewer":
        assert response.status_code == 403, response.text
        assert "may not edit" in response.json()["detail"]
        assert after == before  # nothing written, nothing triggered, the guard never reached
    elif response.status_code >= 400:
        # A refused request writes no document and triggers no run (the guard may keep the refusal's answer).
        assert (after.lsns, after.triggered) == (before.lsns, before.triggered), response.text

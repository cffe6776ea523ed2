"""The plugin API on the live api-server fuzzed from the OpenAPI it serves (``/chatter/openapi.json``),
as the stack's admin and as its viewer: no 5xx, and every status, content type and body is one the schema
declares. A viewer's every action on a source they may read is refused (403) and changes nothing: the source's
outbox and lease documents and its UI idempotency container are as they were. A few examples per operation, so the
file adds well under a minute to the live suite once the stack is up.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode

from tests.fixtures.live_airflow import LiveAirflow

pytestmark = [pytest.mark.live, pytest.mark.kafka, pytest.mark.cosmos, pytest.mark.timeout(900)]

#: The source whose actions the viewer is refused: it keeps its UI keys in a Cosmos container.
SOURCE = "ui"


@pytest.fixture(scope="module")
def chatter_schema(live_airflow: LiveAirflow) -> Any:
    served = httpx.get(f"{live_airflow.url}/chatter/openapi.json", timeout=30)
    assert served.status_code == 200, served.text
    return schemathesis.openapi.from_url(f"{live_airflow.url}/chatter/openapi.json")


@pytest.fixture(scope="module")
def tokens(live_airflow: LiveAirflow) -> dict[str, str]:
    return {role: live_airflow.token(role) for role in ("admin", "viewer")}


@pytest.fixture(scope="module")
def watched(live_airflow: LiveAirflow, cosmos_database: Any) -> list[Any]:
    """The containers a viewer's action on ``SOURCE`` could change."""
    source = live_airflow.sources[SOURCE]
    store = cosmos_database.get_container_client(source.settings["ui_idempotency_container"])
    return [source.monitored, source.leases, store]


def _state(containers: list[Any]) -> list[set[tuple[str, str]]]:
    return [
        {(d["id"], d["_etag"]) for d in c.query_items("SELECT c.id, c._etag FROM c", enable_cross_partition_query=True)}
        for c in containers
    ]


def _fuzz(live: LiveAirflow, schema: Any, role: str, token: str, watched: list[Any]) -> None:
    """Each operation, with valid and with invalid requests (schemathesis' pytest plugin cannot load a schema from
    a session fixture here, so hypothesis drives its strategies directly)."""

    def check(case: Any) -> None:
        action = case.operation.method.upper() == "POST"
        refused_action = action and role == "viewer"
        if refused_action:
            case.path_parameters = {**(case.path_parameters or {}), "source": SOURCE}
            before = _state(watched)
        response = case.call_and_validate(base_url=f"{live.url}/chatter", headers={"Authorization": f"Bearer {token}"})
        if refused_action:
            assert response.status_code == 403, response.text
            assert _state(watched) == before

    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 8, [o.label for o in operations]
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            fuzz = settings(max_examples=3, deadline=None, database=None, suppress_health_check=list(HealthCheck))(
                given(case=operation.as_strategy(mode))(check)
            )
            try:
                fuzz()
            except Exception as error:
                raise AssertionError(f"{role} {operation.label} ({mode.value}): {error}") from error


def test_live_plugin_api_as_admin_answers_what_its_schema_declares(
    live_airflow: LiveAirflow, chatter_schema: Any, tokens: dict[str, str], watched: list[Any]
) -> None:
    _fuzz(live_airflow, chatter_schema, "admin", tokens["admin"], watched)


def test_live_plugin_api_as_viewer_answers_what_its_schema_declares_and_refuses_every_action(
    live_airflow: LiveAirflow, chatter_schema: Any, tokens: dict[str, str], watched: list[Any]
) -> None:
    _fuzz(live_airflow, chatter_schema, "viewer", tokens["viewer"], watched)

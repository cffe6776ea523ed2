"""The conf guard: a chatter manual DAG run with a conf key the DAG has no param for is refused at creation (400)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from airflow_chatter.airflow.conf_guard import STRICT_CONF, ChatterConfGuard


def _client() -> tuple[TestClient, list[dict[str, Any]]]:
    """A stand-in for Airflow's API behind the guard, recording what reached it."""
    received: list[dict[str, Any]] = []

    async def create_run(request: Request) -> JSONResponse:
        received.append({"path": request.url.path, "body": await request.json()})
        return JSONResponse({"dag_run_id": "manual__1"})

    app = Starlette(routes=[Route("/api/v2/dags/{dag_id}/dagRuns", create_run, methods=["POST"])])
    return TestClient(ChatterConfGuard(app)), received


@pytest.mark.parametrize(
    ("conf", "unknown"),
    [
        ({"colour": "red"}, "'colour'"),
        ({"dryrun": True}, "'dryrun'"),
        ({"source": "orders", "x": 1, "a": 2}, "'a', 'x'"),
    ],
)
def test_a_backfill_run_with_an_unknown_conf_key_is_refused_with_400_naming_it_and_nothing_is_created(
    conf: dict[str, Any], unknown: str
) -> None:
    client, received = _client()
    response = client.post("/api/v2/dags/chatter_backfill/dagRuns", json={"logical_date": None, "conf": conf})
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert f"unknown key(s) {unknown}" in detail and "accepts only source, start" in detail, detail
    assert received == [], "Airflow never saw the request"


def test_a_requeue_run_with_a_misspelt_key_is_refused_too() -> None:
    client, received = _client()
    response = client.post("/api/v2/dags/chatter_requeue/dagRuns", json={"conf": {"dry-run": False}})
    assert response.status_code == 400 and "'dry-run'" in response.json()["detail"]
    assert received == []


def test_a_run_with_only_known_keys_reaches_airflow_with_the_body_unchanged() -> None:
    client, received = _client()
    body = {"logical_date": None, "conf": {"source": "orders", "dry_run": False, "start": "resume"}, "note": "n"}
    response = client.post("/api/v2/dags/chatter_backfill/dagRuns", content=json.dumps(body))
    assert response.status_code == 200
    assert received == [{"path": "/api/v2/dags/chatter_backfill/dagRuns", "body": body}]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/v2/dags/chatter_drain_orders/dagRuns", {"conf": {"anything": 1}}),  # not a strict DAG
        ("/api/v2/dags/other/dagRuns", {"conf": {"colour": "red"}}),
        ("/api/v2/dags/chatter_backfill/dagRuns", {"logical_date": None}),  # no conf: the params' defaults
    ],
)
def test_other_dags_and_runs_without_conf_pass_through(path: str, body: dict[str, Any]) -> None:
    client, received = _client()
    assert client.post(path, json=body).status_code == 200
    assert received == [{"path": path, "body": body}]


def test_a_body_that_is_not_json_is_left_to_airflow() -> None:
    async def create_run(request: Request) -> JSONResponse:
        return JSONResponse({"raw": (await request.body()).decode()}, status_code=422)

    app = Starlette(routes=[Route("/api/v2/dags/{dag_id}/dagRuns", create_run, methods=["POST"])])
    response = TestClient(ChatterConfGuard(app)).post("/api/v2/dags/chatter_backfill/dagRuns", content=b"{not json")
    assert response.status_code == 422 and response.json() == {"raw": "{not json"}


@pytest.mark.airflow
def test_the_guard_knows_exactly_the_params_of_the_shipped_manual_dags(airflow_db: object) -> None:
    from airflow_chatter.airflow.dag_factory import backfill_dag, requeue_dag
    from tests.fixtures.airflow import DAGS_FOLDER

    for dag in (backfill_dag(DAGS_FOLDER), requeue_dag(DAGS_FOLDER)):
        assert set(dag.params) == set(STRICT_CONF[dag.dag_id]), dag.dag_id

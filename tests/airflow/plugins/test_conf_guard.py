"""The conf guard: a chatter manual DAG run with a conf key the DAG has no param for is refused at creation (400)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from airflow_chatter.airflow.plugins.conf_guard import STRICT_CONF, ChatterConfGuard


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
    from airflow_chatter.airflow.dags.factory import backfill_dag, requeue_dag
    from tests.fixtures.airflow import DAGS_FOLDER

    for dag in (backfill_dag(DAGS_FOLDER), requeue_dag(DAGS_FOLDER)):
        assert set(dag.params) == set(STRICT_CONF[dag.dag_id]), dag.dag_id


def _served_under(root_path: str) -> tuple[TestClient, list[str]]:
    """Airflow's api-server as it is built with ``[api] base_url = http://host<root_path>/``: a FastAPI app with that
    ``root_path`` and the guard added as a root middleware (``app.add_middleware``), recording the paths it served.
    It also serves a plugin's endpoint whose path merely contains the trigger endpoint's words."""
    from fastapi import FastAPI

    received: list[str] = []
    app = FastAPI(root_path=root_path)

    @app.post("/api/v2/dags/{dag_id}/dagRuns")
    async def create_run(request: Request) -> dict[str, str]:
        received.append(request.url.path)
        return {"dag_run_id": "manual__1"}

    @app.post("/pluginsv2/notes/api/v2/dags/{dag_id}/dagRuns")
    async def plugin_endpoint(request: Request) -> dict[str, str]:
        received.append(request.url.path)
        return {"note": "kept"}

    app.add_middleware(ChatterConfGuard)
    return TestClient(app), received


UNKNOWN = {"conf": {"colour": "red"}}


@pytest.mark.parametrize(
    ("root_path", "path"),
    [
        ("", "/api/v2/dags/chatter_backfill/dagRuns"),  # no base_url path
        ("/airflow", "/airflow/api/v2/dags/chatter_backfill/dagRuns"),  # a proxy that forwards the prefix
        ("/airflow", "/api/v2/dags/chatter_backfill/dagRuns"),  # a proxy that strips it (root_path still set)
        ("/team/a/airflow", "/team/a/airflow/api/v2/dags/chatter_requeue/dagRuns/"),
    ],
)
def test_a_run_with_an_unknown_conf_key_is_refused_under_the_api_servers_base_url_prefix(
    root_path: str, path: str
) -> None:
    client, received = _served_under(root_path)
    response = client.post(path, json=UNKNOWN)
    assert response.status_code == 400, response.text
    assert "unknown key(s) 'colour'" in response.json()["detail"]
    assert received == [], "Airflow never saw the request"


@pytest.mark.parametrize(
    ("root_path", "path"),
    [
        ("/airflow", "/airflow/pluginsv2/notes/api/v2/dags/chatter_backfill/dagRuns"),
        ("", "/pluginsv2/notes/api/v2/dags/chatter_backfill/dagRuns"),
        ("/airflow", "/airflowx/api/v2/dags/chatter_backfill/dagRuns"),  # not the prefix: only shares its letters
    ],
)
def test_a_path_that_only_contains_the_trigger_endpoints_words_is_not_guarded(root_path: str, path: str) -> None:
    client, received = _served_under(root_path)
    response = client.post(path, json=UNKNOWN)
    assert response.status_code != 400, response.text
    if "pluginsv2" in path:
        assert response.json() == {"note": "kept"} and received == [path]


_REAL_API_SERVER = """
import json, os, sys
from pathlib import Path
from devkit.local_env import apply_local_airflow_env, local_airflow_env
apply_local_airflow_env(local_airflow_env(Path(sys.argv[1]), dags_folder=Path(sys.argv[2])))
os.environ["AIRFLOW__API__BASE_URL"] = "http://127.0.0.1:1/airflow/"
from airflow.utils import db
db.initdb()
from airflow.api_fastapi.app import create_app
from starlette.testclient import TestClient
client = TestClient(create_app())
paths = ["/airflow/api/v2/dags/chatter_backfill/dagRuns", "/airflow/api/v2/dags/other/dagRuns"]
print(json.dumps({p: client.post(p, json={"conf": {"colour": "red"}}).status_code for p in paths}))
"""


@pytest.mark.airflow
def test_airflows_own_api_server_under_a_base_url_path_runs_the_guard_on_the_prefixed_trigger_endpoint(
    tmp_path: Path,
) -> None:
    # Airflow reads [api] base_url when its app module is first imported, so the api-server is built in a child.
    from tests.fixtures.airflow import DAGS_FOLDER, REPO_ROOT

    child = subprocess.run(
        [sys.executable, "-c", _REAL_API_SERVER, str(tmp_path), str(DAGS_FOLDER)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert child.returncode == 0, child.stderr[-2000:]
    statuses = json.loads(child.stdout.strip().splitlines()[-1])
    assert statuses == {
        "/airflow/api/v2/dags/chatter_backfill/dagRuns": 400,  # the guard, before Airflow's auth
        "/airflow/api/v2/dags/other/dagRuns": 401,  # not guarded: Airflow's own answer (no credentials)
    }


def _backfill_client() -> tuple[TestClient, list[dict[str, Any]], str]:
    """The guard with the API tests' fake backend (source ``orders`` on memory containers, its lease listed)."""
    from starlette.applications import Starlette as App

    from tests.airflow.plugins.test_ui_api import drained_backend

    backend = drained_backend()
    received: list[dict[str, Any]] = []

    async def create_run(request: Request) -> JSONResponse:
        received.append(await request.json())
        return JSONResponse({"dag_run_id": "manual__1"})

    app = App(routes=[Route("/api/v2/dags/{dag_id}/dagRuns", create_run, methods=["POST"])])
    monitored, _ = backend.stores["orders"]
    (token,) = [r.token for r in monitored.read_feed_ranges()]
    return TestClient(ChatterConfGuard(app, backend=backend)), received, token


@pytest.mark.parametrize(
    ("conf", "field"),
    [
        ({"source": "orders", "start": "2999-01-01T00:00:00+00:00"}, "start"),
        ({"source": "orders", "start": "2999-01-01T00:00:00"}, "start"),
        ({"source": "orders", "feed_ranges": ["no-such-range"]}, "feed_ranges"),
    ],
)
def test_a_backfill_that_would_read_nothing_is_refused_at_creation_naming_the_field(
    conf: dict[str, Any], field: str
) -> None:
    """Through REST (and Airflow's trigger form, the same request): a future start or an unknown feed range was
    accepted and failed a moment later in a red run; now no run is created."""
    client, received, _ = _backfill_client()
    response = client.post("/api/v2/dags/chatter_backfill/dagRuns", json={"logical_date": None, "conf": conf})
    assert response.status_code == 400 and response.json()["field"] == field, response.text
    assert field in response.json()["detail"]
    assert received == [], "no run was created"


def test_a_backfill_of_a_known_feed_range_reaches_airflow() -> None:
    client, received, token = _backfill_client()
    body = {"logical_date": None, "conf": {"source": "orders", "feed_ranges": [token], "start": "beginning"}}
    response = client.post("/api/v2/dags/chatter_backfill/dagRuns", json=body)
    assert response.status_code == 200 and received == [body], response.text

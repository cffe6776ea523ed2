"""A live deployment: the drain DAGs on a real Airflow 3.3 stack (api-server, scheduler, dag-processor, triggerer as
separate processes, LocalExecutor, SQLite, SimpleAuthManager) against the real broker and the Cosmos emulator.

Everything goes through the REST API a user (or the UI) uses. Every wait has a deadline. The tests run in file
order; the one that rewrites the sources file puts it back when it ends. ``CHATTER_SKIP_LIVE_AIRFLOW=1`` skips them.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from typing import Any

import httpx
import pytest
import yaml

from airflow_chatter.outbox.document import OutboxMessage
from tests.fixtures.kafka import SaslBroker, consume_records
from tests.fixtures.live_airflow import DESTINATION, PK_PATH, LiveAirflow, LiveSource, wait_until

# The first test also pays for the stack's start (about 40 s, at most the fixture's START_TIMEOUT_S).
pytestmark = [pytest.mark.live, pytest.mark.kafka, pytest.mark.cosmos, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def api(live_airflow: LiveAirflow) -> httpx.Client:
    return live_airflow.client("admin")


def _write_orders(source: LiveSource, count: int, tag: str) -> list[dict[str, Any]]:
    written = []
    for n in range(count):
        customer = f"cust-{tag}-{n % 3}"
        message = OutboxMessage(
            message_id=f"live-{tag}-{n}-{uuid.uuid4().hex[:8]}",
            destination=DESTINATION,
            body=json.dumps({"customer": customer, "order": n}),
            content_type="application/json",
        )
        written.append(source.monitored.create_item(message.to_document(PK_PATH, customer)))
    return written


def _statuses(source: LiveSource, documents: list[dict[str, Any]]) -> dict[str, str]:
    return {d["id"]: source.monitored.read_item(d["id"], d["customerId"])["status"] for d in documents}


def _assert_delivered(live: LiveAirflow, source: LiveSource, documents: list[dict[str, Any]]) -> None:
    assert set(_statuses(source, documents).values()) == {"delivered"}, _statuses(source, documents)
    records = consume_records(live.kafka_bootstrap, source.topic, len(documents), timeout_s=60)
    published = {dict(r.headers)["message-id"].decode() for r in records}
    assert published == {d["MessageId"] for d in documents}, "every outbox message reached its topic"


def _trigger(api: httpx.Client, dag_id: str, conf: dict[str, Any]) -> httpx.Response:
    return api.post(f"/api/v2/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": conf})


def _runs(api: httpx.Client, dag_id: str) -> list[dict[str, Any]]:
    response = api.get(f"/api/v2/dags/{dag_id}/dagRuns")
    assert response.status_code == 200, response.text
    return list(response.json()["dag_runs"])


def test_rly_the_scheduler_runs_the_drain_dag_after_unpause_and_it_delivers(
    live_airflow: LiveAirflow, api: httpx.Client
) -> None:
    source = live_airflow.sources["sched"]
    documents = _write_orders(source, 12, "sched")

    live_airflow.unpause(api, source.drain_dag_id)
    run = live_airflow.wait_for_run(api, source.drain_dag_id, timeout_s=180)

    assert run["run_type"] == "scheduled", "the scheduler, not a manual trigger, started the run"
    [summary] = [live_airflow.xcom(api, run, "drain", 0)]
    assert summary["published"] == 12 and summary["delivered"] == 12, summary
    # Every try counts: the try left its counts on its lease, under this task run, for a retry to report (read at
    # once; should the next scheduled run have released the lease in between, it names that run of the same task).
    lease = source.leases.read_item(summary["lease"], summary["lease"])
    assert summary["earlier_tries"] == [], "a first try"
    recorded = lease["run_tries"]
    [entry] = recorded["tries"]
    if recorded["run"] == f"{source.drain_dag_id}/{run['dag_run_id']}/drain/0":
        assert (entry["try"], entry["published"], entry["error_type"]) == (1, 12, None), entry
    else:
        assert recorded["run"].startswith(f"{source.drain_dag_id}/scheduled__"), recorded
        assert recorded["run"].endswith("/drain/0") and entry["try"] == 1, recorded
    _assert_delivered(live_airflow, source, documents)


def test_a_manual_backfill_run_with_valid_params_runs_and_delivers(
    live_airflow: LiveAirflow, api: httpx.Client
) -> None:
    source = live_airflow.sources["bf"]
    documents = _write_orders(source, 5, "bf")
    live_airflow.unpause(api, "chatter_backfill")

    response = _trigger(
        api, "chatter_backfill", {"source": "bf", "start": "beginning", "dry_run": False, "document_budget": 1000}
    )

    assert response.status_code == 200, response.text
    run = live_airflow.wait_for_run(api, "chatter_backfill", response.json()["dag_run_id"], timeout_s=180)
    summaries = [live_airflow.xcom(api, run, "backfill_drain", 0)]
    assert [s["published"] for s in summaries] == [5], summaries
    _assert_delivered(live_airflow, source, documents)


@pytest.mark.parametrize(
    ("conf", "named"),
    [
        pytest.param({"point_in_time": "yesterday"}, "point_in_time", id="point_in_time-not-a-timestamp"),
        pytest.param(
            {"source": "bf", "start": "point_in_time", "point_in_time": "yesterday"},
            "point_in_time",
            id="point_in_time-not-a-timestamp-with-start",
        ),
        pytest.param({"colour": "red"}, "colour", id="unknown-key"),
        pytest.param({"source": "bf", "dryrun": True}, "dryrun", id="misspelt-dry_run"),
    ],
)
def test_a_backfill_run_with_invalid_params_is_refused_at_creation(
    live_airflow: LiveAirflow, api: httpx.Client, conf: dict[str, Any], named: str
) -> None:
    live_airflow.wait_for_dag(api, "chatter_backfill")
    before = len(_runs(api, "chatter_backfill"))

    response = _trigger(api, "chatter_backfill", conf)
    if response.status_code == 200:
        # Wrongly accepted: remove the run before it drains anything, so the later tests see the DAG idle.
        api.delete(f"/api/v2/dags/chatter_backfill/dagRuns/{response.json()['dag_run_id']}")

    assert response.status_code in (400, 422), f"{response.status_code} {response.text}"
    assert named in response.text, f"the refusal names {named!r}: {response.text}"
    assert len(_runs(api, "chatter_backfill")) == before, "no run was created"


def _task_instance(api: httpx.Client, run: dict[str, Any], task_id: str) -> dict[str, Any] | None:
    response = api.get(f"/api/v2/dags/{run['dag_id']}/dagRuns/{run['dag_run_id']}/taskInstances/{task_id}")
    return response.json() if response.status_code == 200 else None


def test_the_wait_sensor_defers_and_the_triggerer_resumes_it_when_documents_arrive(
    live_airflow: LiveAirflow, api: httpx.Client
) -> None:
    source = live_airflow.sources["wait"]
    live_airflow.unpause(api, source.wait_dag_id)
    response = _trigger(api, source.wait_dag_id, {})
    assert response.status_code == 200, response.text
    run = response.json()

    def deferred() -> dict[str, Any] | None:
        ti = _task_instance(api, run, "wait_for_pending")
        if ti and ti["state"] in ("failed", "upstream_failed", "success"):
            pytest.fail(f"the sensor ended {ti['state']} before any document was written")
        return ti if ti and ti["state"] == "deferred" else None

    ti = wait_until(deferred, timeout_s=120, what="the sensor to defer (task state 'deferred')")
    assert ti["trigger"]["classpath"].endswith("ChatterPendingOutboxTrigger"), ti["trigger"]
    documents = _write_orders(source, 3, "wait")

    # The trigger polls every 60 s (the DAG's default), so the run finishes within a poll plus a drain; its first
    # poll may already see the documents if the triggerer picked it up after they were written.
    finished = live_airflow.wait_for_run(api, source.wait_dag_id, run["dag_run_id"], timeout_s=180)

    event = live_airflow.xcom(api, finished, "wait_for_pending")
    assert event["pending"] >= 1, event
    _assert_delivered(live_airflow, source, documents)


def _ui_test(api: httpx.Client, connection_id: str) -> dict[str, Any]:
    """What the UI's Test button posts for a stored connection: its fields as shown, the password masked."""
    shown = api.get(f"/api/v2/connections/{connection_id}")
    assert shown.status_code == 200, shown.text
    body = {k: v for k, v in shown.json().items() if k in ("connection_id", "conn_type", "host", "port", "login")}
    body.update({"extra": shown.json().get("extra"), "schema": shown.json().get("schema") or ""})
    body["password"] = "***"
    response = api.post("/api/v2/connections/test", json=body)
    assert response.status_code == 200, response.text
    return dict(response.json())


@pytest.mark.parametrize("conn_type", ["chattercosmos", "chatterkafka"])
def test_the_ui_test_connection_endpoint_succeeds_for_a_stored_connection(
    live_airflow: LiveAirflow, api: httpx.Client, conn_type: str
) -> None:
    connection_id = f"{conn_type}_ui_{uuid.uuid4().hex[:6]}"
    if conn_type == "chattercosmos":
        stored = live_airflow.cosmos_connection
        body = {
            "connection_id": connection_id,
            "conn_type": conn_type,
            "host": stored["host"],  # the endpoint, where Airflow expects an address
            "password": stored["password"],
            "extra": json.dumps(stored["extra"]),
        }
    else:
        body = {
            "connection_id": connection_id,
            "conn_type": conn_type,
            "host": live_airflow.kafka_bootstrap,  # the bootstrap servers
            "extra": json.dumps({"security_protocol": "PLAINTEXT"}),
        }
    created = api.post("/api/v2/connections", json=body)
    assert created.status_code == 201, created.text
    try:
        result = _ui_test(api, connection_id)
    finally:
        api.delete(f"/api/v2/connections/{connection_id}")

    assert result["status"] is True, result["message"]


def test_the_ui_test_connection_with_a_wrong_sasl_password_says_so_and_names_the_connection(
    api: httpx.Client, kafka_sasl_broker: SaslBroker
) -> None:
    """The api-server runs the Test button's check in its own busy process, under a random connection id: the
    answer is the broker's refusal (as the CLI says), named after the connection tested, without the password."""
    connection_id = f"chatterkafka_sasl_{uuid.uuid4().hex[:6]}"
    wrong = "wrong-" + uuid.uuid4().hex[:8]
    body = {
        "connection_id": connection_id,
        "conn_type": "chatterkafka",
        "host": kafka_sasl_broker.address,
        "login": kafka_sasl_broker.username,
        "password": wrong,
        "extra": json.dumps({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN"}),
    }
    created = api.post("/api/v2/connections", json=body)
    assert created.status_code == 201, created.text
    try:
        result = _ui_test(api, connection_id)  # the stored (wrong) password, masked in the request
    finally:
        api.delete(f"/api/v2/connections/{connection_id}")

    message = result["message"]
    assert result["status"] is False, message
    assert message.startswith(f"Kafka connection {connection_id!r} failed: "), (
        "the message names the connection the user tested, not the endpoint's transient id: " + message
    )
    assert f"SASL authentication failed for user {kafka_sasl_broker.username!r}" in message, message
    assert "cannot reach" not in message, "a refused password is not a network problem: " + message
    assert wrong not in message, "the password is never echoed"


def test_a_broken_source_entry_leaves_the_other_sources_dags_running(
    live_airflow: LiveAirflow, api: httpx.Client
) -> None:
    source = live_airflow.sources["sched"]
    dag = live_airflow.wait_for_dag(api, source.drain_dag_id)
    original = live_airflow.sources_file.read_text()
    broken = {
        **source.entry(live_airflow.database),
        "name": "broken",
        "monitored_container": "broken-orders",
        "max_batch_size": 5000,
    }
    try:
        config = yaml.safe_load(original)
        config["sources"].append(broken)
        live_airflow.sources_file.write_text(yaml.safe_dump(config, sort_keys=False))
        reparse = api.put(f"/api/v2/parseDagFile/{dag['file_token']}")
        assert reparse.status_code in (200, 201), reparse.text

        def broken_reported() -> list[dict[str, Any]] | None:
            errors = api.get("/api/v2/importErrors").json()["import_errors"]
            named = [e for e in errors if "broken" in e["stack_trace"] and "max_batch_size" in e["stack_trace"]]
            return named or None

        wait_until(broken_reported, timeout_s=120, what="an import error naming the broken source and its field")

        still = api.get(f"/api/v2/dags/{source.drain_dag_id}").json()
        assert still.get("is_stale") is False, f"{source.drain_dag_id} stays active: {still}"
        documents = _write_orders(source, 2, "after-broken")
        triggered = _trigger(api, source.drain_dag_id, {})
        assert triggered.status_code == 200, triggered.text
        live_airflow.wait_for_run(api, source.drain_dag_id, triggered.json()["dag_run_id"], timeout_s=180)
        assert set(_statuses(source, documents).values()) == {"delivered"}
    finally:
        live_airflow.sources_file.write_text(original)


def _stack_pids(live: LiveAirflow) -> set[int]:
    """Every process of the stack: the members of each component's process group (pid files of the script)."""
    pids: set[int] = set()
    for pid_file in (live.home / "pids").glob("*.pid"):
        group = pid_file.read_text().split()[0]
        members = subprocess.run(["pgrep", "-g", group], capture_output=True, text=True, timeout=30).stdout.split()
        pids.update(int(p) for p in members)
    return pids


def test_every_socket_the_stack_listens_on_is_bound_to_loopback(live_airflow: LiveAirflow) -> None:
    pids = _stack_pids(live_airflow)
    assert len(pids) >= 4, "the four components run"

    listing = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, timeout=30, check=True).stdout
    ours = [line.split() for line in listing.splitlines() if set(map(int, re.findall(r"pid=(\d+)", line))) & pids]

    addresses = sorted(fields[3] for fields in ours)
    assert addresses == [live_airflow.url.removeprefix("http://")], (
        f"only the api-server listens, on 127.0.0.1: {addresses}"
    )

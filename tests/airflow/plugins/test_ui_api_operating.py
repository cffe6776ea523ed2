"""What an operator and a tester hit in the plugin's API: a broken sources entry, actions without an
ETag, a repeated requeue, runs older than the latest page and backfill runs, error shapes and the OpenAPI schema."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from airflow_chatter.adapters.memory.container import MemoryDocumentContainer
from airflow_chatter.adapters.memory.faults import fail
from airflow_chatter.airflow.plugins.api.app import create_app
from airflow_chatter.airflow.plugins.api.reads import MAX_RUNS
from airflow_chatter.airflow.plugins.api.shapes import MAX_ECHO
from airflow_chatter.airflow.sources import load_sources_isolated
from airflow_chatter.drain.tries import Attempt
from airflow_chatter.operations.monitoring import RunRecord
from airflow_chatter.ports import ContainerError, ServiceUnavailable, Throttled
from airflow_chatter.testing.handlers import first_of
from tests.airflow.plugins.test_ui_api import (
    GRANTS,
    OTHER,
    SOURCE,
    FakeBackend,
    _requeue_body,
    auth,
    drained_backend,
    key,
)
from tests.unit.drain._drain_support import outbox_doc

REQUEUE = "/api/sources/orders/undeliverable/requeue"


@pytest.fixture
def backend() -> FakeBackend:
    return drained_backend()


@pytest.fixture
def client(backend: FakeBackend) -> TestClient:
    return TestClient(create_app(backend))


def _entry(name: str, container: str, leases: str) -> dict[str, Any]:
    return {
        "name": name,
        "database": "db",
        "monitored_container": container,
        "lease_container": leases,
        "partition_key_paths": "/tenantId",
    }


def test_a_broken_entry_is_listed_as_broken_and_the_valid_sources_still_answer(
    backend: FakeBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One broken entry must not blank the page: the API parses the file entry by entry, as the DAG files do."""
    broken = _entry("broken", "c", "l")
    del broken["database"]
    path = tmp_path / "chatter_sources.yaml"
    path.write_text(
        yaml.safe_dump(
            {"sources": [_entry("orders", "orders", "leases"), broken, _entry("billing", "billing", "leases-b")]}
        )
    )
    backend.loaded = load_sources_isolated(path)
    monkeypatch.setitem(GRANTS["viewer"], "chatter_drain_broken", {"GET"})
    app = TestClient(create_app(backend))

    listed = app.get("/api/sources", headers=auth("viewer"))
    assert listed.status_code == 200, listed.text
    assert [s["name"] for s in listed.json()["sources"]] == [SOURCE.name, OTHER.name], "every valid source is shown"
    (entry,) = listed.json()["broken"]
    assert entry["name"] == "broken" and entry["dag_id"] == "chatter_drain_broken"
    assert entry["problems"] == [{"field": "sources[1] (broken).database", "message": "Field required"}], entry
    assert app.get("/api/sources/orders", headers=auth("viewer")).status_code == 200, "a healthy source answers"
    one = app.get("/api/sources/broken", headers=auth("viewer"))
    assert one.status_code == 404 and one.json()["field"] == "sources[1] (broken).database", one.text
    rows = app.get("/api/overview", headers=auth("viewer")).json()["rows"]
    assert rows[0]["state"] == "broken config" and rows[0]["source"] == "broken", rows
    assert "sources[1] (broken).database" in rows[0]["error"], rows[0]
    assert sorted(r["source"] for r in rows[1:]) == sorted([SOURCE.name, OTHER.name]), "the valid sources stay listed"


def test_a_broken_entry_is_hidden_from_who_may_not_read_its_dag(backend: FakeBackend, tmp_path: Path) -> None:
    broken = _entry("broken", "c", "l")
    del broken["database"]
    path = tmp_path / "chatter_sources.yaml"
    path.write_text(yaml.safe_dump({"sources": [_entry("orders", "orders", "leases"), broken]}))
    backend.loaded = load_sources_isolated(path)
    listed = TestClient(create_app(backend)).get("/api/sources", headers=auth("viewer")).json()
    assert listed["broken"] == [], "the viewer has no permission on chatter_drain_broken"


def test_a_requeue_without_an_etag_is_refused_naming_etag_and_changes_nothing(client: TestClient) -> None:
    body = _requeue_body(client)
    del body["documents"][0]["etag"]
    response = client.post(REQUEUE, json=body, headers={**auth("admin"), **key("e1")})
    assert response.status_code == 422 and response.json()["field"] == "etag", response.text
    assert client.get("/api/sources/orders", headers=auth("viewer")).json()["undeliverable_count"] == 2


def test_a_release_without_an_etag_is_refused_and_the_running_drain_keeps_its_lease(
    client: TestClient, backend: FakeBackend
) -> None:
    """A ``{}`` release took a lease from a running drain: the ETag is required, not optional."""
    engine = backend.engine(owner="running-drain")
    (lease,) = engine.store.list_leases()
    engine.store.acquire(lease.id)
    response = client.post(
        f"/api/sources/orders/leases/{lease.id}/release", json={}, headers={**auth("admin"), **key("e2")}
    )
    assert response.status_code == 422 and response.json()["field"] == "etag", response.text
    assert engine.store.get(lease.id).owner == "running-drain", "nothing was released"


def test_a_repeated_requeue_says_the_documents_are_pending_already(client: TestClient) -> None:
    body = _requeue_body(client)
    first = client.post(REQUEUE, json=body, headers={**auth("admin"), **key("q1")})
    again = client.post(REQUEUE, json=body, headers={**auth("admin"), **key("q2")})
    assert first.status_code == again.status_code == 200
    ids = sorted(d["id"] for d in body["documents"])
    assert sorted(again.json()["already_pending"]) == ids and again.json()["not_found"] == [], again.text


def test_a_422_echoes_a_long_input_only_cut_short(client: TestClient) -> None:
    response = client.post(
        REQUEUE, json={"documents": [{"id": "x" * 20_000, "etag": '"e"'}]}, headers={**auth("admin"), **key("q3")}
    )
    assert response.status_code == 422 and response.json()["field"] == "id", response.text
    assert len(response.text) < 4 * MAX_ECHO, "the 20,000-character id is not echoed back"


@pytest.mark.parametrize(
    ("headers", "status"),
    [({}, 400), ({"Idempotency-Key": "not-quoted"}, 400)],
)
def test_idempotency_refusals_have_the_apis_one_shape_naming_the_header(
    client: TestClient, headers: dict[str, str], status: int
) -> None:
    response = client.post(REQUEUE, json=_requeue_body(client), headers={**auth("admin"), **headers})
    assert response.status_code == status and response.json()["field"] == "Idempotency-Key", response.text
    assert response.headers["content-type"].startswith("application/json")


def test_idempotency_key_reused_with_another_body_names_the_header(client: TestClient) -> None:
    body = _requeue_body(client)
    client.post(REQUEUE, json=body, headers={**auth("admin"), **key("same")})
    body["documents"] = body["documents"][:1]
    reused = client.post(REQUEUE, json=body, headers={**auth("admin"), **key("same")})
    assert reused.status_code == 422 and reused.json()["field"] == "Idempotency-Key", reused.text


def _record(run_id: str, run_type: str = "scheduled", source: str | None = None) -> RunRecord:
    return RunRecord(run_id, run_type, "success", None, (), source)


def test_a_run_older_than_the_latest_page_is_found_by_its_id(client: TestClient, backend: FakeBackend) -> None:
    backend.runs_by_dag[SOURCE.dag_id] = [_record(f"scheduled__{n}") for n in range(MAX_RUNS + 10)]
    old = f"scheduled__{MAX_RUNS + 5}"
    response = client.get(f"/api/sources/orders/runs/{old}", headers=auth("viewer"))
    assert response.status_code == 200 and response.json()["run_id"] == old, response.text
    assert response.json()["point"]["run_id"] == old, "the run's totals, as the page's run line shows them"
    tab = client.get(f"/api/dags/{SOURCE.dag_id}/runs/{old}", headers=auth("viewer"))
    assert tab.status_code == 200 and tab.json()["source"] == "orders" and tab.json()["backfill"] is False


def test_backfill_runs_are_shown_for_their_source_and_in_their_runs_tab(
    client: TestClient, backend: FakeBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(GRANTS["viewer"], "chatter_backfill", {"GET"})
    backend.runs_by_dag["chatter_backfill"] = [
        _record("manual__b2", "manual", source="billing"),
        _record("manual__b1", "manual", source="orders"),
    ]
    tab = client.get("/api/dags/chatter_backfill/runs/manual__b1", headers=auth("viewer"))
    assert tab.status_code == 200 and tab.json()["source"] == "orders" and tab.json()["backfill"] is True, tab.text
    view = client.get("/api/sources/orders", headers=auth("viewer")).json()
    assert [r["run_id"] for r in view["backfill_runs"]] == ["manual__b1"], "only the orders backfill"
    assert client.get("/api/sources/orders/runs/manual__b1", headers=auth("viewer")).status_code == 200
    other = client.get("/api/sources/orders/runs/manual__b2", headers=auth("viewer"))
    assert other.status_code == 404 and other.json()["field"] == "run_id", "billing's backfill is not orders'"
    unknown = client.get("/api/dags/some_other_dag/runs/x", headers=auth("admin"))
    assert unknown.status_code in (403, 404)


def test_the_openapi_schema_declares_the_key_header_the_security_and_the_error_answers(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    op = schema["paths"]["/api/sources/{source}/undeliverable/requeue"]["post"]
    (header,) = [p for p in op["parameters"] if p["in"] == "header"]
    assert header["name"] == "Idempotency-Key" and header["required"] is True
    schemes = schema["components"]["securitySchemes"]
    assert {"HTTPBearer", "APIKeyCookie"} <= set(schemes) and op["security"], "both ways to authenticate"
    for status in ("400", "401", "403", "404", "409", "422"):
        assert op["responses"][status]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/Problem"
        }, status
    read = schema["paths"]["/api/sources"]["get"]
    assert {"401", "403"} <= set(read["responses"]) and read["security"]
    etag = schema["components"]["schemas"]["ReleaseBody"]
    assert etag["required"] == ["etag"], "the conditional write is required"


def test_a_backfill_from_the_future_is_refused_naming_start_and_no_run_is_created(
    client: TestClient, backend: FakeBackend
) -> None:
    response = client.post(
        "/api/sources/orders/backfill", json={"start": "2999-01-01T00:00:00Z"}, headers={**auth("admin"), **key("f1")}
    )
    assert response.status_code == 422 and response.json()["field"] == "start", response.text
    assert backend.triggered == [], "refused before a run was created"


def test_the_airflow_backend_reads_the_sources_file_entry_by_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The api-server's backend itself, not the fake: a broken entry used to make it raise for the whole file."""
    from airflow_chatter.airflow.plugins.backend import AirflowBackend
    from airflow_chatter.airflow.sources import SOURCES_FILE_ENV

    broken = _entry("broken", "c", "l")
    del broken["database"]
    path = tmp_path / "chatter_sources.yaml"
    path.write_text(yaml.safe_dump({"sources": [_entry("orders", "orders", "leases"), broken]}))
    monkeypatch.setenv(SOURCES_FILE_ENV, str(path))
    loaded = AirflowBackend().sources()
    assert loaded.config is not None and [s.name for s in loaded.config.sources] == ["orders"]
    assert [b.name for b in loaded.broken] == ["broken"]


# -- Cosmos DB errors: the project's clients hand every 429 to the caller (F-11) -----------------------------------


def test_f11_a_throttled_read_answers_503_with_retry_after_in_the_apis_shape(
    client: TestClient, backend: FakeBackend
) -> None:
    monitored, _ = backend.stores[SOURCE.name]
    monitored.handler = first_of(
        monitored.handler, fail("query", error=Throttled("429 request rate is large", retry_after_ms=2300))
    )
    response = client.get("/api/sources/orders", headers=auth("viewer"))
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "3", "the server's 2.3 s, rounded up"
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert "throttling" in body["detail"] and "'orders'" in body["detail"] and "field" not in body, body


def test_another_cosmos_error_on_a_read_answers_502_naming_the_status_not_the_services_text(
    client: TestClient, backend: FakeBackend, caplog: pytest.LogCaptureFixture
) -> None:
    _, leases = backend.stores[SOURCE.name]
    secret = "AccountKey=c2VjcmV0LWtleQ=="
    leases.handler = first_of(leases.handler, fail("query", error=ContainerError(f"boom {secret}", status_code=500)))
    with caplog.at_level(logging.WARNING, logger="airflow_chatter.ui"):
        response = client.get("/api/overview", headers=auth("viewer"))
    assert response.status_code == 502, response.text
    assert response.json()["detail"] == "Cosmos DB answered 500 (ContainerError)", response.text
    assert secret not in response.text
    assert "boom" in caplog.text, "the service's own text goes to the api-server log for the operator"


def test_f11_a_throttled_idempotency_store_answers_503_and_the_action_does_not_run(
    backend: FakeBackend, caplog: pytest.LogCaptureFixture
) -> None:
    """The guard's reserve meets a 429: nothing is reserved, nothing requeued, and the same key works afterwards."""
    backend.orders = SOURCE.model_copy(update={"ui_idempotency_container": "ui-idempotency"})
    store = MemoryDocumentContainer(partition_key_paths=("/scope",), default_ttl=-1, container_id="ui-idempotency")
    backend.idempotency = store
    store.handler = fail("create", error=Throttled("429", retry_after_ms=500), times=1)
    client = TestClient(create_app(backend))
    body = _requeue_body(client)
    with caplog.at_level(logging.INFO, logger="airflow_chatter.ui"):
        throttled = client.post(REQUEUE, json=body, headers={**auth("admin"), **key("t1")})
        assert throttled.status_code == 503 and throttled.headers["retry-after"] == "1", throttled.text
        assert "field" not in throttled.json() and "throttled" in throttled.json()["detail"], throttled.text
        assert "UI requeue by" not in caplog.text, "the action did not run"
        again = client.post(REQUEUE, json=body, headers={**auth("admin"), **key("t1")})
    assert again.status_code == 200 and len(again.json()["requeued"]) == 2, again.text


def test_every_try_counts_in_the_pages_totals_and_the_runs_point(backend: FakeBackend) -> None:
    """A run whose drain was tried three times, the first two failing on the stamp after publishing: the page's
    totals and the run's point count all three tries, and the failure counts say why the lease's is 0."""
    monitored, _ = backend.stores[SOURCE.name]
    monitored.create(outbox_doc("retried-1"), "t1")
    engine = backend.engine()
    (lease,) = engine.store.list_leases()
    for number in (1, 2, 3):
        if number < 3:
            monitored.handler = fail("patch", error=ServiceUnavailable("stamp down"), times=1)
        summary = engine.drain_lease(lease.id, attempt=Attempt("chatter_drain_orders/retried/drain/0", number))
    backend.runs_by_dag[SOURCE.dag_id].insert(
        0, RunRecord("retried", "scheduled", "success", None, (summary.to_dict(),))
    )
    client = TestClient(create_app(backend))

    view = client.get("/api/sources/orders", headers=auth("viewer")).json()
    point = client.get("/api/sources/orders/runs/retried", headers=auth("viewer")).json()["point"]

    assert (point["published"], point["delivered"], point["tries"]) == (3, 1, 3), point
    assert view["totals"]["published"] == 1 + 3, "the first run's one document and the retried run's three tries"
    assert view["totals"]["confirmation_failures"] == 2, view["totals"]
    counts = view["failure_counts"]
    assert (counts["in_runs"], counts["on_leases"]) == (2, 0) and "a success resets them" in counts["why_they_differ"]


def test_releasing_a_lease_that_does_not_exist_is_404_naming_lease_id(client: TestClient) -> None:
    response = client.post(
        "/api/sources/orders/leases/no-such-lease/release", json={"etag": '"e"'}, headers={**auth("admin"), **key("n1")}
    )
    assert response.status_code == 404 and response.json()["field"] == "lease_id", response.text
    assert "does not exist" in response.json()["detail"]


@pytest.mark.parametrize("path", [REQUEUE, "/api/sources/orders/leases/some-lease/release"])
def test_an_action_body_refuses_an_unknown_field_naming_it(client: TestClient, path: str) -> None:
    """As the backfill body does: a misspelt field is refused, never silently ignored."""
    body = {**_requeue_body(client), "etag": '"e"', "dryrun": True}
    if path != REQUEUE:
        body = {"etag": '"e"', "dryrun": True}
    response = client.post(path, json=body, headers={**auth("admin"), **key(f"u-{path[-7:]}")})
    assert response.status_code == 422 and response.json()["field"] in ("dryrun", "etag"), response.text
    assert "dryrun" in response.text or "etag" in response.text
    assert client.get("/api/sources/orders", headers=auth("viewer")).json()["undeliverable_count"] == 2


def test_a_body_that_is_not_json_is_refused_naming_the_body(client: TestClient) -> None:
    response = client.post(
        REQUEUE,
        content=b"{not json",
        headers={**auth("admin"), **key("j1"), "Content-Type": "application/json"},
    )
    assert response.status_code == 422 and response.json()["field"] == "body", response.text


def test_requeueing_a_delivered_document_says_it_is_delivered_not_not_found(
    client: TestClient, backend: FakeBackend
) -> None:
    monitored, _ = backend.stores["orders"]
    good = next(d for d in monitored.query("SELECT * FROM c") if d.get("status") == "delivered")
    again = client.post(
        REQUEUE, json={"documents": [{"id": good["id"], "etag": good["_etag"]}]}, headers={**auth("admin"), **key("d2")}
    )
    assert again.status_code == 200, again.text
    assert (again.json()["already_delivered"], again.json()["not_found"]) == ([good["id"]], []), again.text


def test_a_viewer_is_not_shown_the_idempotency_store_warning_an_editor_is(client: TestClient) -> None:
    """The warning is about acting twice; a viewer cannot act."""
    viewer = client.get("/api/sources/orders", headers=auth("viewer")).json()["idempotency"]
    admin = client.get("/api/sources/orders", headers=auth("admin")).json()["idempotency"]
    assert viewer["warning"] is None and viewer["store"] == "memory", viewer
    assert admin["warning"] and "ui_idempotency_container is not set" in admin["warning"], admin


def test_a_backfill_of_an_unknown_feed_range_from_the_page_is_refused_naming_feed_ranges(
    client: TestClient, backend: FakeBackend
) -> None:
    response = client.post(
        "/api/sources/orders/backfill",
        json={"feed_ranges": ["no-such-range"]},
        headers={**auth("admin"), **key("fr1")},
    )
    assert response.status_code == 422 and response.json()["field"] == "feed_ranges", response.text
    assert backend.triggered == [], "no run was created"


def test_f11_the_source_answer_carries_the_guarantee_transactions_and_throttling_its_drains_reported(
    backend: FakeBackend,
) -> None:
    """F-11: a drain whose stamps met two 429s reports them and the time it waited; the page's answer sums them with
    an exactly-once run's transactions, fenced drain, recovered page and paced rate, as the summaries (XCom) said,
    and says which tries the figures cover."""
    monitored, _ = backend.stores[SOURCE.name]
    monitored.create(outbox_doc("throttled-1"), "t1")
    engine = backend.engine()
    (lease,) = engine.store.list_leases()
    monitored.handler = fail("patch", error=Throttled("busy", retry_after_ms=1000), times=2)
    throttled = engine.drain_lease(lease.id)
    assert throttled.delivered == 1 and throttled.throttled == 2, throttled.log_line()
    exactly_once = {
        "lease": lease.id,
        "guarantee": "exactly_once",
        "transactions_committed": 3,
        "transactions_aborted": 1,
        "fenced": True,
        "recovered_pages": 1,
        "paced_request_units_per_second": 250.0,
    }
    backend.runs_by_dag[SOURCE.dag_id][:0] = [
        RunRecord("exactly-once", "manual", "success", None, (exactly_once,)),
        RunRecord("throttled", "scheduled", "success", None, (throttled.to_dict(),)),
    ]

    delivery = TestClient(create_app(backend)).get("/api/sources/orders", headers=auth("viewer")).json()["delivery"]

    assert delivery["guarantee"] == "exactly_once" and delivery["guarantees"] == ["exactly_once", "at_least_once"]
    assert (delivery["transactions_committed"], delivery["transactions_aborted"]) == (3, 1), delivery
    assert (delivery["fenced_drains"], delivery["recovered_pages"]) == (1, 1), delivery
    assert delivery["throttled"] == 2 and delivery["throttle_waited_seconds"] == round(
        throttled.throttle_waited_seconds, 1
    )
    assert delivery["throttle_waited_seconds"] > 0, delivery
    assert (delivery["paced_run"], delivery["paced_request_units_per_second"]) == ("exactly-once", 250.0), delivery
    assert delivery["covers"].startswith("the last try of each drain task"), delivery

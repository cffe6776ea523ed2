"""The plugin's JSON API (``airflow_chatter.airflow.plugins.api``) over in-memory containers and a fake backend
(users, DAG permissions, runs): status codes, the fields errors name, ETag-conditional actions, idempotency, logs."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi import Request
from fastapi.testclient import TestClient

from airflow_chatter.airflow.plugins.api.access import User
from airflow_chatter.airflow.plugins.api.app import create_app
from airflow_chatter.airflow.plugins.api.shapes import (
    InvalidQueryError,
    NotAuthorized,
    ParamsRejected,
    decode_continuation,
    encode_continuation,
    valid_page_size,
)
from airflow_chatter.airflow.plugins.conf_guard import STRICT_CONF
from airflow_chatter.airflow.sources import LoadedSources, SourceConfig, SourcesFile
from airflow_chatter.drain.engine import DrainEngine
from airflow_chatter.drain.follow import StopRequest
from airflow_chatter.drain.suspension import SuspensionState
from airflow_chatter.operations.monitoring import MAX_PAGE_SIZE, RunRecord
from airflow_chatter.ports import DocumentContainer, PatchOperation
from airflow_chatter.testing.clock import ManualClock
from airflow_chatter.testing.fakes import FakePublisher
from tests.unit.drain._drain_support import ABSENT, T0, memory_container, outbox_doc
from tests.unit.drain._follow_script import Script

PATHS = ("/tenantId",)
SOURCE = SourceConfig(
    name="orders",
    database="db",
    monitored_container="orders",
    lease_container="leases",
    partition_key_paths="/tenantId",
)
OTHER = SourceConfig(
    name="billing",
    database="db",
    monitored_container="billing",
    lease_container="leases-b",
    partition_key_paths="/tenantId",
)
#: user -> {dag_id: methods}
GRANTS = {
    "admin": {SOURCE.dag_id: {"GET", "PUT", "POST"}, OTHER.dag_id: {"GET", "PUT"}, "chatter_backfill": {"POST"}},
    "viewer": {SOURCE.dag_id: {"GET"}, OTHER.dag_id: {"GET"}},
    "outsider": {OTHER.dag_id: {"GET"}},
}


@dataclass
class FakeBackend:
    clock: ManualClock = field(default_factory=lambda: ManualClock(T0))
    runs_by_dag: dict[str, list[RunRecord]] = field(default_factory=dict)
    triggered: list[dict[str, Any]] = field(default_factory=list)
    #: The ``orders`` source as configured (a test may name a ``ui_idempotency_container``) and that container.
    orders: SourceConfig = SOURCE
    idempotency: DocumentContainer | None = None
    #: What ``sources()`` answers when a test gives a sources file as parsed (entry by entry) instead.
    loaded: LoadedSources | None = None

    def __post_init__(self) -> None:
        self.stores = {
            s.name: (
                memory_container(self.clock, container_id=s.monitored_container),
                memory_container(self.clock, paths=("/id",), container_id=s.lease_container),
            )
            for s in (SOURCE, OTHER)
        }

    async def authenticate(self, request: Request) -> User:
        header = request.headers.get("authorization", "")
        token = header.removeprefix("Bearer ") if header.startswith("Bearer ") else request.cookies.get("_token")
        if not token:
            raise NotAuthorized(401, "Not authenticated")
        if token not in GRANTS:
            raise NotAuthorized(403, "Invalid JWT token")
        return User(token, token)

    def authorized(self, user: User, method: str, dag_id: str, *, run: bool = False) -> bool:
        return method in GRANTS[user.name].get(dag_id, set())

    def sources(self) -> LoadedSources:
        if self.loaded is not None:
            return self.loaded
        return LoadedSources("chatter_sources.yaml", SourcesFile(sources=[self.orders, OTHER]), ())

    def containers(self, source: SourceConfig) -> tuple[DocumentContainer, DocumentContainer]:
        return self.stores[source.name]

    def idempotency_container(self, source: SourceConfig) -> DocumentContainer:
        if self.idempotency is None or source.ui_idempotency_container is None:
            raise AssertionError(f"source {source.name} names no ui_idempotency_container: the store is in memory")
        return self.idempotency

    def runs(self, dag_id: str, limit: int, since: datetime | None = None) -> list[RunRecord]:
        """The newest ``limit`` runs, and every run started since ``since`` (as the Airflow backend)."""
        runs = self.runs_by_dag.get(dag_id, [])
        return [
            r
            for n, r in enumerate(runs)
            if n < limit or (since is not None and r.started_at and datetime.fromisoformat(r.started_at) >= since)
        ]

    def run(self, dag_id: str, run_id: str) -> RunRecord | None:
        return next((r for r in self.runs_by_dag.get(dag_id, []) if r.run_id == run_id), None)

    def trigger(self, dag_id: str, conf: dict[str, Any], user: User, note: str) -> dict[str, Any]:
        unknown = set(conf) - set(STRICT_CONF[dag_id])
        if unknown:  # what the DAG's first task refuses: the UI must send only the DAG's params
            raise AssertionError(f"the UI sent conf keys the DAG has no param for: {sorted(unknown)}")
        if conf["start"] not in ("beginning", "resume") and not conf["start"].startswith("20"):
            raise ParamsRejected(
                f"Invalid input for param start: {conf['start']!r} is not valid under any of the given schemas"
            )
        self.triggered.append(conf)
        return {"dag_id": dag_id, "run_id": f"manual__{len(self.triggered)}", "state": "queued"}

    def telemetry(self) -> dict[str, Any]:
        return {"sdk_configured": False, "meter_provider": "opentelemetry.metrics.NoOpMeterProvider"}

    # -- test helpers ---------------------------------------------------------------------------------

    def engine(self, owner: str = "drain-a") -> DrainEngine:
        monitored, leases = self.stores[SOURCE.name]
        return DrainEngine.open(SOURCE.to_options(), monitored, leases, FakePublisher(), clock=self.clock, owner=owner)

    def drain(self) -> dict[str, Any]:
        (summary,) = self.engine().drain_all()
        record = RunRecord(
            f"run-{len(self.runs_by_dag.get(SOURCE.dag_id, []))}", "manual", "success", None, (summary.to_dict(),)
        )
        self.runs_by_dag.setdefault(SOURCE.dag_id, []).insert(0, record)
        return summary.to_dict()


def drained_backend() -> FakeBackend:
    """One good and two undeliverable documents on ``orders``, drained once."""
    b = FakeBackend()
    monitored, _ = b.stores[SOURCE.name]
    for doc in (outbox_doc("good-1"), outbox_doc("bad-1", Destination=ABSENT), outbox_doc("bad-2", MessageBody=ABSENT)):
        monitored.create(doc, doc["tenantId"])
    b.drain()
    return b


@pytest.fixture
def backend() -> FakeBackend:
    return drained_backend()


@pytest.fixture
def client(backend: FakeBackend) -> TestClient:
    return TestClient(create_app(backend))


def auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {user}"}


def key(value: str) -> dict[str, str]:
    return {"Idempotency-Key": f'"{value}"'}


def _requeue_body(client: TestClient) -> dict[str, Any]:
    items = client.get("/api/sources/orders/undeliverable", headers=auth("admin")).json()["items"]
    return {"documents": [{"id": i["id"], "etag": i["etag"]} for i in items]}


def test_the_run_count_is_capped(client: TestClient) -> None:
    response = client.get("/api/sources/orders", params={"runs": 51}, headers=auth("viewer"))
    assert response.status_code == 422 and response.json()["field"] == "runs", response.text


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/sources"),
        ("GET", "/api/sources/orders"),
        ("GET", "/api/sources/orders/undeliverable"),
        ("POST", "/api/sources/orders/undeliverable/requeue"),
        ("POST", "/api/sources/orders/leases/x/release"),
        ("POST", "/api/sources/orders/backfill"),
    ],
)
def test_every_api_endpoint_answers_401_without_a_token_or_cookie(client: TestClient, method: str, path: str) -> None:
    response = client.request(method, path, json={}, headers=key("k1"))
    assert response.status_code == 401, response.text
    assert response.json()["detail"] == "Not authenticated"


def test_the_uis_token_cookie_authenticates(client: TestClient) -> None:
    client.cookies.set("_token", "viewer")
    assert client.get("/api/sources/orders").status_code == 200


def test_reading_a_source_needs_read_permission_on_its_dag(client: TestClient) -> None:
    assert client.get("/api/sources/orders", headers=auth("outsider")).status_code == 403
    listed = client.get("/api/sources", headers=auth("outsider")).json()["sources"]
    assert [s["name"] for s in listed] == ["billing"], "the list shows only the sources the caller may read"


def test_overview_shows_undeliverable_count_leases_and_runs(client: TestClient, backend: FakeBackend) -> None:
    view = client.get("/api/sources/orders", headers=auth("viewer")).json()
    assert view["undeliverable_count"] == 2 and view["attention"] is True
    assert view["suspensions"] == [] and len(view["leases"]) == 1
    assert view["runs"][0]["published"] == 1 and view["runs"][0]["undeliverable"] == 2
    assert view["totals"]["delivered"] == 1 and view["totals_from"] == "run summaries"


def test_sus_a_suspended_lease_is_listed_with_its_window_end(client: TestClient, backend: FakeBackend) -> None:
    engine = backend.engine()
    (lease,) = engine.store.list_leases()
    engine.store.save_suspension(lease, SuspensionState(5, True, backend.clock.now, False))
    view = client.get("/api/sources/orders", headers=auth("viewer")).json()
    (suspension,) = view["suspensions"]
    assert suspension["lease_id"] == lease.id and suspension["consecutive_failures"] == 5
    assert suspension["window_end"] == "2026-11-30T06:01:00+00:00"
    assert client.get("/api/sources", headers=auth("viewer")).json()["sources"][0]["suspended_leases"] == [lease.id]


def test_ctr_undeliverable_documents_carry_their_violations(client: TestClient) -> None:
    page = client.get("/api/sources/orders/undeliverable", headers=auth("viewer")).json()
    assert {i["message_id"]: i["violations"] for i in page["items"]} == {
        "bad-1": ["Destination"],
        "bad-2": ["MessageBody"],
    }
    found = client.get("/api/sources/orders/undeliverable", params={"message_id": "bad-2"}, headers=auth("viewer"))
    assert [i["message_id"] for i in found.json()["items"]] == ["bad-2"]


@pytest.mark.parametrize(
    ("path", "params", "status", "field_name"),
    [
        ("/api/sources/nope", {}, 404, "source"),
        ("/api/sources/nope/undeliverable", {}, 404, "source"),
        ("/api/sources/orders/undeliverable", {"page_size": MAX_PAGE_SIZE + 1}, 400, "page_size"),
        ("/api/sources/orders/undeliverable", {"continuation": "garbage!"}, 400, "continuation"),
    ],
)
def test_bad_input_is_refused_naming_the_field(
    client: TestClient, path: str, params: dict[str, Any], status: int, field_name: str
) -> None:
    response = client.get(path, params=params, headers=auth("viewer"))
    assert response.status_code == status, response.text
    assert response.json()["field"] == field_name


@pytest.mark.parametrize("size", [0, MAX_PAGE_SIZE + 1, "lots"])
def test_a_page_size_out_of_range_is_refused_naming_the_field(size: object) -> None:
    with pytest.raises(InvalidQueryError, match="page_size="):
        valid_page_size(size)


@pytest.mark.parametrize("token", ["not-base64!!", "eyJ2IjoyfQ", encode_continuation("x")[:-3] + "***"])
def test_a_malformed_continuation_is_refused_naming_the_field(token: str) -> None:
    with pytest.raises(InvalidQueryError, match="continuation="):
        decode_continuation(token)


def test_a_viewer_cannot_requeue_and_nothing_changes(client: TestClient, backend: FakeBackend) -> None:
    body = _requeue_body(client)
    response = client.post(
        "/api/sources/orders/undeliverable/requeue", json=body, headers={**auth("viewer"), **key("v1")}
    )
    assert response.status_code == 403, response.text
    assert client.get("/api/sources/orders", headers=auth("viewer")).json()["undeliverable_count"] == 2


def test_requeue_moves_the_selection_to_pending_logs_the_user_and_the_next_drain_publishes_it(
    client: TestClient, backend: FakeBackend, caplog: pytest.LogCaptureFixture
) -> None:
    monitored, _ = backend.stores[SOURCE.name]
    for item in _requeue_body(client)["documents"]:  # the writer's fix
        doc = monitored.read(item["id"], "t1")
        monitored.patch(
            item["id"],
            "t1",
            [PatchOperation("set", "/Destination", "orders"), PatchOperation("set", "/MessageBody", "{}")],
        )
        assert doc["status"] == "undeliverable"
    body = _requeue_body(client)
    with caplog.at_level(logging.INFO, logger="airflow_chatter.ui"):
        response = client.post(
            "/api/sources/orders/undeliverable/requeue", json=body, headers={**auth("admin"), **key("r1")}
        )
    assert response.status_code == 200, response.text
    assert sorted(response.json()["requeued"]) == sorted(d["id"] for d in body["documents"])
    assert "UI requeue by admin on source orders: requeued" in caplog.text
    assert backend.drain()["published"] == 2


def test_a_stale_etag_requeues_nothing_and_says_so(client: TestClient, backend: FakeBackend) -> None:
    body = _requeue_body(client)
    monitored, _ = backend.stores[SOURCE.name]
    first = body["documents"][0]["id"]
    monitored.patch(first, "t1", [PatchOperation("set", "/note", "edited")])
    response = client.post(
        "/api/sources/orders/undeliverable/requeue", json=body, headers={**auth("admin"), **key("r2")}
    )
    assert response.json()["changed_meanwhile"] == [first] and len(response.json()["requeued"]) == 1


def test_idm_a_double_submitted_requeue_with_one_key_acts_once(
    client: TestClient, backend: FakeBackend, caplog: pytest.LogCaptureFixture
) -> None:
    body = _requeue_body(client)
    headers = {**auth("admin"), **key("double")}
    with caplog.at_level(logging.INFO, logger="airflow_chatter.ui"):
        first = client.post("/api/sources/orders/undeliverable/requeue", json=body, headers=headers)
        second = client.post("/api/sources/orders/undeliverable/requeue", json=body, headers=headers)
    assert first.status_code == second.status_code == 200
    assert second.headers["idempotent-replayed"] == "true" and second.json() == first.json()
    assert caplog.text.count("UI requeue by admin") == 1, "the handler ran once"


def test_idm_without_an_idempotency_container_the_memory_store_is_announced_in_the_api_and_the_log(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    view = client.get("/api/sources/orders", headers=auth("admin")).json()  # an editor: a viewer cannot act
    assert view["idempotency"]["store"] == "memory" and view["idempotency"]["shared_across_workers"] is False
    assert "single api-server worker" in view["idempotency"]["warning"]
    body = _requeue_body(client)
    with caplog.at_level(logging.WARNING, logger="airflow_chatter.ui"):
        for attempt in ("m1", "m2"):
            response = client.post(
                "/api/sources/orders/undeliverable/requeue", json=body, headers={**auth("admin"), **key(attempt)}
            )
            assert response.json()["idempotency"] == "memory (single api-server worker only)"
    assert caplog.text.count("ui_idempotency_container is not set") == 1, "warned once per source"


def test_idm_the_idempotency_scope_is_the_authenticated_user(client: TestClient, backend: FakeBackend) -> None:
    denied = client.post(
        "/api/sources/orders/undeliverable/requeue",
        json=_requeue_body(client),
        headers={**auth("viewer"), **key("shared")},
    )
    assert denied.status_code == 403
    allowed = client.post(
        "/api/sources/orders/undeliverable/requeue",
        json=_requeue_body(client),
        headers={**auth("admin"), **key("shared")},
    )
    assert allowed.status_code == 200 and "idempotent-replayed" not in allowed.headers, (
        "a refused request is not stored"
    )


def test_an_action_without_an_idempotency_key_is_refused(client: TestClient) -> None:
    response = client.post(
        "/api/sources/orders/undeliverable/requeue", json=_requeue_body(client), headers=auth("admin")
    )
    assert response.status_code == 400 and "Idempotency-Key" in response.json()["detail"]


def test_release_frees_a_stuck_lease_conditionally_on_the_etag_shown(client: TestClient, backend: FakeBackend) -> None:
    engine = backend.engine(owner="dead-worker")
    (lease,) = engine.store.list_leases()
    held = engine.store.acquire(lease.id)
    path = f"/api/sources/orders/leases/{lease.id}/release"
    stale = client.post(path, json={"etag": lease.etag}, headers={**auth("admin"), **key("l1")})
    assert stale.status_code == 409 and stale.json()["field"] == "lease_id"
    done = client.post(path, json={"etag": held.etag}, headers={**auth("admin"), **key("l2")})
    assert done.status_code == 200 and done.json()["previous_owner"] == "dead-worker"
    assert engine.store.get(lease.id).owner is None


def test_backfill_triggers_the_backfill_dag_with_the_source_and_airflows_param_errors_are_400(
    client: TestClient, backend: FakeBackend
) -> None:
    ok = client.post("/api/sources/orders/backfill", json={"dry_run": True}, headers={**auth("admin"), **key("b1")})
    assert ok.status_code == 200 and backend.triggered[0]["source"] == "orders" and backend.triggered[0]["dry_run"]
    bad = client.post(
        "/api/sources/orders/backfill", json={"start": "yesterday"}, headers={**auth("admin"), **key("b2")}
    )
    assert bad.status_code == 400 and bad.json()["field"] == "params" and "start" in bad.json()["detail"]


def test_backfill_needs_permission_to_run_the_backfill_dag(client: TestClient) -> None:
    GRANTS["admin"].pop("chatter_backfill")
    try:
        denied = client.post("/api/sources/orders/backfill", json={}, headers={**auth("admin"), **key("b4")})
    finally:
        GRANTS["admin"]["chatter_backfill"] = {"POST"}
    assert denied.status_code == 403 and "chatter_backfill" in denied.json()["detail"]


def test_the_openapi_schema_lists_the_endpoints(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert "/api/sources/{source}/undeliverable/requeue" in paths and "/api/sources/{source}/backfill" in paths


def test_the_page_bundle_is_served_as_javascript(client: TestClient) -> None:
    response = client.get("/static/chatter-ui.js")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/javascript")
    assert "globalThis.AirflowPlugin" in response.text


def test_the_ui_backfill_sends_only_the_dags_params_a_timestamp_start_and_refuses_an_unknown_field(
    client: TestClient, backend: FakeBackend
) -> None:
    stamped = client.post(
        "/api/sources/orders/backfill",
        json={"start": "2026-11-29T00:00:00Z", "document_budget": 50},
        headers={**auth("admin"), **key("b5")},
    )
    assert stamped.status_code == 200
    assert backend.triggered[-1] == {
        "source": "orders",
        "start": "2026-11-29T00:00:00Z",
        "feed_ranges": [],
        "document_budget": 50,
        "dry_run": True,
    }, "a dry run unless asked otherwise, and nothing the DAG has no param for"
    unknown = client.post(
        "/api/sources/orders/backfill", json={"point_in_time": "x"}, headers={**auth("admin"), **key("b6")}
    )
    assert unknown.status_code == 422 and "point_in_time" in unknown.text


def test_the_overview_lists_readable_sources_worst_first_with_what_the_caller_may_do(
    client: TestClient, backend: FakeBackend
) -> None:
    engine = backend.engine()
    (lease,) = engine.store.list_leases()
    engine.store.save_suspension(lease, SuspensionState(5, True, backend.clock.now, False))
    view = client.get("/api/overview", headers=auth("viewer")).json()
    assert [(r["source"], r["state"]) for r in view["rows"]] == [
        ("orders", "suspended"),
        ("billing", "never drained"),
    ]
    orders = view["rows"][0]
    assert orders["leases"] == 1 and orders["suspended_leases"] == 1 and orders["undeliverable"] == 2
    assert orders["last_drain_run"] == "run-0" and "2 undeliverable document(s)" in orders["reasons"]
    assert view["permissions"]["orders"] == {"edit": False, "backfill": False}
    admin = client.get("/api/overview", headers=auth("admin")).json()
    assert admin["permissions"]["orders"] == {"edit": True, "backfill": True}
    outsider = client.get("/api/overview", headers=auth("outsider")).json()
    assert [r["source"] for r in outsider["rows"]] == ["billing"], "a DAG the caller may not read is not shown"
    assert client.get("/api/overview").status_code == 401


def test_the_source_detail_tells_the_page_what_the_caller_may_do(client: TestClient) -> None:
    assert client.get("/api/sources/orders", headers=auth("viewer")).json()["permissions"]["edit"] is False
    assert client.get("/api/sources/orders", headers=auth("admin")).json()["permissions"]["edit"] is True


def test_the_navigation_icon_is_served_as_svg(client: TestClient) -> None:
    response = client.get("/static/chatter-icon.svg")
    assert response.status_code == 200 and response.headers["content-type"].startswith("image/svg+xml")
    assert response.text.startswith("<svg")


def test_a_following_drain_is_live_in_the_overview_row_and_its_lease_with_last_poll_published_and_lag() -> None:
    # The API judges a lease's expiry by the wall clock: the drain's manual clock starts there.
    backend = FakeBackend(clock=ManualClock(datetime.now(UTC)))
    monitored, _ = backend.stores[SOURCE.name]
    client = TestClient(create_app(backend))
    monitored.create(outbox_doc("m1"), "t1")
    engine = backend.engine()
    (lease,) = engine.ensure_leases()
    stop = StopRequest()
    seen: dict[str, Any] = {}

    def look() -> None:
        seen["overview"] = client.get("/api/overview", headers=auth("viewer")).json()
        seen["detail"] = client.get("/api/sources/orders", headers=auth("viewer")).json()
        stop.request()

    script = Script(lambda: monitored.calls["read_change_feed"], backend.clock.advance, {4: look})
    engine.drain_lease(lease.id, follow=script.follow(stop)).raise_for_error()

    rows = {r["source"]: r for r in seen["overview"]["rows"]}
    assert rows["orders"]["live"] is True and rows["orders"]["published_last_minute"] == 1
    assert rows["orders"]["last_poll_at"] is not None and rows["orders"]["follow_lag_seconds"] is not None
    assert rows["billing"]["live"] is None, "a source no drain followed has no live state"
    (shown,) = seen["detail"]["leases"]
    assert shown["follow"]["live"] is True and shown["follow"]["published_last_minute"] == 1
    assert shown["follow"]["last_poll_at"] == rows["orders"]["last_poll_at"]
    after = {r["source"]: r for r in client.get("/api/overview", headers=auth("viewer")).json()["rows"]}
    assert after["orders"]["live"] is False, "stopped and released: no longer live"


def test_published_in_the_last_hour_sums_every_run_of_the_hour_not_the_last_twenty() -> None:
    """A one-minute schedule: 25 runs in the hour, one document each, and an older run outside it."""
    backend = drained_backend()
    now = datetime.now(UTC)  # the API's monitor reads the wall clock
    runs = [
        RunRecord(
            f"scheduled__{n}",
            "scheduled",
            "success",
            (now - timedelta(minutes=n + 1)).isoformat(),
            ({"lease": "l", "published": 1, "delivered": 1},),
        )
        for n in range(25)
    ]
    older = RunRecord(
        "scheduled__old",
        "scheduled",
        "success",
        (now - timedelta(hours=2)).isoformat(),
        ({"lease": "l", "published": 7, "delivered": 7},),
    )
    backend.runs_by_dag[SOURCE.dag_id] = [*runs, older]
    rows = TestClient(create_app(backend)).get("/api/overview", headers=auth("viewer")).json()["rows"]
    (row,) = [r for r in rows if r["source"] == "orders"]
    assert row["published_last_hour"] == 25, "every run of the hour counts, the older one does not"


def test_the_source_answer_carries_the_pending_age_verdict_the_page_draws(backend: FakeBackend) -> None:
    """The verdict is the core's; the page only colours it, so the answer must carry it."""
    watched = SourceConfig(**{**SOURCE.model_dump(), "max_pending_age_seconds": 300})
    backend.orders = watched
    body = TestClient(create_app(backend)).get("/api/sources/orders", headers=auth("viewer")).json()
    assert body["pending_age"] == {
        "seconds": 0.0,
        "limit_seconds": 300.0,
        "known_floor_seconds": 0.0,
        "verdict": "within",
    }, body["pending_age"]

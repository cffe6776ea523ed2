"""The FastAPI side of the Idempotency-Key draft, through FastAPI's TestClient (IDM-O01..O06, F-08)."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from airflow_chatter.adapters.fastapi.idempotency import HttpIdempotencyOptions
from airflow_chatter.adapters.memory import MemoryIdempotencyStore
from airflow_chatter.adapters.memory.container import MemoryDocumentContainer
from airflow_chatter.adapters.memory.faults import fail
from airflow_chatter.idempotency import ContainerIdempotencyStore, Reserved
from airflow_chatter.idempotency.fingerprint import request_fingerprint
from airflow_chatter.ports import Throttled
from airflow_chatter.testing.clock import ManualClock
from tests.unit.idempotency._http_app import Calls, make_app

ORDER = {"sku": "A-1", "qty": 2}


@pytest.fixture
def store() -> MemoryIdempotencyStore:
    return MemoryIdempotencyStore(clock=ManualClock())


@pytest.fixture
def calls() -> Calls:
    return Calls()


@pytest.fixture
def client(store: MemoryIdempotencyStore, calls: Calls) -> TestClient:
    return TestClient(make_app(store, calls), raise_server_exceptions=False)


def _key(value: str) -> dict[str, str]:
    return {"Idempotency-Key": f'"{value}"'}


def _problem(response: object) -> dict[str, object]:
    assert response.headers["content-type"] == "application/problem+json"  # type: ignore[attr-defined]
    return json.loads(response.content)  # type: ignore[attr-defined,no-any-return]


def test_a_retry_replays_the_stored_status_headers_and_body_and_the_handler_runs_once(
    client: TestClient, calls: Calls
) -> None:
    first = client.post("/orders", json=ORDER, headers=_key("k-1"))
    again = client.post("/orders", json=ORDER, headers=_key("k-1"))
    assert first.status_code == again.status_code == 201
    assert again.content == first.content and json.loads(again.content)["order"] == 1
    assert again.headers["location"] == "/orders/1"
    assert again.headers.get_list("x-multi") == ["one", "two"]
    assert again.headers["idempotent-replayed"] == "true" and "idempotent-replayed" not in first.headers
    assert calls.counts["orders"] == 1


def test_idm_o06_set_cookie_is_not_stored_in_the_snapshot(client: TestClient) -> None:
    first = client.post("/orders", json=ORDER, headers=_key("k-cookie"))
    again = client.post("/orders", json=ORDER, headers=_key("k-cookie"))
    assert "set-cookie" in first.headers and "set-cookie" not in again.headers


def test_idm_o06_a_missing_key_on_an_opted_in_endpoint_is_400_and_the_handler_does_not_run(
    client: TestClient, calls: Calls
) -> None:
    response = client.post("/orders", json=ORDER)
    assert response.status_code == 400
    assert "requires a Idempotency-Key header" in str(_problem(response)["detail"])
    assert calls.counts["orders"] == 0


def test_methods_not_opted_in_and_routes_without_the_guard_pass_through(client: TestClient, calls: Calls) -> None:
    assert client.get("/orders").json() == {"listed": 1}
    assert client.post("/plain").json() == {"plain": 1}
    assert client.post("/plain").json() == {"plain": 2}


@pytest.mark.parametrize(
    ("header", "detail"),
    [
        ("k-1", "must be a quoted structured-field string"),
        ('"k\u00e9"', "printable ASCII only"),
        (f'"{"k" * 201}"', "201 characters long, over the limit of 200 characters"),
        ('""', "must not be empty"),
    ],
    ids=["bare-token", "non-ascii", "over-200-characters", "empty"],
)
def test_f08_a_bad_key_is_400_naming_the_problem_and_nothing_is_stored(
    client: TestClient, calls: Calls, store: MemoryIdempotencyStore, header: str, detail: str
) -> None:
    response = client.post("/orders", json=ORDER, headers={"Idempotency-Key": header.encode("utf-8")})  # type: ignore[dict-item]
    assert response.status_code == 400
    assert detail in str(_problem(response)["detail"])
    assert calls.counts["orders"] == 0 and len(store) == 0


def test_two_key_headers_are_400(client: TestClient, calls: Calls) -> None:
    response = client.post("/orders", json=ORDER, headers=[("Idempotency-Key", '"a"'), ("Idempotency-Key", '"b"')])
    assert response.status_code == 400 and "exactly one" in str(_problem(response)["detail"])
    assert calls.counts["orders"] == 0


def test_a_key_of_200_characters_is_accepted(client: TestClient) -> None:
    assert client.post("/orders", json=ORDER, headers=_key("k" * 200)).status_code == 201


def test_idm_o05_the_key_reused_with_another_body_is_422(client: TestClient, calls: Calls) -> None:
    client.post("/orders", json=ORDER, headers=_key("k-2"))
    response = client.post("/orders", json={"sku": "B-2", "qty": 1}, headers=_key("k-2"))
    assert response.status_code == 422 and "different request" in str(_problem(response)["detail"])
    assert calls.counts["orders"] == 1


def test_the_fingerprint_ignores_query_parameter_order_but_not_the_content_type(client: TestClient) -> None:
    client.post("/orders?a=1&b=2", json=ORDER, headers=_key("k-3"))
    assert client.post("/orders?b=2&a=1", json=ORDER, headers=_key("k-3")).headers["idempotent-replayed"] == "true"
    other_type = client.post(
        "/orders?a=1&b=2",
        content=json.dumps(ORDER).encode(),
        headers=_key("k-3") | {"content-type": "application/x-other+json"},
    )
    assert other_type.status_code == 422


def test_idm_o05_a_key_in_flight_is_409_with_retry_after(client: TestClient, store: MemoryIdempotencyStore) -> None:
    body = json.dumps(ORDER).encode()
    fingerprint = request_fingerprint("POST", "/orders", "", body, content_type="application/json")
    assert isinstance(store.reserve("anonymous", "k-4", fingerprint), Reserved)
    response = client.post("/orders", content=body, headers=_key("k-4") | {"content-type": "application/json"})
    assert response.status_code == 409
    assert response.headers["retry-after"] == "30"
    assert "still being processed" in str(_problem(response)["detail"])


def test_scopes_keep_the_same_key_apart(client: TestClient, calls: Calls) -> None:
    client.post("/orders", json=ORDER, headers=_key("k-5") | {"x-tenant": "t1"})
    response = client.post("/orders", json=ORDER, headers=_key("k-5") | {"x-tenant": "t2"})
    assert response.status_code == 201 and "idempotent-replayed" not in response.headers
    assert calls.counts["orders"] == 2


def test_idm_o04_a_body_over_the_limit_is_413_naming_the_limit_and_nothing_is_stored(calls: Calls) -> None:
    store = MemoryIdempotencyStore(clock=ManualClock())
    client = TestClient(make_app(store, calls, HttpIdempotencyOptions(max_request_body_bytes=16)))
    declared = client.post("/orders", content=b"x" * 17, headers=_key("k-6"))
    assert declared.status_code == 413 and "at most 16 bytes" in str(_problem(declared)["detail"])

    def chunked() -> object:
        yield b"x" * 10
        yield b"x" * 10

    streamed = client.post("/orders", content=chunked(), headers=_key("k-6"))  # type: ignore[arg-type]
    assert streamed.status_code == 413 and "limit 16" in str(_problem(streamed)["detail"])
    assert calls.counts["orders"] == 0 and len(store) == 0
    assert client.post("/orders", json={"a": 1}, headers=_key("k-6")).status_code == 201, "exactly at the limit"


def test_a_5xx_is_not_stored_so_a_retry_runs_the_handler_again(client: TestClient, calls: Calls) -> None:
    assert client.post("/unavailable", headers=_key("k-7")).status_code == 503
    assert client.post("/unavailable", headers=_key("k-7")).json() == {"try": 2}


def test_a_handler_exception_abandons_the_reservation_so_a_retry_runs_again(client: TestClient, calls: Calls) -> None:
    assert client.post("/boom", headers=_key("k-8")).status_code == 500
    assert client.post("/boom", headers=_key("k-8")).status_code == 500
    assert calls.counts["boom"] == 2


def test_idm_o04_a_response_over_the_limit_is_sent_whole_but_not_stored(calls: Calls) -> None:
    store = MemoryIdempotencyStore(clock=ManualClock())
    client = TestClient(make_app(store, calls, HttpIdempotencyOptions(max_response_body_bytes=1024)))
    first = client.post("/big", headers=_key("k-9"))
    assert first.status_code == 200 and len(first.json()["pad"]) == 2048
    assert client.post("/big", headers=_key("k-9")).json()["n"] == 2
    assert len(store) == 0


def test_a_streamed_response_is_stored_and_replayed(client: TestClient, calls: Calls) -> None:
    first = client.post("/stream", headers=_key("k-10"))
    again = client.post("/stream", headers=_key("k-10"))
    assert first.text == again.text == "part-1-end"
    assert again.headers["content-type"].startswith("text/plain") and again.headers["idempotent-replayed"] == "true"


def test_a_streamed_response_over_the_limit_is_sent_whole_but_not_stored(calls: Calls) -> None:
    store = MemoryIdempotencyStore(clock=ManualClock())
    client = TestClient(make_app(store, calls, HttpIdempotencyOptions(max_response_body_bytes=6)))
    assert client.post("/stream", headers=_key("k-11")).text == "part-1-end"
    assert client.post("/stream", headers=_key("k-11")).text == "part-2-end"


def test_one_route_can_be_attached_with_the_route_helper(client: TestClient, calls: Calls) -> None:
    first = client.post("/single", headers=_key("k-12"))
    again = client.post("/single", headers=_key("k-12"))
    assert first.status_code == again.status_code == 202
    assert again.json() == {"single": 1} and again.headers["idempotent-replayed"] == "true"
    assert client.post("/single").status_code == 400


def test_bad_options_are_refused_naming_the_option() -> None:
    with pytest.raises(ValueError, match="max_request_body_bytes"):
        HttpIdempotencyOptions(max_request_body_bytes=-1)


def test_idm_o06_with_require_key_off_a_request_without_a_key_runs_unguarded(calls: Calls) -> None:
    store = MemoryIdempotencyStore(clock=ManualClock())
    client = TestClient(make_app(store, calls, HttpIdempotencyOptions(require_key=False)))
    assert client.post("/orders", json=ORDER).status_code == 201
    assert client.post("/orders", json=ORDER).status_code == 201
    assert calls.counts["orders"] == 2 and len(store) == 0


def test_idm_o01_o02_the_defaults_are_the_reference_s() -> None:
    options = HttpIdempotencyOptions()
    assert (options.header_name, options.replay_header_name) == ("Idempotency-Key", "Idempotent-Replayed")
    assert options.methods == {"POST", "PATCH"} and options.require_key and not options.include_set_cookie
    assert options.max_request_body_bytes == options.max_response_body_bytes == 1024 * 1024
    assert options.mismatch_status_code == 422


def test_a_streamed_body_that_fails_abandons_the_reservation_so_a_retry_runs_again(
    client: TestClient, calls: Calls, store: MemoryIdempotencyStore
) -> None:
    assert client.post("/stream-fails", headers=_key("k-13")).status_code == 500
    assert client.post("/stream-fails", headers=_key("k-13")).status_code == 500
    assert calls.counts["stream-fails"] == 2 and len(store) == 0


def test_f11_a_store_throttled_on_reserve_answers_503_with_retry_after_and_the_handler_does_not_run(
    calls: Calls,
) -> None:
    """The project's Cosmos clients leave 429s to the caller: the guard answers one on reserving the key with 503
    and the server's retry-after, having reserved nothing, so the client's retry with the same key runs once."""
    container = MemoryDocumentContainer(partition_key_paths=("/scope",), default_ttl=-1)
    container.handler = fail("create", error=Throttled("429", retry_after_ms=1200), times=1)
    client = TestClient(make_app(ContainerIdempotencyStore(container), calls), raise_server_exceptions=False)
    throttled = client.post("/orders", json=ORDER, headers=_key("k-429"))
    assert throttled.status_code == 503 and throttled.headers["retry-after"] == "2", throttled.text
    assert "throttled" in str(_problem(throttled)["detail"]) and calls.counts["orders"] == 0
    again = client.post("/orders", json=ORDER, headers=_key("k-429"))
    assert again.status_code == 201 and calls.counts["orders"] == 1, again.text


def test_the_guard_declares_the_key_and_its_answers_on_opted_in_routes_only(calls: Calls) -> None:
    options = HttpIdempotencyOptions(require_key=False, mismatch_status_code=409)
    paths = TestClient(make_app(MemoryIdempotencyStore(), calls, options)).get("/openapi.json").json()["paths"]
    single = paths["/single"]["post"]  # one route at a time, status 202
    (key,) = [p for p in single["parameters"] if p["name"] == "Idempotency-Key"]
    assert key["in"] == "header" and key["required"] is False
    assert "Idempotent-Replayed" in single["responses"]["202"]["headers"]
    assert sorted(
        s for s in single["responses"] if "application/problem+json" in single["responses"][s]["content"]
    ) == [
        "400",
        "409",
        "413",
    ]
    assert "parameters" not in paths["/orders"]["get"]  # GET is not an opted-in method
    assert "parameters" not in paths["/plain"]["post"]  # not a guarded route

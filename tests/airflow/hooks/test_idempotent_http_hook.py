"""The idempotent HTTP hook: at most one API call per key across tries, the response replayed, the crash window.

The API is an ``httpx.MockTransport`` that counts calls and records the ``Idempotency-Key`` header it got; the
store is the in-memory one on a manual clock. One ``dag.test()`` run shows a task that fails after its call and
is retried by Airflow: the API is called once and the retry gets the recorded response.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from airflow_chatter.adapters.memory import MemoryIdempotencyStore
from airflow_chatter.airflow.hooks import idempotent_http
from airflow_chatter.airflow.hooks.idempotent_http import (
    DEFAULT_HOOK_OPTIONS,
    IdempotencyKeyReusedError,
    IdempotentHttpHook,
    RequestInFlightError,
    derive_task_key,
)
from airflow_chatter.airflow.hooks.idempotent_http import (
    idempotent_http as idempotent_http_decorator,
)
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.idempotency import IdempotencyKeyTooLongError, StoredResponse
from airflow_chatter.idempotency.fingerprint import request_fingerprint
from airflow_chatter.testing.clock import ManualClock


class FakeApi:
    """An HTTP API that counts calls; answers ``status`` with a JSON body numbering the call."""

    def __init__(self, status: int = 201) -> None:
        self.status = status
        self.requests: list[httpx.Request] = []
        self.fail_transport = False

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.fail_transport:
            raise httpx.ConnectError("connection reset", request=request)
        return httpx.Response(
            self.status,
            json={"charge": len(self.requests)},
            headers={"Location": f"/charges/{len(self.requests)}", "X-Multi": "a", "Set-Cookie": "session=s3cr3t"},
        )

    def hook(self, store: MemoryIdempotencyStore, **kwargs: Any) -> IdempotentHttpHook:
        client = httpx.Client(base_url="https://payments.example", transport=httpx.MockTransport(self))
        return IdempotentHttpHook(store, client=client, **kwargs)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(clock: ManualClock) -> MemoryIdempotencyStore:
    return MemoryIdempotencyStore(DEFAULT_HOOK_OPTIONS, clock=clock)


def test_a_retry_with_the_same_key_gets_the_recorded_response_and_the_api_is_called_once(
    store: MemoryIdempotencyStore,
) -> None:
    api = FakeApi()
    first = api.hook(store).post("/charges", json={"amount": 10}, key="order-1")
    retry = api.hook(store).post("/charges", json={"amount": 10}, key="order-1")  # a new try: a new hook
    assert len(api.requests) == 1
    assert api.requests[0].headers["Idempotency-Key"] == '"order-1"', "the key goes to the API as an sf-string"
    assert (first.replayed, retry.replayed) == (False, True)
    assert retry.status_code == 201 and retry.json() == {"charge": 1} and retry.header("location") == "/charges/1"
    assert retry.to_dict() == {"status_code": 201, "replayed": True, "key": "order-1", "text": '{"charge":1}'}


def test_a_session_cookie_of_the_api_is_neither_stored_nor_replayed(store: MemoryIdempotencyStore) -> None:
    api = FakeApi()
    first = api.hook(store).post("/charges", json={"amount": 10}, key="order-c")
    replay = api.hook(store).post("/charges", json={"amount": 10}, key="order-c")
    assert api.requests and first.header("location") == "/charges/1"
    assert first.header("set-cookie") is None, "the live answer has the shape a replay will have"
    assert replay.replayed and replay.header("set-cookie") is None and replay.header("location") == "/charges/1"
    (record,) = [entry for entry in store._entries.values()]  # noqa: SLF001 - what the store holds is the point
    assert "s3cr3t" not in repr(record)


def test_the_same_key_with_another_body_is_refused_without_calling(store: MemoryIdempotencyStore) -> None:
    api = FakeApi()
    api.hook(store).post("/charges", json={"amount": 10}, key="order-2")
    with pytest.raises(IdempotencyKeyReusedError, match="'order-2' was already used with a different request"):
        api.hook(store).post("/charges", json={"amount": 99}, key="order-2")
    assert len(api.requests) == 1


def test_a_key_held_by_another_try_fails_this_try_with_the_retry_after(store: MemoryIdempotencyStore) -> None:
    api = FakeApi()
    hook = api.hook(store)
    request = hook._client.build_request("POST", "/charges", json={"amount": 10})
    fingerprint = request_fingerprint(
        "POST", "https://payments.example/charges", "", request.read(), content_type="application/json"
    )
    store.reserve("airflow", "order-3", fingerprint)
    with pytest.raises(RequestInFlightError, match="held by another try; retry in 300 s"):
        hook.post("/charges", json={"amount": 10}, key="order-3")
    assert api.requests == []


@pytest.mark.parametrize("status", [500, 503, 429, 408])
def test_a_retryable_status_is_not_recorded_so_the_next_try_calls_again(
    store: MemoryIdempotencyStore, status: int
) -> None:
    api = FakeApi(status)
    assert api.hook(store).post("/charges", json={}, key="order-4").status_code == status
    assert api.hook(store).post("/charges", json={}, key="order-4").replayed is False
    assert len(api.requests) == 2


def test_a_client_error_is_recorded_and_replayed(store: MemoryIdempotencyStore) -> None:
    api = FakeApi(402)
    api.hook(store).post("/charges", json={}, key="order-5")
    replay = api.hook(store).post("/charges", json={}, key="order-5")
    assert replay.replayed and replay.status_code == 402 and len(api.requests) == 1
    with pytest.raises(httpx.HTTPStatusError, match="HTTP 402"):
        replay.raise_for_status()


def test_a_transport_error_abandons_the_key_so_the_retry_calls_again(store: MemoryIdempotencyStore) -> None:
    api = FakeApi()
    api.fail_transport = True
    with pytest.raises(httpx.ConnectError):
        api.hook(store).post("/charges", json={}, key="order-6")
    api.fail_transport = False
    assert api.hook(store).post("/charges", json={}, key="order-6").replayed is False
    assert len(api.requests) == 2


def test_a_response_over_the_size_limit_is_returned_but_not_recorded(store: MemoryIdempotencyStore) -> None:
    api = FakeApi()
    assert api.hook(store, max_response_bytes=4).post("/charges", json={}, key="order-7").json() == {"charge": 1}
    api.hook(store, max_response_bytes=4).post("/charges", json={}, key="order-7")
    assert len(api.requests) == 2


def test_the_crash_window_a_try_that_dies_after_the_call_is_taken_over_after_the_reservation_timeout(
    store: MemoryIdempotencyStore, clock: ManualClock
) -> None:
    """What the docs admit: the second call happens, and only the API's own Idempotency-Key handling can stop it."""

    class DiesBeforeRecording(MemoryIdempotencyStore):
        dies = True

        def complete(self, scope: str, key: str, reservation_id: str, response: StoredResponse) -> None:
            if self.dies:
                raise SystemExit("worker killed")
            super().complete(scope, key, reservation_id, response)

    api = FakeApi()
    dying = DiesBeforeRecording(DEFAULT_HOOK_OPTIONS, clock=clock)
    with pytest.raises(SystemExit):
        api.hook(dying).post("/charges", json={}, key="order-8")
    with pytest.raises(RequestInFlightError):
        api.hook(dying).post("/charges", json={}, key="order-8")
    clock.advance(DEFAULT_HOOK_OPTIONS.reservation_timeout.total_seconds() + 1)
    dying.dies = False
    assert api.hook(dying).post("/charges", json={}, key="order-8").replayed is False
    assert len(api.requests) == 2
    assert {r.headers["Idempotency-Key"] for r in api.requests} == {'"order-8"'}, "the API saw one key twice"


def test_over_long_and_non_ascii_keys_are_refused_before_any_call(store: MemoryIdempotencyStore) -> None:
    api = FakeApi()
    with pytest.raises(IdempotencyKeyTooLongError, match="over the limit of 200"):
        api.hook(store).post("/charges", json={}, key="k" * 201)
    with pytest.raises(ValueError, match="printable ASCII"):
        api.hook(store).post("/charges", json={}, key="caf\u00e9")
    assert api.requests == [] and len(store) == 0


def test_a_request_timeout_not_below_the_reservation_timeout_is_refused(store: MemoryIdempotencyStore) -> None:
    with pytest.raises(ConfigurationError, match="timeout=300.0 must be below the reservation timeout"):
        IdempotentHttpHook(store, timeout=300.0)


def test_the_derived_key_names_the_task_instance_and_is_the_same_for_every_try() -> None:
    when = datetime(2026, 3, 1, tzinfo=UTC)
    assert derive_task_key("billing", "charge", 3, when) == "billing/charge/3/2026-03-01T00:00:00+00:00"
    assert (
        derive_task_key("billing", "charge", None, "manual__2026", "refund") == "billing/charge/-1/manual__2026/refund"
    )
    assert derive_task_key("billing", "charge", 3, when) != derive_task_key("billing", "charge", 4, when)


def test_a_derived_key_that_would_be_too_long_or_not_ascii_is_hashed_to_a_stable_short_key() -> None:
    long_key = derive_task_key("d" * 150, "t" * 100, 0, "run")
    assert long_key.startswith("sha256:") and len(long_key) == 50
    assert long_key == derive_task_key("d" * 150, "t" * 100, 0, "run")
    assert derive_task_key("dag", "task", 0, "run", "caf\u00e9").startswith("sha256:")


def test_the_key_is_derived_from_the_running_task_when_not_given(
    store: MemoryIdempotencyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    when = datetime(2026, 3, 1, tzinfo=UTC)
    monkeypatch.setattr(idempotent_http, "_current_task", lambda: ("billing", "charge", -1, when))
    api = FakeApi()
    response = api.hook(store).post("/charges", json={})
    assert response.key == "billing/charge/-1/2026-03-01T00:00:00+00:00"
    assert api.requests[0].headers["Idempotency-Key"] == f'"{response.key}"'


def test_the_decorator_hides_http_from_the_task_signature_and_passes_a_hook(store: MemoryIdempotencyStore) -> None:
    api = FakeApi()
    client = httpx.Client(base_url="https://payments.example", transport=httpx.MockTransport(api))

    @idempotent_http_decorator(store=store, client=client)
    def charge(amount: int, http: IdempotentHttpHook) -> int:
        return int(http.post("/charges", json={"amount": amount}, key=f"charge-{amount}").json()["charge"])

    import inspect

    assert list(inspect.signature(charge).parameters) == ["amount"]
    assert charge(5) == 1


def test_the_decorator_refuses_a_function_without_an_http_parameter() -> None:
    with pytest.raises(ConfigurationError, match="needs a parameter named 'http'"):
        idempotent_http_decorator()(lambda amount: amount)


# -- dag.test(): Airflow retries the task; the API is called once -----------------------------------------------

#: The API and the store the DAG below uses: module-level, so the DAG file and the test share them in-process.
RETRY_API = FakeApi()
RETRY_STORE = MemoryIdempotencyStore(DEFAULT_HOOK_OPTIONS)

_RETRY_DAG = """
from datetime import UTC, datetime, timedelta

import httpx
from airflow.sdk import DAG, get_current_context, task

from airflow_chatter.airflow.hooks.idempotent_http import idempotent_http
from tests.airflow.hooks.test_idempotent_http_hook import RETRY_API, RETRY_STORE

with DAG("idempotent_http_retry", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC)):

    @task(retries=2, retry_delay=timedelta(seconds=0))
    @idempotent_http(
        store=RETRY_STORE,
        client=httpx.Client(base_url="https://payments.example", transport=httpx.MockTransport(RETRY_API)),
    )
    def charge(http):
        response = http.post("/charges", json={"amount": 10})
        if get_current_context()["ti"].try_number == 1:
            raise RuntimeError("the worker failed after the call")
        return response.to_dict()

    charge()
"""


@pytest.mark.airflow
def test_a_task_retried_by_airflow_after_its_call_gets_the_recorded_response(airflow_db: Any, tmp_path: Any) -> None:
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db

    from tests.airflow._support import xcoms

    (tmp_path / "idempotent_http_retry.py").write_text(_RETRY_DAG)
    bag = DagBag(dag_folder=str(tmp_path))
    assert bag.import_errors == {}, bag.import_errors
    DagBundlesManager().sync_bundles_to_db()
    # Registered under the configured bundle, so dag.test() finds it serialized (the file lives outside the bundle).
    sync_bag_to_db(bag, "chatter-dags", None)

    run = bag.dags["idempotent_http_retry"].test(logical_date=datetime(2026, 3, 1, tzinfo=UTC))

    assert run.state == "success", run.state
    assert len(RETRY_API.requests) == 1, "one API call across both tries"
    [result] = xcoms(run, "charge")
    assert result["replayed"] is True and json.loads(result["text"]) == {"charge": 1}
    assert result["key"] == "idempotent_http_retry/charge/-1/2026-03-01T00:00:00+00:00"


def test_the_decorator_leaves_a_client_it_was_given_open_for_the_next_call(store: MemoryIdempotencyStore) -> None:
    api = FakeApi()
    client = httpx.Client(base_url="https://payments.example", transport=httpx.MockTransport(api))

    @idempotent_http_decorator(store=store, client=client)
    def charge(amount: int, http: IdempotentHttpHook) -> int:
        return int(http.post("/charges", json={"amount": amount}, key=f"charge-{amount}").json()["charge"])

    assert (charge(1), charge(2)) == (1, 2)
    assert not client.is_closed

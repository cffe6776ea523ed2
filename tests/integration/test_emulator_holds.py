"""The emulator's holds (``/_chatter/holds``, docs/emulator.md) and its added latency as a non-blocking timer.

A hold parks matching document requests unanswered until released: the deterministic "a client is in the middle of
this request" the worker-SIGKILL test (tests/celery) needs. Every wait polls the emulator's own state, bounded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from azure.cosmos import ContainerProxy, exceptions

from tests.fixtures.cosmos import (
    ContainerFactory,
    CosmosEndpoint,
    EmulatorAdminError,
    emulator_admin,
    emulator_configured,
    emulator_hold,
)

pytestmark = pytest.mark.cosmos

T = TypeVar("T")


def _poll(check: Callable[[], T | None], what: str, timeout_s: float = 30.0) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        found = check()
        if found not in (None, False):
            return found  # type: ignore[return-value]
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(0.1)


def _emulator_only(endpoint: CosmosEndpoint) -> None:
    if not endpoint.is_emulator:
        pytest.skip("holds and the added latency are switches of the project emulator")


def _keys_by_range(endpoint: CosmosEndpoint, container: ContainerProxy, count: int = 40) -> dict[str, list[str]]:
    keys = [f"cust-{n}" for n in range(count)]
    answers = emulator_admin(endpoint, "POST", "epk", body={"container": container.container_link, "pks": keys})
    by_range: dict[str, list[str]] = {}
    for key, answer in zip(keys, answers, strict=True):
        by_range.setdefault(answer["range_id"], []).append(key)
    return by_range


def _four_range_container(endpoint: CosmosEndpoint, factory: ContainerFactory) -> ContainerProxy:
    with emulator_configured(endpoint, partition_ranges=4):
        return factory(("/pk",))


def _patch_batch(container: ContainerProxy, key: str, ids: list[str]) -> Any:
    return container.execute_item_batch(
        [("patch", (i, [{"op": "set", "path": "/status", "value": "delivered"}])) for i in ids], partition_key=key
    )


def test_a_hold_parks_the_batches_of_one_range_until_released_and_serves_the_rest(
    cosmos_endpoint: CosmosEndpoint, cosmos_container_factory: ContainerFactory
) -> None:
    _emulator_only(cosmos_endpoint)
    container = _four_range_container(cosmos_endpoint, cosmos_container_factory)
    by_range = _keys_by_range(cosmos_endpoint, container)
    held_key, free_key = by_range["0"][0], by_range["1"][0]
    for key in (held_key, free_key):
        for n in range(2):
            container.create_item({"id": f"{key}-{n}", "pk": key, "status": "pending"})

    outcome: dict[str, Any] = {}
    with emulator_hold(cosmos_endpoint, container, ["batch", "patch"], range_id="0") as hold:
        worker = threading.Thread(
            target=lambda: outcome.update(result=_patch_batch(container, held_key, [f"{held_key}-0", f"{held_key}-1"])),
            daemon=True,
        )
        worker.start()
        _poll(lambda: hold.state()["waiting"] == 1, "the batch of range 0 to be parked")

        # Another range's batch, reads and queries of the held range pass.
        assert len(_patch_batch(container, free_key, [f"{free_key}-0", f"{free_key}-1"])) == 2
        assert container.read_item(f"{held_key}-0", held_key)["status"] == "pending", "the held batch is not applied"
        assert worker.is_alive(), "the held batch has no answer while held"
        released = hold.release()
    worker.join(timeout=30)
    assert not worker.is_alive()
    assert len(outcome["result"]) == 2
    assert released["served"] == 1 and released["dropped"] == 0 and released["matched"] == 1
    assert container.read_item(f"{held_key}-1", held_key)["status"] == "delivered"
    assert emulator_admin(cosmos_endpoint, "GET", "holds")["holds"] == [], "a released hold is gone"


def test_a_failing_hold_answers_its_error_at_once_to_the_matching_requests_only_until_released(
    cosmos_endpoint: CosmosEndpoint, cosmos_container_factory: ContainerFactory
) -> None:
    """A read-only key as an account shows it: the stamps (``batch``, ``patch``) answer 403, reads and creates
    pass; after the release the same batch is applied."""
    _emulator_only(cosmos_endpoint)
    container = cosmos_container_factory(("/pk",))
    for n in range(2):
        container.create_item({"id": f"ro-{n}", "pk": "p", "status": "pending"})
    refusal = {"status": 403, "substatus": 5301, "message": "Request blocked by Auth: the key is read-only"}
    with emulator_hold(cosmos_endpoint, container, ["batch", "patch"], fail=refusal) as hold:
        with pytest.raises(exceptions.CosmosHttpResponseError) as batch_refused:
            _patch_batch(container, "p", ["ro-0", "ro-1"])
        with pytest.raises(exceptions.CosmosHttpResponseError) as patch_refused:
            container.patch_item("ro-0", "p", [{"op": "set", "path": "/status", "value": "delivered"}])
        for refused in (batch_refused.value, patch_refused.value):
            assert (refused.status_code, refused.sub_status) == (403, 5301)
            assert "the key is read-only" in str(refused)
        container.create_item({"id": "ro-2", "pk": "p", "status": "pending"})
        assert container.read_item("ro-0", "p")["status"] == "pending", "nothing refused was applied"
        state = hold.state()
        assert (state["matched"], state["waiting"], state["fail"]) == (2, 0, {**refusal}), state
        released = hold.release()
    assert (released["served"], released["dropped"]) == (0, 0)
    assert len(_patch_batch(container, "p", ["ro-0", "ro-1"])) == 2
    assert container.read_item("ro-1", "p")["status"] == "delivered"


_CHILD = """
import json, sys
from azure.cosmos import CosmosClient
spec = json.loads(sys.argv[1])
client = CosmosClient(spec["url"], credential=spec["key"], connection_verify=spec["verify"])
container = client.get_database_client(spec["db"]).get_container_client(spec["coll"])
container.create_item({"id": spec["id"], "pk": spec["pk"]})
"""


def test_a_held_request_whose_client_was_killed_is_dropped_on_release_not_applied(
    cosmos_endpoint: CosmosEndpoint, cosmos_container_factory: ContainerFactory
) -> None:
    _emulator_only(cosmos_endpoint)
    container = cosmos_container_factory(("/pk",))
    item_id = f"orphan-{uuid.uuid4().hex[:8]}"
    spec = {
        "url": cosmos_endpoint.url,
        "key": cosmos_endpoint.key,
        "verify": cosmos_endpoint.verify,
        "db": container.container_link.split("/")[1],
        "coll": container.id,
        "id": item_id,
        "pk": "p",
    }
    with emulator_hold(cosmos_endpoint, container, ["create"]) as hold:
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, json.dumps(spec)], start_new_session=True, env=dict(os.environ)
        )
        try:
            _poll(lambda: hold.state()["waiting"] == 1, "the child's create to be parked", timeout_s=60)
        finally:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(timeout=30)
        _poll(lambda: hold.state()["waiting"] == 0, "the emulator to notice the killed client")
        released = hold.release()
    assert (released["served"], released["dropped"]) == (0, 1)
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        container.read_item(item_id, "p")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"container": "dbs/d/colls/c", "operations": ["stamp"]}, "operations"),
        ({"container": "dbs/d/colls/c", "operations": []}, "operations"),
        ({"container": "c", "operations": ["batch"]}, "container"),
        ({"container": "dbs/d/colls/c", "operations": ["batch"], "range_id": 0}, "range_id"),
        ({"container": "dbs/d/colls/c", "operations": ["batch"], "after": 1}, "after"),
        ({"container": "dbs/d/colls/c", "operations": ["batch"], "fail": {"status": 429}}, "fail.status"),
        ({"container": "dbs/d/colls/c", "operations": ["batch"], "fail": {"status": 200}}, "fail.status"),
        ({"container": "dbs/d/colls/c", "operations": ["batch"], "fail": {"status": 403, "code": 1}}, "fail.code"),
    ],
)
def test_a_bad_hold_is_refused_naming_the_field(cosmos_endpoint: CosmosEndpoint, body: Any, field: str) -> None:
    _emulator_only(cosmos_endpoint)
    with pytest.raises(EmulatorAdminError, match=rf"400 .*{field}"):
        emulator_admin(cosmos_endpoint, "POST", "holds", body=body)
    assert emulator_admin(cosmos_endpoint, "GET", "holds")["holds"] == [], "nothing was held"


def test_releasing_an_unknown_hold_is_404(cosmos_endpoint: CosmosEndpoint) -> None:
    _emulator_only(cosmos_endpoint)
    with pytest.raises(EmulatorAdminError, match="404 no hold h-none"):
        emulator_admin(cosmos_endpoint, "DELETE", "holds", params={"id": "h-none"})


def test_added_latency_is_a_timer_so_concurrent_requests_wait_side_by_side(
    cosmos_endpoint: CosmosEndpoint, cosmos_container_factory: ContainerFactory
) -> None:
    """An account's round trips overlap: four concurrent reads are all in their added latency at once (the
    emulator's ``in_latency`` gauge), and its admin calls answer meanwhile, instead of one blocked event loop
    serving them one after another."""
    _emulator_only(cosmos_endpoint)
    container = cosmos_container_factory(("/pk",))
    for n in range(4):
        container.create_item({"id": f"d{n}", "pk": "p"})
    done: list[int] = []
    with emulator_configured(cosmos_endpoint, latency_ms=5000):
        readers = [
            threading.Thread(target=lambda n=n: (container.read_item(f"d{n}", "p"), done.append(n)), daemon=True)
            for n in range(4)
        ]
        for reader in readers:
            reader.start()
        _poll(
            lambda: emulator_admin(cosmos_endpoint, "GET", "stats")["in_latency"] == 4,
            "all four reads to be waiting out their latency at once",
        )
        for reader in readers:
            reader.join(timeout=60)
    assert sorted(done) == [0, 1, 2, 3]
    assert emulator_admin(cosmos_endpoint, "GET", "stats")["in_latency"] == 0


def test_requests_with_a_body_after_large_responses_on_one_connection_are_all_answered_with_latency(
    cosmos_endpoint: CosmosEndpoint, cosmos_container_factory: ContainerFactory
) -> None:
    """A drain's pattern on one keep-alive connection: a change-feed page larger than a socket buffer, then writes
    with a body. Node 20 used to pause the connection's parser while that page drained and then drop the next
    request whose body came in a later TLS record ("Remote end closed connection without response"); with the
    added latency that hit most drains. Every request is answered now."""
    _emulator_only(cosmos_endpoint)
    container = cosmos_container_factory(("/pk",))
    for n in range(80):
        container.create_item({"id": f"d{n}", "pk": f"k{n % 8}", "pad": "x" * 1500})
    failures: list[str] = []
    with emulator_configured(cosmos_endpoint, latency_ms=10):
        for round_ in range(40):
            try:
                page = list(next(container.query_items_change_feed(start_time="Beginning").by_page()))
                assert len(page) == 80
                key = f"k{round_ % 8}"
                ids = [f"d{n}" for n in range(round_ % 8, 80, 8)][:4]
                _patch_batch(container, key, ids)
                container.replace_item(f"d{round_ % 8}", {"id": f"d{round_ % 8}", "pk": key, "round": round_})
            except exceptions.CosmosHttpResponseError as error:
                failures.append(f"round {round_}: {error}")
            except Exception as error:  # noqa: BLE001 - a dropped connection surfaces as ServiceResponseError
                failures.append(f"round {round_}: {type(error).__name__}: {error}")
    assert failures == []

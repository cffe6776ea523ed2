"""A receiver started by messages, on the live stack: ``chatter_consume_orders_on_arrival``
(dags/example_chatter_consume_orders.py) is scheduled on its topic's ``kafka://`` asset, whose ``AssetWatcher``
runs ``ChatterTopicBacklogTrigger`` in the triggerer.

A stack of its own with one source, ``orders`` (so nothing else runs on it and its pool counts are the watcher's
alone). With the DAG unpaused and nothing past the group's committed offsets, the watcher costs no task slot: no run
is created, no task instance is queued or running, every slot count of the pool stays 0, while its trigger is
assigned to the live triggerer. One message published then makes one run, which receives it. Everything is read
through REST, except which triggerer holds the trigger (the metadata DB, read-only: ``LiveAirflow.triggerer_of``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from azure.cosmos import exceptions

from airflow_chatter.adapters.kafka.admin import ensure_topics
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.inbox.markers import marker_id
from devkit.live_airflow import LiveSource, order_placed
from tests.fixtures.live_airflow import LiveAirflow, running_stack, wait_until

pytestmark = [pytest.mark.live, pytest.mark.kafka, pytest.mark.cosmos, pytest.mark.timeout(900)]

WATCHER_DAG = "chatter_consume_orders_on_arrival"
GROUP = "chatter-example-consume-orders"  # the example's DEFAULT_GROUP_ID
#: How many times the idle stack is looked at, and the pause after each: about 50 s, some 25 of the watcher's 2 s
#: polls (``WATCH_POLL_SECONDS`` of the example DAG).
IDLE_SAMPLES, IDLE_SAMPLE_S = 10, 5.0
SLOTS = ("occupied_slots", "running_slots", "queued_slots", "scheduled_slots", "deferred_slots")


@pytest.fixture(scope="module")
def orders_stack(request: pytest.FixtureRequest) -> Iterator[LiveAirflow]:
    if os.environ.get("CHATTER_SKIP_LIVE_AIRFLOW") == "1":
        pytest.skip("CHATTER_SKIP_LIVE_AIRFLOW=1: the live Airflow tests are skipped")
    with running_stack(request, session_prefix="watcher-live-", source_names=("orders",), source_settings={}) as stack:
        yield stack


def _runs(api: httpx.Client) -> list[dict[str, Any]]:
    response = api.get(f"/api/v2/dags/{WATCHER_DAG}/dagRuns", params={"order_by": "run_after"})
    assert response.status_code == 200, response.text
    return list(response.json()["dag_runs"])


def _unfinished_task_instances(api: httpx.Client) -> list[dict[str, Any]]:
    """Every task instance of the stack (any DAG, any run) not in a finished state."""
    response = api.get("/api/v2/dags/~/dagRuns/~/taskInstances", params={"limit": 100})
    assert response.status_code == 200, response.text
    finished = {"success", "failed", "skipped", "upstream_failed", "removed"}
    return [ti for ti in response.json()["task_instances"] if ti["state"] not in finished]


def _pool(api: httpx.Client) -> dict[str, int]:
    response = api.get("/api/v2/pools/default_pool")
    assert response.status_code == 200, response.text
    return {name: response.json()[name] for name in SLOTS}


def _received(source: LiveSource, message_id: str, key: str) -> bool:
    try:
        source.monitored.read_item(marker_id(message_id, GROUP), partition_key=key)
    except exceptions.CosmosResourceNotFoundError:
        return False
    return True


def test_an_idle_topic_watcher_holds_no_task_slot_and_one_message_makes_one_run(orders_stack: LiveAirflow) -> None:
    live = orders_stack
    api = live.client("admin")
    source = live.sources["orders"]
    settings = KafkaSettings(bootstrap_servers=live.kafka_bootstrap, api_version=(2, 8))
    ensure_topics(settings, [source.topic], partitions=3)
    live.unpause(api, WATCHER_DAG)

    # The watcher: the topic's asset names its trigger, which the live triggerer has taken.
    watcher = live.wait_for_topic_watcher(api, source.topic)
    assert watcher["name"] == f"backlog_{GROUP}_{source.topic}"
    triggerer = live.triggerer_of(watcher["trigger_id"])

    with KafkaPublisher(settings) as publisher:
        # One message, one run, which receives it and commits: the group has nothing left past its offsets.
        first, first_id, first_key = order_placed(source.topic, 0, "watch")
        [outcome] = publisher.send_batch([first])
        assert outcome.confirmation is not None, outcome.error
        [run] = wait_until(lambda: _runs(api) or None, timeout_s=180, what="a run started by the first message")
        assert run["run_type"] == "asset_triggered", run
        live.wait_for_run(api, WATCHER_DAG, run["dag_run_id"], timeout_s=240)
        assert _received(source, first_id, first_key), "the run received the message (its Inbox Marker)"

        # Idle: nothing to read. Looked at over some 25 polls of the watcher: no run, no task, no slot.
        heartbeats = []
        for _ in range(IDLE_SAMPLES):
            assert [r["dag_run_id"] for r in _runs(api)] == [run["dag_run_id"]], "an idle watcher starts no run"
            assert _unfinished_task_instances(api) == [], "no task instance queued, scheduled, deferred or running"
            assert _pool(api) == dict.fromkeys(SLOTS, 0), "the idle watcher holds no pool slot"
            assert live.triggerer_of(watcher["trigger_id"]) == triggerer, "the trigger stays in the triggerer"
            health = api.get("/api/v2/monitor/health").json()["triggerer"]
            assert health["status"] == "healthy", health
            heartbeats.append(health["latest_triggerer_heartbeat"])
            time.sleep(IDLE_SAMPLE_S)
        assert len(set(heartbeats)) > 1, "the triggerer kept heart-beating through the idle window"
        print(f"idle: {IDLE_SAMPLES} looks {IDLE_SAMPLE_S:g} s apart, 1 run, 0 unfinished task instances, pool 0,")
        print(f"      trigger {watcher['trigger_id']} on triggerer job {triggerer}, {len(set(heartbeats))} heartbeats")

        # One more message: exactly one more run, which receives it.
        second, second_id, second_key = order_placed(source.topic, 1, "watch")
        [outcome] = publisher.send_batch([second])
        assert outcome.confirmation is not None, outcome.error
        later = wait_until(
            lambda: [r for r in _runs(api) if r["dag_run_id"] != run["dag_run_id"]] or None,
            timeout_s=180,
            what="a run started by the second message",
        )
        live.wait_for_run(api, WATCHER_DAG, later[0]["dag_run_id"], timeout_s=240)
        assert _received(source, second_id, second_key)
    runs = _runs(api)
    assert [r["dag_run_id"] for r in runs] == [run["dag_run_id"], later[0]["dag_run_id"]], "one run per message"
    assert later[0]["run_type"] == "asset_triggered", later

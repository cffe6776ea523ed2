"""Follow mode on the live stack: a following drain task stopped through Airflow while documents keep arriving.

A stack of its own with one source, ``follow`` (``follow: true``, pages of 10, no schedule: runs are triggered here).
While it follows a steady stream of writes, the monitoring page (headless Chromium, signed in through Airflow's login
form) shows it live in the overview row and in its Leases table. Its drain task is then marked failed through the
REST API, as an operator stopping it from the UI would: Airflow's supervisor sees the new state at its next
heartbeat and sends the task process SIGTERM (its task runner calls the operator's ``on_kill``), then SIGKILL 5 s
later. The drain must stop at a page boundary and release its lease (owner and expiry cleared, not left to expire);
the next run must take over and deliver the rest: nothing lost, at most one page published twice. Every wait has a
deadline.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from airflow_chatter.outbox.document import OutboxMessage
from tests.fixtures.kafka import consume_records, topic_record_count
from tests.fixtures.live_airflow import DESTINATION, PK_PATH, LiveAirflow, LiveSource, running_stack, wait_until
from tests.live._browser import Browser
from tests.live.test_ui_live import _log_in

pytestmark = [pytest.mark.live, pytest.mark.kafka, pytest.mark.cosmos, pytest.mark.timeout(900)]

PAGE = 10
SETTINGS = {
    "follow": True,
    "follow_poll_seconds": 0.25,
    "max_batch_size": PAGE,
    "max_documents": 100000,
    "max_seconds": 300,
    "schedule": None,
}


@pytest.fixture(scope="module")
def stack(request: pytest.FixtureRequest) -> Iterator[LiveAirflow]:
    if os.environ.get("CHATTER_SKIP_LIVE_AIRFLOW") == "1":
        pytest.skip("CHATTER_SKIP_LIVE_AIRFLOW=1: the live Airflow tests are skipped")
    with running_stack(
        request,
        session_prefix="airflow-live-follow-",
        source_names=("follow",),
        source_settings={"follow": SETTINGS},
    ) as live:
        yield live


def _write(source: LiveSource, tag: str, n: int) -> dict[str, Any]:
    customer = f"cust-{tag}-{n % 3}"
    message = OutboxMessage(
        message_id=f"follow-{tag}-{n}-{uuid.uuid4().hex[:6]}",
        destination=DESTINATION,
        body=json.dumps({"customer": customer, "order": n}),
        content_type="application/json",
    )
    written: dict[str, Any] = source.monitored.create_item(message.to_document(PK_PATH, customer))
    return written


def _trigger(api: httpx.Client, dag_id: str) -> str:
    response = api.post(f"/api/v2/dags/{dag_id}/dagRuns", json={"logical_date": None})
    assert response.status_code == 200, response.text
    return str(response.json()["dag_run_id"])


def _drain_ti(api: httpx.Client, dag_id: str, run_id: str) -> dict[str, Any] | None:
    response = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances", params={"task_id": "drain"})
    tis = [ti for ti in response.json()["task_instances"] if ti["task_id"] == "drain"] if response.is_success else []
    return tis[0] if len(tis) == 1 else None


def _lease(source: LiveSource) -> dict[str, Any] | None:
    query = "SELECT * FROM c WHERE c._chatterType = 'lease'"
    leases = list(source.leases.query_items(query, enable_cross_partition_query=True))
    return leases[0] if len(leases) == 1 else None


def _page_shows_it_live(stack: LiveAirflow, source: LiveSource, profile: Path) -> dict[str, Any]:
    """What the monitoring page shows of the following source: its overview row and, unfolded, its Leases table."""
    browser = Browser(profile)
    try:
        _log_in(browser, stack, "admin", "/plugin/chatter")
        row = f"document.querySelector('[data-testid=overview-{source.name}]')"
        browser.wait_for(f"{row} && !!{row}.querySelector('[data-testid=overview-live]')", what="the live badge")
        folded = f"document.querySelector('[data-testid=source-{source.name}-folded] button')"
        browser.wait_for(f"!!{folded}", what="the source's folded panel")
        browser.click(folded, what="its Details button")
        cell = "document.querySelector('[data-testid=lease-follow]')"
        browser.wait_for(f"!!{cell}", what="the Follow cell of its lease")
        shown: dict[str, Any] = browser.evaluate(
            f"""(() => ({{
                badge: {row}.querySelector('[data-testid=overview-live]').innerText,
                row: {row}.querySelector('[data-testid=overview-follow]').innerText,
                live: {cell}.dataset.live,
                cell: {cell}.innerText,
            }}))()"""
        )
        return shown
    finally:
        browser.close()


def test_f04_a_following_drain_task_stopped_through_airflow_releases_its_lease_and_loses_nothing(
    stack: LiveAirflow, tmp_path: Path
) -> None:
    source = stack.sources["follow"]
    api = stack.client("admin")
    stack.unpause(api, source.drain_dag_id)  # no schedule: only the runs triggered here
    first = _trigger(api, source.drain_dag_id)
    wait_until(
        lambda: (ti := _drain_ti(api, source.drain_dag_id, first)) is not None and ti["state"] == "running",
        timeout_s=180,
        what="the first run's drain task to run",
    )
    following = wait_until(
        lambda: (lease := _lease(source)) is not None and (lease.get("follow") or {}).get("owner") or None,
        timeout_s=120,
        what="the drain to catch up and follow (its owner on the lease's follow block)",
    )

    written: list[dict[str, Any]] = []
    done = threading.Event()

    def steady() -> None:  # 10 writes a second until told to stop
        n = 0
        while not done.is_set():
            written.append(_write(source, "stream", n))
            n += 1
            time.sleep(0.1)

    writer = threading.Thread(target=steady, name="writer")
    writer.start()
    try:
        wait_until(lambda: len(written) >= 40, timeout_s=60, what="40 writes", interval_s=0.2)
        shown = _page_shows_it_live(stack, source, tmp_path / "chromium-profile")
        ti = _drain_ti(api, source.drain_dag_id, first)
        assert ti is not None and ti["state"] == "running", ti
        marked = api.patch(
            f"/api/v2/dags/{source.drain_dag_id}/dagRuns/{first}/taskInstances/drain/{ti['map_index']}",
            json={"new_state": "failed"},
        )
        assert marked.status_code == 200, marked.text
        at_stop = len(written)
        # SIGTERM at the supervisor's next heartbeat; the drain stops at a page boundary and releases its lease.
        released = wait_until(
            lambda: (lease := _lease(source)) is not None and lease["owner"] is None and lease,
            timeout_s=60,
            what="the stopped drain to release its lease",
            interval_s=0.5,
        )
        wait_until(lambda: len(written) >= at_stop + 40, timeout_s=60, what="writes after the stop", interval_s=0.2)
    finally:
        done.set()
        writer.join()
    assert shown["badge"] == "live" and shown["live"] == "true", shown
    assert "published in the last minute" in shown["row"] and "last poll" in shown["cell"], shown
    assert released["expires_at"] is None, "released by the drain, not left to expire"
    assert released["follow"]["owner"] == following, "the follower itself wrote its last lease"
    delivered_before = {
        d["MessageId"] for d in written if source.monitored.read_item(d["id"], d["customerId"])["status"] == "delivered"
    }
    assert delivered_before and len(delivered_before) < len(written), "stopped mid-stream"

    _trigger(api, source.drain_dag_id)  # takes over at once (the lease is free) and follows on
    wait_until(
        lambda: all(source.monitored.read_item(d["id"], d["customerId"])["status"] == "delivered" for d in written),
        timeout_s=240,
        what="the next run to deliver every write",
        interval_s=2.0,
    )
    expected = {d["MessageId"] for d in written}
    records = consume_records(
        stack.kafka_bootstrap, source.topic, topic_record_count(stack.kafka_bootstrap, source.topic), timeout_s=60
    )
    counts = Counter(dict(r.headers)["message-id"].decode() for r in records)
    assert set(counts) == expected, "nothing lost: every write reached Kafka"
    repeated = [message_id for message_id, n in counts.items() if n > 1]
    assert all(counts[m] == 2 for m in repeated) and len(repeated) <= PAGE, f"at most one page repeated: {repeated}"

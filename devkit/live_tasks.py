"""What a live stack's tasks did, read from outside: the OpenLineage events its file transport wrote, and the
connection reads its api-server served, per task instance.

Connections live in the metadata DB here (``store_connections``), as in a deployment: a task then reads each one
from the api-server (``GET /execution/connections/<id>``, asked by the task's supervisor), and the api-server's
access log (``process-logs/api-server.log``, one ``request finished`` line per request with ``client_addr``,
``method`` and ``path``) shows every read. A supervisor talks to the api-server over its own HTTP connection and
names its task instance in the paths of its other requests (``/execution/task-instances/<id>/run``, ``.../heartbeat``,
``.../state``), so each read is counted for the task instance last named on the same client address. A read on an
address no task instance was named on yet (a reconnect whose first request was the read) is counted as unattributed.
Connections given as ``AIRFLOW_CONN_*`` variables are read from the environment and never reach the log.
Used by ``tests/live/test_openlineage_live.py`` and ``benchmarks/openlineage_live.py``.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from devkit.live_airflow import LiveAirflow

_FIELD = re.compile(r"\b(client_addr|method|path)=(\S+)")
_TASK_INSTANCE = re.compile(r"^/execution/task-instances/([0-9a-f-]{36})(?:/|$)")
_CONNECTION = re.compile(r"^/execution/connections/([^/?]+)$")
UNATTRIBUTED = "unattributed"


def store_connections(live: LiveAirflow, api: httpx.Client, cosmos_conn_id: str, kafka_conn_id: str) -> None:
    """Create the stack's two connections in its metadata DB under these ids (through REST, as a user would)."""
    cosmos = live.cosmos_connection
    bodies = [
        {
            "connection_id": cosmos_conn_id,
            "conn_type": cosmos["conn_type"],
            "host": cosmos["host"],
            "password": cosmos["password"],
            "extra": json.dumps(cosmos["extra"]),
        },
        {
            "connection_id": kafka_conn_id,
            "conn_type": "chatterkafka",
            "host": live.kafka_bootstrap,
            "extra": json.dumps({"security_protocol": "PLAINTEXT"}),
        },
    ]
    for body in bodies:
        response = api.post("/api/v2/connections", json=body)
        assert response.status_code == 201, f"POST /api/v2/connections {body['connection_id']}: {response.text}"


def connection_reads(log_text: str) -> dict[str, Counter[str]]:
    """Connection reads per task instance id (``UNATTRIBUTED`` for reads no task instance was named for), by
    connection id, from the api-server's access log."""
    owner: dict[str, str] = {}
    reads: dict[str, Counter[str]] = defaultdict(Counter)
    for line in log_text.splitlines():
        if "request finished" not in line:
            continue
        fields = dict(_FIELD.findall(line))
        client, path = fields.get("client_addr"), fields.get("path", "")
        if client is None:
            continue
        if named := _TASK_INSTANCE.match(path):
            owner[client] = named.group(1)
        elif (read := _CONNECTION.match(path)) and fields.get("method") == "GET":
            reads[owner.get(client, UNATTRIBUTED)][read.group(1)] += 1
    return dict(reads)


def lineage_events(path: Path) -> list[dict[str, Any]]:
    """The events the file transport wrote (one JSON object per line)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@dataclass
class TaskTally:
    """One task id's instances in the runs looked at, their OpenLineage events and their connection reads."""

    task_id: str
    instances: int = 0
    tries: int = 0
    events: Counter[str] = field(default_factory=Counter)
    #: Per connection id, the reads of each instance (one entry per instance).
    reads: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))

    def line(self, conn_ids: Iterable[str]) -> str:
        """One row: instances, tries, START/COMPLETE/FAIL, and min/mean/max reads per instance per connection."""
        shown = []
        for conn_id in conn_ids:
            per = self.reads.get(conn_id) or [0] * self.instances
            shown.append(f"{min(per)}/{sum(per) / len(per):.2f}/{max(per)}" if per else "-")
        counts = " ".join(f"{kind}={self.events[kind]}" for kind in ("START", "COMPLETE", "FAIL"))
        return f"{self.task_id:<14} instances={self.instances:<3} tries={self.tries:<3} {counts}  " + "  ".join(
            f"{c}={s}" for c, s in zip(conn_ids, shown, strict=True)
        )


def task_instances(api: httpx.Client, dag_id: str, run_id: str) -> list[dict[str, Any]]:
    response = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances", params={"limit": 1000})
    assert response.status_code == 200, response.text
    return list(response.json()["task_instances"])


def tally(
    instances: Iterable[Mapping[str, Any]],
    events: Iterable[Mapping[str, Any]],
    reads: Mapping[str, Counter[str]],
    conn_ids: Iterable[str],
) -> dict[str, TaskTally]:
    """Per task id: the instances given (REST ``taskInstances`` items), their OpenLineage events (matched by DAG
    run id, task id and map index) and each one's reads of each of ``conn_ids``."""
    wanted = list(conn_ids)
    by_key: dict[tuple[str, str, str, int], Counter[str]] = defaultdict(Counter)
    for event in events:
        facets = event.get("run", {}).get("facets", {}).get("airflow", {})
        run_id, task = facets.get("dagRun", {}).get("run_id"), facets.get("taskInstance", {})
        dag_id, _, task_id = str(event.get("job", {}).get("name", "")).partition(".")
        if run_id is None or not task_id:
            continue
        map_index = task.get("map_index")
        by_key[(dag_id, run_id, task_id, -1 if map_index is None else int(map_index))][event["eventType"]] += 1
    tallies: dict[str, TaskTally] = {}
    for ti in instances:
        entry = tallies.setdefault(ti["task_id"], TaskTally(ti["task_id"]))
        entry.instances += 1
        entry.tries += int(ti.get("try_number") or 0)
        entry.events.update(by_key.get((ti["dag_id"], ti["dag_run_id"], ti["task_id"], int(ti["map_index"])), {}))
        for conn_id in wanted:
            entry.reads[conn_id].append(reads.get(ti["id"], Counter())[conn_id])
    return tallies

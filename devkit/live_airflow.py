"""A live Airflow (api-server, scheduler, dag-processor, triggerer, or the CeleryExecutor stack) on 127.0.0.1, for
the live tests and the Airflow benchmarks: ``stack_for`` starts one with ``scripts/airflow-live.sh start`` (or
``scripts/celery-stack.sh``) in a throw-away ``AIRFLOW_LIVE_HOME``, with the checkout's ``dags/`` folder as the
bundle, a sources file of its own (each source with its own monitored and lease containers and its own Kafka topic),
and the two connections as ``AIRFLOW_CONN_*`` env vars; it stops the stack at the end (the script stops only what it
started, by pid file and process group). A stack that cannot start raises ``AssertionError`` with the script's output.
Needs a checkout (the scripts are not in the wheel).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import yaml

from airflow_chatter.adapters.cosmos.container import create_container
from airflow_chatter.adapters.cosmos.provision import provision_idempotency_container
from airflow_chatter.ports import OutgoingMessage
from devkit.services import CHECKOUT

REPO = CHECKOUT
SCRIPT = REPO / "scripts" / "airflow-live.sh"
SESSION_DIR_PREFIX = "airflow-live-test-"
#: Migration plus the four components becoming healthy: about 40 s on 2 idle cores; more when they are shared.
START_TIMEOUT_S = 300
#: Four components, each given 30 s after SIGTERM before SIGKILL.
STOP_TIMEOUT_S = 180
PK_PATH = "/customerId"
DESTINATION = "orders.events"
COSMOS_CONN_ID = "chatter_cosmos_live"
KAFKA_CONN_ID = "chatter_kafka_live"
#: The live sources: ``sched`` is drained by its scheduled DAG, ``bf`` by manual backfill runs, ``wait`` by the
#: wait-and-drain DAG (deferrable sensor), ``ui`` by the UI plugin's tests, ``event`` by its drain DAG scheduled on
#: the pending asset (``schedule: on_pending``, tests/live/test_event_driven.py). Separate containers keep one test's
#: drain off another's documents.
SOURCE_NAMES = ("sched", "bf", "wait", "ui", "event")
#: Sources whose entry sets more than the defaults below.
#: ``ui`` keeps its UI actions' Idempotency-Keys in a Cosmos container (``{run}``: the stack's run id; ``stack_for``
#: creates and deletes it), as a deployment with several api-server workers must.
SOURCE_SETTINGS: dict[str, dict[str, Any]] = {
    "event": {"schedule": "on_pending", "on_pending_poll_seconds": 2},
    # ``max_pending_age_seconds``: the page's documents that wait behind its suspended lease trip the pending-age
    # check (``chatter_pending_age``, paused until tests/live/test_ui_live.py unpauses it).
    "ui": {"ui_idempotency_container": "live-{run}-ui-idempotency", "max_pending_age_seconds": 30},
}

T = TypeVar("T")


def wait_until(check: Callable[[], T | None], *, timeout_s: float, what: str, interval_s: float = 2.0) -> T:
    """Call ``check`` until it returns something other than ``None``/``False``; after the deadline, fail naming
    ``what``.

    A check whose request to the stack times out or finds the api-server briefly unreachable counts as "not yet":
    on a loaded machine the api-server's one worker can take longer than a client timeout to answer a poll, and
    the deadline, not one slow answer, decides. The last such error is named if the deadline passes.
    """
    deadline = time.monotonic() + timeout_s
    transient: httpx.TransportError | None = None
    while True:
        try:
            last = check()
        except httpx.TransportError as error:
            transient, last = error, None
        if last not in (None, False):
            return last
        if time.monotonic() >= deadline:
            also = f" (last request error: {transient!r})" if transient is not None else ""
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}{also}")
        time.sleep(interval_s)


def order_placed(topic: str, n: int, tag: str) -> tuple[OutgoingMessage, str, str]:
    """The ``n``-th ``OrderPlaced`` event of a run tagged ``tag``, as the example receiver
    (``dags/example_chatter_consume_orders.py``) reads it, its message id and its Kafka key (``cust-<n % 7>``: the
    partition key of its receipt and Inbox Marker)."""
    message_id, key = f"{tag}-{n}-{uuid.uuid4().hex[:6]}", f"cust-{n % 7}"
    body = json.dumps({"orderId": f"{tag}-{n}-{uuid.uuid4().hex[:4]}", "total": n}).encode()
    headers = (("message-id", message_id.encode()), ("event-type", b"OrderPlaced"))
    return OutgoingMessage(topic=topic, value=body, key=key.encode(), headers=headers), message_id, key


@dataclass(frozen=True)
class LiveSource:
    """One source of the live sources file: its containers (SDK proxies) and its topic."""

    name: str
    monitored: Any
    leases: Any
    topic: str
    #: Sources-file keys beyond the defaults of ``entry`` (e.g. ``schedule``).
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def drain_dag_id(self) -> str:
        return f"chatter_drain_{self.name}"

    @property
    def wait_dag_id(self) -> str:
        return f"chatter_wait_{self.name}"

    def entry(self, database: str) -> dict[str, Any]:
        return {
            "name": self.name,
            "cosmos_conn_id": COSMOS_CONN_ID,
            "kafka_conn_id": KAFKA_CONN_ID,
            "database": database,
            "monitored_container": self.monitored.id,
            "lease_container": self.leases.id,
            "partition_key_paths": PK_PATH,
            "topics": {DESTINATION: self.topic},
            "max_documents": 1000,
            "max_seconds": 60,
            **self.settings,
        }


@dataclass
class LiveAirflow:
    """A running stack: its URL, home and users, a REST client, and the sources it drains."""

    url: str
    home: Path
    passwords: dict[str, str]
    sources: dict[str, LiveSource]
    sources_file: Path
    database: str
    kafka_bootstrap: str
    cosmos_connection: dict[str, Any]
    #: The environment the stack's script was started with, and the script (for its other sub-commands).
    env: dict[str, str] = field(default_factory=dict)
    script: Path = SCRIPT
    _clients: list[httpx.Client] = field(default_factory=list)

    def token(self, user: str = "admin") -> str:
        response = httpx.post(
            f"{self.url}/auth/token", json={"username": user, "password": self.passwords[user]}, timeout=30
        )
        assert response.status_code in (200, 201), f"POST /auth/token as {user}: {response.status_code} {response.text}"
        return str(response.json()["access_token"])

    def client(self, user: str = "admin") -> httpx.Client:
        """A REST client authenticated as ``user`` (a Bearer token from ``POST /auth/token``)."""
        client = httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {self.token(user)}", "Accept": "application/json"},
            timeout=30,
        )
        self._clients.append(client)
        return client

    def close(self) -> None:
        for client in self._clients:
            client.close()

    # -- helpers the tests share --------------------------------------------------------------

    def wait_for_dag(self, api: httpx.Client, dag_id: str, *, timeout_s: float = 120) -> dict[str, Any]:
        """The DAG as the API shows it, once the dag-processor has serialized it."""

        def found() -> dict[str, Any] | None:
            response = api.get(f"/api/v2/dags/{dag_id}")
            return response.json() if response.status_code == 200 else None

        return wait_until(found, timeout_s=timeout_s, what=f"DAG {dag_id} to be parsed")

    def unpause(self, api: httpx.Client, dag_id: str) -> None:
        self.wait_for_dag(api, dag_id)
        response = api.patch(f"/api/v2/dags/{dag_id}", json={"is_paused": False})
        assert response.status_code == 200, response.text
        assert response.json()["is_paused"] is False

    def wait_for_run(
        self, api: httpx.Client, dag_id: str, run_id: str | None = None, *, timeout_s: float = 180
    ) -> dict[str, Any]:
        """Wait for a finished run (``run_id``, or the DAG's first run); fail with its task states if not success."""

        def finished() -> dict[str, Any] | None:
            if run_id is None:
                runs = api.get(f"/api/v2/dags/{dag_id}/dagRuns", params={"order_by": "run_after"}).json()["dag_runs"]
                run = runs[0] if runs else None
            else:
                run = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}").json()
            return run if run and run.get("state") in ("success", "failed") else None

        run = wait_until(finished, timeout_s=timeout_s, what=f"a run of {dag_id} to finish")
        if run["state"] != "success":
            raise AssertionError(f"{dag_id} run {run['dag_run_id']} ended {run['state']}: {self.task_states(api, run)}")
        return run

    def task_states(self, api: httpx.Client, run: dict[str, Any]) -> dict[str, Any]:
        path = f"/api/v2/dags/{run['dag_id']}/dagRuns/{run['dag_run_id']}/taskInstances"
        return {f"{ti['task_id']}[{ti['map_index']}]": ti["state"] for ti in api.get(path).json()["task_instances"]}

    def topic_watchers(self, api: httpx.Client, topic: str) -> list[dict[str, Any]]:
        """The watchers (``name``, ``trigger_id``) of the topic's ``kafka://`` asset, as ``GET /api/v2/assets`` shows
        them: none until a DAG scheduled on the asset is unpaused and its watcher registered."""
        response = api.get("/api/v2/assets", params={"uri_pattern": topic})
        assert response.status_code == 200, response.text
        return [w for a in response.json()["assets"] if a["uri"].endswith(f"/{topic}") for w in a["watchers"]]

    def _metadata(self, query: str, *args: Any) -> Any:
        """One row of a read-only query of the stack's SQLite metadata DB (what REST does not show), or None."""
        import sqlite3

        with sqlite3.connect(f"file:{self.home / 'airflow.db'}?mode=ro", uri=True, timeout=30) as db:
            return db.execute(query, args).fetchone()

    def running_triggerer(self) -> int | None:
        """The job id of the running triggerer."""
        row = self._metadata(
            "SELECT id FROM job WHERE job_type = 'TriggererJob' AND state = 'running' ORDER BY id DESC"
        )
        return None if row is None else int(row[0])

    def triggerer_of(self, trigger_id: int) -> int | None:
        """The job id of the triggerer running this trigger (``trigger.triggerer_id``), None while unassigned."""
        row = self._metadata("SELECT triggerer_id FROM trigger WHERE id = ?", trigger_id)
        return None if row is None or row[0] is None else int(row[0])

    def wait_for_topic_watcher(self, api: httpx.Client, topic: str, *, timeout_s: float = 180) -> dict[str, Any]:
        """The topic's watcher, once the running triggerer runs its trigger."""
        [watcher] = wait_until(
            lambda: self.topic_watchers(api, topic) or None, timeout_s=timeout_s, what=f"the watcher of {topic}"
        )
        wait_until(
            lambda: (job := self.triggerer_of(watcher["trigger_id"])) is not None and job == self.running_triggerer(),
            timeout_s=timeout_s,
            what=f"the running triggerer to take the trigger of {topic}'s watcher",
        )
        return dict(watcher)

    def xcom(self, api: httpx.Client, run: dict[str, Any], task_id: str, map_index: int = -1) -> Any:
        path = (
            f"/api/v2/dags/{run['dag_id']}/dagRuns/{run['dag_run_id']}/taskInstances/{task_id}/xcomEntries/return_value"
        )
        response = api.get(path, params={"map_index": map_index, "deserialize": True})
        assert response.status_code == 200, f"GET {path}: {response.status_code} {response.text}"
        return response.json()["value"]


def _script(
    action: str, env: dict[str, str], timeout_s: float, script: Path = SCRIPT, *args: str
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["bash", str(script), action, *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired as error:
        return subprocess.CompletedProcess(
            error.cmd,
            124,
            stdout=str(error.stdout or ""),
            stderr=f"{error.stderr.decode() if isinstance(error.stderr, bytes) else error.stderr or ''}\n"
            f"timed out after {timeout_s} s",
        )


def _settings(stdout: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in stdout.splitlines() if line.startswith("AIRFLOW_LIVE_"))
    return {name: value.strip() for name, value in pairs}


def _session_root(prefix: str = SESSION_DIR_PREFIX) -> Path:
    """``<state dir>/airflow-live-test-<pid>``: where this session's stack lives (kept afterwards, for its logs).

    ``scripts/test.sh`` stops any stack still running under such a directory when a killed run left one behind;
    here the directories of earlier sessions whose process is gone are removed first.
    """
    state = Path(os.environ.get("CHATTER_STATE_DIR") or REPO / ".cache" / "services")
    for old in state.glob(f"{prefix}*"):
        pid = old.name.removeprefix(prefix)
        if pid.isdigit() and not Path(f"/proc/{pid}").exists() and not any((old / "home" / "pids").glob("*.pid")):
            shutil.rmtree(old, ignore_errors=True)
    root = state / f"{prefix}{os.getpid()}"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    return root


def _stack_env(home: Path, sources_file: Path, connections: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The caller's environment without this process's in-process Airflow settings, plus the stack's own."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not (k == "AIRFLOW_HOME" or k.startswith("AIRFLOW__") or k.startswith("AIRFLOW_CONN_"))
    }
    env.update(
        {
            "AIRFLOW_LIVE_HOME": str(home),
            "CHATTER_SOURCES_FILE": str(sources_file),
            **{f"AIRFLOW_CONN_{conn_id.upper()}": json.dumps(body) for conn_id, body in connections.items()},
        }
    )
    # The stack must not derive *_local connections from a services.env someone else wrote.
    env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    env.pop("COSMOS_ENDPOINT", None)
    env.pop("COSMOS_KEY", None)
    env["CHATTER_STATE_DIR"] = str(home.parent)
    return env


def _for_run(settings: dict[str, Any], run: str) -> dict[str, Any]:
    """A source's settings with the run id put into the container names it declares."""
    named = {
        k: v.format(run=run)
        for k, v in settings.items()
        if k in ("ui_idempotency_container", "monitored_container", "lease_container")
    }
    return {**settings, **named}


@contextmanager
def stack_for(
    cosmos_endpoint: Any,
    cosmos_database: Any,
    kafka_bootstrap: str,
    *,
    script: Path = SCRIPT,
    session_prefix: str = SESSION_DIR_PREFIX,
    source_names: tuple[str, ...] = SOURCE_NAMES,
    source_settings: dict[str, dict[str, Any]] | None = None,
    extra_env: dict[str, str] | None = None,
    partition_ranges: int | None = None,
) -> Iterator[LiveAirflow]:
    """Start a stack with ``script start`` (``airflow-live.sh`` or ``celery-stack.sh``) for sources of its own,
    yield it, and stop it with ``script stop``, deleting its containers. ``partition_ranges`` (emulator only) gives
    every monitored container that many partition key ranges."""
    run = uuid.uuid4().hex[:8]
    settings_by_source = SOURCE_SETTINGS if source_settings is None else source_settings

    def monitored(name: str) -> Any:
        return create_container(cosmos_database, f"live-{run}-{name}", (PK_PATH,), default_ttl=-1)

    with ExitStack() as ranges:
        if partition_ranges is not None:
            from devkit.services import emulator_configured

            ranges.enter_context(emulator_configured(cosmos_endpoint, partition_ranges=partition_ranges))
        sources = {
            name: LiveSource(
                name=name,
                monitored=monitored(name),
                leases=create_container(cosmos_database, f"live-{run}-{name}-leases", ("/id",)),
                topic=f"chatter-live.{run}.{name}",
                settings=_for_run(settings_by_source.get(name, {}), run),
            )
            for name in source_names
        }
    idempotency_containers = sorted(
        {s.settings["ui_idempotency_container"] for s in sources.values() if "ui_idempotency_container" in s.settings}
    )
    for container_id in idempotency_containers:
        provision_idempotency_container(cosmos_database, container_id)
    root = _session_root(session_prefix)
    sources_file = root / "chatter_sources.yaml"
    sources_file.write_text(
        yaml.safe_dump({"sources": [s.entry(cosmos_database.id) for s in sources.values()]}, sort_keys=False)
    )
    verify = cosmos_endpoint.verify
    cosmos_connection = {
        "conn_type": "chattercosmos",
        "host": cosmos_endpoint.url,
        "password": cosmos_endpoint.key,
        "extra": {
            "database_name": cosmos_database.id,
            "connection_verify": verify is not False,
            **({"ca_cert_path": verify} if isinstance(verify, str) else {}),
        },
    }
    kafka_connection = {"conn_type": "chatterkafka", "host": kafka_bootstrap}
    env = _stack_env(root / "home", sources_file, {COSMOS_CONN_ID: cosmos_connection, KAFKA_CONN_ID: kafka_connection})
    env.update(extra_env or {})
    started = _script("start", env, START_TIMEOUT_S, script)
    try:
        if started.returncode != 0:
            raise AssertionError(
                f"{script.relative_to(REPO)} start exited {started.returncode}:\n"
                f"{started.stdout}\n{started.stderr[-6000:]}"
            )
        settings = _settings(started.stdout)
        stack = LiveAirflow(
            url=settings["AIRFLOW_LIVE_URL"],
            home=Path(settings["AIRFLOW_LIVE_HOME"]),
            passwords=json.loads(Path(settings["AIRFLOW_LIVE_PASSWORDS_FILE"]).read_text()),
            sources=sources,
            sources_file=sources_file,
            database=cosmos_database.id,
            kafka_bootstrap=kafka_bootstrap,
            cosmos_connection=cosmos_connection,
            env=env,
            script=script,
        )
        try:
            yield stack
        finally:
            stack.close()
    finally:
        stopped = _script("stop", env, STOP_TIMEOUT_S, script)
        doomed = [c.id for s in sources.values() for c in (s.monitored, s.leases)] + idempotency_containers
        for container_id in doomed:
            try:
                cosmos_database.delete_container(container_id)
            except Exception:  # noqa: BLE001 - cleanup must not mask the tests' own outcome
                pass
        assert stopped.returncode == 0, f"{script.name} stop failed: {stopped.stderr[-3000:]}"

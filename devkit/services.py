"""The project's local services in a checkout, for its tests and benchmarks alike: the Kafka broker of
``scripts/kafka.sh`` and the Cosmos emulator of ``scripts/cosmos-emulator.sh``, and the emulator's admin calls.

Both scripts are the one way to start a service (the tests' fixtures and the benchmarks call them, never copy them).
``KAFKA_BOOTSTRAP_SERVERS`` and ``COSMOS_ENDPOINT``/``COSMOS_KEY``/``COSMOS_VERIFY`` point at services someone else
runs instead. A service started here is stopped at the end only if it was started here; the shared project broker
counts its users, so a benchmark and several test sessions can share it. Needs a checkout (the scripts are not in the
wheel).
"""

from __future__ import annotations

import fcntl
import os
import platform
import socket
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import requests

from airflow_chatter.adapters.cosmos.container import make_cosmos_client

if TYPE_CHECKING:
    from azure.cosmos import CosmosClient

CHECKOUT = Path(__file__).resolve().parents[1]
KAFKA_SH = CHECKOUT / "scripts" / "kafka.sh"
COSMOS_EMULATOR_SH = CHECKOUT / "scripts" / "cosmos-emulator.sh"
PROJECT_KAFKA_PORT = int(os.environ.get("KAFKA_PORT", "19092"))
#: Cold install (~15 s, more on a slow network) + formatting + start-up (up to 90 s).
KAFKA_START_TIMEOUT_S = 420
KAFKA_STOP_TIMEOUT_S = 60
#: Bounds the emulator's `install` (a cold `npm ci` takes about 25 s) plus `start`.
EMULATOR_START_TIMEOUT_S = 300
#: Bounds one admin call of the emulator (they answer at once; no added latency applies to them).
ADMIN_TIMEOUT_S = 10


def machine() -> str:
    """The machine a measurement ran on, for the first line of a report."""
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or "unknown",
    )
    return f"nproc={os.cpu_count()} cpu={cpu} python={platform.python_version()}"


# ----------------------------------------------------------------------------------------------------------------
# Kafka
# ----------------------------------------------------------------------------------------------------------------


def kafka_state_dir(port: int) -> Path:
    root = os.environ.get("CHATTER_STATE_DIR") or str(CHECKOUT / ".cache" / "services")
    return Path(root) / f"kafka-{port}"


def kafka_script(
    action: str, port: int, timeout: float, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``scripts/kafka.sh <action>`` for the broker on ``port`` (``env``: extra variables, e.g. KAFKA_KEEP_DATA)."""
    run_env = {**os.environ, **(env or {}), "KAFKA_PORT": str(port)}
    run_env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    try:
        return subprocess.run(
            ["bash", str(KAFKA_SH), action],
            env=run_env,
            cwd=CHECKOUT,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        stderr = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
        return subprocess.CompletedProcess(
            exc.cmd, 124, stdout=str(exc.stdout or ""), stderr=f"{stderr}\ntimed out after {timeout} s"
        )


def port_refuses(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) != 0


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@dataclass
class KafkaBroker:
    """A broker run by ``scripts/kafka.sh`` on ``port`` (controller on ``port + 1``); ``keep_data``: its log dir
    survives a stop and is reused by the next start (a broker that comes back with its topics)."""

    port: int
    running: bool = False
    keep_data: bool = False
    log_file: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log_file = kafka_state_dir(self.port) / "kafka.log"

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> str:
        result = kafka_script("start", self.port, KAFKA_START_TIMEOUT_S, self._env())
        if result.returncode != 0:
            raise RuntimeError(
                f"scripts/kafka.sh start (KAFKA_PORT={self.port}) failed with exit code "
                f"{result.returncode}:\n{result.stderr[-4000:]}"
            )
        self.running = True
        lines = [line.strip() for line in result.stdout.splitlines() if line.strip()]
        return lines[-1] if lines else self.bootstrap_servers

    def stop(self) -> None:
        result = kafka_script("stop", self.port, KAFKA_STOP_TIMEOUT_S, self._env())
        self.running = False
        if result.returncode != 0:
            raise RuntimeError(f"scripts/kafka.sh stop (KAFKA_PORT={self.port}) failed: {result.stderr[-2000:]}")

    def is_running(self) -> bool:
        return kafka_script("status", self.port, 30).returncode == 0

    def _env(self) -> dict[str, str]:
        return {"KAFKA_KEEP_DATA": "1" if self.keep_data else "0"}


def _broker_pid(port: int) -> str:
    try:
        return (kafka_state_dir(port) / "kafka.pid").read_text().strip()
    except OSError:
        return ""


def _live_users(users: Path) -> list[Path]:
    live = []
    for entry in users.glob("*"):
        try:
            pid = int(entry.name.split("-")[0])
        except ValueError:
            continue
        if _pid_alive(pid):
            live.append(entry)
        else:
            entry.unlink(missing_ok=True)
    return live


@contextmanager
def shared_project_broker() -> Iterator[str]:
    """The project broker on ``PROJECT_KAFKA_PORT``, shared by every test session and benchmark that uses it.

    Each user registers itself (a file named after its pid), so one session ending does not stop the broker under
    another; the last user stops it, and only if a user started it (not one started by hand). Raises
    ``RuntimeError`` when the broker cannot be started.
    """
    state = kafka_state_dir(PROJECT_KAFKA_PORT)
    lock = state.parent / f".kafka-{PROJECT_KAFKA_PORT}.fixture.lock"
    users = state / "fixture-users"
    owned = state / "fixture-owned"
    me = users / f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    broker = KafkaBroker(PROJECT_KAFKA_PORT)
    with _locked(lock):
        already = broker.is_running()
        address = broker.start()
        users.mkdir(parents=True, exist_ok=True)
        if not already:
            owned.write_text(_broker_pid(PROJECT_KAFKA_PORT))
        me.touch()
    try:
        yield address
    finally:
        with _locked(lock):
            me.unlink(missing_ok=True)
            if owned.exists() and not _live_users(users):
                # Stop only the very broker a user started (not one started by hand since).
                if owned.read_text().strip() == _broker_pid(PROJECT_KAFKA_PORT):
                    broker.stop()
                owned.unlink(missing_ok=True)


@contextmanager
def kafka_service() -> Iterator[str]:
    """Bootstrap servers: ``KAFKA_BOOTSTRAP_SERVERS`` when set, else the shared project broker."""
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    if external:
        yield external
        return
    with shared_project_broker() as address:
        yield address


# ----------------------------------------------------------------------------------------------------------------
# Cosmos DB
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CosmosEndpoint:
    """Where a Cosmos DB is and how to connect to it."""

    url: str
    key: str
    #: ``True``/``False`` or the path of the CA bundle (the emulator's generated certificate).
    verify: bool | str
    #: Whether this is the project emulator: its admin calls (docs/emulator.md) set charges, RU/s, latency, ranges
    #: and splits; a real account has none of them.
    is_emulator: bool

    def client(self, **kwargs: object) -> CosmosClient:
        return make_cosmos_client(self.url, self.key, verify=self.verify, **kwargs)


def parse_verify(value: str | None) -> bool | str:
    """``COSMOS_VERIFY``: unset or true-ish verifies, false-ish does not, anything else is a CA bundle path."""
    if value is None or value.lower() in ("", "1", "true", "yes"):
        return True
    if value.lower() in ("0", "false", "no"):
        return False
    return value


def emulator_script(command: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``scripts/cosmos-emulator.sh <command>`` with ``env`` (default: this environment without COSMOS_ENDPOINT)."""
    if env is None:
        env = {k: v for k, v in os.environ.items() if k != "COSMOS_ENDPOINT"}
    return subprocess.run(
        [str(COSMOS_EMULATOR_SH), command],
        env=env,
        cwd=CHECKOUT,
        capture_output=True,
        text=True,
        timeout=EMULATOR_START_TIMEOUT_S,
        check=False,
    )


@contextmanager
def project_emulator() -> Iterator[CosmosEndpoint]:
    """The project emulator from ``scripts/cosmos-emulator.sh start``, stopped at the end only if started here.
    Raises ``RuntimeError`` with the script's output when it cannot be started."""
    result = emulator_script("start")
    if result.returncode != 0:
        raise RuntimeError(
            f"scripts/cosmos-emulator.sh start exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
        )
    pairs = (line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    connection = {name.strip(): value.strip() for name, value in pairs}
    try:
        yield CosmosEndpoint(
            connection["COSMOS_ENDPOINT"],
            connection["COSMOS_KEY"],
            parse_verify(connection.get("COSMOS_VERIFY")),
            is_emulator=True,
        )
    finally:
        if connection.get("COSMOS_EMULATOR_STARTED") == "1":
            emulator_script("stop")


@contextmanager
def cosmos_service() -> Iterator[CosmosEndpoint]:
    """``COSMOS_ENDPOINT``/``COSMOS_KEY``/``COSMOS_VERIFY`` when set (not taken for the project emulator), else the
    project emulator."""
    url = os.environ.get("COSMOS_ENDPOINT")
    if url:
        key = os.environ.get("COSMOS_KEY")
        if not key:
            raise RuntimeError("COSMOS_ENDPOINT is set but COSMOS_KEY is not")
        yield CosmosEndpoint(url, key, parse_verify(os.environ.get("COSMOS_VERIFY")), is_emulator=False)
        return
    with project_emulator() as endpoint:
        yield endpoint


class EmulatorAdminError(RuntimeError):
    """An admin call of the emulator was refused (the message is the emulator's, naming the bad field)."""


def emulator_admin(
    endpoint: CosmosEndpoint,
    method: str,
    name: str,
    body: dict[str, Any] | None = None,
    params: dict[str, str] | None = None,
) -> Any:
    """Call ``<method> /_chatter/<name>`` of the project emulator and return its JSON answer."""
    if not endpoint.is_emulator:
        raise EmulatorAdminError(f"{endpoint.url} is not the project emulator: it has no /_chatter/{name}")
    response = requests.request(
        method,
        endpoint.url.rstrip("/") + f"/_chatter/{name}",
        json=body,
        params=params,
        verify=endpoint.verify,
        timeout=ADMIN_TIMEOUT_S,
    )
    if response.status_code >= 400:
        try:
            reason = str(response.json()["message"])
        except (ValueError, KeyError, TypeError):
            reason = response.text
        raise EmulatorAdminError(f"/_chatter/{name}: {response.status_code} {reason}")
    return response.json()


def emulator_config(endpoint: CosmosEndpoint) -> dict[str, Any]:
    """The emulator's current switches: latency_ms, request_charges, provisioned_ru_per_second, containers."""
    config: dict[str, Any] = emulator_admin(endpoint, "GET", "config")
    return config


def configure_emulator(endpoint: CosmosEndpoint, **settings: Any) -> dict[str, Any]:
    """Merge these switches into the emulator's config (a ``containers`` entry set to None is removed); the new
    config is returned. ``configure_emulator(ep, request_charges=True, latency_ms=5)``."""
    config: dict[str, Any] = emulator_admin(endpoint, "POST", "config", body=settings)
    return config


def emulator_stats(endpoint: CosmosEndpoint, container: Any) -> dict[str, Any]:
    """Cumulative ``{requests, throttled, request_charge, change_feed_reads}`` of this container's (an SDK
    ``ContainerProxy``) document requests, as the emulator counted them (zeros before its first request)."""
    every: dict[str, Any] = emulator_admin(endpoint, "GET", "stats")["containers"]
    zero = {"requests": 0, "throttled": 0, "request_charge": 0, "change_feed_reads": 0}
    found: dict[str, Any] = every.get(container.container_link, zero)
    return found


@contextmanager
def emulator_configured(endpoint: CosmosEndpoint, **settings: Any) -> Iterator[dict[str, Any]]:
    """Apply these switches for the ``with`` block, then put the previous config back exactly (containers too)."""
    previous = emulator_config(endpoint)
    current = configure_emulator(endpoint, **settings)
    try:
        yield current
    finally:
        restore = dict(previous)
        restore["containers"] = {
            **{key: None for key in emulator_config(endpoint)["containers"]},
            **previous["containers"],
        }
        configure_emulator(endpoint, **restore)


@contextmanager
def services(database: str) -> Iterator[tuple[CosmosEndpoint, Any, str]]:
    """(the Cosmos endpoint, its database ``database``, made if missing, the Kafka bootstrap servers)."""
    from airflow_chatter.adapters.cosmos.container import ensure_database

    with cosmos_service() as endpoint, kafka_service() as bootstrap:
        yield endpoint, ensure_database(endpoint.client(), database), bootstrap

"""Call an external HTTP API at most once per idempotency key, across task retries and re-runs.

``IdempotentHttpHook.request`` reserves the key in an idempotency store before it sends anything. The first try
that reserves it sends the request (with the key in the ``Idempotency-Key`` header) and records the response; every
later try with the same key (a retry, a cleared and re-run task, a backfill of the same date) gets the recorded
response back without calling the API. The key is derived from dag id, task id, map index and logical date (the
run id when there is none), or given.

The crash window, honestly: if the worker dies after the API received the request and before the response is
recorded, the reservation is left behind. A retry within the reservation timeout fails with
:class:`RequestInFlightError`; after it, the retry takes the key over and calls the API **again**. Only the API
can close that window, by honouring the ``Idempotency-Key`` header this hook sends on every attempt (same key,
same body). So: prefer APIs that honour it, and keep the reservation timeout above the request timeout (checked).

Responses are recorded when ``store_status`` says so (default: below 500, and not 408/425/429, which are worth
retrying); otherwise, and on a transport error, the reservation is abandoned so the task's retry calls again.
Request headers (credentials) are never stored or logged; response bodies are never logged.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import inspect
import json as jsonlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
from airflow.sdk import BaseHook

from airflow_chatter.errors import ChatterError, ConfigurationError
from airflow_chatter.idempotency.decision import should_store
from airflow_chatter.idempotency.fingerprint import HEADER_NAME, request_fingerprint, serialize_sf_string
from airflow_chatter.ports.idempotency import (
    MAX_KEY_LENGTH,
    AlreadyInFlight,
    BodyHashMismatch,
    IdempotencyOptions,
    Replay,
    StoredResponse,
    validate_key,
)

if TYPE_CHECKING:
    from airflow_chatter.ports import IdempotencyStore

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])

#: Airflow retries come minutes apart and re-runs days apart: keep responses a week by default.
DEFAULT_HOOK_OPTIONS = IdempotencyOptions(ttl=timedelta(days=7), reservation_timeout=timedelta(minutes=5))
DEFAULT_TIMEOUT_SECONDS = 60.0
DEFAULT_MAX_RESPONSE_BYTES = 1024 * 1024
#: Hop-by-hop headers, and ``set-cookie``: a session cookie of the API must not sit in the idempotency container for
#: the ttl and be handed to every replay (the HTTP guard drops it too unless told otherwise, IDM-O06).
_NOT_STORED = frozenset(
    {"content-length", "content-encoding", "transfer-encoding", "connection", "keep-alive", "set-cookie"}
)


class RequestInFlightError(ChatterError):
    """Another try holds the key (still calling, or crashed less than the reservation timeout ago)."""

    def __init__(self, key: str, retry_after: timedelta) -> None:
        self.key = key
        self.retry_after = retry_after
        super().__init__(
            f"idempotency key {key!r} is held by another try; retry in {retry_after.total_seconds():.0f} s "
            "(a try that crashed mid-call is taken over after the reservation timeout)"
        )


class IdempotencyKeyReusedError(ChatterError):
    """The key was used before with a different request (method, URL, content type or body changed)."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(
            f"idempotency key {key!r} was already used with a different request (method, URL or body changed); "
            "pass another key (or a call name) for a different request"
        )


@dataclass(frozen=True)
class IdempotentResponse:
    """The API's answer, fresh (``replayed=False``) or recorded by an earlier try (``replayed=True``)."""

    status_code: int
    headers: Mapping[str, tuple[str, ...]]
    content: bytes
    replayed: bool
    key: str

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return jsonlib.loads(self.content)

    def header(self, name: str) -> str | None:
        for stored, values in self.headers.items():
            if stored.lower() == name.lower() and values:
                return values[0]
        return None

    def raise_for_status(self) -> IdempotentResponse:
        if self.status_code >= 400:
            raise httpx.HTTPStatusError(
                f"HTTP {self.status_code} (idempotency key {self.key!r}, replayed={self.replayed})",
                request=httpx.Request("GET", "http://replayed.invalid/"),
                response=httpx.Response(self.status_code),
            )
        return self

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able form for XCom (the body as text)."""
        return {"status_code": self.status_code, "replayed": self.replayed, "key": self.key, "text": self.text}


def derive_task_key(
    dag_id: str, task_id: str, map_index: int | None, logical_date: datetime | str | None, name: str | None = None
) -> str:
    """``dag/task/map_index/logical-date[/name]``; hashed (``sha256:...``) when over 200 characters or not ASCII.

    ``logical_date`` may be the run id when the run has no logical date. ``name`` tells apart several calls of one
    task. The same task instance always derives the same key, whatever the try number.
    """
    when = logical_date.isoformat() if isinstance(logical_date, datetime) else str(logical_date)
    parts = [dag_id, task_id, str(-1 if map_index is None else map_index), when]
    if name:
        parts.append(name)
    key = "/".join(parts)
    if len(key) <= MAX_KEY_LENGTH and key.isascii() and key.isprintable():
        return key
    digest = base64.urlsafe_b64encode(hashlib.sha256(key.encode("utf-8")).digest()).rstrip(b"=").decode("ascii")
    return f"sha256:{digest}"


def _current_task() -> tuple[str, str, int | None, datetime | str | None]:
    from airflow.sdk import get_current_context

    context = get_current_context()
    ti = context["ti"]
    logical_date = context.get("logical_date") or context.get("run_id")
    return ti.dag_id, ti.task_id, getattr(ti, "map_index", -1), logical_date


class IdempotentHttpHook(BaseHook):
    """Send HTTP requests at most once per idempotency key; see the module docstring.

    Give a ``store``, or a Cosmos connection (``chatter_cosmos_conn_id``, ``container_name``, ``database_name``) to
    use the Cosmos store. ``scope`` is the key namespace (one Cosmos logical partition); default ``airflow``.
    """

    def __init__(
        self,
        store: IdempotencyStore | None = None,
        *,
        chatter_cosmos_conn_id: str = "chatter_cosmos_default",
        container_name: str = "idempotency",
        database_name: str | None = None,
        options: IdempotencyOptions = DEFAULT_HOOK_OPTIONS,
        scope: str = "airflow",
        base_url: str = "",
        headers: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        client: httpx.Client | None = None,
        store_status: Callable[[int], bool] = should_store,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        super().__init__()
        self._store = store
        self._cosmos = (chatter_cosmos_conn_id, container_name, database_name)
        self.options = store.options if store is not None else options
        if timeout >= self.options.reservation_timeout.total_seconds():
            raise ConfigurationError(
                "timeout",
                timeout,
                f"must be below the reservation timeout ({self.options.reservation_timeout.total_seconds():.0f} s), "
                "or a retry could call the API while this try still waits for it",
            )
        self.scope = scope
        #: A client given by the caller is the caller's to close; one built here is closed by :meth:`close`.
        self._owns_client = client is None
        self._client = client or httpx.Client(base_url=base_url, headers=dict(headers or {}), timeout=timeout)
        self._store_status = store_status
        self._max_response_bytes = max_response_bytes

    @property
    def store(self) -> IdempotencyStore:
        if self._store is None:
            from airflow_chatter.airflow.hooks.cosmos import ChatterCosmosHook
            from airflow_chatter.idempotency.container_store import ContainerIdempotencyStore

            conn_id, container_name, database_name = self._cosmos
            hook = ChatterCosmosHook(conn_id)
            # Its 429s retried within the connection's limits: the project's clients leave them to the caller.
            container = hook.retrying(hook.get_container(container_name, database_name=database_name))
            self._store = ContainerIdempotencyStore(container, self.options)
        return self._store

    def get_conn(self) -> httpx.Client:
        """The ``httpx.Client`` requests go through."""
        return self._client

    def close(self) -> None:
        if self._owns_client:
            self._client.close()

    def post(self, url: str, **kwargs: Any) -> IdempotentResponse:
        return self.request("POST", url, **kwargs)

    def put(self, url: str, **kwargs: Any) -> IdempotentResponse:
        return self.request("PUT", url, **kwargs)

    def patch(self, url: str, **kwargs: Any) -> IdempotentResponse:
        return self.request("PATCH", url, **kwargs)

    def request(
        self,
        method: str,
        url: str,
        *,
        key: str | None = None,
        name: str | None = None,
        json: Any = None,
        content: bytes | str | None = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> IdempotentResponse:
        """Send the request once per key; replay the recorded response on every later call with that key.

        ``key`` defaults to :func:`derive_task_key` of the running task (``name`` distinguishes several calls).
        """
        request = self._client.build_request(method, url, json=json, content=content, params=params, headers=headers)
        if key is None:
            dag_id, task_id, map_index, logical_date = _current_task()
            key = derive_task_key(dag_id, task_id, map_index, logical_date, name)
        validate_key(key)
        request.headers[HEADER_NAME] = serialize_sf_string(key)
        scope = self.scope
        body = request.read()
        fingerprint = request_fingerprint(
            request.method,
            f"{request.url.scheme}://{request.url.netloc.decode('ascii')}{request.url.path}",
            request.url.query.decode("ascii"),
            body,
            content_type=request.headers.get("content-type"),
            content_encoding=request.headers.get("content-encoding"),
        )
        outcome = self.store.reserve(scope, key, fingerprint)
        if isinstance(outcome, Replay):
            log.info("idempotency key %r: replaying the response recorded by an earlier try", key)
            return self._response(outcome.response, key, replayed=True)
        if isinstance(outcome, BodyHashMismatch):
            raise IdempotencyKeyReusedError(key)
        if isinstance(outcome, AlreadyInFlight):
            raise RequestInFlightError(key, outcome.retry_after)
        try:
            response = self._client.send(request)
            response.read()
        except BaseException:
            self.store.abandon(scope, key, outcome.reservation_id)
            raise
        headers_kept = [(n, v) for n, v in response.headers.multi_items() if n.lower() not in _NOT_STORED]
        snapshot = StoredResponse(response.status_code, headers_kept, response.content, fingerprint)
        if self._store_status(response.status_code) and len(response.content) <= self._max_response_bytes:
            self.store.complete(scope, key, outcome.reservation_id, snapshot)
            log.info("idempotency key %r: called the API (HTTP %d), response recorded", key, response.status_code)
        else:
            self.store.abandon(scope, key, outcome.reservation_id)
            log.warning(
                "idempotency key %r: HTTP %d not recorded (status not stored, or body over %d bytes); "
                "a retry calls the API again",
                key,
                response.status_code,
                self._max_response_bytes,
            )
        return self._response(snapshot, key, replayed=False)

    @staticmethod
    def _response(stored: StoredResponse, key: str, *, replayed: bool) -> IdempotentResponse:
        return IdempotentResponse(stored.status_code, stored.headers, stored.body, replayed, key)


def idempotent_http(**hook_kwargs: Any) -> Callable[[F], F]:
    """Give a ``@task`` function an :class:`IdempotentHttpHook` as its ``http`` keyword argument::

        @task(retries=3)
        @idempotent_http(base_url="https://payments.example", chatter_cosmos_conn_id="cosmos")
        def charge(order: dict, http: IdempotentHttpHook) -> dict:
            return http.post("/charges", json=order).raise_for_status().json()

    ``http`` is hidden from the task's signature, so the DAG calls ``charge(order)``. The hook is closed after (a
    ``client=`` you pass is left open: it is yours).
    """

    def decorate(function: F) -> F:
        signature = inspect.signature(function)
        if "http" not in signature.parameters:
            raise ConfigurationError("idempotent_http", function.__name__, "needs a parameter named 'http'")

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            hook = IdempotentHttpHook(**hook_kwargs)
            try:
                return function(*args, http=hook, **kwargs)
            finally:
                hook.close()

        wrapper.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[p for p in signature.parameters.values() if p.name != "http"]
        )
        return wrapper  # type: ignore[return-value]

    return decorate


__all__ = [
    "DEFAULT_HOOK_OPTIONS",
    "IdempotencyKeyReusedError",
    "IdempotentHttpHook",
    "IdempotentResponse",
    "RequestInFlightError",
    "derive_task_key",
    "idempotent_http",
    "should_store",
]

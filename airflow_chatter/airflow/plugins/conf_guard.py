"""Refuse a run of a chatter manual DAG whose conf has keys the DAG has no param for, when the run is created.

Airflow 3.3 validates each ``Param`` against its own schema but keeps a conf key that matches no param as a new,
unchecked param (``SerializedParamsDict.deep_merge``), so ``{"colour": "red"}`` or a misspelt ``"dryrun": true``
would create a run. This root middleware (registered by the plugin, so it runs in the api-server only) answers such
a request with **400** naming every unknown key and the keys the DAG accepts, before Airflow creates anything. It
looks only at ``POST /api/v2/dags/<dag id>/dagRuns`` (the REST API and the UI's trigger form) for the DAGs in
:data:`STRICT_CONF`, buffers that request's body and hands it on unchanged otherwise; every other request passes
through untouched.

An api-server served under a path (``[api] base_url = http://host/airflow/``) is a FastAPI app whose ``root_path``
is that path, so the request's ``scope`` carries it: the guard matches the path below it, as Starlette's router
does (``/airflow/api/v2/...`` from a proxy that forwards the prefix, ``/api/v2/...`` from one that strips it).
Anything else that merely contains those words (a plugin's ``/pluginsv2/.../api/v2/dags/...``) is not the endpoint.

Pure ASGI and standard library only at import: the plugin module that registers it is imported by every Airflow
process. A backfill request (``chatter_backfill``) is also checked for a start in the future and, reading the
source's feed ranges through the plugin's backend (imported then, in the api-server), unknown ``feed_ranges``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The manual DAGs whose trigger forms are the whole of what a run may be given (the DAG factory's param names).
STRICT_CONF: Mapping[str, tuple[str, ...]] = {
    "chatter_backfill": ("source", "start", "feed_ranges", "document_budget", "dry_run"),
    "chatter_requeue": ("source", "message_ids", "all_undeliverable", "limit", "dry_run"),
}

_DAG_RUNS = re.compile(r"^/api/v2/dags/(?P<dag_id>[^/]+)/dagRuns/?$")
#: A trigger request is small; a larger body is passed on to Airflow's own limits unread.
_MAX_BODY_BYTES = 1 << 20


def unknown_conf_keys(dag_id: str, body: object) -> tuple[list[str], tuple[str, ...]] | None:
    """``(unknown keys, accepted keys)`` when ``body`` triggers ``dag_id`` with conf keys it has no param for."""
    allowed = STRICT_CONF.get(dag_id)
    if allowed is None or not isinstance(body, Mapping):
        return None
    conf = body.get("conf")
    if not isinstance(conf, Mapping):
        return None
    unknown = sorted(str(key) for key in conf if key not in allowed)
    return (unknown, allowed) if unknown else None


def route_path(scope: Scope) -> str:
    """The request's path below the app's ``root_path`` (Airflow's ``[api] base_url`` path), as the router sees it:
    a path under the root path loses it, any other path is kept whole (a proxy stripped the prefix already)."""
    path = str(scope.get("path", ""))
    root = str(scope.get("root_path", "")).rstrip("/")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] in ("", "/"):
        return path[len(root) :]
    return path


#: The backfill DAG: a run of it is also checked for a start in the future or unknown feed ranges (``backfill_check``).
BACKFILL_DAG_ID = "chatter_backfill"


class ChatterConfGuard:
    """ASGI middleware: 400 for a chatter manual DAG run whose conf names a key the DAG has no param for, or (the
    backfill DAG) a start in the future or feed ranges the source does not have.

    ``backend``: what reads the sources file and the source's containers for the backfill check (default: the
    plugin's ``AirflowBackend``, built on the first backfill request, in the api-server).
    """

    def __init__(self, app: ASGIApp, backend: Any = None) -> None:
        self.app = app
        self._backend = backend

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = _DAG_RUNS.match(route_path(scope)) if scope.get("type") == "http" else None
        if match is None or scope.get("method") != "POST" or match.group("dag_id") not in STRICT_CONF:
            await self.app(scope, receive, send)
            return
        messages, body = await _read_body(receive)
        try:
            verdict = unknown_conf_keys(match.group("dag_id"), json.loads(body)) if body is not None else None
        except ValueError:
            verdict = None  # not JSON: Airflow's own validation answers it
        if verdict is not None:
            unknown, allowed = verdict
            detail = (
                f"conf of DAG {match.group('dag_id')!r} has unknown key(s) {', '.join(map(repr, unknown))}; "
                f"it accepts only {', '.join(allowed)}"
            )
            await _send_json(send, 400, {"detail": detail})
            return
        refused = await self._backfill_refusal(match.group("dag_id"), body)
        if refused is not None:
            field, detail = refused
            await _send_json(send, 400, {"detail": detail, "field": field})
            return
        await self.app(scope, _replay(messages, receive), send)

    async def _backfill_refusal(self, dag_id: str, body: bytes | None) -> tuple[str, str] | None:
        """``(field, message)`` when a backfill run's conf would read nothing; ``None`` to let Airflow decide (any
        other problem, the sources file or Cosmos DB unreadable included: the run's first task refuses it then)."""
        if dag_id != BACKFILL_DAG_ID or body is None:
            return None
        try:
            conf = json.loads(body).get("conf")
        except (ValueError, AttributeError):
            return None
        if not isinstance(conf, Mapping):
            return None
        import asyncio
        import logging

        from airflow_chatter.airflow.plugins.backfill_check import (
            check_backfill_conf,
            check_backfill_start,
            wanted_ranges,
        )
        from airflow_chatter.errors import ConfigurationError

        try:
            check_backfill_start(conf)
            if not wanted_ranges(conf):
                return None
            if self._backend is None:
                from airflow_chatter.airflow.plugins.backend import AirflowBackend

                self._backend = AirflowBackend()
            await asyncio.to_thread(check_backfill_conf, self._backend, conf)
        except ConfigurationError as error:
            return error.option, f"conf of DAG {dag_id!r}: {error}"
        except Exception as error:  # noqa: BLE001 - the check is an early answer, never a new way to fail
            logging.getLogger("airflow_chatter.ui").warning("backfill conf not checked before the run: %s", error)
        return None


async def _read_body(receive: Receive) -> tuple[list[Message], bytes | None]:
    """Every ``http.request`` message of the body, and the body itself (``None`` when over the limit)."""
    messages: list[Message] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message.get("type") != "http.request":
            return messages, None
        size += len(message.get("body", b""))
        if size > _MAX_BODY_BYTES or not message.get("more_body", False):
            break
    if size > _MAX_BODY_BYTES:
        return messages, None
    return messages, b"".join(m.get("body", b"") for m in messages)


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """A ``receive`` that hands the buffered messages on first, then the real channel (disconnects)."""
    pending = list(messages)

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay


async def _send_json(send: Send, status: int, payload: Mapping[str, Any]) -> None:
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

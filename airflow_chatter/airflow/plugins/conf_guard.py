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

Pure ASGI and standard library only: the plugin module that registers it is imported by every Airflow process.
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


class ChatterConfGuard:
    """ASGI middleware: 400 for a chatter manual DAG run whose conf names a key the DAG has no param for."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

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
        await self.app(scope, _replay(messages, receive), send)


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

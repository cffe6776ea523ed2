"""Who asks and what they may do: the dependencies every route of the plugin API stands on.

``create_app`` keeps one ``ChatterApi`` on the app (``app.state.chatter``): the ``Backend`` (what only Airflow knows:
who asks, what they may do, the recent runs' XCom, triggering a run), the sources file read through it, and the
per-source idempotency guards. The routers are module-level and reach it through these dependencies:

* ``read_access`` (every read): authenticate (401), then, on a ``/sources/{source}`` path, the source (404) and the
  caller's read right on its drain DAG (403);
* ``ActionRoute`` (every action): the same with the edit right, **before** the Idempotency-Key guard runs, whose
  scope is the authenticated user, so one user's key never replays to another and a refused request is never
  stored; ``action_access`` hands its result to the route.

``BEARER`` and ``COOKIE`` are declared for the OpenAPI schema (and its security) only: the checks above
authenticate, so neither refuses anything itself.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import Any, Literal, Protocol

from fastapi import Depends, Header, HTTPException, Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from fastapi.security import APIKeyCookie, HTTPBearer
from starlette.concurrency import run_in_threadpool

from airflow_chatter.airflow.plugins.api.shapes import NotAuthorized, broken_entry, echo, problem
from airflow_chatter.airflow.plugins.guards import SourceGuards
from airflow_chatter.airflow.sources import LoadedSources, SourceConfig, SourcesConfigError
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.operations.monitoring import RunRecord
from airflow_chatter.ports import DocumentContainer, IdempotencyStore

Method = Literal["GET", "PUT", "POST"]


@dataclasses.dataclass(frozen=True)
class User:
    name: str
    handle: Any = None  # the backend's own user object


class Backend(Protocol):
    async def authenticate(self, request: Request) -> User: ...
    def authorized(self, user: User, method: Method, dag_id: str, *, run: bool = False) -> bool: ...
    def sources(self) -> LoadedSources: ...
    def containers(self, source: SourceConfig) -> tuple[DocumentContainer, DocumentContainer]: ...
    def idempotency_container(self, source: SourceConfig) -> DocumentContainer: ...
    def runs(self, dag_id: str, limit: int, since: datetime | None = None) -> list[RunRecord]: ...
    def run(self, dag_id: str, run_id: str) -> RunRecord | None: ...
    def trigger(self, dag_id: str, conf: dict[str, Any], user: User, note: str) -> dict[str, Any]: ...
    def telemetry(self) -> dict[str, Any]: ...


class ChatterApi:
    """The app's state: its backend, the backfill DAG's id, the sources' idempotency guards."""

    def __init__(self, backend: Backend, store: IdempotencyStore | None, backfill_dag_id: str) -> None:
        self.backend = backend
        self.backfill_dag_id = backfill_dag_id
        self.guards = SourceGuards(backend.idempotency_container, store)

    def loaded(self) -> LoadedSources:
        """The sources file, entry by entry; a file nothing of which can be trusted answers 503 naming it."""
        try:
            return self.backend.sources()
        except SourcesConfigError as error:
            raise HTTPException(503, {"field": "sources", "message": str(error)}) from None

    def source(self, name: str) -> SourceConfig:
        """A valid source by name; 404 naming ``source``, or, for a broken entry, its first problem's field."""
        loaded = self.loaded()
        if loaded.config is not None:
            try:
                return loaded.config.get(name)
            except ConfigurationError:
                pass
        for entry in loaded.broken:
            if entry.name == name:
                first = broken_entry(entry)["problems"][0]
                message = f"source {name} is broken in {loaded.path}: " + "; ".join(entry.problems)
                raise HTTPException(404, {"field": first["field"] or "source", "message": message})
        raise HTTPException(404, {"field": "source", "message": f"source={echo(name)!r}: no such source"})

    async def check(self, request: Request, method: Method) -> Access:
        """Authenticate, then authorise ``method`` on the path's source's drain DAG (``NotAuthorized`` / 404)."""
        user = await self.backend.authenticate(request)
        name = request.path_params.get("source")
        if name is None:
            return Access(self, user)
        source = self.source(name)
        if not self.backend.authorized(user, method, source.dag_id):
            verb = "edit" if method != "GET" else "read"
            raise NotAuthorized(403, f"{user.name} may not {verb} DAG {source.dag_id}")
        return Access(self, user, source)


@dataclasses.dataclass(frozen=True)
class Access:
    """A request that passed its checks: the API, who asks and, on a ``/sources/{source}`` path, that source."""

    api: ChatterApi
    user: User
    path_source: SourceConfig | None = None

    @property
    def backend(self) -> Backend:
        return self.api.backend

    @property
    def source(self) -> SourceConfig:
        """The path's source (a route under ``/sources/{source}`` only)."""
        if self.path_source is None:
            raise HTTPException(404, {"field": "source", "message": "no source in the path"})
        return self.path_source

    def may(self, method: Method, dag_id: str, *, run: bool = False) -> bool:
        """Whether the caller may ``method`` the DAG (``run``: create its runs)."""
        return self.backend.authorized(self.user, method, dag_id, run=run)


def chatter_api(request: Request) -> ChatterApi:
    """The app's ``ChatterApi`` (``create_app`` keeps it on the app's state)."""
    api: ChatterApi = request.app.state.chatter
    return api


async def read_access(request: Request) -> Access:
    """The dependency of every read: authenticated, and allowed to read the path's source's drain DAG."""
    return await chatter_api(request).check(request, "GET")


def action_access(request: Request) -> Access:
    """The dependency of every action: what ``ActionRoute`` checked before the idempotency guard."""
    access: Access = request.state.chatter_access
    return access


class ActionRoute(APIRoute):
    """Authenticate and authorise (edit) first, then the idempotency guard, then FastAPI's handler."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        original = super().get_route_handler()

        async def handler(request: Request) -> Response:
            api = chatter_api(request)
            try:
                access = await api.check(request, "PUT")
                guard = await run_in_threadpool(api.guards.guard, access.source)
            except NotAuthorized as error:
                return problem(error.status, error.detail)
            except HTTPException as error:
                detail = error.detail if isinstance(error.detail, dict) else {"message": error.detail}
                return problem(error.status_code, str(detail.get("message")), detail.get("field"))
            request.state.chatter_access = access
            request.state.chatter_user = access.user  # the guard's scope
            response = await guard.handle(request, original)
            if response.headers.get("content-type", "").startswith("application/problem+json"):
                return _reshaped(response)
            return response

        return handler


def _reshaped(response: Response) -> JSONResponse:
    """The idempotency guard's refusal (RFC 9457) in the API's one shape, naming the header it is about."""
    body = json.loads(bytes(response.body))
    field = {413: "body", 503: None}.get(response.status_code, "Idempotency-Key")
    kept = {k: v for k, v in response.headers.items() if k.lower() == "retry-after"}
    return problem(response.status_code, str(body.get("detail")), field, headers=kept or None)


BEARER = HTTPBearer(auto_error=False, description="An Airflow token from POST /auth/token.")
COOKIE = APIKeyCookie(name="_token", auto_error=False, description="The Airflow UI's token cookie.")
SECURITY = [Depends(BEARER), Depends(COOKIE)]


def idempotency_key(
    key: str = Header(  # noqa: B008
        alias="Idempotency-Key",
        description='A quoted string (RFC 8941), e.g. "3f1c…": the same key replays the first answer.',
    ),
) -> str:
    return key

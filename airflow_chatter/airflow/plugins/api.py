"""The plugin's JSON API (FastAPI, mounted by Airflow's api-server under ``/chatter``): the monitoring read model
per source, and the operator's three actions.

Every ``/api`` endpoint authenticates the caller with Airflow (401 without a token or the UI's ``_token`` cookie)
and checks their permission on *that source's* drain DAG: read for ``GET``, edit (``PUT``) for an action (403
otherwise). Actions also pass the Idempotency-Key guard (a double click acts once): the caller is authenticated and
authorised **before** the guard runs, and the guard's scope is the authenticated user, so one user's key never
replays to another and a refused request is never stored. Every action is logged with the user and what changed.

The guard's store is per source: the Cosmos idempotency container the source names (``ui_idempotency_container``),
shared by every api-server worker; without one, this process's memory, which is right for a single worker only: the
API says so (``idempotency`` in the overview and in each action's answer) and logs a warning once per source.

What only Airflow knows (who asks, what they may do, the recent runs' XCom, triggering a run) comes through a
``Backend`` (``backend.py`` in Airflow; a fake in the API tests). The Cosmos side is the core's read model
(``airflow_chatter.operations.monitoring``) and interventions: parameterised queries, every list paged with a cap.
The HTTP side of paging is here: the page size and search text a request may give, and the opaque continuation
token around the core's keyset position (the last item id shown).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import logging
from collections.abc import Callable, Coroutine
from importlib import resources
from typing import Any, Literal, Protocol

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from airflow_chatter.adapters.fastapi.idempotency import HttpIdempotencyOptions, Idempotency
from airflow_chatter.adapters.memory.idempotency import MemoryIdempotencyStore
from airflow_chatter.airflow.dags.config import SourceConfig, SourcesFile
from airflow_chatter.errors import ChatterError, ConfigurationError
from airflow_chatter.idempotency.container_store import ContainerIdempotencyStore
from airflow_chatter.operations.interventions import (
    MAX_REQUEUE,
    LeaseChangedError,
    Selected,
    release_lease,
    requeue_selected,
)
from airflow_chatter.operations.monitoring import (
    MAX_PAGE_SIZE,
    RunRecord,
    list_undeliverable,
    monitor_store,
    source_overview,
)
from airflow_chatter.operations.outbox_queries import count_undeliverable
from airflow_chatter.operations.overview import OverviewRow, broken_row, overview_row, sort_rows
from airflow_chatter.ports import ContainerError, DocumentContainer, IdempotencyStore

log = logging.getLogger("airflow_chatter.ui")

#: Recent runs a source's page reads (their XCom summaries), at most.
MAX_RUNS = 50
BUNDLE = "chatter-ui.js"
#: The navigation icon, inline (the wheel ships only the static *.js): a grey line drawing, legible in both themes.
ICON_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" fill="none" stroke="#888" stroke-width="2" '
    'stroke-linecap="round" stroke-linejoin="round"><path d="M4 4h16v10H4z"/><path d="M8 18h8"/>'
    '<path d="M12 14v4"/><path d="M9 9l3-3 3 3"/></svg>'
)

Method = Literal["GET", "PUT", "POST"]


class NotAuthorized(Exception):
    """Raised by a backend: ``status`` 401 (who are you?) or 403 (not allowed)."""

    def __init__(self, status: int, detail: str) -> None:
        self.status = status
        self.detail = detail
        super().__init__(detail)


class ParamsRejected(ChatterError):
    """Airflow refused the run's params (its own validation); the message says which and why."""


@dataclasses.dataclass(frozen=True)
class User:
    name: str
    handle: Any = None  # the backend's own user object


class Backend(Protocol):
    async def authenticate(self, request: Request) -> User: ...
    def authorized(self, user: User, method: Method, dag_id: str, *, run: bool = False) -> bool: ...
    def sources(self) -> SourcesFile: ...
    def containers(self, source: SourceConfig) -> tuple[DocumentContainer, DocumentContainer]: ...
    def idempotency_container(self, source: SourceConfig) -> DocumentContainer: ...
    def runs(self, dag_id: str, limit: int) -> list[RunRecord]: ...
    def trigger(self, dag_id: str, conf: dict[str, Any], user: User, note: str) -> dict[str, Any]: ...
    def telemetry(self) -> dict[str, Any]: ...


# ------------------------------------------------------------------------------------------------
# Paging.
# ------------------------------------------------------------------------------------------------


class InvalidQueryError(ConfigurationError):
    """A bad list request (page size, continuation, search text); names the field, and the API answers 400."""


def valid_page_size(value: object, *, default: int = 25, cap: int = MAX_PAGE_SIZE) -> int:
    """A list request's page size: an integer from 1 to ``cap``; ``InvalidQueryError`` naming ``page_size``."""
    if value is None or value == "":
        return default
    try:
        number = int(str(value))
    except ValueError:
        raise InvalidQueryError("page_size", value, "must be an integer") from None
    if not 1 <= number <= cap:
        raise InvalidQueryError("page_size", value, f"must be between 1 and {cap}")
    return number


def search_text(value: str | None) -> str | None:
    """A MessageId prefix to search for, 1-1023 characters; ``InvalidQueryError`` naming ``message_id``."""
    if value is not None and (not value.strip() or len(value) > 1023):
        raise InvalidQueryError("message_id", value, "must be 1-1023 characters")
    return value


def encode_continuation(after_id: str) -> str:
    """An opaque continuation for the next page: the last item id shown, base64url JSON."""
    raw = json.dumps({"v": 1, "after": after_id}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode_continuation(token: str | None) -> str | None:
    """The item id a continuation resumes after; ``InvalidQueryError`` naming ``continuation`` if malformed."""
    if token is None or token == "":
        return None
    try:
        padded = token + "=" * (-len(token) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (ValueError, binascii.Error, UnicodeError):
        raise InvalidQueryError("continuation", token, "is not a continuation this API returned") from None
    after = data.get("after") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("v") != 1 or not isinstance(after, str) or not after:
        raise InvalidQueryError("continuation", token, "is not a continuation this API returned")
    return after


# ------------------------------------------------------------------------------------------------
# Request bodies.
# ------------------------------------------------------------------------------------------------


class SelectedDocument(BaseModel):
    id: str = Field(min_length=1, max_length=1023, description="The outbox item id.")
    etag: str | None = Field(None, max_length=200, description="The ETag the page showed; the requeue is conditional.")


class RequeueBody(BaseModel):
    documents: list[SelectedDocument] = Field(min_length=1, max_length=MAX_REQUEUE)


class ReleaseBody(BaseModel):
    etag: str | None = Field(None, max_length=200, description="The lease ETag the page showed.")


class BackfillBody(BaseModel):
    """The ``chatter_backfill`` DAG's params (validated by Airflow against the DAG's ``Param`` schema): ``start`` is
    ``beginning``, ``resume`` or a UTC timestamp; a dry run unless ``dry_run`` is false, as the DAG's own default."""

    model_config = ConfigDict(extra="forbid")

    start: str = "beginning"
    feed_ranges: list[str] = Field(default_factory=list, max_length=100)
    document_budget: int = 10000
    dry_run: bool = True


# ------------------------------------------------------------------------------------------------
# The app.
# ------------------------------------------------------------------------------------------------


def _problem(status: int, detail: str, field: str | None = None) -> JSONResponse:
    body: dict[str, Any] = {"detail": detail}
    if field is not None:
        body["field"] = field
    return JSONResponse(body, status_code=status)


#: What the API says when a source's UI actions keep their keys in memory.
MEMORY_WARNING = (
    "ui_idempotency_container is not set for this source, so the UI actions' Idempotency-Keys are kept in one "
    "api-server process's memory: a double click acts once only with a single api-server worker "
    "(AIRFLOW__API__WORKERS=1)"
)


@dataclasses.dataclass(frozen=True)
class IdempotencyInfo:
    """Where a source's UI actions keep their Idempotency-Keys, as the API reports it."""

    store: Literal["cosmos", "memory"]
    shared_across_workers: bool
    container: str | None = None
    warning: str | None = None


class _Api:
    def __init__(self, backend: Backend, store: IdempotencyStore | None, backfill_dag_id: str) -> None:
        self.backend = backend
        self.backfill_dag_id = backfill_dag_id
        self._override = store
        # The guard of every source without a container of its own (or of all, over an overriding store).
        self._local = Idempotency(store or MemoryIdempotencyStore(), HttpIdempotencyOptions(), scope=self._scope)
        self._guards: dict[tuple[str, str, str], Idempotency] = {}
        self._warned: set[str] = set()

    @staticmethod
    def _scope(request: Request) -> str:
        return f"chatter-ui:{request.state.chatter_user.name}"

    def idempotency(self, source: SourceConfig) -> IdempotencyInfo:
        if self._override is not None:
            shared = not isinstance(self._override, MemoryIdempotencyStore)
            return IdempotencyInfo("cosmos" if shared else "memory", shared, None, None if shared else MEMORY_WARNING)
        if source.ui_idempotency_container is None:
            return IdempotencyInfo("memory", False, None, MEMORY_WARNING)
        return IdempotencyInfo("cosmos", True, f"{source.database}/{source.ui_idempotency_container}")

    def guard(self, source: SourceConfig) -> Idempotency:
        """The source's guard: over its Cosmos idempotency container (verified once), else over the local store."""
        if self._override is not None:
            return self._local
        container = source.ui_idempotency_container
        if container is None:
            if source.name not in self._warned:
                self._warned.add(source.name)
                log.warning("UI actions on source %s: %s", source.name, MEMORY_WARNING)
            return self._local
        slot = (source.cosmos_conn_id, source.database, container)
        guard = self._guards.get(slot)
        if guard is None:
            cosmos = ContainerIdempotencyStore(self.backend.idempotency_container(source))
            try:
                cosmos.verify_container()
            except (ChatterError, ContainerError) as error:
                where = f"{source.database}/{container}"
                message = f"source {source.name}: {where} cannot keep the UI's keys: {error}"
                raise HTTPException(503, {"field": "ui_idempotency_container", "message": message}) from None
            guard = self._guards.setdefault(slot, Idempotency(cosmos, HttpIdempotencyOptions(), scope=self._scope))
        return guard

    def store_kind(self, source: SourceConfig) -> str:
        """An action's answer says where its key is kept: ``cosmos``, or ``memory (single api-server worker only)``."""
        info = self.idempotency(source)
        return "cosmos" if info.shared_across_workers else "memory (single api-server worker only)"

    def source(self, name: str) -> SourceConfig:
        try:
            return self.backend.sources().get(name)
        except ConfigurationError as error:
            raise HTTPException(404, {"field": "source", "message": str(error)}) from None

    async def check(self, request: Request, method: Method) -> tuple[User, SourceConfig | None]:
        """Authenticate, then authorise ``method`` on the source's drain DAG (``NotAuthorized`` / 404)."""
        user = await self.backend.authenticate(request)
        name = request.path_params.get("source")
        if name is None:
            return user, None
        source = self.source(name)
        if not self.backend.authorized(user, method, source.dag_id):
            verb = "edit" if method != "GET" else "read"
            raise NotAuthorized(403, f"{user.name} may not {verb} DAG {source.dag_id}")
        return user, source


def valid_sources(backend: Backend) -> list[SourceConfig]:
    """The sources that parse; none while the file is broken as a whole (``broken_entries`` says why)."""
    try:
        return list(backend.sources().sources)
    except ConfigurationError:
        return []


def broken_entries(backend: Backend) -> list[tuple[str, str]]:
    """The sources entries that do not parse, as ``(name, error)``: the one place the overview learns of them.

    The sources file is parsed all-or-nothing here, so a broken file is one entry named ``sources file``; a per-entry
    parse (finding 1) replaces this body and the overview then shows each broken entry by its name.
    """
    try:
        backend.sources()
    except ConfigurationError as error:
        return [("sources file", str(error))]
    return []


def create_app(
    backend: Backend,
    *,
    idempotency_store: IdempotencyStore | None = None,
    backfill_dag_id: str = "chatter_backfill",
) -> FastAPI:
    """The plugin's FastAPI app over ``backend``; its OpenAPI schema is at ``/openapi.json``.

    ``idempotency_store`` overrides every source's store (tests, a deployment with its own store); by default each
    source's is its ``ui_idempotency_container``, else this process's memory.
    """
    api = _Api(backend, idempotency_store, backfill_dag_id)
    app = FastAPI(
        title="airflow-chatter",
        description="Monitoring and operating the outbox drains: leases, Drain Suspensions, undeliverable "
        "documents; requeue, backfill, lease release. Authenticate as for Airflow's REST API (Bearer token "
        "from POST /auth/token, or the UI's _token cookie).",
        version="1",
    )

    @app.exception_handler(NotAuthorized)
    async def _denied(request: Request, error: NotAuthorized) -> JSONResponse:
        return _problem(error.status, error.detail)

    @app.exception_handler(InvalidQueryError)
    async def _bad_query(request: Request, error: InvalidQueryError) -> JSONResponse:
        return _problem(400, str(error), error.option)

    class ActionRoute(APIRoute):
        """Authenticate and authorise (edit) first, then the idempotency guard, then FastAPI's handler."""

        def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
            original = super().get_route_handler()

            async def handler(request: Request) -> Response:
                try:
                    user, source = await api.check(request, "PUT")
                    if source is None:  # every action route has a {source}
                        return _problem(404, "no source in the path", "source")
                    guard = await run_in_threadpool(api.guard, source)
                except NotAuthorized as error:
                    return _problem(error.status, error.detail)
                except HTTPException as error:
                    detail = error.detail if isinstance(error.detail, dict) else {"message": error.detail}
                    return _problem(error.status_code, str(detail.get("message")), detail.get("field"))
                request.state.chatter_user = user
                return await guard.handle(request, original)

            return handler

    reader = APIRouter(prefix="/api")
    actions = APIRouter(prefix="/api", route_class=ActionRoute)

    async def read_access(request: Request) -> User:
        user, _ = await api.check(request, "GET")
        return user

    def acting_user(request: Request) -> User:
        user: User = request.state.chatter_user
        return user

    # -- reading ---------------------------------------------------------------------------------------------

    @reader.get("/sources", summary="The configured sources the caller may read, with their at-a-glance state")
    def list_sources(user: User = Depends(read_access)) -> dict[str, Any]:  # noqa: B008
        rows = []
        for source in backend.sources().sources:
            if not backend.authorized(user, "GET", source.dag_id):
                continue
            monitored, leases = backend.containers(source)
            store = monitor_store(source.to_options(), monitored, leases)
            suspended = [lease.id for lease in store.list_leases() if lease.suspension.suspended]
            rows.append(
                {
                    "name": source.name,
                    "dag_id": source.dag_id,
                    "suspended_leases": suspended,
                    "undeliverable": count_undeliverable(monitored),
                }
            )
        return {"sources": rows, "backfill_dag_id": api.backfill_dag_id}

    @reader.get("/sources/{source}", summary="One source: leases, Drain Suspensions, recent runs, totals")
    def overview(
        source: str,
        runs: int = Query(20, ge=1, le=MAX_RUNS, description=f"Recent runs to read (at most {MAX_RUNS})."),
        user: User = Depends(read_access),  # noqa: B008
    ) -> dict[str, Any]:
        config = api.source(source)
        monitored, leases = backend.containers(config)
        store = monitor_store(config.to_options(), monitored, leases)
        view = source_overview(config.name, config.dag_id, store, monitored, backend.runs(config.dag_id, runs))
        return {
            **dataclasses.asdict(view),
            "attention": view.attention,
            # The instruments are recorded in the workers' task processes; the api-server has only the summaries.
            "totals_from": "run summaries",
            "telemetry": backend.telemetry(),
            "idempotency": dataclasses.asdict(api.idempotency(config)),
            # What the caller may do here: the page hides the actions that would answer 403.
            "permissions": {
                "edit": backend.authorized(user, "PUT", config.dag_id),
                "backfill": backend.authorized(user, "POST", api.backfill_dag_id, run=True),
            },
        }

    @reader.get("/sources/{source}/undeliverable", summary="Undeliverable documents, paged, with their violations")
    def undeliverable(
        source: str,
        page_size: int = Query(25, description=f"Rows per page, 1 to {MAX_PAGE_SIZE}."),
        continuation: str | None = Query(None, max_length=2000, description="From the previous page."),
        message_id: str | None = Query(None, description="Only message ids starting with this."),
        user: User = Depends(read_access),  # noqa: B008
    ) -> dict[str, Any]:
        config = api.source(source)
        monitored, _ = backend.containers(config)
        page = list_undeliverable(
            monitored,
            size=valid_page_size(page_size),
            continuation=decode_continuation(continuation),
            message_id=search_text(message_id),
        )
        return {
            **dataclasses.asdict(page),
            "continuation": encode_continuation(page.continuation) if page.continuation is not None else None,
        }

    @reader.get("/sources/{source}/runs/{run_id}", summary="The drain summaries of one run of the source's DAG")
    def run(source: str, run_id: str, user: User = Depends(read_access)) -> dict[str, Any]:  # noqa: B008
        config = api.source(source)
        for record in backend.runs(config.dag_id, MAX_RUNS):
            if record.run_id == run_id:
                return dataclasses.asdict(record)
        raise HTTPException(404, {"field": "run_id", "message": f"run_id={run_id!r} is not a recent run"})

    @reader.get("/overview", summary="One row per source the caller may read, the most severe state first")
    def overview_table(
        runs: int = Query(20, ge=1, le=MAX_RUNS, description=f"Recent runs to read (at most {MAX_RUNS})."),
        user: User = Depends(read_access),  # noqa: B008
    ) -> dict[str, Any]:
        rows: list[OverviewRow] = []
        can: dict[str, dict[str, bool]] = {}
        for name, error in broken_entries(backend):
            rows.append(broken_row(name, error))
        for config in valid_sources(backend):
            if not backend.authorized(user, "GET", config.dag_id):
                continue  # a source whose DAG the caller may not read is not shown
            monitored, leases = backend.containers(config)
            store = monitor_store(config.to_options(), monitored, leases)
            view = source_overview(config.name, config.dag_id, store, monitored, backend.runs(config.dag_id, runs))
            rows.append(overview_row(view, now=store.now()))
            can[config.name] = {
                "edit": backend.authorized(user, "PUT", config.dag_id),
                "backfill": backend.authorized(user, "POST", api.backfill_dag_id, run=True),
            }
        return {
            "rows": [dataclasses.asdict(row) for row in sort_rows(rows)],
            "permissions": can,
            "user": user.name,
            "backfill_dag_id": api.backfill_dag_id,
        }

    # -- acting ------------------------------------------------------------------------------------------------

    @actions.post("/sources/{source}/undeliverable/requeue", summary="Requeue selected undeliverable documents")
    def requeue(source: str, body: RequeueBody, request: Request) -> dict[str, Any]:
        user = acting_user(request)
        config = api.source(source)
        monitored, _ = backend.containers(config)
        paths = config.to_options().partition_key_paths
        result = requeue_selected(monitored, paths, [Selected(d.id, d.etag) for d in body.documents])
        log.info(
            "UI requeue by %s on source %s: requeued %s, changed meanwhile %s, not found %s",
            user.name,
            config.name,
            list(result.requeued),
            list(result.changed_meanwhile),
            list(result.not_found),
        )
        return {"source": config.name, "by": user.name, **result.to_dict(), "idempotency": api.store_kind(config)}

    @actions.post("/sources/{source}/leases/{lease_id}/release", summary="Release a stuck lease")
    def release(source: str, lease_id: str, body: ReleaseBody, request: Request) -> dict[str, Any]:
        user = acting_user(request)
        config = api.source(source)
        monitored, leases = backend.containers(config)
        store = monitor_store(config.to_options(), monitored, leases)
        try:
            released = release_lease(store, lease_id, expected_etag=body.etag)
        except LeaseChangedError as error:
            raise HTTPException(409, {"field": "lease_id", "message": str(error)}) from None
        log.info(
            "UI lease release by %s on source %s: lease %s owner %s -> none (released=%s)",
            user.name,
            config.name,
            lease_id,
            released.previous_owner,
            released.released,
        )
        return {"source": config.name, "by": user.name, **released.to_dict(), "idempotency": api.store_kind(config)}

    @actions.post("/sources/{source}/backfill", summary="Trigger a backfill drain of the source")
    def backfill(source: str, body: BackfillBody, request: Request) -> dict[str, Any]:
        user = acting_user(request)
        config = api.source(source)
        if not backend.authorized(user, "POST", api.backfill_dag_id, run=True):
            raise NotAuthorized(403, f"{user.name} may not trigger DAG {api.backfill_dag_id}")
        conf = {"source": config.name, **body.model_dump()}
        try:
            run = backend.trigger(api.backfill_dag_id, conf, user, note=f"backfill of {config.name} from the UI")
        except ParamsRejected as error:
            raise HTTPException(400, {"field": "params", "message": str(error)}) from None
        log.info("UI backfill by %s on source %s: run %s with %s", user.name, config.name, run.get("run_id"), conf)
        return {"source": config.name, "by": user.name, **run, "idempotency": api.store_kind(config)}

    app.include_router(reader)
    app.include_router(actions)

    @app.exception_handler(HTTPException)
    async def _http(request: Request, error: HTTPException) -> JSONResponse:
        detail = error.detail
        if isinstance(detail, dict):
            return _problem(error.status_code, str(detail.get("message")), detail.get("field"))
        return _problem(error.status_code, str(detail))

    @app.get("/static/" + BUNDLE, include_in_schema=False)
    def bundle() -> Response:
        """The page's ES module (code only, no data: public like Airflow's own static files)."""
        text = resources.files("airflow_chatter.airflow.plugins").joinpath("static", BUNDLE).read_text("utf-8")
        return Response(text, media_type="text/javascript", headers={"Cache-Control": "no-cache"})

    @app.get("/static/chatter-icon.svg", include_in_schema=False)
    def icon() -> Response:
        """The navigation icon (public, like the bundle)."""
        return Response(ICON_SVG, media_type="image/svg+xml", headers={"Cache-Control": "max-age=3600"})

    return app

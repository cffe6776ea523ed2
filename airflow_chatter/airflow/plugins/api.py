"""The plugin's JSON API (FastAPI, mounted by Airflow's api-server under ``/chatter``): the monitoring read model
per source, and the operator's three actions.

Every ``/api`` endpoint authenticates the caller with Airflow (401 without a token or the UI's ``_token`` cookie)
and checks their permission on *that source's* drain DAG: read for ``GET``, edit (``PUT``) for an action (403
otherwise). Actions also pass the Idempotency-Key guard (a double click acts once): the caller is authenticated and
authorised **before** the guard runs, and the guard's scope is the authenticated user, so one user's key never
replays to another and a refused request is never stored. Every action is logged with the user and what changed.

The guard's store is per source (``guards.py``): the Cosmos idempotency container the source names
(``ui_idempotency_container``), shared by every api-server worker; without one, this process's memory, which is
right for a single worker only: the API says so (``idempotency`` in the overview and in each action's answer).

What only Airflow knows (who asks, what they may do, the recent runs' XCom, triggering a run) comes through a
``Backend`` (``backend.py`` in Airflow; a fake in the API tests). The Cosmos side is the core's read model
(``airflow_chatter.operations.monitoring``) and interventions: parameterised queries, every list paged with a cap.
The HTTP side of paging is here: the page size and search text a request may give, and the opaque continuation
token around the core's keyset position (the last item id shown).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Coroutine
from datetime import datetime
from importlib import resources
from typing import Any, Literal, Protocol

from fastapi import APIRouter, Depends, FastAPI, Header, HTTPException, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from fastapi.security import APIKeyCookie, HTTPBearer
from starlette.concurrency import run_in_threadpool

from airflow_chatter.airflow.dags.config import LoadedSources, SourceConfig, SourcesConfigError
from airflow_chatter.airflow.plugins.api_shapes import (
    ACTION_ERRORS,
    READ_ERRORS,
    BackfillBody,
    InvalidQueryError,
    NotAuthorized,
    ParamsRejected,
    ReleaseBody,
    RequeueBody,
    broken_entry,
    decode_continuation,
    echo,
    encode_continuation,
    problem,
    search_text,
    store_problem,
    valid_page_size,
    validation_problem,
)
from airflow_chatter.airflow.plugins.backfill_check import check_backfill_conf
from airflow_chatter.airflow.plugins.guards import SourceGuards
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.operations.interventions import (
    LeaseChangedError,
    NoSuchLeaseError,
    Selected,
    release_lease,
    requeue_selected,
)
from airflow_chatter.operations.monitoring import (
    MAX_PAGE_SIZE,
    RunRecord,
    list_undeliverable,
    monitor_store,
    run_points,
    source_overview,
)
from airflow_chatter.operations.outbox_queries import count_undeliverable
from airflow_chatter.operations.overview import OverviewRow, broken_row, overview_row, recent_since, sort_rows
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


# ------------------------------------------------------------------------------------------------
# The app.
# ------------------------------------------------------------------------------------------------


class _Api:
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
        responses=READ_ERRORS,
        title="airflow-chatter",
        description="Monitoring and operating the outbox drains: leases, Drain Suspensions, undeliverable "
        "documents; requeue, backfill, lease release. Authenticate as for Airflow's REST API (Bearer token "
        "from POST /auth/token, or the UI's _token cookie).",
        version="1",
    )

    @app.exception_handler(NotAuthorized)
    async def _denied(request: Request, error: NotAuthorized) -> JSONResponse:
        return problem(error.status, error.detail)

    @app.exception_handler(InvalidQueryError)
    async def _bad_query(request: Request, error: InvalidQueryError) -> JSONResponse:
        return problem(400, str(error), error.option)

    @app.exception_handler(ContainerError)
    async def _store_failed(request: Request, error: ContainerError) -> JSONResponse:
        """A Cosmos DB error on a read or an action (the idempotency guard's store included): 503 with Retry-After
        for a 429 or an unavailable service, else 502; the service's own text goes to the log only."""
        source = request.path_params.get("source")
        log.warning("Cosmos DB error on %s %s (source %s): %s", request.method, request.url.path, source, error)
        return store_problem(error, source)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        return validation_problem(error.errors())

    class ActionRoute(APIRoute):
        """Authenticate and authorise (edit) first, then the idempotency guard, then FastAPI's handler."""

        def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
            original = super().get_route_handler()

            async def handler(request: Request) -> Response:
                try:
                    user, source = await api.check(request, "PUT")
                    if source is None:  # every action route has a {source}
                        return problem(404, "no source in the path", "source")
                    guard = await run_in_threadpool(api.guards.guard, source)
                except NotAuthorized as error:
                    return problem(error.status, error.detail)
                except HTTPException as error:
                    detail = error.detail if isinstance(error.detail, dict) else {"message": error.detail}
                    return problem(error.status_code, str(detail.get("message")), detail.get("field"))
                request.state.chatter_user = user
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

    # Declared for the OpenAPI schema (and its security); ``api.check`` authenticates, so neither refuses itself.
    bearer = HTTPBearer(auto_error=False, description="An Airflow token from POST /auth/token.")
    cookie = APIKeyCookie(name="_token", auto_error=False, description="The Airflow UI's token cookie.")

    def idempotency_key(
        key: str = Header(  # noqa: B008
            alias="Idempotency-Key",
            description='A quoted string (RFC 8941), e.g. "3f1c…": the same key replays the first answer.',
        ),
    ) -> str:
        return key

    security = [Depends(bearer), Depends(cookie)]
    reader = APIRouter(prefix="/api", dependencies=security, responses=READ_ERRORS)
    actions = APIRouter(
        prefix="/api",
        route_class=ActionRoute,
        dependencies=[*security, Depends(idempotency_key)],
        responses=ACTION_ERRORS,
    )

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
        loaded = api.loaded()
        for source in loaded.config.sources if loaded.config is not None else ():
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
        # A broken entry is listed (name, field, message) to whoever may read its DAG; one with no usable name
        # (so no DAG) to every reader: the other sources are shown as usual either way.
        broken = [
            broken_entry(entry)
            for entry in loaded.broken
            if entry.dag_id is None or backend.authorized(user, "GET", entry.dag_id)
        ]
        return {"sources": rows, "broken": broken, "backfill_dag_id": api.backfill_dag_id}

    @reader.get("/sources/{source}", summary="One source: leases, Drain Suspensions, recent runs, totals")
    def overview(
        source: str,
        runs: int = Query(20, ge=1, le=MAX_RUNS, description=f"Recent runs to read (at most {MAX_RUNS})."),
        user: User = Depends(read_access),  # noqa: B008
    ) -> dict[str, Any]:
        config = api.source(source)
        monitored, leases = backend.containers(config)
        store = monitor_store(config.to_options(), monitored, leases)
        view = source_overview(
            config.name,
            config.dag_id,
            store,
            monitored,
            backend.runs(config.dag_id, runs),
            max_pending_age_seconds=config.max_pending_age_seconds,
        )
        return {
            **dataclasses.asdict(view),
            "backfill_runs": [dataclasses.asdict(r) for r in backfill_runs(user, config, runs)],
            "attention": view.attention,
            # The instruments are recorded in the workers' task processes; the api-server has only the summaries.
            "totals_from": "run summaries",
            "telemetry": backend.telemetry(),
            "idempotency": dataclasses.asdict(
                api.guards.info(config, editor=backend.authorized(user, "PUT", config.dag_id))
            ),
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

    def backfill_runs(user: User, config: SourceConfig, limit: int) -> list[RunRecord]:
        """The source's latest backfill runs (the backfill DAG's, whose conf names it), for a backfill reader."""
        if not backend.authorized(user, "GET", api.backfill_dag_id):
            return []
        return [r for r in backend.runs(api.backfill_dag_id, MAX_RUNS) if r.source == config.name][:limit]

    def find_run(user: User, config: SourceConfig, run_id: str) -> RunRecord:
        """A run of the source's drain DAG, or a backfill run of the source, by id however old (404 naming run_id)."""
        record = backend.run(config.dag_id, run_id)
        if record is None and backend.authorized(user, "GET", api.backfill_dag_id):
            record = backend.run(api.backfill_dag_id, run_id)
            record = record if record is not None and record.source == config.name else None
        if record is None:
            message = f"run_id={echo(run_id)!r} is no run of {config.dag_id} nor a backfill run of {config.name}"
            raise HTTPException(404, {"field": "run_id", "message": message})
        return record

    @reader.get("/sources/{source}/runs/{run_id}", summary="The drain summaries of one run (drain or backfill)")
    def run(source: str, run_id: str, user: User = Depends(read_access)) -> dict[str, Any]:  # noqa: B008
        config = api.source(source)
        record = find_run(user, config, run_id)
        return {
            "source": config.name,
            **dataclasses.asdict(record),
            "point": dataclasses.asdict(run_points([record])[0]),
        }

    @reader.get("/dags/{dag_id}/runs/{run_id}", summary="One run of a drain or the backfill DAG, with its source")
    def dag_run(dag_id: str, run_id: str, user: User = Depends(read_access)) -> dict[str, Any]:  # noqa: B008
        """What a DAG run's Outbox tab shows: the source it drained (a backfill run's from its conf) and its
        summaries; 404 naming ``dag_id`` for a DAG that drains no outbox."""
        if not backend.authorized(user, "GET", dag_id):
            raise NotAuthorized(403, f"{user.name} may not read DAG {dag_id}")
        loaded = api.loaded()
        sources = loaded.config.sources if loaded.config is not None else []
        if dag_id == api.backfill_dag_id:
            record = backend.run(dag_id, run_id)
            if record is None:
                raise HTTPException(404, {"field": "run_id", "message": f"run_id={echo(run_id)!r}: no such run"})
            return {"source": record.source, "dag_id": dag_id, "backfill": True, **dataclasses.asdict(record)}
        for config in sources:
            if config.dag_id == dag_id:
                record = find_run(user, config, run_id)
                return {**dataclasses.asdict(record), "source": config.name, "dag_id": dag_id, "backfill": False}
        raise HTTPException(404, {"field": "dag_id", "message": f"dag_id={echo(dag_id)!r} drains no outbox"})

    @reader.get("/overview", summary="One row per source the caller may read, the most severe state first")
    def overview_table(
        runs: int = Query(20, ge=1, le=MAX_RUNS, description=f"Recent runs to read (at most {MAX_RUNS})."),
        user: User = Depends(read_access),  # noqa: B008
    ) -> dict[str, Any]:
        rows: list[OverviewRow] = []
        can: dict[str, dict[str, bool]] = {}
        loaded = api.loaded()
        for entry in loaded.broken:  # as GET /sources lists them: to whoever may read its DAG
            if entry.dag_id is None or backend.authorized(user, "GET", entry.dag_id):
                name = entry.name or f"sources[{entry.index}]"
                rows.append(broken_row(name, "; ".join(entry.problems), entry.dag_id))
        for config in loaded.config.sources if loaded.config is not None else ():
            if not backend.authorized(user, "GET", config.dag_id):
                continue  # a source whose DAG the caller may not read is not shown
            monitored, leases = backend.containers(config)
            store = monitor_store(config.to_options(), monitored, leases)
            hour = backend.runs(config.dag_id, runs, since=recent_since(store.now()))
            view = source_overview(
                config.name,
                config.dag_id,
                store,
                monitored,
                hour,
                max_pending_age_seconds=config.max_pending_age_seconds,
            )
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
            "UI requeue by %s on source %s: requeued %s, changed meanwhile %s, already pending %s, not found %s",
            user.name,
            config.name,
            list(result.requeued),
            list(result.changed_meanwhile),
            list(result.already_pending),
            list(result.not_found),
        )
        return {
            "source": config.name,
            "by": user.name,
            **result.to_dict(),
            "idempotency": api.guards.store_kind(config),
        }

    @actions.post("/sources/{source}/leases/{lease_id}/release", summary="Release a stuck lease")
    def release(source: str, lease_id: str, body: ReleaseBody, request: Request) -> dict[str, Any]:
        user = acting_user(request)
        config = api.source(source)
        monitored, leases = backend.containers(config)
        store = monitor_store(config.to_options(), monitored, leases)
        try:
            released = release_lease(store, lease_id, expected_etag=body.etag)
        except (LeaseChangedError, NoSuchLeaseError) as error:
            status = 404 if isinstance(error, NoSuchLeaseError) else 409
            raise HTTPException(status, {"field": "lease_id", "message": str(error)}) from None
        log.info(
            "UI lease release by %s on source %s: lease %s owner %s -> none (released=%s)",
            user.name,
            config.name,
            lease_id,
            released.previous_owner,
            released.released,
        )
        return {
            "source": config.name,
            "by": user.name,
            **released.to_dict(),
            "idempotency": api.guards.store_kind(config),
        }

    @actions.post("/sources/{source}/backfill", summary="Trigger a backfill drain of the source")
    def backfill(source: str, body: BackfillBody, request: Request) -> dict[str, Any]:
        user = acting_user(request)
        config = api.source(source)
        if not backend.authorized(user, "POST", api.backfill_dag_id, run=True):
            raise NotAuthorized(403, f"{user.name} may not trigger DAG {api.backfill_dag_id}")
        conf = {"source": config.name, **body.model_dump()}
        try:
            check_backfill_conf(backend, conf)  # refused before a run exists, naming start or feed_ranges
            run = backend.trigger(api.backfill_dag_id, conf, user, note=f"backfill of {config.name} from the UI")
        except ParamsRejected as error:
            raise HTTPException(400, {"field": "params", "message": str(error)}) from None
        except ConfigurationError as error:
            raise HTTPException(422, {"field": error.option, "message": str(error)}) from None
        log.info("UI backfill by %s on source %s: run %s with %s", user.name, config.name, run.get("run_id"), conf)
        return {"source": config.name, "by": user.name, **run, "idempotency": api.guards.store_kind(config)}

    app.include_router(reader)
    app.include_router(actions)

    @app.exception_handler(HTTPException)
    async def _http(request: Request, error: HTTPException) -> JSONResponse:
        detail = error.detail
        if isinstance(detail, dict):
            return problem(error.status_code, str(detail.get("message")), detail.get("field"))
        return problem(error.status_code, str(detail))

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

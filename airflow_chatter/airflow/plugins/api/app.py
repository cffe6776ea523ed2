"""The plugin's JSON API (FastAPI, mounted by Airflow's api-server under ``/chatter``): the monitoring read model
per source, and the operator's three actions.

Every ``/api`` endpoint authenticates the caller with Airflow (401 without a token or the UI's ``_token`` cookie)
and checks their permission on *that source's* drain DAG: read for ``GET`` (``reads.py``), edit (``PUT``) for an
action (``actions.py``; 403 otherwise). Actions also pass the Idempotency-Key guard (a double click acts once):
the caller is authenticated and authorised **before** the guard runs (``access.py``).

The guard's store is per source (``guards.py``): the Cosmos idempotency container the source names
(``ui_idempotency_container``), shared by every api-server worker; without one, this process's memory, which is
right for a single worker only: the API says so (``idempotency`` in the overview and in each action's answer).

The routers are module-level; ``create_app`` puts them on an app with its ``Backend`` (``backend.py`` in Airflow; a
fake in the API tests) and the one error answer every endpoint gives (``shapes.py``).
"""

from __future__ import annotations

import logging
from importlib import resources

from fastapi import APIRouter, FastAPI, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from airflow_chatter.airflow.plugins.api.access import Backend, ChatterApi
from airflow_chatter.airflow.plugins.api.actions import actions
from airflow_chatter.airflow.plugins.api.reads import reader
from airflow_chatter.airflow.plugins.api.shapes import (
    READ_ERRORS,
    InvalidQueryError,
    NotAuthorized,
    problem,
    store_problem,
    validation_problem,
)
from airflow_chatter.ports import ContainerError, IdempotencyStore

log = logging.getLogger("airflow_chatter.ui")

BUNDLE = "chatter-ui.js"
#: The navigation icon, inline (the wheel ships only the static *.js): a grey line drawing, legible in both themes.
ICON_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" fill="none" stroke="#888" stroke-width="2" '
    'stroke-linecap="round" stroke-linejoin="round"><path d="M4 4h16v10H4z"/><path d="M8 18h8"/>'
    '<path d="M12 14v4"/><path d="M9 9l3-3 3 3"/></svg>'
)


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
    app = FastAPI(
        responses=READ_ERRORS,
        title="airflow-chatter",
        description="Monitoring and operating the outbox drains: leases, Drain Suspensions, undeliverable "
        "documents; requeue, backfill, lease release. Authenticate as for Airflow's REST API (Bearer token "
        "from POST /auth/token, or the UI's _token cookie).",
        version="1",
    )
    app.state.chatter = ChatterApi(backend, idempotency_store, backfill_dag_id)
    app.add_exception_handler(NotAuthorized, _denied)  # type: ignore[arg-type]
    app.add_exception_handler(InvalidQueryError, _bad_query)  # type: ignore[arg-type]
    app.add_exception_handler(ContainerError, _store_failed)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, _http)  # type: ignore[arg-type]
    app.include_router(reader)
    app.include_router(actions)
    app.include_router(static)
    return app


async def _denied(request: Request, error: NotAuthorized) -> JSONResponse:
    return problem(error.status, error.detail)


async def _bad_query(request: Request, error: InvalidQueryError) -> JSONResponse:
    return problem(400, str(error), error.option)


async def _store_failed(request: Request, error: ContainerError) -> JSONResponse:
    """A Cosmos DB error on a read or an action (the idempotency guard's store included): 503 with Retry-After
    for a 429 or an unavailable service, else 502; the service's own text goes to the log only."""
    source = request.path_params.get("source")
    log.warning("Cosmos DB error on %s %s (source %s): %s", request.method, request.url.path, source, error)
    return store_problem(error, source)


async def _invalid(request: Request, error: RequestValidationError) -> JSONResponse:
    return validation_problem(error.errors())


async def _http(request: Request, error: HTTPException) -> JSONResponse:
    detail = error.detail
    if isinstance(detail, dict):
        return problem(error.status_code, str(detail.get("message")), detail.get("field"))
    return problem(error.status_code, str(detail))


static = APIRouter(include_in_schema=False)


@static.get("/static/" + BUNDLE)
def bundle() -> Response:
    """The page's ES module (code only, no data: public like Airflow's own static files)."""
    text = resources.files("airflow_chatter.airflow.plugins").joinpath("static", BUNDLE).read_text("utf-8")
    return Response(text, media_type="text/javascript", headers={"Cache-Control": "no-cache"})


@static.get("/static/chatter-icon.svg")
def icon() -> Response:
    """The navigation icon (public, like the bundle)."""
    return Response(ICON_SVG, media_type="image/svg+xml", headers={"Cache-Control": "max-age=3600"})

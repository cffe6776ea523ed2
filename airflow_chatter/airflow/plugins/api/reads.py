"""The API's reads (``GET /api/...``): the sources, one source's monitoring read model, its undeliverable documents,
its runs, and the overview table. Each stands on ``read_access`` (``access.py``): authenticated, and allowed to read
the drain DAG of the path's source.

The Cosmos side is the core's read model (``airflow_chatter.operations.monitoring``): parameterised queries, every
list paged with a cap. The HTTP side of paging is here: the page size and search text a request may give, and the
opaque continuation token around the core's keyset position (the last item id shown).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Query

from airflow_chatter.airflow.plugins.api.access import SECURITY, Access, read_access
from airflow_chatter.airflow.plugins.api.shapes import (
    READ_ERRORS,
    NotAuthorized,
    broken_entry,
    decode_continuation,
    echo,
    encode_continuation,
    search_text,
    valid_page_size,
)
from airflow_chatter.airflow.sources import SourceConfig
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

#: Recent runs a source's page reads (their XCom summaries), at most.
MAX_RUNS = 50

reader = APIRouter(prefix="/api", dependencies=SECURITY, responses=READ_ERRORS)


@reader.get("/sources", summary="The configured sources the caller may read, with their at-a-glance state")
def list_sources(access: Access = Depends(read_access)) -> dict[str, Any]:  # noqa: B008
    rows = []
    loaded = access.api.loaded()
    for source in loaded.config.sources if loaded.config is not None else ():
        if not access.may("GET", source.dag_id):
            continue
        monitored, leases = access.backend.containers(source)
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
    broken = [broken_entry(entry) for entry in loaded.broken if entry.dag_id is None or access.may("GET", entry.dag_id)]
    return {"sources": rows, "broken": broken, "backfill_dag_id": access.api.backfill_dag_id}


@reader.get("/sources/{source}", summary="One source: leases, Drain Suspensions, recent runs, totals")
def overview(
    source: str,
    runs: int = Query(20, ge=1, le=MAX_RUNS, description=f"Recent runs to read (at most {MAX_RUNS})."),
    access: Access = Depends(read_access),  # noqa: B008
) -> dict[str, Any]:
    config, backend, backfill_dag_id = access.source, access.backend, access.api.backfill_dag_id
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
        "backfill_runs": [dataclasses.asdict(r) for r in _backfill_runs(access, config, runs)],
        "attention": view.attention,
        # The instruments are recorded in the workers' task processes; the api-server has only the summaries.
        "totals_from": "run summaries",
        "telemetry": backend.telemetry(),
        "idempotency": dataclasses.asdict(access.api.guards.info(config, editor=access.may("PUT", config.dag_id))),
        # What the caller may do here: the page hides the actions that would answer 403.
        "permissions": {
            "edit": access.may("PUT", config.dag_id),
            "backfill": access.may("POST", backfill_dag_id, run=True),
        },
    }


@reader.get("/sources/{source}/undeliverable", summary="Undeliverable documents, paged, with their violations")
def undeliverable(
    source: str,
    page_size: int = Query(25, description=f"Rows per page, 1 to {MAX_PAGE_SIZE}."),
    continuation: str | None = Query(None, max_length=2000, description="From the previous page."),
    message_id: str | None = Query(None, description="Only message ids starting with this."),
    access: Access = Depends(read_access),  # noqa: B008
) -> dict[str, Any]:
    monitored, _ = access.backend.containers(access.source)
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


@reader.get("/sources/{source}/runs/{run_id}", summary="The drain summaries of one run (drain or backfill)")
def run(source: str, run_id: str, access: Access = Depends(read_access)) -> dict[str, Any]:  # noqa: B008
    record = _find_run(access, access.source, run_id)
    return {
        "source": access.source.name,
        **dataclasses.asdict(record),
        "point": dataclasses.asdict(run_points([record])[0]),
    }


@reader.get("/dags/{dag_id}/runs/{run_id}", summary="One run of a drain or the backfill DAG, with its source")
def dag_run(dag_id: str, run_id: str, access: Access = Depends(read_access)) -> dict[str, Any]:  # noqa: B008
    """What a DAG run's Outbox tab shows: the source it drained (a backfill run's from its conf) and its
    summaries; 404 naming ``dag_id`` for a DAG that drains no outbox."""
    if not access.may("GET", dag_id):
        raise NotAuthorized(403, f"{access.user.name} may not read DAG {dag_id}")
    loaded = access.api.loaded()
    sources = loaded.config.sources if loaded.config is not None else []
    if dag_id == access.api.backfill_dag_id:
        record = access.backend.run(dag_id, run_id)
        if record is None:
            raise HTTPException(404, {"field": "run_id", "message": f"run_id={echo(run_id)!r}: no such run"})
        return {"source": record.source, "dag_id": dag_id, "backfill": True, **dataclasses.asdict(record)}
    for config in sources:
        if config.dag_id == dag_id:
            record = _find_run(access, config, run_id)
            return {**dataclasses.asdict(record), "source": config.name, "dag_id": dag_id, "backfill": False}
    raise HTTPException(404, {"field": "dag_id", "message": f"dag_id={echo(dag_id)!r} drains no outbox"})


@reader.get("/overview", summary="One row per source the caller may read, the most severe state first")
def overview_table(
    runs: int = Query(20, ge=1, le=MAX_RUNS, description=f"Recent runs to read (at most {MAX_RUNS})."),
    access: Access = Depends(read_access),  # noqa: B008
) -> dict[str, Any]:
    rows: list[OverviewRow] = []
    can: dict[str, dict[str, bool]] = {}
    loaded = access.api.loaded()
    backfill_dag_id = access.api.backfill_dag_id
    for entry in loaded.broken:  # as GET /sources lists them: to whoever may read its DAG
        if entry.dag_id is None or access.may("GET", entry.dag_id):
            name = entry.name or f"sources[{entry.index}]"
            rows.append(broken_row(name, "; ".join(entry.problems), entry.dag_id))
    for config in loaded.config.sources if loaded.config is not None else ():
        if not access.may("GET", config.dag_id):
            continue  # a source whose DAG the caller may not read is not shown
        monitored, leases = access.backend.containers(config)
        store = monitor_store(config.to_options(), monitored, leases)
        hour = access.backend.runs(config.dag_id, runs, since=recent_since(store.now()))
        view = source_overview(
            config.name, config.dag_id, store, monitored, hour, max_pending_age_seconds=config.max_pending_age_seconds
        )
        rows.append(overview_row(view, now=store.now()))
        can[config.name] = {
            "edit": access.may("PUT", config.dag_id),
            "backfill": access.may("POST", backfill_dag_id, run=True),
        }
    return {
        "rows": [dataclasses.asdict(row) for row in sort_rows(rows)],
        "permissions": can,
        "user": access.user.name,
        "backfill_dag_id": backfill_dag_id,
    }


def _backfill_runs(access: Access, config: SourceConfig, limit: int) -> list[RunRecord]:
    """The source's latest backfill runs (the backfill DAG's, whose conf names it), for a backfill reader."""
    backfill_dag_id = access.api.backfill_dag_id
    if not access.may("GET", backfill_dag_id):
        return []
    return [r for r in access.backend.runs(backfill_dag_id, MAX_RUNS) if r.source == config.name][:limit]


def _find_run(access: Access, config: SourceConfig, run_id: str) -> RunRecord:
    """A run of the source's drain DAG, or a backfill run of the source, by id however old (404 naming run_id)."""
    backfill_dag_id = access.api.backfill_dag_id
    record = access.backend.run(config.dag_id, run_id)
    if record is None and access.may("GET", backfill_dag_id):
        record = access.backend.run(backfill_dag_id, run_id)
        record = record if record is not None and record.source == config.name else None
    if record is None:
        message = f"run_id={echo(run_id)!r} is no run of {config.dag_id} nor a backfill run of {config.name}"
        raise HTTPException(404, {"field": "run_id", "message": message})
    return record

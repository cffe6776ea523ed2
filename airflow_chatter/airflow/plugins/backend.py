"""The API's ``Backend`` inside Airflow's api-server: Airflow's auth manager, its metadata DB (the drain runs' XCom
summaries), its own DAG-run creation (so the DAG's ``Param`` validation applies), and the sources file with the
project's hooks. Imported only when the API app is first built (on the first request), never by the plugin module.
"""

from __future__ import annotations

import os
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

from fastapi import HTTPException, Request

from airflow_chatter.airflow.plugins.api.access import Method, User
from airflow_chatter.airflow.plugins.api.shapes import NotAuthorized, ParamsRejected
from airflow_chatter.airflow.sources import (
    SOURCES_FILE_ENV,
    LoadedSources,
    SourceConfig,
    load_sources_isolated,
)
from airflow_chatter.operations.monitoring import RunRecord
from airflow_chatter.operations.overview import MAX_RUNS_IN_HOUR
from airflow_chatter.ports import DocumentContainer

#: The drain task ids whose XCom carries a ``DrainSummary`` (scheduled and backfill DAGs).
DRAIN_TASKS = ("drain", "backfill_drain")
#: ``return_value`` of a successful drain; ``summary`` of a failed one (pushed before it raises).
SUMMARY_KEYS = ("return_value", "summary")


def sources_path() -> Path:
    """``$CHATTER_SOURCES_FILE``, else ``chatter_sources.yaml`` in Airflow's DAGs folder (as the DAG factory)."""
    configured = os.environ.get(SOURCES_FILE_ENV)
    if configured:
        return Path(configured)
    from airflow.configuration import conf

    return Path(conf.get("core", "dags_folder")) / "chatter_sources.yaml"


class AirflowBackend:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sources: tuple[float, LoadedSources] | None = None
        self._containers: dict[tuple[str, str, str, str], tuple[DocumentContainer, DocumentContainer]] = {}

    # -- who asks ----------------------------------------------------------------------------------

    async def authenticate(self, request: Request) -> User:
        from airflow.api_fastapi.auth.managers.base_auth_manager import COOKIE_NAME_JWT_TOKEN
        from airflow.api_fastapi.core_api.security import resolve_user_from_token

        header = request.headers.get("authorization", "")
        scheme, _, credentials = header.partition(" ")
        token = credentials.strip() if scheme.lower() == "bearer" else request.cookies.get(COOKIE_NAME_JWT_TOKEN)
        try:
            user = await resolve_user_from_token(token)
        except HTTPException as error:
            raise NotAuthorized(error.status_code, str(error.detail)) from None
        return User(name=str(user.get_name()), handle=user)

    def authorized(self, user: User, method: Method, dag_id: str, *, run: bool = False) -> bool:
        from airflow.api_fastapi.app import get_auth_manager
        from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails

        return bool(
            get_auth_manager().is_authorized_dag(
                method=method,
                access_entity=DagAccessEntity.RUN if run else None,
                details=DagDetails(id=dag_id),
                user=user.handle,
            )
        )

    # -- the sources file and the containers ---------------------------------------------------------

    def sources(self) -> LoadedSources:
        """The sources file entry by entry, as the DAG files parse it: a broken entry is listed, the others load."""
        path = sources_path()
        mtime = path.stat().st_mtime
        with self._lock:
            if self._sources is None or self._sources[0] != mtime:
                self._sources = (mtime, load_sources_isolated(path))
            return self._sources[1]

    def containers(self, source: SourceConfig) -> tuple[DocumentContainer, DocumentContainer]:
        key = (source.cosmos_conn_id, source.database, source.monitored_container, source.lease_container)
        with self._lock:
            if key not in self._containers:
                from airflow_chatter.airflow.hooks.cosmos import ChatterCosmosHook

                hook = ChatterCosmosHook(source.cosmos_conn_id, database_name=source.database)
                self._containers[key] = (
                    hook.get_container(source.monitored_container),
                    hook.get_container(source.lease_container),
                )
            return self._containers[key]

    def idempotency_container(self, source: SourceConfig) -> DocumentContainer:
        """The source's ``ui_idempotency_container`` (the API verifies its shape before the first action)."""
        from airflow_chatter.airflow.hooks.cosmos import ChatterCosmosHook

        if source.ui_idempotency_container is None:
            raise ValueError(f"source {source.name} has no ui_idempotency_container")
        hook = ChatterCosmosHook(source.cosmos_conn_id, database_name=source.database)
        return hook.get_container(source.ui_idempotency_container)

    # -- the metadata DB ---------------------------------------------------------------------------

    def runs(self, dag_id: str, limit: int, since: datetime | None = None) -> list[RunRecord]:
        """The DAG's newest ``limit`` runs, and every run started since ``since`` (at most ``MAX_RUNS_IN_HOUR``),
        newest first, with their drain summaries, read in-process from the metadata DB."""
        from airflow.models.dagrun import DagRun
        from airflow.utils.session import create_session
        from sqlalchemy import or_, select

        newest = select(DagRun).where(DagRun.dag_id == dag_id).order_by(DagRun.run_after.desc()).limit(limit)
        if since is None:
            return self._records(newest)
        with create_session() as session:  # two plain queries: MySQL refuses a LIMIT inside IN (...)
            ids = list(session.scalars(newest.with_only_columns(DagRun.id)).all())
        return self._records(
            select(DagRun)
            .where(DagRun.dag_id == dag_id, or_(DagRun.id.in_(ids), DagRun.start_date >= since))
            .order_by(DagRun.run_after.desc())
            .limit(max(limit, MAX_RUNS_IN_HOUR))
        )

    def run(self, dag_id: str, run_id: str) -> RunRecord | None:
        """One run by id, however old (a run's Outbox tab), with its drain summaries."""
        from airflow.models.dagrun import DagRun
        from sqlalchemy import select

        found = self._records(select(DagRun).where(DagRun.dag_id == dag_id, DagRun.run_id == run_id))
        return found[0] if found else None

    def _records(self, query: Any) -> list[RunRecord]:
        """The runs ``query`` selects, each with its drain summaries and (a backfill run's) conf ``source``."""
        from airflow.models.xcom import XComModel
        from airflow.utils.session import create_session
        from sqlalchemy import select

        with create_session() as session:
            runs = session.scalars(query).all()
            if not runs:
                return []
            rows = session.scalars(
                select(XComModel).where(
                    XComModel.dag_id == runs[0].dag_id,
                    XComModel.run_id.in_([run.run_id for run in runs]),
                    XComModel.task_id.in_(DRAIN_TASKS),
                    XComModel.key.in_(SUMMARY_KEYS),
                )
            ).all()
            summaries: dict[str, dict[tuple[str, int], dict[str, Any]]] = {}
            for row in rows:
                value = XComModel.deserialize_value(row)
                if isinstance(value, dict) and "lease" in value:
                    summaries.setdefault(row.run_id, {})[(row.task_id, row.map_index)] = value
            return [
                RunRecord(
                    run_id=run.run_id,
                    run_type=str(run.run_type) if run.run_type is not None else None,
                    state=str(run.state) if run.state is not None else None,
                    started_at=run.start_date.isoformat() if run.start_date else None,
                    summaries=tuple(summaries.get(run.run_id, {})[k] for k in sorted(summaries.get(run.run_id, {}))),
                    source=_conf_source(run.conf),
                )
                for run in runs
            ]

    def trigger(self, dag_id: str, conf: dict[str, Any], user: User, note: str) -> dict[str, Any]:
        """Create a manual run the way Airflow's own ``POST /api/v2/dags/{dag_id}/dagRuns`` does."""
        from airflow.api_fastapi.core_api.datamodels.dag_run import TriggerDAGRunPostBody
        from airflow.exceptions import ParamValidationError
        from airflow.models.dagbag import DBDagBag
        from airflow.utils.session import create_session
        from airflow.utils.state import DagRunState
        from airflow.utils.types import DagRunTriggeredByType, DagRunType

        body = TriggerDAGRunPostBody(conf=conf, logical_date=None)
        with create_session() as session:
            dag = DBDagBag().get_latest_version_of_dag(dag_id, session=session)
            if dag is None:
                raise ParamsRejected(f"DAG {dag_id} is not parsed yet")
            try:
                params = body.validate_context(dag)
                run = dag.create_dagrun(
                    run_id=params["run_id"],
                    logical_date=params["logical_date"],
                    data_interval=params["data_interval"],
                    run_after=params["run_after"],
                    conf=params["conf"],
                    run_type=DagRunType.MANUAL,
                    triggered_by=DagRunTriggeredByType.UI,
                    triggering_user_name=user.name,
                    state=DagRunState.QUEUED,
                    partition_key=params.get("partition_key"),
                    partition_date=params.get("partition_date"),
                    session=session,
                )
            except (ParamValidationError, ValueError) as error:
                raise ParamsRejected(str(error)) from None
            run.note = (note, user.handle.get_id())
            return {"dag_id": dag_id, "run_id": run.run_id, "state": str(run.state)}

    def telemetry(self) -> dict[str, Any]:
        """Whether an OpenTelemetry SDK meter provider is configured in this process (the api-server's)."""
        from opentelemetry import metrics

        provider = metrics.get_meter_provider()
        kind = f"{type(provider).__module__}.{type(provider).__qualname__}"
        return {"sdk_configured": kind.startswith("opentelemetry.sdk."), "meter_provider": kind}


def _conf_source(conf: Any) -> str | None:
    """The ``source`` a run's conf names (the backfill DAG's param), if it is a string."""
    value = conf.get("source") if isinstance(conf, dict) else None
    return value if isinstance(value, str) else None

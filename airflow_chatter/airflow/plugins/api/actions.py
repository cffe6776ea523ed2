"""The API's three actions (``POST /api/sources/{source}/...``): requeue undeliverable documents, release a lease,
trigger a backfill. Each runs through ``ActionRoute`` (``access.py``): authenticated and allowed to edit the source's
drain DAG, then past the Idempotency-Key guard (a double click acts once). Every action is logged with the user and
what changed, and its answer says where its key is kept (``idempotency``).
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Depends, HTTPException

from airflow_chatter.airflow.plugins.api.access import SECURITY, Access, ActionRoute, action_access, idempotency_key
from airflow_chatter.airflow.plugins.api.shapes import (
    ACTION_ERRORS,
    BackfillBody,
    NotAuthorized,
    ParamsRejected,
    ReleaseBody,
    RequeueBody,
)
from airflow_chatter.airflow.plugins.backfill_check import check_backfill_conf
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.operations.interventions import (
    LeaseChangedError,
    NoSuchLeaseError,
    Selected,
    release_lease,
    requeue_selected,
)
from airflow_chatter.operations.monitoring import monitor_store

log = logging.getLogger("airflow_chatter.ui")

actions = APIRouter(
    prefix="/api",
    route_class=ActionRoute,
    dependencies=[*SECURITY, Depends(idempotency_key)],
    responses=ACTION_ERRORS,
)


@actions.post("/sources/{source}/undeliverable/requeue", summary="Requeue selected undeliverable documents")
def requeue(source: str, body: RequeueBody, access: Access = Depends(action_access)) -> dict[str, Any]:  # noqa: B008
    user, config = access.user, access.source
    monitored, _ = access.backend.containers(config)
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
        "idempotency": access.api.guards.store_kind(config),
    }


@actions.post("/sources/{source}/leases/{lease_id}/release", summary="Release a stuck lease")
def release(
    source: str,
    lease_id: str,
    body: ReleaseBody,
    access: Access = Depends(action_access),  # noqa: B008
) -> dict[str, Any]:
    user, config = access.user, access.source
    monitored, leases = access.backend.containers(config)
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
        "idempotency": access.api.guards.store_kind(config),
    }


@actions.post("/sources/{source}/backfill", summary="Trigger a backfill drain of the source")
def backfill(source: str, body: BackfillBody, access: Access = Depends(action_access)) -> dict[str, Any]:  # noqa: B008
    user, config, backfill_dag_id = access.user, access.source, access.api.backfill_dag_id
    if not access.may("POST", backfill_dag_id, run=True):
        raise NotAuthorized(403, f"{user.name} may not trigger DAG {backfill_dag_id}")
    conf = {"source": config.name, **body.model_dump()}
    try:
        check_backfill_conf(access.backend, conf)  # refused before a run exists, naming start or feed_ranges
        run = access.backend.trigger(backfill_dag_id, conf, user, note=f"backfill of {config.name} from the UI")
    except ParamsRejected as error:
        raise HTTPException(400, {"field": "params", "message": str(error)}) from None
    except ConfigurationError as error:
        raise HTTPException(422, {"field": error.option, "message": str(error)}) from None
    log.info("UI backfill by %s on source %s: run %s with %s", user.name, config.name, run.get("run_id"), conf)
    return {"source": config.name, "by": user.name, **run, "idempotency": access.api.guards.store_kind(config)}

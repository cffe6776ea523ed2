"""Build the drain DAGs from the sources config file: one scheduled drain DAG per source, one manual
backfill DAG and one manual requeue DAG for all of them. ``dags/chatter_drains.py``, ``dags/chatter_backfill.py``
and ``dags/chatter_requeue.py`` call this.

The file is ``$CHATTER_SOURCES_FILE``, or ``chatter_sources.yaml`` beside the DAG file. A file that cannot be
read (or whose top level is wrong) raises ``SourcesConfigError`` while each DAG file is parsed. A broken *entry*
breaks only its own DAG: ``chatter_drain_<name>`` becomes a stand-in that drains nothing and names the problem,
``dags/chatter_sources_check.py`` shows it as an import error naming the file, the source and the field, and the
other sources keep their DAGs. No half-configured DAG is ever scheduled.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param

from airflow_chatter.airflow.assets import drain_schedule, topics_alias
from airflow_chatter.airflow.operators.drain import ChatterDrainOperator
from airflow_chatter.airflow.operators.invalid import ChatterInvalidSourceOperator
from airflow_chatter.airflow.operators.list_leases import ChatterListLeasesOperator
from airflow_chatter.airflow.operators.requeue import ChatterRequeueUndeliverableOperator
from airflow_chatter.airflow.operators.topic_events import ChatterTopicEventsOperator
from airflow_chatter.airflow.sources import (
    SOURCES_FILE_ENV,
    BrokenSource,
    LoadedSources,
    SourceConfig,
    SourcesFile,
    load_sources_isolated,
)

log = logging.getLogger(__name__)

START_DATE = datetime(2026, 1, 1, tzinfo=UTC)
BACKFILL_DAG_ID = "chatter_backfill"
REQUEUE_DAG_ID = "chatter_requeue"
PENDING_AGE_DAG_ID = "chatter_pending_age"
#: How often the pending-age check measures: an alert fires within two of these after a source stalls.
PENDING_AGE_SCHEDULE = "* * * * *"
#: A drain task stops itself at ``max_seconds``; Airflow kills it only well after that.
EXECUTION_TIMEOUT_MARGIN = timedelta(minutes=5)
#: A mapped drain is labelled by its lease id in the UI (rendered once the templates are).
MAP_INDEX_TEMPLATE = "{{ task.lease_id }}"
DEFAULT_ARGS = {"owner": "chatter", "retries": 2, "retry_delay": timedelta(seconds=30)}


def chatter_dag(dag_id: str, *tags: str, schedule: Any = None, **options: Any) -> DAG:
    """The settings every DAG of the package shares: from ``START_DATE``, no catch-up, one run at a time (a run's
    drains finish before the next run lists leases again), the ``chatter`` tag first and ``DEFAULT_ARGS``.
    ``options`` adds the rest (``doc_md``, ``params``, ...) or replaces ``default_args`` / ``max_active_runs``."""
    settings: dict[str, Any] = {"default_args": DEFAULT_ARGS, "max_active_runs": 1, **options}
    return DAG(
        dag_id=dag_id, schedule=schedule, start_date=START_DATE, catchup=False, tags=["chatter", *tags], **settings
    )


def sources_file(default_dir: str | Path) -> Path:
    """The sources config path: ``$CHATTER_SOURCES_FILE`` or ``<default_dir>/chatter_sources.yaml``."""
    return Path(os.environ.get(SOURCES_FILE_ENV) or Path(default_dir) / "chatter_sources.yaml")


def topic_events(source_name: str, drain_task_id: str, *, alias: str | None = None) -> ChatterTopicEventsOperator:
    """The run's asset events, one per topic its drains delivered to, emitted once after them (not by each mapped
    drain: two reaching a new topic together race Airflow's creation of its asset, and one of them is failed).

    A teardown without setups: it runs when the drains are done, whatever their states, and is not a leaf for
    the run's state, so a failed drain still fails the run.
    """
    events = ChatterTopicEventsOperator(
        task_id="topic_events",
        source_name=source_name,
        drain_task_id=drain_task_id,
        outlets=[topics_alias(alias or source_name)],
        retries=0,  # it reads XCom and emits events: nothing a retry would cure
    )
    events.as_teardown()
    return events


def build_drain_dag(source: SourceConfig) -> DAG:
    """``chatter_drain_<name>``: list leases → one bounded drain per lease, never two runs at once."""
    # --8<-- [start:chatter_drain_dag]
    with chatter_dag(
        source.dag_id,
        "outbox",
        *source.tags,
        schedule=drain_schedule(source),  # cron, a preset, or the pending asset (schedule: on_pending)
        doc_md=(
            f"Drains the outbox of `{source.database}/{source.monitored_container}` to Kafka "
            f"(leases in `{source.lease_container}`, connections `{source.cosmos_conn_id}` / "
            f"`{source.kafka_conn_id}`). Each mapped `drain` task drains one lease for at most "
            f"{source.max_documents} documents or {source.max_seconds:g} s."
        ),
    ) as dag:
        leases = ChatterListLeasesOperator(task_id="list_leases", source=source)
        drains = ChatterDrainOperator.partial(
            task_id="drain",
            source=source,
            pool=source.pool or "default_pool",  # cap the Cosmos RU the drains of all DAGs spend
            pool_slots=source.pool_slots,
            max_active_tis_per_dagrun=source.max_parallel_drains,
            execution_timeout=timedelta(seconds=source.max_seconds) + EXECUTION_TIMEOUT_MARGIN,
            map_index_template=MAP_INDEX_TEMPLATE,  # "drain [<lease id>]", not "drain [0]"
        ).expand(lease_id=leases.output)
        drains >> topic_events(source.name, "drain")  # an asset event per topic delivered to
    # --8<-- [end:chatter_drain_dag]
    return dag


#: An RFC 3339 date-time with an explicit offset (``Z`` or ``+hh:mm``). jsonschema checks ``format: date-time`` only
#: when ``rfc3339-validator`` is installed (it is not, with Airflow 3.3), so the pattern is what refuses
#: "yesterday" when the run is created.
DATE_TIME_PATTERN = (
    r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]"
    r"(:[0-5][0-9](\.[0-9]{1,6})?)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"
)
BACKFILL_PARAMS = ("source", "start", "feed_ranges", "document_budget", "dry_run")


def backfill_params(names: list[str]) -> dict[str, Param]:
    """The backfill trigger form; the server validates every field when the run is created (400/422 otherwise).

    ``start`` is ``beginning``, ``resume`` or a UTC timestamp, one field, so "from a point in time, but no time" cannot
    be said. ``source`` has no default, so a run triggered with an empty conf is refused naming it. The default is a
    dry run. A start in the future and feed ranges the source does not have are refused by the first task.
    """
    return {
        # No default: a run triggered without conf is refused naming ``source`` instead of dry-running the first.
        "source": Param(type="string", enum=names, description="The source to re-drain (required)."),
        "start": Param(
            "beginning",
            type="string",
            anyOf=[{"enum": ["beginning", "resume"]}, {"format": "date-time", "pattern": DATE_TIME_PATTERN}],
            examples=["beginning", "resume"],
            description="beginning: reset the backfill leases and read the whole change feed; "
            "a UTC timestamp such as 2026-11-29T00:00:00Z: the same, but the new backfill leases start reading the "
            "change feed there; resume: continue the previous backfill from its checkpoints.",
        ),
        "feed_ranges": Param(
            [],
            type=["null", "array"],
            items={"type": "string", "minLength": 1},
            description="Only these feed range tokens or lease ids (empty: all).",
        ),
        "document_budget": Param(
            10000, type="integer", minimum=1, maximum=1_000_000, description="Documents per lease, at most."
        ),
        "dry_run": Param(
            True,
            type="boolean",
            description="On by default: count pending documents and list ranges, drain nothing. Turn it off to "
            "backfill.",
        ),
    }


def build_backfill_dag(config: SourcesFile) -> DAG:
    """``chatter_backfill``: a manual re-drain of one source with its own lease set.

    It lists (or resets) the source's backfill leases and drains each while holding the scheduled
    lease of the same range, so the scheduled checkpoints never move and the two never own a range
    together. Delivered documents are skipped, so it re-publishes only what is still pending.
    """
    names = [s.name for s in config.sources]
    # --8<-- [start:chatter_backfill_dag]
    with chatter_dag(
        BACKFILL_DAG_ID,
        "outbox",
        "backfill",
        is_paused_upon_creation=False,  # manual only: unpaused, so a trigger runs at once instead of sitting queued
        doc_md="Re-drain one source's outbox from the beginning or a point in time, with its own lease set. "
        "A dry run unless `dry_run` is false.",
        params=backfill_params(names),
    ) as dag:
        # A point in time goes to the leases the list task creates (their start_from), not to the drains as a
        # _ts filter: older changes are not read at all, and "resume" keeps it because the leases do.
        leases = ChatterListLeasesOperator(
            task_id="list_backfill_leases",
            source_name="{{ params.source }}",
            sources=config,
            lease_set="backfill",
            reset="{{ params.start != 'resume' }}",
            feed_ranges="{{ params.feed_ranges | tojson }}",
            plan_only="{{ params.dry_run }}",
            since="{{ params.start if params.start not in ('beginning', 'resume') else '' }}",
            allowed_conf=sorted(BACKFILL_PARAMS),
        )
        drains = ChatterDrainOperator.partial(
            task_id="backfill_drain",
            source_name="{{ params.source }}",
            sources=config,
            lease_set="backfill",
            exclusive_with_scheduled=True,
            max_documents="{{ params.document_budget }}",
            pool=config.backfill_pool or "default_pool",
            map_index_template=MAP_INDEX_TEMPLATE,
            retries=5,  # a range the scheduled drain holds right now is retried, not skipped
            retry_delay=timedelta(minutes=1),
        ).expand(lease_id=leases.output)
        drains >> topic_events("{{ params.source }}", "backfill_drain", alias="backfill")
    # --8<-- [end:chatter_backfill_dag]
    return dag


REQUEUE_PARAMS = ("source", "message_ids", "all_undeliverable", "limit", "dry_run")


def requeue_params(names: list[str]) -> dict[str, Param]:
    """The requeue trigger form: every field validated when the run is created; a dry run by default."""
    return {
        "source": Param(names[0], type="string", enum=names, description="The source whose outbox to requeue."),
        "message_ids": Param(
            None,
            type=["null", "array"],
            items={"type": "string", "minLength": 1},
            minItems=1,
            description="Message ids of undeliverable outbox documents to set back to pending.",
        ),
        "all_undeliverable": Param(
            False, type="boolean", description="Requeue every undeliverable document (up to limit) instead."
        ),
        "limit": Param(1000, type="integer", minimum=1, maximum=100_000, description="Documents per run, at most."),
        "dry_run": Param(
            True,
            type="boolean",
            description="On by default: list what would be requeued, change nothing. Turn it off to requeue.",
        ),
    }


def build_requeue_dag(config: SourcesFile) -> DAG:
    """``chatter_requeue``: set undeliverable outbox documents of one source back to pending, on demand.

    For after the cause is fixed (a resolver bug, a missing topic): the next scheduled drain publishes them again.
    Who triggered it and what it changed are logged and returned as XCom.
    """
    names = [s.name for s in config.sources]
    # --8<-- [start:chatter_requeue_dag]
    with chatter_dag(
        REQUEUE_DAG_ID,
        "outbox",
        "requeue",
        is_paused_upon_creation=False,  # manual only: a trigger runs at once
        doc_md="Set undeliverable outbox documents back to pending (by message id, or all of them). "
        "A dry run unless `dry_run` is false.",
        params=requeue_params(names),
    ) as dag:
        ChatterRequeueUndeliverableOperator(
            task_id="requeue",
            source_name="{{ params.source }}",
            sources=config,
            message_ids="{{ params.message_ids | tojson }}",
            all_undeliverable="{{ params.all_undeliverable }}",
            limit="{{ params.limit }}",
            plan_only="{{ params.dry_run }}",
            allowed_conf=sorted(REQUEUE_PARAMS),
        )
    # --8<-- [end:chatter_requeue_dag]
    return dag


def build_wait_and_drain_dag(source: SourceConfig, *, poll_interval: float = 60.0) -> DAG:
    """``chatter_wait_<name>``: an unscheduled DAG that waits (deferred, in the triggerer) for pending
    outbox documents, then drains every lease once. Trigger it, or give it a schedule, when documents
    arrive rarely and an idle drain every few minutes would be wasted."""
    from airflow_chatter.airflow.sensors.pending import ChatterPendingOutboxSensor

    # --8<-- [start:chatter_wait_dag]
    with chatter_dag(f"chatter_wait_{source.name}", "outbox", "example") as dag:
        wait = ChatterPendingOutboxSensor(
            task_id="wait_for_pending",
            source=source,
            poll_interval=poll_interval,
            timeout=6 * 3600,
            deferrable=True,  # waits in the triggerer: no worker slot is held while the outbox is empty
        )
        leases = ChatterListLeasesOperator(task_id="list_leases", source=source)
        drains = ChatterDrainOperator.partial(
            task_id="drain",
            source=source,
            pool=source.pool or "default_pool",
            map_index_template=MAP_INDEX_TEMPLATE,
        ).expand(lease_id=leases.output)
        wait >> leases >> drains >> topic_events(source.name, "drain")
    # --8<-- [end:chatter_wait_dag]
    return dag


def build_broken_source_dag(broken: BrokenSource, path: str) -> DAG:
    """``chatter_drain_<name>`` for an entry that does not validate: no schedule, its description and its one task
    name the problems, so the DAG id stays visible with the reason while the other sources keep draining."""
    assert broken.dag_id is not None
    reason = f"{path}: {'; '.join(broken.problems)}"
    with DAG(
        dag_id=broken.dag_id,
        schedule=None,
        start_date=START_DATE,
        catchup=False,
        description=f"NOT DRAINING, invalid source config: {reason}"[:1000],
        doc_md=f"**This source is not drained**: its entry in the sources file is invalid.\n\n```\n{reason}\n```",
        tags=["chatter", "outbox", "invalid-config"],
    ) as dag:
        ChatterInvalidSourceOperator(task_id="invalid_source_config", path=path, problems=broken.problems, retries=0)
    return dag


def _loaded(default_dir: str | Path) -> LoadedSources:
    loaded = load_sources_isolated(sources_file(default_dir))
    for broken in loaded.broken:
        log.error("Sources file %s: entry %d is not loaded: %s", loaded.path, broken.index, "; ".join(broken.problems))
    return loaded


def drain_dags(default_dir: str | Path) -> dict[str, DAG]:
    """Every scheduled drain DAG of the sources file, by DAG id (for a DAG file's ``globals()``).

    A broken entry breaks only its own DAG: it becomes ``build_broken_source_dag``'s stand-in (when it has a usable
    name), and ``dags/chatter_sources_check.py`` reports it as an import error; the other sources are built as usual.
    A file that cannot be read or whose top level is wrong raises here, and no drain DAG is built.
    """
    loaded = _loaded(default_dir)
    dags = {s.dag_id: build_drain_dag(s) for s in (loaded.config.sources if loaded.config else [])}
    for broken in loaded.broken:
        if broken.dag_id is not None and broken.dag_id not in dags:
            dags[broken.dag_id] = build_broken_source_dag(broken, loaded.path)
    return dags


def check_sources(default_dir: str | Path) -> None:
    """Raise ``SourcesConfigError`` naming every broken entry (for ``dags/chatter_sources_check.py``).

    Airflow records an import error per DAG file and marks every DAG of a file with one stale, so a broken entry is
    reported by this DAG-less file, not by the file that builds the drains of the good ones.
    """
    loaded = _loaded(default_dir)
    if loaded.broken:
        raise loaded.error()


def backfill_dag(default_dir: str | Path) -> DAG:
    """The backfill DAG over the valid sources (a broken one is not offered)."""
    return build_backfill_dag(_loaded(default_dir).require_config())


def requeue_dag(default_dir: str | Path) -> DAG:
    """The requeue DAG over the valid sources (a broken one is not offered)."""
    return build_requeue_dag(_loaded(default_dir).require_config())


def build_pending_age_dag(config: SourcesFile, notifiers: Sequence[Any] | None = None) -> DAG | None:
    """``chatter_pending_age``: every ``PENDING_AGE_SCHEDULE``, one check per source with
    ``max_pending_age_seconds``, failing (no retries) while its oldest pending document is over the limit; the
    ``notifiers`` (default ``ChatterPendingAgeNotifier``) are its ``on_failure_callback``. None without such a source.
    """
    from airflow_chatter.airflow.notifiers import ChatterPendingAgeNotifier
    from airflow_chatter.airflow.operators.pending_age import ChatterPendingAgeCheckOperator

    watched = [s for s in config.sources if s.max_pending_age_seconds is not None]
    if not watched:
        return None
    alert = list(notifiers) if notifiers is not None else [ChatterPendingAgeNotifier()]
    with chatter_dag(
        PENDING_AGE_DAG_ID,
        "alerts",
        schedule=PENDING_AGE_SCHEDULE,
        doc_md="Fails a source's check while its oldest Pending Outbox Document is older than its "
        "`max_pending_age_seconds`; the failure notifies (docs/airflow.md).",
        default_args={"owner": "chatter", "retries": 0, "on_failure_callback": alert},
    ) as dag:
        for source in watched:
            ChatterPendingAgeCheckOperator(task_id=f"pending_age_{source.name}", source=source)
    return dag


def pending_age_dag(default_dir: str | Path, notifiers: Sequence[Any] | None = None) -> DAG | None:
    """The pending-age check DAG over the valid sources (for ``dags/chatter_pending_age.py``)."""
    return build_pending_age_dag(_loaded(default_dir).require_config(), notifiers)


def wait_and_drain_dags(default_dir: str | Path) -> dict[str, DAG]:
    config = _loaded(default_dir).config
    return {f"chatter_wait_{s.name}": build_wait_and_drain_dag(s) for s in (config.sources if config else [])}

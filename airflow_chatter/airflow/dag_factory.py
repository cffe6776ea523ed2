"""Build the drain DAGs from the sources config file: one scheduled drain DAG per source, one manual
backfill DAG for all of them. ``dags/chatter_drains.py`` and ``dags/chatter_backfill.py`` call this.

The file is ``$CHATTER_SOURCES_FILE``, or ``chatter_sources.yaml`` beside the DAG file. A bad file
raises ``SourcesConfigError`` while the DAG file is parsed, so the DAG processor reports an import
error naming the file, the source and the field, and no half-configured DAG is ever scheduled.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG, Param

from airflow_chatter.airflow.assets import drain_schedule
from airflow_chatter.airflow.config import SourceConfig, SourcesFile, load_sources
from airflow_chatter.airflow.local_env import SOURCES_FILE_ENV
from airflow_chatter.airflow.operators.drain import ChatterDrainOperator, ChatterListLeasesOperator

START_DATE = datetime(2026, 1, 1, tzinfo=UTC)
BACKFILL_DAG_ID = "chatter_backfill"
#: A drain task stops itself at ``max_seconds``; Airflow kills it only well after that.
EXECUTION_TIMEOUT_MARGIN = timedelta(minutes=5)
DEFAULT_ARGS = {"owner": "chatter", "retries": 2, "retry_delay": timedelta(seconds=30)}


def sources_file(default_dir: str | Path) -> Path:
    """The sources config path: ``$CHATTER_SOURCES_FILE`` or ``<default_dir>/chatter_sources.yaml``."""
    return Path(os.environ.get(SOURCES_FILE_ENV) or Path(default_dir) / "chatter_sources.yaml")


def build_drain_dag(source: SourceConfig) -> DAG:
    """``chatter_drain_<name>``: list leases → one bounded drain per lease, never two runs at once."""
    # [START chatter_drain_dag]
    with DAG(
        dag_id=source.dag_id,
        schedule=drain_schedule(source),  # cron, a preset, or the pending asset (schedule: on_pending)
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,  # a run's drains finish before the next run lists leases again
        default_args=DEFAULT_ARGS,
        tags=["chatter", "outbox", *source.tags],
        doc_md=(
            f"Drains the outbox of `{source.database}/{source.monitored_container}` to Kafka "
            f"(leases in `{source.lease_container}`, connections `{source.cosmos_conn_id}` / "
            f"`{source.kafka_conn_id}`). Each mapped `drain` task drains one lease for at most "
            f"{source.max_documents} documents or {source.max_seconds:g} s."
        ),
    ) as dag:
        leases = ChatterListLeasesOperator(task_id="list_leases", source=source)
        ChatterDrainOperator.partial(
            task_id="drain",
            source=source,
            pool=source.pool or "default_pool",  # cap the Cosmos RU the drains of all DAGs spend
            pool_slots=source.pool_slots,
            max_active_tis_per_dagrun=source.max_parallel_drains,
            execution_timeout=timedelta(seconds=source.max_seconds) + EXECUTION_TIMEOUT_MARGIN,
        ).expand(lease_id=leases.output)
    # [END chatter_drain_dag]
    return dag


def build_backfill_dag(config: SourcesFile) -> DAG:
    """``chatter_backfill``: a manual re-drain of one source with its own lease set.

    It lists (or resets) the source's backfill leases and drains each while holding the scheduled
    lease of the same range, so the scheduled checkpoints never move and the two never own a range
    together. Delivered documents are skipped, so it re-publishes only what is still pending.
    """
    names = [s.name for s in config.sources]
    # [START chatter_backfill_dag]
    with DAG(
        dag_id=BACKFILL_DAG_ID,
        schedule=None,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        default_args=DEFAULT_ARGS,
        tags=["chatter", "outbox", "backfill"],
        doc_md="Re-drain one source's outbox from the beginning or a point in time, with its own lease set.",
        params={
            "source": Param(names[0], type="string", enum=names, description="The source to re-drain."),
            "start": Param(
                "beginning",
                type="string",
                enum=["beginning", "point_in_time", "resume"],
                description="beginning: reset the backfill leases and read the whole change feed; "
                "point_in_time: the same, but the new backfill leases start reading the change feed at point_in_time; "
                "resume: continue the previous backfill from its checkpoints.",
            ),
            "point_in_time": Param(
                None,
                type=["null", "string"],
                format="date-time",
                description="UTC timestamp; required when start is point_in_time.",
            ),
            "feed_ranges": Param(
                [],
                type="array",
                items={"type": "string"},
                description="Only these feed range tokens or lease ids (empty: all).",
            ),
            "document_budget": Param(
                10000, type="integer", minimum=1, maximum=1_000_000, description="Documents per lease, at most."
            ),
            "dry_run": Param(
                False, type="boolean", description="Count pending documents and list ranges; drain nothing."
            ),
        },
    ) as dag:
        # The point in time goes to the leases the list task creates (their start_from), not to the drains as a
        # _ts filter: older changes are not read at all, and "resume" keeps it because the leases do.
        since = (
            "{{ (params.point_in_time or 'missing: point_in_time is required when start is point_in_time') "
            "if params.start == 'point_in_time' else 'beginning' }}"
        )
        leases = ChatterListLeasesOperator(
            task_id="list_backfill_leases",
            source_name="{{ params.source }}",
            sources=config,
            lease_set="backfill",
            reset="{{ params.start != 'resume' }}",
            feed_ranges="{{ params.feed_ranges | tojson }}",
            plan_only="{{ params.dry_run }}",
            since=since,
        )
        ChatterDrainOperator.partial(
            task_id="backfill_drain",
            source_name="{{ params.source }}",
            sources=config,
            lease_set="backfill",
            exclusive_with_scheduled=True,
            max_documents="{{ params.document_budget }}",
            pool=config.backfill_pool or "default_pool",
            retries=5,  # a range the scheduled drain holds right now is retried, not skipped
            retry_delay=timedelta(minutes=1),
        ).expand(lease_id=leases.output)
    # [END chatter_backfill_dag]
    return dag


def build_wait_and_drain_dag(source: SourceConfig, *, poll_interval: float = 60.0) -> DAG:
    """``chatter_wait_<name>``: an unscheduled DAG that waits (deferred, in the triggerer) for pending
    outbox documents, then drains every lease once. Trigger it, or give it a schedule, when documents
    arrive rarely and an idle drain every few minutes would be wasted."""
    from airflow_chatter.airflow.sensors.pending import ChatterPendingOutboxSensor

    # [START chatter_wait_dag]
    with DAG(
        dag_id=f"chatter_wait_{source.name}",
        schedule=None,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        default_args=DEFAULT_ARGS,
        tags=["chatter", "outbox", "example"],
    ) as dag:
        wait = ChatterPendingOutboxSensor(
            task_id="wait_for_pending",
            source=source,
            poll_interval=poll_interval,
            timeout=6 * 3600,
            deferrable=True,  # waits in the triggerer: no worker slot is held while the outbox is empty
        )
        leases = ChatterListLeasesOperator(task_id="list_leases", source=source)
        drains = ChatterDrainOperator.partial(
            task_id="drain", source=source, pool=source.pool or "default_pool"
        ).expand(lease_id=leases.output)
        wait >> leases >> drains
    # [END chatter_wait_dag]
    return dag


def drain_dags(default_dir: str | Path) -> dict[str, DAG]:
    """Every scheduled drain DAG of the sources file, by DAG id (for a DAG file's ``globals()``)."""
    config = load_sources(sources_file(default_dir))
    return {source.dag_id: build_drain_dag(source) for source in config.sources}


def backfill_dag(default_dir: str | Path) -> DAG:
    return build_backfill_dag(load_sources(sources_file(default_dir)))


def wait_and_drain_dags(default_dir: str | Path) -> dict[str, DAG]:
    config = load_sources(sources_file(default_dir))
    return {f"chatter_wait_{s.name}": build_wait_and_drain_dag(s) for s in config.sources}

"""The pending-age check: one task per source with ``max_pending_age_seconds``, in the ``chatter_pending_age`` DAG.

It measures how long the source's oldest Pending Outbox Document has waited (the core's rule, the one the page and
the dashboard tile show), sets the OpenTelemetry gauge, and **fails** when the age is over the limit, so Airflow's
own alerting carries it: the DAG's ``on_failure_callback`` notifiers (``notifiers.py``; Slack, SMTP, ... in a
deployment), the failed task instance in the UI. The next run that finds the source within the limit succeeds: the
alert clears. An unknown age (pending documents beyond what the estimate reads) passes and says so; an unreachable
Cosmos DB fails the task with its error (a check that cannot measure must be seen). Why not a Deadline Alert:
docs/decisions.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_chatter.airflow.operators.base import ChatterSourceBaseOperator, task_scope
from airflow_chatter.errors import ChatterError

if TYPE_CHECKING:
    from airflow.sdk import Context


class PendingAgeExceededError(ChatterError):
    """The oldest Pending Outbox Document of a source has waited longer than its ``max_pending_age_seconds``."""


class ChatterPendingAgeCheckOperator(ChatterSourceBaseOperator):
    """Measure the source's oldest pending age; fail (``PendingAgeExceededError``) when it is over the source's
    ``max_pending_age_seconds``. Returns ``{source, oldest_pending_age_seconds, max_pending_age_seconds, verdict}``.

    :param source: the source config (a ``SourceConfig`` or its dict form); its ``max_pending_age_seconds`` is the
        limit (a source without one is only measured).
    """

    ui_color = "#fde2e2"

    @task_scope
    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_chatter.operations.monitoring import measure_pending_age, monitor_store
        from airflow_chatter.operations.pending_age import record_pending_age

        config = self.config
        monitored, leases = self.containers()
        store = monitor_store(config.to_options(), monitored, leases)
        age = measure_pending_age(store, monitored, config.max_pending_age_seconds)
        record_pending_age(config.name, age)
        result = {
            "source": config.name,
            "oldest_pending_age_seconds": age.seconds,
            "max_pending_age_seconds": age.limit_seconds,
            "verdict": age.verdict,
        }
        if age.verdict == "over":
            raise PendingAgeExceededError(f"source {config.name}: {age.message}")
        self.log.info("source %s: %s (%s)", config.name, age.message, age.verdict)
        return result

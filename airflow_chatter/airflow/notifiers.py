"""The pending-age check's default notifier: an ERROR log line naming the source and the age.

A deployment gives its own notifiers (``SlackNotifier``, ``SmtpNotifier``, any ``BaseNotifier``) to
``pending_age_dag(..., notifiers=[...])`` in its DAG file; this one is the default so an alert is never silent.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import BaseNotifier

log = logging.getLogger("airflow_chatter.alerts")


class ChatterPendingAgeNotifier(BaseNotifier):
    """Log the failed check's error (the source, its oldest pending age and the limit) at ERROR."""

    template_fields = ()

    def notify(self, context: Any) -> None:
        ti = context.get("ti") or context.get("task_instance")
        error = context.get("exception")
        task = getattr(ti, "task_id", "?")
        log.error("Pending-age alert (%s): %s", task, error if error is not None else "the check failed")

"""Airflow DAG file: ``chatter_pending_age``, the pending-age check of the sources with ``max_pending_age_seconds``
(none: no DAG). Pass your notifiers (``SlackNotifier``, ``SmtpNotifier``, ...) as ``notifiers=[...]``; the default
logs the alert at ERROR. See docs/airflow.md."""

from pathlib import Path

from airflow_chatter.airflow.dags.factory import pending_age_dag

dag = pending_age_dag(Path(__file__).parent)

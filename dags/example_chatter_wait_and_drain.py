"""Airflow DAG file (example): wait for pending outbox documents with the deferrable sensor, then drain.

One ``chatter_wait_<source>`` DAG per source, unscheduled. See docs/airflow.md.
"""

from pathlib import Path

from airflow_chatter.airflow.dags.factory import wait_and_drain_dags

globals().update(wait_and_drain_dags(Path(__file__).parent))

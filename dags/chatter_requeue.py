"""Airflow DAG file: the manual ``chatter_requeue`` DAG (undeliverable back to pending). See docs/airflow.md."""

from pathlib import Path

from airflow_chatter.airflow.dags.factory import requeue_dag

dag = requeue_dag(Path(__file__).parent)

"""Airflow DAG file: the manual ``chatter_backfill`` DAG (trigger it with the form). See docs/airflow.md."""

from pathlib import Path

from airflow_chatter.airflow.dags.factory import backfill_dag

dag = backfill_dag(Path(__file__).parent)

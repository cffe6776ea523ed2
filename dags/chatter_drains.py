"""Airflow DAG file: one scheduled outbox drain DAG per source in chatter_sources.yaml.

Set ``CHATTER_SOURCES_FILE`` to read another file. See docs/airflow.md.
"""

from pathlib import Path

from airflow_chatter.airflow.dags.factory import drain_dags

globals().update(drain_dags(Path(__file__).parent))

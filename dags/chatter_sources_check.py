"""Airflow DAG file with no DAG: reports each broken entry of the sources file as an import error of this file.

Airflow keeps one import error per DAG file and marks every DAG of a file that has one stale, so the drains of the
good sources (``chatter_drains.py``) must not be the file that reports a bad entry. See docs/config.md.
"""

from pathlib import Path

from airflow_chatter.airflow.dags.factory import check_sources

check_sources(Path(__file__).parent)

"""The in-process Airflow harness (tests/fixtures/airflow.py) points Airflow at a throw-away home."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def test_airflow_home_is_the_throwaway_dir(airflow_home: Path) -> None:
    from airflow.configuration import conf

    assert os.environ["AIRFLOW_HOME"] == str(airflow_home), "settings must be set before import airflow"
    assert conf.get("database", "sql_alchemy_conn").startswith(f"sqlite:///{airflow_home}"), (
        "a test must never touch ~/airflow or a real metadata DB"
    )


@pytest.mark.airflow
def test_metadata_db_is_migrated(airflow_db: Path) -> None:
    from airflow.models.pool import Pool
    from airflow.utils.session import create_session

    with create_session() as session:
        assert session.query(Pool).filter(Pool.pool == "default_pool").count() == 1, (
            "initdb creates the default pool, so the schema exists"
        )

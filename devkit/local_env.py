"""Settings for an in-process Airflow (tests, the demo): a throw-away AIRFLOW_HOME with SQLite.

Airflow reads its configuration once, at the first ``import airflow``, so these variables must be in
``os.environ`` before that import. This module therefore imports nothing from Airflow.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

#: The name of the DAG bundle that holds the repository's ``dags/`` folder.
BUNDLE_NAME = "chatter-dags"


def local_airflow_env(home: Path, *, dags_folder: Path) -> dict[str, str]:
    """Return the environment for a local, single-process Airflow rooted at ``home``."""
    home = home.resolve()
    dags_folder = dags_folder.resolve()
    bundles = [
        {
            "name": BUNDLE_NAME,
            "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
            "kwargs": {"path": str(dags_folder)},
        }
    ]
    return {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(home / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__DATABASE__LOAD_DEFAULT_CONNECTIONS": "False",
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
        "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps(bundles),
        # Keep the in-process API server and every task on loopback.
        "AIRFLOW__API__HOST": "127.0.0.1",
    }


def apply_local_airflow_env(env: Mapping[str, str], *, strict: bool = True) -> None:
    """Put ``env`` into ``os.environ``; refuse (``strict``) if Airflow was already imported."""
    if strict and "airflow" in sys.modules:
        raise RuntimeError(
            "airflow was imported before the local Airflow settings were applied; "
            "its configuration (AIRFLOW_HOME, database) is already fixed. "
            "Apply devkit.local_env first."
        )
    for key, value in env.items():
        os.environ[key] = value
    Path(env["AIRFLOW_HOME"]).mkdir(parents=True, exist_ok=True)

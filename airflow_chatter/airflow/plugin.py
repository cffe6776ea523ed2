"""The Airflow UI plugin (entry point ``airflow.plugins``). Imported in every Airflow process: keep it light."""

from __future__ import annotations

from airflow.sdk.plugins_manager import AirflowPlugin

from airflow_chatter.airflow.conf_guard import ChatterConfGuard


class ChatterPlugin(AirflowPlugin):
    name = "chatter"
    # Runs in the api-server: refuses a chatter manual DAG run with conf keys the DAG has no param for (400).
    fastapi_root_middlewares = [  # noqa: RUF012 - AirflowPlugin declares these as class attributes
        {"middleware": ChatterConfGuard, "args": [], "kwargs": {}, "name": "chatter-conf-guard"},
    ]

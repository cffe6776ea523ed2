"""The Airflow UI plugin (entry point ``airflow.plugins``). Imported in every Airflow process: keep it light."""

from __future__ import annotations

from airflow.sdk.plugins_manager import AirflowPlugin


class ChatterPlugin(AirflowPlugin):
    name = "chatter"

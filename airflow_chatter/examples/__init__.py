"""Handlers the example DAGs in ``dags/`` name by dotted path (importable wherever Airflow runs a task)."""

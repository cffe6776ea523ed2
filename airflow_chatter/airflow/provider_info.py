"""Provider info for Airflow's ProvidersManager (entry point ``apache_airflow_provider``).

Plain data: Airflow reads it without importing the hooks, so it must stay import-light.
"""

from __future__ import annotations

from typing import Any


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "airflow-chatter",
        "name": "Chatter (transactional outbox on Cosmos DB to Kafka)",
        "description": "Drain Cosmos DB outbox documents to Kafka; inbox and idempotency stores.",
        "versions": ["0.1.0"],
    }

"""The azure-cosmos adapter: the container port over a real account or the emulator."""

from airflow_chatter.adapters.cosmos.container import (
    CosmosDocumentContainer,
    create_container,
    ensure_database,
    make_cosmos_client,
    translate_error,
    translated_errors,
)

__all__ = [
    "CosmosDocumentContainer",
    "create_container",
    "ensure_database",
    "make_cosmos_client",
    "translate_error",
    "translated_errors",
]

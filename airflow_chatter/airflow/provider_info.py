"""Provider info for Airflow's ProvidersManager (entry point ``apache_airflow_provider``).

Plain data: Airflow reads it without importing the hooks, so it must stay import-light. The two
connection forms are declared here (``conn-fields`` as JSON Schema, ``ui-field-behaviour`` in
kebab-case), not through the hook methods deprecated in Airflow 3.2.
"""

from __future__ import annotations

from typing import Any

_NULLABLE_STRING: dict[str, Any] = {"type": ["string", "null"]}

COSMOS_CONNECTION_TYPE: dict[str, Any] = {
    "connection-type": "chatter_cosmos",
    "hook-class-name": "airflow_chatter.airflow.hooks.cosmos.ChatterCosmosHook",
    "hook-name": "Chatter Cosmos DB",
    "ui-field-behaviour": {
        # Copied from the azure provider's azure_cosmos block: a subclass with its own conn type
        # inherits no form.
        "hidden-fields": ["schema", "port", "host", "extra"],
        "relabeling": {"login": "Cosmos Endpoint URI", "password": "Cosmos Account Key"},
        "placeholders": {
            "login": "https://<account>.documents.azure.com:443/",
            "password": "account key; leave empty for Entra ID (DefaultAzureCredential)",
            "database_name": "orders",
            "resource_group_name": "only to fetch the account key through the management plane",
            "ca_cert_path": "/path/to/emulator-cert.pem",
        },
    },
    "conn-fields": {
        "database_name": {
            "label": "Database",
            "description": "Default database for the containers this connection serves.",
            "schema": _NULLABLE_STRING,
        },
        "connection_verify": {
            "label": "Verify TLS certificate",
            "description": "Turn off only for a local emulator with a self-signed certificate.",
            "schema": {"type": ["boolean", "null"], "default": True},
        },
        "ca_cert_path": {
            "label": "CA certificate path",
            "description": "PEM file to verify the endpoint against (a local emulator's certificate).",
            "schema": _NULLABLE_STRING,
        },
        "connection_timeout": {
            "label": "Connection timeout (s)",
            "schema": {"type": ["integer", "null"], "minimum": 1, "default": 10},
        },
        "subscription_id": {"label": "Subscription ID (optional)", "schema": _NULLABLE_STRING},
        "resource_group_name": {"label": "Resource Group Name (optional)", "schema": _NULLABLE_STRING},
        "managed_identity_client_id": {"label": "Managed Identity Client ID", "schema": _NULLABLE_STRING},
        "workload_identity_tenant_id": {"label": "Workload Identity Tenant ID", "schema": _NULLABLE_STRING},
    },
}

KAFKA_CONNECTION_TYPE: dict[str, Any] = {
    "connection-type": "chatter_kafka",
    "hook-class-name": "airflow_chatter.airflow.hooks.kafka.ChatterKafkaHook",
    "hook-name": "Chatter Kafka (kafka-python)",
    "ui-field-behaviour": {
        "hidden-fields": ["schema", "port", "host", "extra"],
        "relabeling": {"login": "SASL Username", "password": "SASL Password"},
        "placeholders": {
            "login": "only for SASL_PLAINTEXT / SASL_SSL",
            "password": "only for SASL_PLAINTEXT / SASL_SSL",
            "bootstrap_servers": "broker1:9092,broker2:9092",
            "ssl_cafile": "/path/to/ca.pem",
            "api_version": "2.8",
        },
    },
    "conn-fields": {
        "bootstrap_servers": {
            "label": "Bootstrap servers",
            "description": "Comma-separated host:port list.",
            "schema": {"type": "string", "minLength": 1},
        },
        "security_protocol": {
            "label": "Security protocol",
            "schema": {
                "type": "string",
                "enum": ["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"],
                "default": "PLAINTEXT",
            },
        },
        "sasl_mechanism": {
            "label": "SASL mechanism",
            "schema": {
                "type": ["string", "null"],
                "enum": ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", None],
                "default": None,
            },
        },
        "ssl_cafile": {"label": "SSL CA file", "schema": _NULLABLE_STRING},
        "ssl_check_hostname": {
            "label": "Check the broker's TLS hostname",
            "schema": {"type": ["boolean", "null"], "default": True},
        },
        "api_version": {
            "label": "Broker API version",
            "description": "Pinned so the client never blocks probing the broker (e.g. 2.8). At least 2.1.",
            "schema": {"type": ["string", "null"], "pattern": "^[0-9]+(\\.[0-9]+){1,2}$", "default": "2.8"},
        },
        "request_timeout_ms": {
            "label": "Request timeout (ms)",
            "schema": {"type": ["integer", "null"], "minimum": 1000, "default": 30000},
        },
        "client_id": {"label": "Client id", "schema": {"type": ["string", "null"], "default": "airflow-chatter"}},
    },
}


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "airflow-chatter",
        "name": "Chatter (transactional outbox on Cosmos DB to Kafka)",
        "description": "Drain Cosmos DB outbox documents to Kafka; inbox and idempotency stores.",
        "versions": ["0.1.0"],
        "integrations": [
            {"integration-name": "Chatter", "tags": ["azure", "kafka"]},
        ],
        "hooks": [
            {
                "integration-name": "Chatter",
                "python-modules": [
                    "airflow_chatter.airflow.hooks.cosmos",
                    "airflow_chatter.airflow.hooks.kafka",
                ],
            }
        ],
        "operators": [{"integration-name": "Chatter", "python-modules": ["airflow_chatter.airflow.operators.drain"]}],
        "sensors": [{"integration-name": "Chatter", "python-modules": ["airflow_chatter.airflow.sensors.pending"]}],
        "triggers": [{"integration-name": "Chatter", "python-modules": ["airflow_chatter.airflow.triggers.pending"]}],
        "connection-types": [COSMOS_CONNECTION_TYPE, KAFKA_CONNECTION_TYPE],
        # NOTE: no "plugins" key; the plugin is registered once, through the ``airflow.plugins``
        # entry point (both would register it twice).
    }

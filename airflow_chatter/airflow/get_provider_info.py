"""Provider info for Airflow's ProvidersManager (entry point ``apache_airflow_provider``).

Plain data: Airflow reads it without importing the hooks, so it must stay import-light (each connection form comes
from its settings model, ``CosmosConnectionSettings`` and ``KafkaSettings``, which import no Airflow: a bound or a
default lives in one place). The connection forms are
declared here (``conn-fields`` as JSON Schema, ``ui-field-behaviour`` in kebab-case), not through the hook methods
deprecated in Airflow 3.2. Type names have no ``_`` (RFC 3986 schemes: Airflow warns for each URI of such a
type).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import BaseModel

from airflow_chatter.adapters.kafka.settings import KAFKA_DEFAULTS, KafkaSettings
from airflow_chatter.airflow.hooks.cosmos_settings import CosmosConnectionSettings


@cache
def _properties(model: type[BaseModel]) -> dict[str, Any]:
    return dict(model.model_json_schema()["properties"])


def _schema(model: type[BaseModel], name: str) -> dict[str, Any]:
    """The form schema of a settings model's field, from the model's own JSON Schema (its type, enum, default and
    bounds). A cleared field means the default, so every field but a choice also takes ``null``."""
    field = _properties(model)[name]
    variants = field.get("anyOf", [field])
    (kind,) = [variant["type"] for variant in variants if variant.get("type") != "null"]
    schema: dict[str, Any] = {"type": kind if "enum" in field else [kind, "null"]}
    # pydantic writes a bound under a validator as its own ``ge`` / ``gt`` key, JSON Schema's names otherwise.
    bounds = (("enum", "enum"), ("ge", "minimum"), ("gt", "exclusiveMinimum"), ("minimum", "minimum"))
    for variant in variants:
        for key, form_key in (*bounds, ("exclusiveMinimum", "exclusiveMinimum")):
            if key in variant:
                schema[form_key] = variant[key]
    if field.get("default") is not None:
        schema["default"] = field["default"]
    return schema


def _kafka_schema(name: str) -> dict[str, Any]:
    return _schema(KafkaSettings, name)


def _form_fields(model: type[BaseModel]) -> dict[str, Any]:
    """Every field of a settings model as a form field: its title the label, its description, its schema."""
    fields: dict[str, Any] = {}
    for name in model.model_fields:
        field = _properties(model)[name]
        described = {"description": field["description"]} if "description" in field else {}
        fields[name] = {"label": field["title"], **described, "schema": _schema(model, name)}
    return fields


_COSMOS_FORM: dict[str, Any] = {
    # The endpoint is the host: Airflow's Test Connection reuses the stored key only for the stored host.
    # (A subclass with its own conn type inherits no form from the azure provider, so it is declared here.)
    "hidden-fields": ["schema", "port", "login", "extra"],
    "relabeling": {"host": "Cosmos Endpoint URI", "password": "Cosmos Account Key"},
    "placeholders": {
        "host": "https://<account>.documents.azure.com:443/",
        "password": "account key; leave empty for Entra ID (DefaultAzureCredential)",
        "database_name": "orders",
        "resource_group_name": "only to fetch the account key through the management plane",
        "ca_cert_path": "/path/to/emulator-cert.pem",
    },
}

COSMOS_CONNECTION_TYPE: dict[str, Any] = {
    "connection-type": "chattercosmos",
    "hook-class-name": "airflow_chatter.airflow.hooks.cosmos.ChatterCosmosHook",
    "hook-name": "Chatter Cosmos DB",
    "ui-field-behaviour": _COSMOS_FORM,
    "conn-fields": _form_fields(CosmosConnectionSettings),
}


_KAFKA_CONN_FIELDS: dict[str, Any] = {
    "security_protocol": {"label": "Security protocol", "schema": _kafka_schema("security_protocol")},
    "sasl_mechanism": {
        "label": "SASL mechanism",
        "description": "Used with SASL_PLAINTEXT / SASL_SSL only.",
        "schema": _kafka_schema("sasl_mechanism"),
    },
    "ssl_cafile": {"label": "SSL CA file", "schema": _kafka_schema("ssl_cafile")},
    "ssl_check_hostname": {"label": "Check the broker's TLS hostname", "schema": _kafka_schema("ssl_check_hostname")},
    "api_version": {
        # The model holds a tuple of ints; the form takes the dotted string the hook parses into it.
        "label": "Broker API version",
        "description": "Pinned so the client never blocks probing the broker (e.g. 2.8). At least 2.1.",
        "schema": {
            "type": ["string", "null"],
            "pattern": "^[0-9]+(\\.[0-9]+){1,2}$",
            "default": ".".join(str(part) for part in KAFKA_DEFAULTS["api_version"]),
        },
    },
    "request_timeout_ms": {"label": "Request timeout (ms)", "schema": _kafka_schema("request_timeout_ms")},
    "client_id": {"label": "Client id", "schema": _kafka_schema("client_id")},
}

_KAFKA_FORM: dict[str, Any] = {
    # The bootstrap servers are the host: Airflow's Test Connection reuses the stored password only for it.
    "hidden-fields": ["schema", "port", "extra"],
    "relabeling": {"host": "Bootstrap servers", "login": "SASL Username", "password": "SASL Password"},
    "placeholders": {
        "host": "broker1:9092,broker2:9092",
        "login": "only for SASL_PLAINTEXT / SASL_SSL",
        "password": "only for SASL_PLAINTEXT / SASL_SSL",
        "ssl_cafile": "/path/to/ca.pem",
        "api_version": "2.8",
    },
}

KAFKA_CONNECTION_TYPE: dict[str, Any] = {
    "connection-type": "chatterkafka",
    "hook-class-name": "airflow_chatter.airflow.hooks.kafka.ChatterKafkaHook",
    "hook-name": "Chatter Kafka (kafka-python)",
    "ui-field-behaviour": _KAFKA_FORM,
    "conn-fields": _KAFKA_CONN_FIELDS,
}


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "airflow-chatter",
        "name": "Chatter (transactional outbox on Cosmos DB to Kafka)",
        "description": "Drain Cosmos DB outbox documents to Kafka at least once, and consume the topics back.",
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
                    "airflow_chatter.airflow.hooks.inbox",
                    "airflow_chatter.airflow.hooks.idempotent_http",
                ],
            }
        ],
        "operators": [
            {
                "integration-name": "Chatter",
                "python-modules": [
                    "airflow_chatter.airflow.operators.topic_events",
                    "airflow_chatter.airflow.operators.list_leases",
                    "airflow_chatter.airflow.operators.drain",
                    "airflow_chatter.airflow.operators.requeue",
                    "airflow_chatter.airflow.operators.receive",
                    "airflow_chatter.airflow.operators.pending_age",
                ],
            }
        ],
        "sensors": [{"integration-name": "Chatter", "python-modules": ["airflow_chatter.airflow.sensors.pending"]}],
        "triggers": [
            {
                "integration-name": "Chatter",
                "python-modules": [
                    "airflow_chatter.airflow.triggers.pending",
                    "airflow_chatter.airflow.triggers.pending_event",
                    "airflow_chatter.airflow.triggers.topic_backlog",
                ],
            }
        ],
        "connection-types": [COSMOS_CONNECTION_TYPE, KAFKA_CONNECTION_TYPE],
        # NOTE: no "plugins" key; the plugin is registered once, through the ``airflow.plugins``
        # entry point (both would register it twice).
    }

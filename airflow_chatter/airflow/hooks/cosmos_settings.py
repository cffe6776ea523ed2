"""``CosmosConnectionSettings``: the Cosmos connection's extras, validated once, and the form that edits them.

One pydantic model declares every extra of the ``chattercosmos`` connection type: its type, bound, default, label and
description. ``ChatterCosmosHook`` reads the extras through it (a bad value is refused naming the connection and the
extra), and ``get_provider_info`` generates the connection form's ``conn-fields`` from its JSON Schema, so a bound or a
default lives in one place, as ``KafkaSettings`` does for the Kafka connection.

A cleared form field (``None``, ``""``, ``"None"``) means the default. An extra may also be stored in Airflow's older
``extra__chattercosmos__<name>`` form. Extras the model does not declare are ignored, as the azure provider does.

This module imports neither Airflow nor the Azure SDK: Airflow reads the provider info in every process.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from airflow_chatter.airflow.utils.values import is_unset
from airflow_chatter.errors import ConfigurationError

if TYPE_CHECKING:
    from airflow_chatter.ports.throttle import ThrottleLimits

CONN_TYPE = "chattercosmos"
#: How Airflow's older connection forms stored an extra: ``extra__<conn type>__<name>``.
LEGACY_PREFIX = f"extra__{CONN_TYPE}__"


class CosmosConnectionSettings(BaseModel):
    """The extras of a ``chattercosmos`` connection. Frozen; validated on construction, once."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    database_name: str | None = Field(
        None, title="Database", description="Default database for the containers this connection serves."
    )
    connection_verify: bool = Field(
        True,
        title="Verify TLS certificate",
        description=(
            "Keep on. For a local emulator (127.0.0.1 / localhost) also give its CA certificate path: azure-cosmos "
            "does not verify loopback endpoints without one, so the hook refuses to connect unverified unawares."
        ),
    )
    ca_cert_path: str | None = Field(
        None,
        title="CA certificate path",
        description="PEM file to verify the endpoint against (a local emulator's certificate).",
    )
    connection_timeout: int = Field(
        10, ge=1, title="Connection timeout (s)", description="Seconds the client waits to connect to the account."
    )
    max_throttle_retries: int | None = Field(
        None,
        ge=0,
        title="429 retries per request",
        description=(
            "A throttled (429) Cosmos request is retried after the server's retry-after at most this many times "
            "while the container serves nothing else. Unset: a drain counts no retries (its bound is the 429 wait), "
            "any other caller 9 per request. A source's own max_throttle_retries wins."
        ),
    )
    max_throttle_wait_seconds: float | None = Field(
        None,
        ge=0,
        allow_inf_nan=False,
        title="429 wait per drain (s)",
        description=(
            "Wall-clock seconds a drain may wait out 429s while the container serves none of its requests "
            "(default 30; overlapping waits count once); past it the drain stops at a page boundary, nothing "
            "lost. A source's own max_throttle_wait_seconds wins."
        ),
    )
    request_priority: Literal["low", "high"] | None = Field(
        None,
        title="Relay request priority",
        description=(
            "Cosmos priority-based execution of the drain's requests (feed reads, stamps, lease writes): low "
            "(default) lets the services' own writes go first when the container is busy. A source's own "
            "request_priority wins."
        ),
    )
    subscription_id: str | None = Field(None, title="Subscription ID (optional)")
    resource_group_name: str | None = Field(None, title="Resource Group Name (optional)")
    managed_identity_client_id: str | None = Field(None, title="Managed Identity Client ID")
    workload_identity_tenant_id: str | None = Field(None, title="Workload Identity Tenant ID")

    @classmethod
    def from_extras(cls, extras: Mapping[str, Any]) -> CosmosConnectionSettings:
        """The settings of a connection's extras; ``ConfigurationError`` naming ``extra <name>`` and the value."""
        values: dict[str, Any] = {}
        for name in cls.model_fields:
            value = extras.get(name)
            if is_unset(value):
                value = extras.get(LEGACY_PREFIX + name)
            if not is_unset(value):
                values[name] = value.strip() if isinstance(value, str) else value
        refused: ConfigurationError | None = None
        try:
            return cls(**values)
        except ValidationError as error:
            first = error.errors()[0]
            name = str(first["loc"][0])
            refused = ConfigurationError(f"extra {name}", values.get(name), f"is refused: {first['msg']}")
        raise refused  # outside the except block: not even __context__ keeps pydantic's error

    def throttle_limits(self) -> ThrottleLimits:
        """The connection's 429 limits (F-11); what it leaves unset is the default (30 s; no retry count, ``None``)."""
        from airflow_chatter.ports.throttle import ThrottleLimits

        return ThrottleLimits().overridden(self.max_throttle_retries, self.max_throttle_wait_seconds)

"""``KafkaSettings``: how to reach Kafka and how long to wait, validated once, used by every client.

One pydantic model serves the Airflow hook (which only maps connection fields onto it), the publisher and the
consumer, so a value is checked in one place and a default lives in one table (``KAFKA_DEFAULTS``, also read by the
connection form in ``airflow_chatter.airflow.get_provider_info``). Why it refuses what it refuses:

* ``acks`` and ``enable_idempotence`` exist only so that asking for anything weaker than ``"all"`` / ``True`` is
  refused loudly: kafka-python silently *disables* idempotence when another setting conflicts with it (``acks``
  other than all, ``retries=0``, more than 5 requests in flight).
* ``api_version`` is pinned by default (an unpinned kafka-python client blocks its constructor up to 30 s probing the
  broker) and must be at least 2.1 (Kafka 4 removed older protocols, KIP-896).
* A SASL user or password with a protocol that does not use SASL is a mistake that would send them nowhere: refused.
  ``sasl_mechanism`` has a default (``PLAIN``, like a form's pre-selected choice) and is ignored without SASL unless
  it names another mechanism, which would again be a mistake.

Every refusal is a ``KafkaSettingsError`` (a ``ValueError``) whose message starts with the setting's name and whose
``field`` attribute names it, so the hook can say where in the connection it lives. The SASL password is a
``SecretStr``: it shows as ``'***'`` in ``repr`` and never appears in an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from airflow_chatter.adapters.kafka.transport import deliver_bytes_before_close

__all__ = [
    "KAFKA_DEFAULTS",
    "MIN_API_VERSION",
    "SASL_MECHANISMS",
    "SECURITY_PROTOCOLS",
    "KafkaSettings",
    "KafkaSettingsError",
]

#: Lowest ``api_version`` a Kafka 4.x broker still speaks to (KIP-896 removed older protocols).
MIN_API_VERSION: tuple[int, ...] = (2, 1)
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
COMPRESSION_TYPES = (None, "gzip", "snappy", "lz4", "zstd")

#: The one table of defaults. ``request_timeout_ms`` is Kafka's own default (30 s), what connections always got.
#: ``batch_size`` is not Kafka's 16 KiB: a drain sends a page of up to 1,000 records and then flushes, and with
#: kafka-python every batch costs a wake-up of its sender thread and a share of a request in Python; 128 KiB raised
#: the drain from ~4,900 to ~7,000-8,800 msg/s (benchmarks/drain_throughput.py), 512 KiB (a page of 1 KB records is
#: then one batch per partition, and the append loop stops meeting the sender thread mid-page) another ~10 % against
#: the emulator and the no-work stub (docs/benchmarks.md, "Drain against Kafka and memory"). Under a broker's usual 1 MB
#: ``message.max.bytes``; kafka-python splits a batch a broker refuses as too large. A cap, not an allocation.
KAFKA_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {
        "client_id": "airflow-chatter",
        "security_protocol": "PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "ssl_check_hostname": True,
        "api_version": (2, 8),  # "2.8", not (2, 8, 0): kafka-python warns about the three-part form
        "max_block_ms": 10_000,
        "request_timeout_ms": 30_000,
        "delivery_timeout_ms": 60_000,
        "linger_ms": 5,
        "max_in_flight": 5,
        "batch_size": 524_288,
        "max_request_size": 1_048_576,
        "compression_type": None,
        "retry_backoff_ms": 100,
    }
)

#: kafka-python's spellings of our settings (connection extras may use either).
_ALIASES = {
    "max_in_flight_requests_per_connection": "max_in_flight",
    "sasl_plain_username": "sasl_username",
    "sasl_plain_password": "sasl_password",
}


class KafkaSettingsError(ValueError):
    """A Kafka setting has a value that is refused; the message starts with the setting, ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _not_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("must be an integer, not a boolean")
    return value


_PositiveInt = Annotated[int, BeforeValidator(_not_bool), Field(gt=0)]
_NonNegativeInt = Annotated[int, BeforeValidator(_not_bool), Field(ge=0)]


def _upper(value: Any) -> Any:
    return value.strip().upper() if isinstance(value, str) else value


def _mechanism(value: Any) -> Any:
    """No mechanism (a cleared form field) means the default one."""
    return KAFKA_DEFAULTS["sasl_mechanism"] if value is None or value == "" else _upper(value)


class KafkaSettings(BaseModel):
    """How to reach Kafka and how long to wait. Frozen; validated on construction, once."""

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    bootstrap_servers: tuple[str, ...]
    client_id: str = Field(KAFKA_DEFAULTS["client_id"], min_length=1)
    security_protocol: Annotated[Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"], BeforeValidator(_upper)] = (
        KAFKA_DEFAULTS["security_protocol"]
    )
    sasl_mechanism: Annotated[Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"], BeforeValidator(_mechanism)] = (
        KAFKA_DEFAULTS["sasl_mechanism"]
    )
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: str | None = None
    ssl_check_hostname: bool = KAFKA_DEFAULTS["ssl_check_hostname"]
    #: Pinned so no client constructor does I/O. ``None`` probes the broker (blocking).
    api_version: tuple[int, ...] | None = KAFKA_DEFAULTS["api_version"]
    #: Longest a send waits for topic metadata (broker unreachable: the bound of a batch).
    max_block_ms: _PositiveInt = KAFKA_DEFAULTS["max_block_ms"]
    request_timeout_ms: _PositiveInt = KAFKA_DEFAULTS["request_timeout_ms"]
    #: Upper bound for one record from send to acknowledgement or error, retries included.
    delivery_timeout_ms: _PositiveInt = KAFKA_DEFAULTS["delivery_timeout_ms"]
    linger_ms: _NonNegativeInt = KAFKA_DEFAULTS["linger_ms"]
    max_in_flight: int = KAFKA_DEFAULTS["max_in_flight"]
    #: Upper bound of one record batch per partition (bytes); see ``KAFKA_DEFAULTS``.
    batch_size: _PositiveInt = KAFKA_DEFAULTS["batch_size"]
    max_request_size: _PositiveInt = KAFKA_DEFAULTS["max_request_size"]
    compression_type: Literal["gzip", "snappy", "lz4", "zstd"] | None = KAFKA_DEFAULTS["compression_type"]
    retry_backoff_ms: _NonNegativeInt = KAFKA_DEFAULTS["retry_backoff_ms"]
    acks: Literal["all"] = "all"
    enable_idempotence: Literal[True] = True

    def __init__(self, **values: Any) -> None:
        refused: KafkaSettingsError | None = None
        try:
            super().__init__(**values)
        except ValidationError as error:
            refused = _settings_error(error)
        if refused is not None:
            raise refused  # outside the except block: not even __context__ keeps pydantic's error

    # -- field rules ---------------------------------------------------------------------------

    @field_validator("bootstrap_servers", mode="before")
    @classmethod
    def _split_servers(cls, value: Any) -> tuple[str, ...]:
        items = value.split(",") if isinstance(value, str) else list(value or ())
        servers = tuple(str(s).strip() for s in items if str(s).strip())
        if not servers:
            raise ValueError("bootstrap_servers: at least one host:port is required")
        return servers

    @field_validator("acks", mode="before")
    @classmethod
    def _acks_all(cls, value: Any) -> str:
        if value in ("all", -1, "-1") and not isinstance(value, bool):
            return "all"
        raise ValueError(
            f"acks={value!r} would weaken delivery: KafkaPublisher always publishes with acks='all' "
            "(a message is confirmed only when every in-sync replica has it)"
        )

    @field_validator("enable_idempotence", mode="before")
    @classmethod
    def _idempotent(cls, value: Any) -> bool:
        if value is not True:
            raise ValueError(
                f"enable_idempotence={value!r} would weaken delivery: KafkaPublisher always uses an idempotent producer"
            )
        return True

    @field_validator("max_in_flight", mode="before")
    @classmethod
    def _in_flight(cls, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).strip().isdigit():
            number = None
        else:
            number = int(value)
        if number is None or not 1 <= number <= 5:
            raise ValueError(
                f"max_in_flight={value!r}: must be 1..5; more than 5 requests in flight disables idempotence"
            )
        return number

    @field_validator("api_version", mode="before")
    @classmethod
    def _version(cls, value: Any) -> tuple[int, ...] | None:
        if value is None:
            return None
        try:
            parts = tuple(int(p) for p in (value.split(".") if isinstance(value, str) else value))
        except (TypeError, ValueError):
            raise ValueError(f"api_version={value!r}: must be a broker version such as '3.9' (or None)") from None
        if not 2 <= len(parts) <= 3:
            raise ValueError(f"api_version={value!r}: must be a broker version such as '3.9' (or None)")
        if parts < MIN_API_VERSION:
            raise ValueError(f"api_version={value!r}: Kafka 4.x brokers need at least {MIN_API_VERSION!r}")
        return parts

    @model_validator(mode="after")
    def _consistent(self) -> KafkaSettings:
        if self.delivery_timeout_ms < self.linger_ms + self.request_timeout_ms:
            raise ValueError(
                f"delivery_timeout_ms={self.delivery_timeout_ms}: must be at least linger_ms + "
                f"request_timeout_ms ({self.linger_ms + self.request_timeout_ms})"
            )
        if self.uses_sasl:
            if not self.sasl_username:
                raise ValueError(f"sasl_username: required with {self.security_protocol}")
            if not self.sasl_password or not self.sasl_password.get_secret_value():
                raise ValueError(f"sasl_password: required with {self.security_protocol}")
        else:
            stray = [
                name
                for name, value in (
                    ("sasl_mechanism", self.sasl_mechanism != KAFKA_DEFAULTS["sasl_mechanism"]),
                    ("sasl_username", bool(self.sasl_username)),
                    ("sasl_password", bool(self.sasl_password)),
                )
                if value
            ]
            if stray:
                raise ValueError(
                    f"{'/'.join(stray)}: set, but security_protocol={self.security_protocol!r} does not use SASL "
                    "(use SASL_SSL or SASL_PLAINTEXT)"
                )
        return self

    # -- reading -------------------------------------------------------------------------------

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def uses_ssl(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def servers(self) -> str:
        """The bootstrap servers as one comma-separated string (for messages)."""
        return ",".join(self.bootstrap_servers)

    def __repr__(self) -> str:
        parts = []
        for name in type(self).model_fields:
            value = getattr(self, name)
            shown = ("'***'" if value else "None") if name == "sasl_password" else repr(value)
            parts.append(f"{name}={shown}")
        return f"{type(self).__name__}({', '.join(parts)})"

    __str__ = __repr__

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> KafkaSettings:
        """Build settings from a plain mapping (connection extras, kafka-python keyword arguments).

        Accepts the kafka-python spellings ``max_in_flight_requests_per_connection`` and
        ``sasl_plain_username`` / ``sasl_plain_password``. ``retries`` is accepted only when it does not weaken
        delivery (``retries=0`` disables idempotence) and is otherwise ignored: the delivery bound is
        ``delivery_timeout_ms``. ``transactional_id`` is refused; so is any key that is not a setting.
        """
        kwargs: dict[str, Any] = {}
        for raw_key, value in values.items():
            if raw_key == "retries":
                if value is not None and float(value) <= 0:
                    raise KafkaSettingsError(
                        "retries", f"retries={value!r} would weaken delivery: it disables idempotence"
                    )
                continue
            if raw_key == "transactional_id":
                raise KafkaSettingsError(
                    "transactional_id", "transactional_id: KafkaPublisher does not use transactions"
                )
            kwargs[_ALIASES.get(raw_key, raw_key)] = value
        return cls(**kwargs)

    def client_config(self) -> dict[str, Any]:
        """The connection and security keyword arguments shared by kafka-python clients. Holds the password.

        Every kafka-python client of the project is built from this config, so kafka-python's read of a broker's
        last answer before its close (``transport``) is installed here, before the first client, and never by an
        import.
        """
        deliver_bytes_before_close()
        config: dict[str, Any] = {
            "bootstrap_servers": list(self.bootstrap_servers),
            "client_id": self.client_id,
            "security_protocol": self.security_protocol,
            "request_timeout_ms": self.request_timeout_ms,
            "retry_backoff_ms": self.retry_backoff_ms,
            "api_version": self.api_version,
            # Only used when api_version is None; keep it inside the configured bound.
            "bootstrap_timeout_ms": self.max_block_ms,
        }
        if self.uses_ssl:
            config["ssl_check_hostname"] = self.ssl_check_hostname
            if self.ssl_cafile:
                config["ssl_cafile"] = self.ssl_cafile
        if self.uses_sasl:
            assert self.sasl_password is not None  # checked by _consistent
            config["sasl_mechanism"] = self.sasl_mechanism
            config["sasl_plain_username"] = self.sasl_username
            config["sasl_plain_password"] = self.sasl_password.get_secret_value()
        return config

    def producer_config(self) -> dict[str, Any]:
        """Keyword arguments for ``kafka.KafkaProducer``: always ``acks="all"`` and idempotent. Holds the password."""
        config = self.client_config()
        config.update(
            acks="all",
            enable_idempotence=True,
            max_in_flight_requests_per_connection=self.max_in_flight,
            max_block_ms=self.max_block_ms,
            delivery_timeout_ms=self.delivery_timeout_ms,
            linger_ms=self.linger_ms,
            batch_size=self.batch_size,
            max_request_size=self.max_request_size,
            compression_type=self.compression_type,
        )
        return config


def _settings_error(error: ValidationError) -> KafkaSettingsError:
    """One message naming each refused setting, the first first; never the password's value."""
    messages: list[str] = []
    first = ""
    for item in error.errors(include_input=True, include_url=False):
        loc = [str(p) for p in item.get("loc", ()) if not isinstance(p, int)]
        name = loc[0] if loc else ""
        first = first or name
        kind = item.get("type", "")
        cause = (item.get("ctx") or {}).get("error")
        if kind == "value_error" and isinstance(cause, ValueError) and not name:
            messages.append(str(cause))  # a model rule: its message names its settings
            first = first or str(cause).split("=")[0].split(":")[0]
        elif kind == "value_error" and isinstance(cause, ValueError) and str(cause).startswith(name):
            messages.append(str(cause))
        elif kind == "extra_forbidden":
            messages.append(f"{name}: not a Kafka publisher setting")
        elif kind == "missing":
            messages.append(f"{name}: required")
        else:
            shown = "'***'" if name == "sasl_password" else repr(item.get("input"))
            text = str(cause) if kind == "value_error" and cause is not None else item.get("msg", "invalid")
            messages.append(f"{name}={shown}: {text}")
    return KafkaSettingsError(first, "; ".join(messages))

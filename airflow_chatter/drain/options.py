"""Source and delivery options, validated when they are built (CFG-01..09, CTR-08).

A bad option is refused where the DAG or hook is built, naming the option and its value, rather than discovered at
drain time, when a wrong stamp would already have been written or a pending document silently skipped.

Each option is bounded once, here: ``SourceFields`` holds what a source declares, ``SourceOptions`` adds what only
code can give (callables, the stamp settings), and the Airflow sources file's entries extend ``SourceFields`` too
(``airflow_chatter.airflow.sources.SourceConfig``), so a file and a caller are refused by the same rule.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal, NoReturn

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, field_validator, model_validator

from airflow_chatter.drain.stamps import StampMode
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.outbox.document import DEFAULT_DELIVERED_TTL_SECONDS, DELIVERED, PENDING, UNDELIVERABLE
from airflow_chatter.outbox.formats import MessageFormat
from airflow_chatter.outbox.mapping import KeyStrategy
from airflow_chatter.outbox.partition_keys import canonicalize_paths
from airflow_chatter.ports.request_priority import RequestPriority

#: The only status patch path: the pending predicate reads ``status``, so a stamp anywhere else would leave the
#: document pending and republish it forever (CFG-02).
STATUS_PATCH_PATH = "/status"
#: Not configurable (CFG-04): ``ttl`` is the only field Cosmos DB purges on.
TTL_PATCH_PATH = "/ttl"

#: Cosmos DB stores ``ttl`` as a signed 32-bit number of seconds; a larger value would make every delivered stamp
#: fail after its publish, so the same message would be republished on every pass.
MAX_TTL_SECONDS = 2_147_483_647

#: Bounds of ``max_batch_size``: at least one document per page, and at most what one change-feed page should hold.
MIN_BATCH_SIZE = 1
MAX_BATCH_SIZE = 1000

#: F-10: stamp batches in flight per drain, by default and at most (each is one thread and one connection).
DEFAULT_STAMP_CONCURRENCY = 8
MAX_STAMP_CONCURRENCY = 64

#: Follow mode (drain/follow.py): how often a caught-up following drain reads its feed range again, by default and
#: within which bounds (under 50 ms is a busy loop; over a minute is what a schedule is for).
DEFAULT_FOLLOW_POLL_SECONDS = 0.25
MIN_FOLLOW_POLL_SECONDS = 0.05
MAX_FOLLOW_POLL_SECONDS = 60.0

#: What a drain promises a topic's consumers (docs/drain.md): ``at_least_once`` (a crash may republish up to a
#: page) or ``exactly_once`` (one Kafka transaction per page, with a checkpoint record; ``drain/exactly_once.py``).
Guarantee = Literal["at_least_once", "exactly_once"]
#: Where an exactly-once drain's checkpoint records go unless a source names its own ``checkpoint_topic``: one
#: compacted topic for every source, keyed per source and lease, created by ``provision``.
DEFAULT_CHECKPOINT_TOPIC = "chatter.checkpoints"
#: Kafka's own rule for a topic name (``kafka.common.internals.Topic``): refused here, not at the first commit.
_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")

#: A delivered document must purge itself, within what Cosmos's 32-bit ``ttl`` holds (CFG-01).
DeliveredTtlSeconds = Annotated[int, Field(strict=True, gt=0, le=MAX_TTL_SECONDS)]
_Seconds = Annotated[float, Field(strict=True, gt=0, allow_inf_nan=False)]


def configuration_error(error: ValidationError) -> ConfigurationError:
    """The first problem of a validation, as the ``ConfigurationError`` naming its option and value."""
    first = error.errors(include_url=False)[0]
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, ConfigurationError):
        return cause
    loc = first.get("loc") or ("options",)
    message = str(first.get("msg", "is invalid"))
    return ConfigurationError(str(loc[0]), first.get("input"), message[:1].lower() + message[1:])


def _non_blank(option: str, value: str) -> str:
    if not value.strip():
        raise ConfigurationError(option, value, "must be a non-blank string")
    return value


class _Value(BaseModel):
    """A frozen options value: setting an attribute is an ``AttributeError``, as on a frozen dataclass."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"{type(self).__name__} is frozen: {name} cannot be set")


class DeliverySettings(_Value):
    """How a published document is stamped.

    ``delivered_ttl_seconds`` (default 86400) is the ttl written with the delivered status, so a delivered document
    purges itself; it must be > 0 and fit Cosmos's 32-bit ``ttl``. ``status_patch_path`` (default ``/status``) must
    be exactly ``/status``. ``delivered_status_value`` (default ``delivered``) must be non-blank and differ from
    ``pending`` (or the relay would republish its own stamp) and from ``undeliverable`` (or a delivered document
    could never be told from one the contract gave up on).
    """

    delivered_ttl_seconds: DeliveredTtlSeconds = DEFAULT_DELIVERED_TTL_SECONDS
    status_patch_path: StrictStr = STATUS_PATCH_PATH
    delivered_status_value: StrictStr = DELIVERED

    def __init__(self, **settings: Any) -> None:
        try:
            super().__init__(**settings)
        except ValidationError as error:
            raise configuration_error(error) from None

    @field_validator("status_patch_path")
    @classmethod
    def _status_path(cls, path: str) -> str:
        if not path.startswith("/") or not any(path.split("/")[1:]):
            raise ConfigurationError(
                "status_patch_path", path, "is not a JSON pointer (a leading '/' and at least one non-empty segment)"
            )
        if path != STATUS_PATCH_PATH:
            raise ConfigurationError(
                "status_patch_path", path, f"must be {STATUS_PATCH_PATH!r}, the field the pending predicate reads"
            )
        return path

    @field_validator("delivered_status_value")
    @classmethod
    def _status_value(cls, value: str) -> str:
        _non_blank("delivered_status_value", value)
        if value in (PENDING, UNDELIVERABLE):
            raise ConfigurationError(
                "delivered_status_value",
                value,
                f"must differ from {PENDING!r} and {UNDELIVERABLE!r}; a delivered stamp must leave the document "
                "neither pending nor indistinguishable from an undeliverable one",
            )
        return value

    @property
    def ttl_patch_path(self) -> str:
        """Always ``/ttl`` (CFG-04)."""
        return TTL_PATCH_PATH


class SourceFields(BaseModel):
    """What a source declares, each field with its bounds; see ``SourceOptions`` for what each means.

    Validated in strict mode: a number given as a string, or a boolean for a number, is refused rather than read.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: StrictStr
    partition_key_paths: tuple[str, ...]
    key_strategy: KeyStrategy = "partition_key"
    max_batch_size: Annotated[int, Field(strict=True, ge=MIN_BATCH_SIZE, le=MAX_BATCH_SIZE)] = 100
    monitored_source_identity: StrictStr | None = None
    lease_source_identity: StrictStr | None = None
    lease_prefix: StrictStr = ""
    lease_duration_seconds: _Seconds = 60.0
    # F-10 / F-11: how stamps are written, the RU cap, the 429 retry limits.
    stamp_mode: StampMode = "batched"
    stamp_concurrency: Annotated[int, Field(strict=True, ge=1, le=MAX_STAMP_CONCURRENCY)] = DEFAULT_STAMP_CONCURRENCY
    max_request_units_per_second: _Seconds | None = None
    max_throttle_retries: Annotated[int, Field(strict=True, ge=0)] | None = None
    max_throttle_wait_seconds: Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)] | None = None
    request_priority: RequestPriority | None = None
    # Follow mode: keep the lease once caught up and poll the feed range every follow_poll_seconds.
    follow: Annotated[bool, Field(strict=True)] = False
    follow_poll_seconds: Annotated[
        float, Field(strict=True, ge=MIN_FOLLOW_POLL_SECONDS, le=MAX_FOLLOW_POLL_SECONDS, allow_inf_nan=False)
    ] = DEFAULT_FOLLOW_POLL_SECONDS
    # F-13: how a published document looks on Kafka (``airflow_chatter.outbox.formats``).
    message_format: MessageFormat = "chatter"
    # Exactly-once into Kafka (drain/exactly_once.py): the guarantee, and the compacted topic of checkpoint records.
    guarantee: Guarantee = "at_least_once"
    checkpoint_topic: StrictStr = DEFAULT_CHECKPOINT_TOPIC

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _non_blank("name", value)

    @field_validator("partition_key_paths", mode="before")
    @classmethod
    def _paths(cls, value: object) -> tuple[str, ...]:
        if not isinstance(value, (str, list, tuple)):
            raise ConfigurationError("partition_key_paths", value, "must be a path or a list of paths")
        return canonicalize_paths(value)

    @field_validator("checkpoint_topic")
    @classmethod
    def _checkpoint_topic(cls, value: str) -> str:
        if not _TOPIC_NAME.fullmatch(value) or value in (".", ".."):
            raise ConfigurationError(
                "checkpoint_topic", value, "is not a Kafka topic name (1..249 of ASCII letters, digits, '.', '_', '-')"
            )
        return value

    @field_validator("monitored_source_identity", "lease_source_identity")
    @classmethod
    def _identity(cls, value: str | None, info: Any) -> str | None:
        if value is not None and not value.strip():
            raise ConfigurationError(info.field_name, value, "must be a non-blank string when declared")
        return value

    @model_validator(mode="after")
    def _identity_pair(self) -> SourceFields:
        monitored, lease = self.monitored_source_identity, self.lease_source_identity
        if (monitored is None) != (lease is None):
            missing = "lease_source_identity" if lease is None else "monitored_source_identity"
            given = "monitored_source_identity" if lease is None else "lease_source_identity"
            raise ConfigurationError(
                given, monitored if lease is None else lease, f"is declared without {missing}; declare both or neither"
            )
        return self

    @property
    def declares_source_identity(self) -> bool:
        """Whether the source identity is declared rather than read from the containers (SRC-02)."""
        return self.monitored_source_identity is not None


class SourceOptions(SourceFields, _Value):
    """One drained source: a monitored container read through its change feed, and its lease container.

    ``name`` names the source in logs and errors. ``partition_key_paths`` is the monitored container's partition-key
    path (a string or a sequence for a hierarchical key), canonicalised here. ``key_strategy`` (default
    ``partition_key``) picks the Kafka record key. ``max_batch_size`` (default 100, 1..1000) bounds a change-feed
    page. ``delivery`` holds the stamp settings. ``monitored_source_identity`` and ``lease_source_identity`` declare
    the source identity; give both or neither (CFG-06). ``body_resolver`` replaces verbatim reconstruction (RSV);
    ``additional_pending_filter`` can only narrow what is admitted (PND-03). ``lease_prefix`` (default empty)
    prefixes lease document ids; ``lease_duration_seconds`` (default 60) is how long an unrenewed lease stays owned.

    Throughput (F-10, F-11): ``stamp_mode`` ``batched`` (default: a page's stamps grouped per partition key in
    transactional batches) or ``sequential`` (one patch after another, in feed order); ``stamp_concurrency``
    (default 8, 1..64) batches in flight; ``max_request_units_per_second`` (default ``None``: no cap) paces the
    drain under that many RU/s of measured charges; a 429 is retried after its retry-after while the drain has
    waited less than ``max_throttle_wait_seconds`` of wall clock since the container last served it (and, where
    set, a request met at most ``max_throttle_retries`` 429s meanwhile), then the drain stops at that page with
    nothing lost. ``None`` (the default) for either takes the Cosmos connection's extra of the same name, else 30 s
    and no retry count: a drain's default bound is time alone (``DrainEngine.open(throttle_limits=...)``); a
    source's value wins.
    ``request_priority`` (``low`` or ``high``) is the Cosmos priority of every request of the drain (feed reads,
    stamps, lease writes); ``None`` (the default) takes the Cosmos connection's extra of the same name, else
    ``low``: the container's provisioned throughput goes to the services' own (high) writes first.

    Follow mode (drain/follow.py): ``follow`` (default false) keeps a caught-up drain on its lease, reading its feed
    range again every ``follow_poll_seconds`` (default 0.25, 0.05..60) until its bounds, a stop or a lost lease.
    ``message_format`` (F-13) is ``chatter`` (default: F-02's headers) or ``cloudevents`` (the CloudEvents Kafka
    binding, binary mode); it shapes records built from the document, not what a ``body_resolver`` returns.

    ``guarantee`` (default ``at_least_once``) is what the topic's consumers get: ``exactly_once`` publishes each page
    in one Kafka transaction with a checkpoint record for its lease on ``checkpoint_topic`` (default
    ``chatter.checkpoints``, compacted; drain/exactly_once.py), so ``read_committed`` consumers see each message once.

    A bad option raises ``ConfigurationError`` naming it and its value.
    """

    delivery: DeliverySettings = Field(default_factory=DeliverySettings)
    body_resolver: Callable[..., Any] | None = None
    additional_pending_filter: Callable[[dict[str, Any]], bool] | None = None

    def __init__(self, name: str, partition_key_paths: str | Sequence[str], **options: Any) -> None:
        try:
            # The paths are canonicalised into a tuple by the field's validator.
            super().__init__(**{"name": name, "partition_key_paths": partition_key_paths, **options})
        except ValidationError as error:
            raise configuration_error(error) from None

    @field_validator("delivery", mode="before")
    @classmethod
    def _delivery(cls, value: object) -> DeliverySettings:
        if not isinstance(value, DeliverySettings):
            raise ConfigurationError("delivery", value, "must be a DeliverySettings")
        return value


__all__ = [
    "DEFAULT_CHECKPOINT_TOPIC",
    "DEFAULT_FOLLOW_POLL_SECONDS",
    "DEFAULT_STAMP_CONCURRENCY",
    "MAX_FOLLOW_POLL_SECONDS",
    "MAX_BATCH_SIZE",
    "MAX_STAMP_CONCURRENCY",
    "MAX_TTL_SECONDS",
    "MIN_BATCH_SIZE",
    "MIN_FOLLOW_POLL_SECONDS",
    "STATUS_PATCH_PATH",
    "TTL_PATCH_PATH",
    "DeliveredTtlSeconds",
    "DeliverySettings",
    "Guarantee",
    "SourceFields",
    "SourceOptions",
    "configuration_error",
]

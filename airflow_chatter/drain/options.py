"""Source and delivery options, validated when they are built (CFG-01..09, CTR-08).

A bad option is refused where the DAG or hook is built, naming the option and its value, rather than discovered at
drain time, when a wrong stamp would already have been written or a pending document silently skipped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_chatter.drain.stamps import STAMP_MODES
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.outbox.document import DEFAULT_DELIVERED_TTL_SECONDS, DELIVERED, PENDING, UNDELIVERABLE
from airflow_chatter.outbox.mapping import KEY_STRATEGIES, KeyStrategy
from airflow_chatter.outbox.partition_keys import canonicalize_paths

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


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_positive_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _is_blank(value: object) -> bool:
    return not isinstance(value, str) or not value.strip()


def _validate_json_pointer(path: object) -> None:
    if not isinstance(path, str) or not path.startswith("/") or not any(path.split("/")[1:]):
        raise ConfigurationError(
            "status_patch_path", path, "is not a JSON pointer (a leading '/' and at least one non-empty segment)"
        )


@dataclass(frozen=True)
class DeliverySettings:
    """How a published document is stamped.

    ``delivered_ttl_seconds`` (default 86400) is the ttl written with the delivered status, so a delivered document
    purges itself; it must be > 0 and fit Cosmos's 32-bit ``ttl``. ``status_patch_path`` (default ``/status``) must
    be exactly ``/status``. ``delivered_status_value`` (default ``delivered``) must be non-blank and differ from
    ``pending`` (or the relay would republish its own stamp) and from ``undeliverable`` (or a delivered document
    could never be told from one the contract gave up on).
    """

    delivered_ttl_seconds: int = DEFAULT_DELIVERED_TTL_SECONDS
    status_patch_path: str = STATUS_PATCH_PATH
    delivered_status_value: str = DELIVERED

    def __post_init__(self) -> None:
        ttl = self.delivered_ttl_seconds
        if not _is_int(ttl) or not 0 < ttl <= MAX_TTL_SECONDS:
            raise ConfigurationError(
                "delivered_ttl_seconds",
                ttl,
                f"must be an integer from 1 to {MAX_TTL_SECONDS}; a delivered document must purge itself",
            )
        _validate_json_pointer(self.status_patch_path)
        if self.status_patch_path != STATUS_PATCH_PATH:
            raise ConfigurationError(
                "status_patch_path",
                self.status_patch_path,
                f"must be {STATUS_PATCH_PATH!r}, the field the pending predicate reads",
            )
        value = self.delivered_status_value
        if _is_blank(value):
            raise ConfigurationError("delivered_status_value", value, "must be a non-blank string")
        if value in (PENDING, UNDELIVERABLE):
            raise ConfigurationError(
                "delivered_status_value",
                value,
                f"must differ from {PENDING!r} and {UNDELIVERABLE!r}; a delivered stamp must leave the document "
                "neither pending nor indistinguishable from an undeliverable one",
            )

    @property
    def ttl_patch_path(self) -> str:
        """Always ``/ttl`` (CFG-04)."""
        return TTL_PATCH_PATH


@dataclass(frozen=True)
class SourceOptions:
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
    drain under that many RU/s of measured charges; a 429 is retried after its retry-after at most
    ``max_throttle_retries`` times per request and ``max_throttle_wait_seconds`` in all per drain, then the drain
    stops at that page with nothing lost. ``None`` (the default) for either takes the Cosmos connection's extra of
    the same name, else 9 retries and 30 s (``DrainEngine.open(throttle_limits=...)``): a source's value wins.
    """

    name: str
    partition_key_paths: tuple[str, ...]
    key_strategy: KeyStrategy = "partition_key"
    max_batch_size: int = 100
    delivery: DeliverySettings = field(default_factory=DeliverySettings)
    monitored_source_identity: str | None = None
    lease_source_identity: str | None = None
    body_resolver: Callable[..., Any] | None = None
    additional_pending_filter: Callable[[dict[str, Any]], bool] | None = None
    lease_prefix: str = ""
    lease_duration_seconds: float = 60.0
    stamp_mode: str = "batched"
    stamp_concurrency: int = DEFAULT_STAMP_CONCURRENCY
    max_request_units_per_second: float | None = None
    max_throttle_retries: int | None = None
    max_throttle_wait_seconds: float | None = None

    def __post_init__(self) -> None:
        if _is_blank(self.name):
            raise ConfigurationError("name", self.name, "must be a non-blank string")
        paths: str | Sequence[str] = self.partition_key_paths
        object.__setattr__(self, "partition_key_paths", canonicalize_paths(paths))
        if self.key_strategy not in KEY_STRATEGIES:
            raise ConfigurationError("key_strategy", self.key_strategy, f"must be one of {sorted(KEY_STRATEGIES)}")
        if not _is_int(self.max_batch_size) or not MIN_BATCH_SIZE <= self.max_batch_size <= MAX_BATCH_SIZE:
            raise ConfigurationError(
                "max_batch_size", self.max_batch_size, f"must be an integer from {MIN_BATCH_SIZE} to {MAX_BATCH_SIZE}"
            )
        if not isinstance(self.delivery, DeliverySettings):
            raise ConfigurationError("delivery", self.delivery, "must be a DeliverySettings")
        self._validate_declared_identity()
        for option in ("body_resolver", "additional_pending_filter"):
            value = getattr(self, option)
            if value is not None and not callable(value):
                raise ConfigurationError(option, value, "must be callable or None")
        if not isinstance(self.lease_prefix, str):
            raise ConfigurationError("lease_prefix", self.lease_prefix, "must be a string")
        duration = self.lease_duration_seconds
        if (
            isinstance(duration, bool)
            or not isinstance(duration, (int, float))
            or not math.isfinite(duration)
            or duration <= 0
        ):
            raise ConfigurationError("lease_duration_seconds", duration, "must be a positive, finite number of seconds")
        self._validate_throughput()

    def _validate_throughput(self) -> None:
        """F-10/F-11 knobs: how stamps are written, the RU cap and the 429 retry limits."""
        if self.stamp_mode not in STAMP_MODES:
            raise ConfigurationError("stamp_mode", self.stamp_mode, f"must be one of {list(STAMP_MODES)}")
        if not _is_int(self.stamp_concurrency) or not 1 <= self.stamp_concurrency <= MAX_STAMP_CONCURRENCY:
            raise ConfigurationError(
                "stamp_concurrency", self.stamp_concurrency, f"must be an integer from 1 to {MAX_STAMP_CONCURRENCY}"
            )
        cap = self.max_request_units_per_second
        if cap is not None and not _is_positive_number(cap):
            raise ConfigurationError(
                "max_request_units_per_second", cap, "must be a positive, finite number of request units, or None"
            )
        retries = self.max_throttle_retries
        if retries is not None and (not _is_int(retries) or retries < 0):
            raise ConfigurationError("max_throttle_retries", retries, "must be an integer >= 0, or None")
        wait = self.max_throttle_wait_seconds
        if wait is not None and not _is_positive_number(wait) and wait != 0:
            raise ConfigurationError(
                "max_throttle_wait_seconds", wait, "must be a finite number of seconds >= 0, or None"
            )

    def _validate_declared_identity(self) -> None:
        monitored, lease = self.monitored_source_identity, self.lease_source_identity
        if monitored is None and lease is None:
            return
        if monitored is None or lease is None:
            missing = "lease_source_identity" if lease is None else "monitored_source_identity"
            given = "monitored_source_identity" if lease is None else "lease_source_identity"
            raise ConfigurationError(
                given, monitored if lease is None else lease, f"is declared without {missing}; declare both or neither"
            )
        for option, value in (("monitored_source_identity", monitored), ("lease_source_identity", lease)):
            if _is_blank(value):
                raise ConfigurationError(option, value, "must be a non-blank string when declared")

    @property
    def declares_source_identity(self) -> bool:
        """Whether the source identity is declared rather than read from the containers (SRC-02)."""
        return self.monitored_source_identity is not None


__all__ = [
    "DEFAULT_STAMP_CONCURRENCY",
    "MAX_BATCH_SIZE",
    "MAX_STAMP_CONCURRENCY",
    "MAX_TTL_SECONDS",
    "MIN_BATCH_SIZE",
    "STATUS_PATCH_PATH",
    "TTL_PATCH_PATH",
    "DeliverySettings",
    "SourceOptions",
]

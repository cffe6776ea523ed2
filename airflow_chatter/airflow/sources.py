"""The sources config file (YAML or JSON) the DAG factory reads: one entry per drained source.

Validated with pydantic when a DAG file is parsed, so a bad file is an import error in the DAG
processor that names the file, the source and the field, e.g.
``chatter_sources.yaml: sources[1] (orders).max_batch_size: Input should be less than or equal to 1000``.
Each entry extends the core's ``SourceFields`` (partition-key paths, key strategy, batch size, the source identity
pair, lease and throughput options), so those fields are bounded once, by the core; this model adds only what the
Airflow layer needs: connections, containers, schedule, pools, topics, the callables' import paths.

User callables (body resolver, pending filter) are dotted import paths: only their syntax is checked
at parse time; they are imported in the task, so the DAG stays serializable.

This module does not import Airflow.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from airflow_chatter.drain.options import DeliveredTtlSeconds, DeliverySettings, SourceFields, SourceOptions
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.outbox.document import DEFAULT_DELIVERED_TTL_SECONDS

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,100}$")
_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")
#: Airflow's cron presets; anything else must look like a 5-field cron expression (checked by Airflow too).
_PRESETS = {"@once", "@continuous", "@hourly", "@daily", "@weekly", "@monthly", "@quarterly", "@yearly"}
#: ``schedule: on_pending``: an event-driven drain (an asset watcher fires when documents are pending; assets/).
ON_PENDING = "on_pending"
_CONTAINER = re.compile(r"^[^/\\?#]{1,255}$")

DEFAULT_BACKFILL_LEASE_PREFIX = "backfill-"

#: The environment variable that names the sources config file the DAG factory reads.
SOURCES_FILE_ENV = "CHATTER_SOURCES_FILE"


class SourcesConfigError(ConfigurationError):
    """The sources config file is invalid; the message names the file, the source and the field."""

    def __init__(self, path: str, problems: Sequence[str]) -> None:
        self.path = path
        self.problems = tuple(problems)
        self.option, self.value, self.reason = "sources", path, "; ".join(self.problems)
        Exception.__init__(self, f"{path}: {self.reason}")


def _dotted(value: str | None, field_name: str) -> str | None:
    if value is not None and not _DOTTED.match(value):
        raise ValueError(f"{field_name} must be a dotted import path such as 'package.module.function'")
    return value


class SourceConfig(SourceFields):
    """One drained source. Field names are the config file's keys.

    Required: ``name``, ``database``, ``monitored_container``, ``lease_container`` and
    ``partition_key_paths``. Defaults: connections ``chatter_cosmos_default`` /
    ``chatter_kafka_default``; ``key_strategy`` ``partition_key``; ``max_batch_size`` 100;
    ``max_documents`` 5000 and ``max_seconds`` 240 per drain task; ``schedule`` every 5 minutes (``on_pending``:
    event-driven, polled every ``on_pending_poll_seconds``, default 5);
    no pool; no topic mapping; ``lease_prefix`` empty and ``backfill_lease_prefix`` ``backfill-``;
    ``delivered_ttl_seconds`` 86400; ``lease_duration_seconds`` 60; ``cosmos_http_logging`` false
    (the Azure SDK's request/response header lines are kept out of task logs); ``ui_idempotency_container`` none
    (the UI's actions keep their Idempotency-Keys in the api-server's memory: right for one api-server worker only);
    ``max_pending_age_seconds`` none (no pending-age alert).
    The fields shared with the core (``SourceFields``) are described on ``SourceOptions``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Unique source name; the drain DAG is chatter_drain_<name>.")
    cosmos_conn_id: str = "chatter_cosmos_default"
    kafka_conn_id: str = "chatter_kafka_default"
    database: str
    monitored_container: str
    lease_container: str
    topics: dict[str, str] = Field(
        default_factory=dict, description="Destination → Kafka topic; unmapped destinations are used as topics."
    )
    max_documents: Annotated[int, Field(ge=1)] = 5000
    max_seconds: Annotated[float, Field(gt=0, le=3600)] = 240
    schedule: str | None = "*/5 * * * *"
    on_pending_poll_seconds: Annotated[float, Field(ge=1, le=600)] = 5
    pool: str | None = None
    pool_slots: Annotated[int, Field(ge=1)] = 1
    max_parallel_drains: Annotated[int, Field(ge=1)] | None = None
    body_resolver: str | None = None
    pending_filter: str | None = None
    backfill_lease_prefix: str = DEFAULT_BACKFILL_LEASE_PREFIX
    delivered_ttl_seconds: DeliveredTtlSeconds = DEFAULT_DELIVERED_TTL_SECONDS
    tags: list[str] = Field(default_factory=list)
    cosmos_http_logging: bool = Field(
        default=False, description="Log the Azure SDK's per-request HTTP lines (headers) in task logs."
    )
    max_pending_age_seconds: Annotated[float, Field(gt=0, le=7 * 86400)] | None = Field(
        default=None,
        description="Alert when the oldest Pending Outbox Document has waited longer than this many seconds (the "
        "chatter_pending_age DAG checks it; the page and the dashboard tile show it); none: no alert.",
    )
    ui_idempotency_container: str | None = Field(
        default=None,
        description="Idempotency container (in this source's database) the UI plugin's actions keep their keys in, "
        "so a double click acts once across api-server workers; none: the api-server's memory (one worker only).",
    )

    @field_validator("name")
    @classmethod
    def _dag_name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError("name must be 1-100 letters, digits, '_' or '-' (it becomes part of a DAG id)")
        return value

    @field_validator("database", "monitored_container", "lease_container", "cosmos_conn_id", "kafka_conn_id")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip() or not _CONTAINER.match(value):
            raise ValueError("must be a non-blank name without '/', '\\', '?' or '#'")
        return value

    @field_validator("ui_idempotency_container")
    @classmethod
    def _optional_container(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or not _CONTAINER.match(value)):
            raise ValueError("must be a non-blank name without '/', '\\', '?' or '#'")
        return value

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str | None) -> str | None:
        if value is None or value in _PRESETS or value == ON_PENDING or len(value.split()) == 5:
            return value
        raise ValueError(
            f"schedule must be a cron expression (5 fields), one of {sorted(_PRESETS)}, {ON_PENDING!r}, or null"
        )

    @field_validator("body_resolver")
    @classmethod
    def _resolver(cls, value: str | None) -> str | None:
        return _dotted(value, "body_resolver")

    @field_validator("pending_filter")
    @classmethod
    def _filter(cls, value: str | None) -> str | None:
        return _dotted(value, "pending_filter")

    @field_validator("topics")
    @classmethod
    def _topics(cls, value: dict[str, str]) -> dict[str, str]:
        for destination, topic in value.items():
            if not topic or not re.match(r"^[A-Za-z0-9._-]{1,249}$", topic):
                raise ValueError(f"topics[{destination!r}]={topic!r} is not a valid Kafka topic name")
        return value

    @model_validator(mode="after")
    def _prefixes(self) -> SourceConfig:
        if self.backfill_lease_prefix == self.lease_prefix:
            raise ValueError(
                "backfill_lease_prefix must differ from lease_prefix, or a backfill would move the scheduled "
                "drain's checkpoints"
            )
        return self

    # -- core objects ------------------------------------------------------------------------

    @property
    def dag_id(self) -> str:
        return f"chatter_drain_{self.name}"

    def to_options(self, *, resolve: bool = False, lease_prefix: str | None = None) -> SourceOptions:
        """Build the core's ``SourceOptions``; ``resolve`` imports the dotted callables (do it in tasks)."""
        shared = {field: getattr(self, field) for field in SourceFields.model_fields}
        if lease_prefix is not None:
            shared["lease_prefix"] = lease_prefix
        return SourceOptions(
            **shared,
            delivery=DeliverySettings(delivered_ttl_seconds=self.delivered_ttl_seconds),
            body_resolver=import_callable(self.body_resolver, "body_resolver") if resolve else None,
            additional_pending_filter=import_callable(self.pending_filter, "pending_filter") if resolve else None,
        )


class SourcesFile(BaseModel):
    """The whole file: ``sources`` is a list of ``SourceConfig`` entries with unique names.

    ``backfill_pool`` (optional) is the pool the manual backfill DAG's drains run in.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    sources: list[SourceConfig] = Field(min_length=1)
    backfill_pool: str | None = None

    @model_validator(mode="after")
    def _unique(self) -> SourcesFile:
        seen: dict[str, str] = {}
        for index, source in enumerate(self.sources):
            if source.name in seen:
                raise ValueError(f"sources[{index}].name {source.name!r} is used twice")
            seen[source.name] = source.name
        lease_sets: dict[tuple[str, ...], str] = {}
        for source in self.sources:
            if source.monitored_source_identity is not None:
                continue
            key = (source.cosmos_conn_id, source.database, source.monitored_container, source.lease_container)
            if key in lease_sets:
                raise ValueError(
                    f"sources {lease_sets[key]!r} and {source.name!r} drain the same monitored and lease "
                    "containers; one lease set would serve both (declare monitored_source_identity and "
                    "lease_source_identity to tell them apart)"
                )
            lease_sets[key] = source.name
        return self

    def get(self, name: str) -> SourceConfig:
        for source in self.sources:
            if source.name == name:
                return source
        raise ConfigurationError("source", name, f"is not one of {[s.name for s in self.sources]}")


def import_callable(path: str | None, option: str) -> Callable[..., Any] | None:
    """Import ``package.module.attribute``; ``ConfigurationError`` naming ``option`` if that fails."""
    if path is None:
        return None
    module_name, _, attribute = path.rpartition(".")
    try:
        target = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise ConfigurationError(option, path, f"cannot be imported ({type(error).__name__}: {error})") from None
    if not callable(target):
        raise ConfigurationError(option, path, "is not callable")
    return target  # type: ignore[no-any-return]


def _location(loc: Sequence[int | str], raw: Any) -> str:
    parts: list[str] = []
    for i, item in enumerate(loc):
        if isinstance(item, int):
            parts[-1:] = [f"{parts[-1] if parts else ''}[{item}]"]
            if i == 1 and loc[0] == "sources":
                try:
                    name = raw["sources"][item].get("name")
                except (KeyError, IndexError, TypeError, AttributeError):
                    name = None
                if name:
                    parts[-1] += f" ({name})"
        else:
            parts.append(str(item))
    return ".".join(parts) or "sources"


def parse_sources(raw: Any, *, path: str = "<config>") -> SourcesFile:
    """Validate a parsed config document; ``SourcesConfigError`` names each bad field."""
    try:
        config = SourcesFile.model_validate(raw)
    except ValidationError as error:
        raise SourcesConfigError(path, _problems(error, raw)) from None
    for index, source in enumerate(config.sources):
        try:
            _check_partition_paths(source.partition_key_paths)
        except ConfigurationError as error:
            raise SourcesConfigError(path, [f"sources[{index}] ({source.name}).{error.option}: {error}"]) from None
    return config


def _check_partition_paths(paths: Sequence[str]) -> None:
    """Refuse at parse time what the drain would refuse at start: a key the outbox writes or patches."""
    from airflow_chatter.drain.monitored_container import STAMPED_ROOTS
    from airflow_chatter.outbox.document import RESERVED_ROOT_FIELDS
    from airflow_chatter.outbox.partition_keys import path_segments

    for path in paths:
        root = path_segments(path)[0]
        if root in STAMPED_ROOTS or root in RESERVED_ROOT_FIELDS:
            raise ConfigurationError(
                "partition_key_paths", path, f"is rooted at {root!r}, a field the outbox writes or the drain patches"
            )


def load_sources(path: str | Path) -> SourcesFile:
    """Read and validate a YAML (``.yaml``/``.yml``) or JSON sources file; any bad entry fails the whole file."""
    path = Path(path)
    return parse_sources(_read(path), path=path.name)


@dataclass(frozen=True)
class BrokenSource:
    """A sources-file entry that failed validation: its index, its name (when it has a usable one), the problems."""

    index: int
    name: str | None
    problems: tuple[str, ...]

    @property
    def dag_id(self) -> str | None:
        return f"chatter_drain_{self.name}" if self.name else None


@dataclass(frozen=True)
class LoadedSources:
    """The valid entries of a sources file (``config``, None when none is valid) and the broken ones."""

    path: str
    config: SourcesFile | None
    broken: tuple[BrokenSource, ...]

    def error(self) -> SourcesConfigError:
        """One error naming every problem of every broken entry (or "no valid source")."""
        problems = [p for b in self.broken for p in b.problems] or ["sources: no valid source"]
        return SourcesConfigError(self.path, problems)

    def require_config(self) -> SourcesFile:
        if self.config is None:
            raise self.error()
        return self.config


def load_sources_isolated(path: str | Path) -> LoadedSources:
    """Read a sources file, keeping the valid entries when others are broken.

    A file that cannot be read, is not YAML/JSON, or whose top level is wrong (not a mapping, no ``sources`` list,
    an unknown key, a bad ``backfill_pool``) raises ``SourcesConfigError``: nothing in it can be trusted. An entry
    that fails validation, or that clashes with an earlier valid one (same name, same containers), is returned in
    ``broken`` with its problems named as ``load_sources`` names them; the others are validated as usual.
    """
    path = Path(path)
    raw = _read(path)
    entries = raw.get("sources") if isinstance(raw, dict) else None
    if not isinstance(entries, list) or not entries:
        parse_sources(raw, path=path.name)  # raises, naming the top-level problem
        raise SourcesConfigError(path.name, ["sources: must be a non-empty list"])  # pragma: no cover - defensive
    try:
        top = SourcesFile.model_validate({**raw, "sources": [_PLACEHOLDER_SOURCE]})
    except ValidationError as error:
        raise SourcesConfigError(path.name, _problems(error, raw)) from None
    good: list[SourceConfig] = []
    broken: list[BrokenSource] = []
    for index, entry in enumerate(entries):
        name = entry.get("name") if isinstance(entry, dict) else None
        usable_name = name if isinstance(name, str) and _NAME.match(name) else None
        try:
            source = parse_sources({"sources": [*good, entry]}, path=path.name).sources[-1]
        except SourcesConfigError as error:
            problems = tuple(_renumber(problem, len(good), index) for problem in error.problems)
            broken.append(BrokenSource(index, usable_name, problems))
            continue
        good.append(source)
    config = SourcesFile(sources=good, backfill_pool=top.backfill_pool) if good else None
    return LoadedSources(path.name, config, tuple(broken))


#: Stands in for the entries while the top level of a file is validated on its own.
_PLACEHOLDER_SOURCE = {
    "name": "placeholder",
    "database": "d",
    "monitored_container": "m",
    "lease_container": "l",
    "partition_key_paths": "/id",
}


def _renumber(problem: str, validated_index: int, file_index: int) -> str:
    """Entry ``validated_index`` of the partial file is entry ``file_index`` of the real one."""
    return problem.replace(f"sources[{validated_index}]", f"sources[{file_index}]")


def _problems(error: ValidationError, raw: Any) -> list[str]:
    problems = []
    for e in error.errors():
        where = _location(e["loc"], raw)
        cause = (e.get("ctx") or {}).get("error")
        if isinstance(cause, ConfigurationError):
            # A core rule: its error names the option (and, from a rule over several fields, the entry's location
            # does not).
            named = where if e["loc"] and e["loc"][-1] == cause.option else f"{where}.{cause.option}"
            problems.append(f"{named}: {cause}")
        else:
            problems.append(f"{where}: {e['msg'].removeprefix('Value error, ')}")
    return problems


def _read(path: Path) -> Any:
    """The parsed document of a YAML or JSON file; ``SourcesConfigError`` if it cannot be read or parsed."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise SourcesConfigError(str(path), [f"cannot be read ({error.strerror})"]) from None
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except ValueError as error:
            raise SourcesConfigError(path.name, [f"is not valid JSON ({error})"]) from None
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise SourcesConfigError(path.name, [f"is not valid YAML ({error})"]) from None

"""Partition-key paths and values: canonicalisation, stamping (OBX-02), recovery (RLY-04), Kafka key (F-02).

A Cosmos partition-key path is a JSON path such as ``/tenant/id``; a hierarchical key is a list of such paths. The
write side stamps the resolved values at the container's real paths, and the drain recovers them from each document
to address its status patch, so both sides must read a path the same way. That is why this is one module.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any

from airflow_chatter.errors import ConfigurationError
from airflow_chatter.ports import PartitionKey, PartitionKeyComponent

_SCALAR_TYPES = (str, int, float, bool)


def path_segments(path: str) -> tuple[str, ...]:
    """Split a path on ``/`` and drop empty parts: ``"/tenant//id/"`` → ``("tenant", "id")``."""
    return tuple(part for part in path.split("/") if part)


def canonicalize_path(path: str) -> str:
    """Return the canonical spelling of one path: its non-empty parts re-joined with a leading ``/``.

    ``tenantId`` and ``/tenantId`` are the same path (CNT-02); case is significant.
    """
    return "/" + "/".join(path_segments(path))


def canonicalize_paths(paths: str | Sequence[str]) -> tuple[str, ...]:
    """Validate and canonicalise a partition-key path (a string, or a sequence for a hierarchical key).

    ``ConfigurationError`` for an empty path list or a path that is not a string, is blank, or has no segment
    (CFG-05/CFG-09): such a path would silently recover a null partition key at drain time.
    """
    items: Sequence[object] = (paths,) if isinstance(paths, str) else tuple(paths)
    if not items:
        raise ConfigurationError("partition_key_paths", paths, "must name at least one partition-key path")
    canonical: list[str] = []
    for item in items:
        if not isinstance(item, str) or not item.strip() or not path_segments(item):
            raise ConfigurationError("partition_key_paths", paths, f"has a blank or non-string path segment {item!r}")
        canonical.append(canonicalize_path(item))
    return tuple(canonical)


def partition_values(paths: Sequence[str], values: PartitionKey | Sequence[PartitionKeyComponent]) -> tuple[Any, ...]:
    """Pair ``values`` with ``paths``: one scalar for a single path, one value per path for a hierarchical key."""
    if isinstance(values, (list, tuple)):
        components = tuple(values)
    else:
        components = (values,)
    if len(components) != len(paths):
        raise ConfigurationError(
            "partition_values", values, f"must supply one value per partition-key path {list(paths)!r}"
        )
    return components


def stamp_partition_value(
    document: MutableMapping[str, Any],
    paths: str | Sequence[str],
    values: PartitionKey | Sequence[PartitionKeyComponent],
) -> None:
    """Write each partition value at its path in ``document`` (OBX-02), creating nested objects on the way.

    The value keeps its JSON kind: a number stays a number, because Cosmos hashes ``5`` and ``"5"`` into different
    logical partitions, and the document must land in the partition its batch was opened on.
    """
    canonical = canonicalize_paths(paths)
    for path, value in zip(canonical, partition_values(canonical, values), strict=True):
        if value is not None and not isinstance(value, _SCALAR_TYPES):
            raise ConfigurationError("partition_values", value, f"for {path} is not a JSON scalar")
        *parents, leaf = path_segments(path)
        node: MutableMapping[str, Any] = document
        for part in parents:
            child = node.setdefault(part, {})
            if not isinstance(child, MutableMapping):
                raise ConfigurationError(
                    "partition_key_paths", path, f"crosses field {part!r}, which the document holds as a non-object"
                )
            node = child
        node[leaf] = value


def _recover_component(document: Mapping[str, Any], path: str) -> PartitionKeyComponent:
    node: object = document
    for part in path_segments(path):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    if node is None or isinstance(node, _SCALAR_TYPES):
        return node
    # An object or array cannot be a partition value; treat it like an absent one.
    return None


def recover_partition_key(document: Mapping[str, Any], paths: str | Sequence[str]) -> PartitionKey:
    """Rebuild a document's partition key from its values at ``paths`` (RLY-04).

    A single path yields its scalar; a hierarchical path yields a list. A missing leaf or a missing / non-object
    intermediate yields a JSON-null component, which makes the later patch fail loudly rather than hit another item.
    """
    items = (paths,) if isinstance(paths, str) else tuple(paths)
    if len(items) == 1:
        return _recover_component(document, items[0])
    return [_recover_component(document, path) for path in items]


def partition_key_recoverer(paths: str | Sequence[str]) -> Callable[[Mapping[str, Any]], PartitionKey]:
    """``recover_partition_key`` with a source's ``paths`` fixed."""
    items = (paths,) if isinstance(paths, str) else tuple(paths)
    return lambda document: recover_partition_key(document, items)


def _compact_json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def partition_key_to_kafka_key(pk: PartitionKey) -> bytes:
    """Return the Kafka record key for a partition key (F-02).

    A string is its own UTF-8 bytes; any other single value is its compact JSON text (``5``, ``true``, ``null``);
    a hierarchical key is the compact JSON array of its values (raw UTF-8, not ``\\u`` escapes). Same key, same bytes,
    same Kafka partition: that is what keeps one aggregate's messages in feed order.
    """
    # NOTE: "surrogatepass" because a key is only bytes to Kafka: a lone surrogate in a stored partition value must
    # still yield a stable key rather than fail the produce of that document on every pass.
    if isinstance(pk, str):
        return pk.encode("utf-8", "surrogatepass")
    if isinstance(pk, (list, tuple)):
        return _compact_json(list(pk)).encode("utf-8", "surrogatepass")
    return _compact_json(pk).encode("utf-8", "surrogatepass")


__all__ = [
    "canonicalize_path",
    "canonicalize_paths",
    "partition_key_recoverer",
    "partition_key_to_kafka_key",
    "partition_values",
    "path_segments",
    "recover_partition_key",
    "stamp_partition_value",
]

"""Start-time verification of the monitored container (CNT-01..06).

Some container settings make a drain lose or endlessly republish messages, silently: a positive ``defaultTtl``
purges pending documents before they are published; a partition path that differs from the declared one recovers
null partition keys, so every delivered stamp fails after its publish; a container partitioned on ``/status`` or
``/ttl`` cannot be stamped at all, because Cosmos DB refuses to patch a partition key. So the drain reads the
container's metadata once, before draining anything, and refuses to start with every violation named at once:
fixing them one restart at a time would cost a failed run per violation.
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow_chatter.drain.options import STATUS_PATCH_PATH, TTL_PATCH_PATH
from airflow_chatter.errors import ContainerContractError
from airflow_chatter.outbox.partition_keys import canonicalize_path, canonicalize_paths, path_segments
from airflow_chatter.ports import ContainerProperties, DocumentContainer

#: Root fields the drain patches on every document; a partition path rooted at one could never be stamped.
STAMPED_ROOTS: frozenset[str] = frozenset(path_segments(STATUS_PATCH_PATH) + path_segments(TTL_PATCH_PATH))

_UNKNOWN = "<unknown>"


def _describe(paths: Sequence[str]) -> str:
    return ", ".join(paths)


def _ttl_violation(default_ttl: int | None) -> str | None:
    # None: TTL off, nothing ever purged. -1: TTL on, no default expiry, so only the delivered stamp's ttl purges.
    if default_ttl is None or default_ttl == -1:
        return None
    return (
        f"its defaultTtl is {default_ttl}, but only unset or -1 is accepted: any other value would let Cosmos DB "
        "purge pending outbox documents before they are published"
    )


def _path_violation(declared: tuple[str, ...], actual_raw: Sequence[str]) -> str | None:
    actual = tuple(canonicalize_path(path) for path in actual_raw)
    if declared == actual:
        return None
    return (
        f"its partition-key path is [{_describe(actual)}] but the source declares [{_describe(declared)}]; "
        "they must match in count, order and case, or every delivered stamp would miss its document"
    )


def _stamped_path_violation(actual_raw: Sequence[str]) -> str | None:
    stamped = [path for path in actual_raw if path_segments(path)[:1] and path_segments(path)[0] in STAMPED_ROOTS]
    if not stamped:
        return None
    return (
        f"it is partitioned on [{_describe(stamped)}], which the drain patches on every document "
        f"({STATUS_PATCH_PATH}, {TTL_PATCH_PATH}); Cosmos DB refuses to patch a partition key, so no stamp could land"
    )


def container_violations(properties: ContainerProperties, declared_paths: Sequence[str]) -> tuple[str, ...]:
    """Every CNT violation of ``properties`` against ``declared_paths``, in a fixed order; empty when it is fine."""
    declared = canonicalize_paths(declared_paths)
    found = (
        _ttl_violation(properties.default_ttl),
        _path_violation(declared, properties.partition_key_paths),
        _stamped_path_violation(properties.partition_key_paths),
    )
    return tuple(v for v in found if v is not None)


def verify_monitored_container(
    container: DocumentContainer,
    declared_paths: Sequence[str],
    *,
    container_id: str | None = None,
    database_id: str | None = None,
) -> ContainerProperties:
    """Read the container's metadata once and return it, or raise one ``ContainerContractError`` naming every
    violation (CNT-01..04).

    A failed metadata read is wrapped (CNT-05) in a ``ContainerContractError`` naming the container and database,
    taken from ``container_id``/``database_id`` or the container's attributes of those names, with the read error as
    its ``__cause__``. Declared paths are validated first, so a bad declaration fails without any read.
    """
    declared = canonicalize_paths(declared_paths)
    try:
        properties = container.properties()
    except Exception as exc:
        cid = container_id or str(getattr(container, "container_id", None) or _UNKNOWN)
        did = database_id or str(getattr(container, "database_id", None) or _UNKNOWN)
        raise ContainerContractError(
            cid, did, [f"its metadata could not be read ({type(exc).__name__}: {exc})"]
        ) from exc
    violations = container_violations(properties, declared)
    if violations:
        raise ContainerContractError(properties.container_id, properties.database_id, violations)
    return properties


__all__ = ["STAMPED_ROOTS", "container_violations", "verify_monitored_container"]

"""Start-time verification of the monitored container (CNT-01..06) and of the lease container.

Some container settings make a drain lose or endlessly republish messages, silently: a positive ``defaultTtl``
purges pending documents before they are published; a partition path that differs from the declared one recovers
null partition keys, so every delivered stamp fails after its publish; a container partitioned on ``/status`` or
``/ttl`` cannot be stamped at all, because Cosmos DB refuses to patch a partition key. So the drain reads the
container's metadata once, before draining anything, and refuses to start with every violation named at once:
fixing them one restart at a time would cost a failed run per violation.

The lease container is checked in the same pass (``verify_containers``), and its violations join the same error
under its own name: it must be partitioned on ``/id`` (each lease is its own logical partition) and must not purge
leases and their checkpoints by a default TTL.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from airflow_chatter.drain.options import STATUS_PATCH_PATH, TTL_PATCH_PATH
from airflow_chatter.errors import LEASE_CONTAINER, MONITORED_CONTAINER, ContainerContractError, ContainerViolations
from airflow_chatter.outbox.partition_keys import canonicalize_path, canonicalize_paths, path_segments
from airflow_chatter.ports import ContainerProperties, DocumentContainer

#: Root fields the drain patches on every document; a partition path rooted at one could never be stamped.
STAMPED_ROOTS: frozenset[str] = frozenset(path_segments(STATUS_PATCH_PATH) + path_segments(TTL_PATCH_PATH))

_UNKNOWN = "<unknown>"
_LEASE_CONTAINER_PATH = "/id"


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


def lease_container_violations(properties: ContainerProperties) -> tuple[str, ...]:
    """Every violation of the lease container: partitioned on ``/id``, and no default TTL that purges leases."""
    violations: list[str] = []
    if tuple(properties.partition_key_paths) != (_LEASE_CONTAINER_PATH,):
        violations.append(
            f"it is partitioned on [{_describe(properties.partition_key_paths)}], but a lease container must be "
            f"partitioned on {_LEASE_CONTAINER_PATH!r} (each lease is its own logical partition)"
        )
    if properties.default_ttl is not None and properties.default_ttl != -1:
        violations.append(
            f"its defaultTtl {properties.default_ttl} would purge leases and their checkpoints; "
            "only unset or -1 is accepted"
        )
    return tuple(violations)


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
    checked = _check(
        container, MONITORED_CONTAINER, lambda p: container_violations(p, declared), container_id, database_id
    )
    _raise_for([checked])
    assert checked.properties is not None
    return checked.properties


def verify_containers(
    monitored: DocumentContainer, declared_paths: Sequence[str], leases: DocumentContainer
) -> tuple[ContainerProperties, ContainerProperties]:
    """Read both containers' metadata once each and return it (monitored, lease), or raise one
    ``ContainerContractError`` naming every violation of both, each under its own container (CNT-04, CNT-05).

    Declared paths are validated first, so a bad declaration fails without any read.
    """
    declared = canonicalize_paths(declared_paths)
    checked = [
        _check(monitored, MONITORED_CONTAINER, lambda p: container_violations(p, declared)),
        _check(leases, LEASE_CONTAINER, lease_container_violations),
    ]
    _raise_for(checked)
    monitored_properties, lease_properties = (c.properties for c in checked)
    assert monitored_properties is not None and lease_properties is not None
    return monitored_properties, lease_properties


@dataclass(frozen=True)
class _Checked:
    properties: ContainerProperties | None
    problems: ContainerViolations | None
    read_error: Exception | None = None


def _check(
    container: DocumentContainer,
    role: str,
    violations_of: Callable[[ContainerProperties], tuple[str, ...]],
    container_id: str | None = None,
    database_id: str | None = None,
) -> _Checked:
    try:
        properties = container.properties()
    except Exception as exc:  # noqa: BLE001 - CNT-05: wrapped, with the read error as the cause
        cid = container_id or str(getattr(container, "container_id", None) or _UNKNOWN)
        did = database_id or str(getattr(container, "database_id", None) or _UNKNOWN)
        read_failed = f"its metadata could not be read ({type(exc).__name__}: {exc})"
        return _Checked(None, ContainerViolations(role, cid, did, (read_failed,)), exc)
    violations = violations_of(properties)
    if not violations:
        return _Checked(properties, None)
    return _Checked(properties, ContainerViolations(role, properties.container_id, properties.database_id, violations))


def _raise_for(checked: Sequence[_Checked]) -> None:
    problems = [c.problems for c in checked if c.problems is not None]
    if not problems:
        return
    cause = next((c.read_error for c in checked if c.read_error is not None), None)
    raise ContainerContractError.of(problems) from cause


__all__ = [
    "STAMPED_ROOTS",
    "container_violations",
    "lease_container_violations",
    "verify_containers",
    "verify_monitored_container",
]

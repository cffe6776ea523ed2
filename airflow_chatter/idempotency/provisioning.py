"""The idempotency container (IDM-C01): partitioned on ``/scope``, TTL on with nothing expiring by default.

Partitioning by scope keeps every operation on one key inside one logical partition, which is what makes the
create-or-conditionally-replace protocol atomic. ``defaultTtl = -1`` turns TTL on without a default expiry, so each
document's own ``ttl`` rules: a container without ``defaultTtl`` ignores item ``ttl`` and keeps every entry forever,
and a positive default would also do what the documents do not ask for.

:func:`container_differences` is pure (it judges ``ContainerProperties``); creating the container is the
azure-cosmos adapter's job: ``airflow_chatter.adapters.cosmos.provision.provision_idempotency_container``.
"""

from __future__ import annotations

from airflow_chatter.ports import ContainerProperties

PARTITION_KEY_PATH = "/scope"
DEFAULT_CONTAINER_ID = "idempotency"
DEFAULT_TTL = -1


def container_differences(properties: ContainerProperties) -> list[str]:
    """Every way ``properties`` differs from an idempotency container; empty when it is one."""
    differences = []
    if properties.partition_key_paths != (PARTITION_KEY_PATH,):
        shown = ", ".join(properties.partition_key_paths) or "none"
        differences.append(f"its partition key path is {shown}, expected {PARTITION_KEY_PATH}")
    if properties.default_ttl is None:
        differences.append(f"its TTL is off (no defaultTtl), expected defaultTtl {DEFAULT_TTL}")
    elif properties.default_ttl != DEFAULT_TTL:
        differences.append(f"its defaultTtl is {properties.default_ttl} seconds, expected {DEFAULT_TTL}")
    return differences


__all__ = [
    "DEFAULT_CONTAINER_ID",
    "DEFAULT_TTL",
    "PARTITION_KEY_PATH",
    "container_differences",
]

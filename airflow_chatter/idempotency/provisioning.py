"""The idempotency container (IDM-C01): partitioned on ``/scope``, TTL on with nothing expiring by default.

Partitioning by scope keeps every operation on one key inside one logical partition, which is what makes the
create-or-conditionally-replace protocol atomic. ``defaultTtl = -1`` turns TTL on without a default expiry, so each
document's own ``ttl`` rules: a container without ``defaultTtl`` ignores item ``ttl`` and keeps every entry forever,
and a positive default would also do what the documents do not ask for.

:func:`container_differences` is pure (it judges ``ContainerProperties``); :func:`provision_container` is the
azure-cosmos side and imports the SDK only when called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_chatter.idempotency.errors import IdempotencyContainerError
from airflow_chatter.ports import Conflict, ContainerProperties, NotFound

if TYPE_CHECKING:
    from azure.cosmos import DatabaseProxy

    from airflow_chatter.ports import DocumentContainer

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


def provision_container(
    database: DatabaseProxy,
    container_id: str = DEFAULT_CONTAINER_ID,
    *,
    throughput: int | None = None,
) -> DocumentContainer:
    """Create the idempotency container if it does not exist, and return it as a ``DocumentContainer``.

    An existing container (or one a concurrent caller just created) is verified instead: one that differs raises
    :class:`IdempotencyContainerError` naming every difference. ``throughput`` (RU/s) applies only on creation.
    """
    from azure.cosmos import PartitionKey

    from airflow_chatter.adapters.cosmos import CosmosDocumentContainer, translated_errors

    container = CosmosDocumentContainer(database.get_container_client(container_id))
    try:
        properties = container.properties()
    except NotFound:
        try:
            with translated_errors():
                database.create_container(
                    id=container_id,
                    partition_key=PartitionKey(path=PARTITION_KEY_PATH),
                    default_ttl=DEFAULT_TTL,
                    offer_throughput=throughput,
                )
        except Conflict:
            pass  # created meanwhile by someone else: verify it like any existing container
        properties = container.properties()
    differences = container_differences(properties)
    if differences:
        raise IdempotencyContainerError(properties.container_id, properties.database_id, differences)
    return container


__all__ = [
    "DEFAULT_CONTAINER_ID",
    "DEFAULT_TTL",
    "PARTITION_KEY_PATH",
    "container_differences",
    "provision_container",
]

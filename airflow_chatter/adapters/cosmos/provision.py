"""Create the containers a source needs, once, before its first drain (``airflow-chatter provision``).

Only the lease container is created: its shape is the library's own (one logical partition per lease, so
partitioned on ``/id``; no default TTL, which would purge leases and their checkpoints). The monitored container and
its database belong to the application that writes the outbox, so they are only checked, never created here.
"""

from __future__ import annotations

from dataclasses import dataclass

from azure.cosmos import DatabaseProxy

from airflow_chatter.adapters.cosmos.container import create_container, translated_errors
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.ports import Conflict, NotFound

#: The lease container's partition-key path (drain/leases.py: every lease is its own logical partition). The drain's
#: start-time check refuses any other, so a container made with a different path here would fail at once.
LEASE_PARTITION_KEY_PATH = "/id"


@dataclass(frozen=True)
class LeaseContainerResult:
    """What ``ensure_lease_container`` found or did."""

    database_id: str
    container_id: str
    created: bool


def ensure_lease_container(database: DatabaseProxy, container_id: str) -> LeaseContainerResult:
    """Create the lease container (partitioned on ``/id``, no default TTL) unless it exists.

    An existing container is left as it is, whatever its shape: the drain's start-time check (run next by the
    provision command) names what is wrong with it. A missing database is a ``ConfigurationError``: the database
    holds the monitored container, so it is the application's to create.
    """
    try:
        with translated_errors():
            database.get_container_client(container_id).read()
        return LeaseContainerResult(database.id, container_id, created=False)
    except NotFound:
        pass
    try:
        create_container(database, container_id, (LEASE_PARTITION_KEY_PATH,))
    except Conflict:  # created meanwhile by another run: as good as ours
        return LeaseContainerResult(database.id, container_id, created=False)
    except NotFound:
        raise ConfigurationError(
            "database", database.id, "does not exist; create it with the monitored container first"
        ) from None
    return LeaseContainerResult(database.id, container_id, created=True)

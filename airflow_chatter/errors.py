"""The project's exception classes (spec F-06).

Every error the core raises on purpose is a ``ChatterError``, so a caller can tell "the library refused" from "a
dependency broke". Argument-shaped errors also subclass ``ValueError`` because that is what they are to Python code.
Messages always name the thing at fault (an option and its value, a container and its database, a lease id), since
the operator reading them sees only the task log.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class ChatterError(Exception):
    """Base class of every error airflow-chatter raises deliberately."""


class ConfigurationError(ChatterError, ValueError):
    """An option has a value the library refuses; raised when a source, hook or DAG is built (CFG rules)."""

    def __init__(self, option: str, value: object, reason: str = "is invalid") -> None:
        self.option = option
        self.value = value
        self.reason = reason
        super().__init__(f"{option}={value!r} {reason}")


class DuplicateSourceError(ConfigurationError):
    """Two sources would share one processor name, so one lease set would serve both (SRC-04)."""

    def __init__(self, processor_name: str, first: str, second: str) -> None:
        self.processor_name = processor_name
        self.first = first
        self.second = second
        super().__init__(
            "source",
            second,
            f"resolves to the same source identity (processor name {processor_name!r}) as source {first!r}; "
            "two sources over the same monitored and lease containers must declare distinct source identities, "
            "because a lease cannot tell their filters or body resolvers apart",
        )


#: The roles a container plays for a drain, as ``ContainerContractError`` names them.
MONITORED_CONTAINER = "Monitored container"
LEASE_CONTAINER = "Lease container"


@dataclass(frozen=True)
class ContainerViolations:
    """Everything wrong with one container a drain was given (CNT), named by its role, id and database."""

    role: str
    container_id: str
    database_id: str
    violations: tuple[str, ...]

    def __str__(self) -> str:
        what = "cannot be drained" if self.role == MONITORED_CONTAINER else "cannot hold the drain's leases"
        return f"{self.role} {self.container_id!r} in database {self.database_id!r} {what}: " + "; and ".join(
            self.violations
        )


class ContainerContractError(ChatterError):
    """A container the drain was given cannot be used safely; raised once, at drain start, with every violation of
    every container at once (CNT-04), each under its own container's name: fixing them one restart at a time would
    cost a failed run per violation.

    ``containers`` holds one ``ContainerViolations`` per container at fault (the monitored one first);
    ``container_id``/``database_id`` name the first of them, ``violations`` lists all of them in that order.
    """

    def __init__(
        self,
        container_id: str,
        database_id: str,
        violations: Sequence[str],
        *,
        role: str = MONITORED_CONTAINER,
        more: Sequence[ContainerViolations] = (),
    ) -> None:
        self.containers = (ContainerViolations(role, container_id, database_id, tuple(violations)), *more)
        self.container_id = container_id
        self.database_id = database_id
        self.violations = tuple(v for container in self.containers for v in container.violations)
        super().__init__(". ".join(str(container) for container in self.containers))

    @classmethod
    def of(cls, containers: Sequence[ContainerViolations]) -> ContainerContractError:
        """One error for every container at fault (at least one)."""
        first, *rest = containers
        return cls(first.container_id, first.database_id, first.violations, role=first.role, more=rest)


class ItemIdTooLongError(ChatterError, ValueError):
    """A composed item id exceeds Cosmos DB's 1023-character id limit (OBX-04)."""

    def __init__(self, item_id_length: int, limit: int, kind: str) -> None:
        self.item_id_length = item_id_length
        self.limit = limit
        self.kind = kind
        super().__init__(
            f"The {kind} item id for this message id would be {item_id_length} characters long, "
            f"over the Cosmos DB id limit of {limit}; use a shorter message id"
        )


class ReservedIdError(ChatterError, ValueError):
    """An application document uses an id in the framework's ``outbox:``/``inbox:`` namespace (OBX-05)."""

    def __init__(self, item_id: str) -> None:
        self.item_id = item_id
        super().__init__(
            f"Item id {item_id!r} is in the reserved 'outbox:'/'inbox:' namespace; only airflow-chatter writes those"
        )


class DrainSuspendedError(ChatterError):
    """A batch was refused because its lease is under Drain Suspension (SUS-04); nothing was published."""

    def __init__(
        self, lease_token: str, source_identity: str, message: str | None = None, *, lease_id: str | None = None
    ) -> None:
        self.lease_token = lease_token
        self.lease_id = lease_id
        self.source_identity = source_identity
        # Named by its id, as the drain summary names it; the feed range is the detail.
        lease = repr(lease_token) if lease_id is None else f"{lease_id!r} (feed range {lease_token})"
        super().__init__(
            message
            or f"Lease {lease} of source {source_identity!r} is under Drain Suspension; the batch was refused "
            "without publishing"
        )


class ConfirmationFailed(ChatterError):
    """Internal carrier: the delivered stamp failed after a confirmed publish (RLY-06).

    The engine counts it as a Confirmation Failure and re-raises ``original``; callers never see the carrier.
    """

    def __init__(self, original: BaseException) -> None:
        if not isinstance(original, BaseException):
            # A carrier with nothing inside would make the engine re-raise None; refuse to build it.
            raise TypeError("ConfirmationFailed requires the stamp fault it carries")
        self.original = original
        super().__init__(f"Confirmation failed after publish: {original!r}")


class UnknownPublisherError(ChatterError):
    """A document names a messaging infrastructure the source has no publisher for (F-03: a host concern)."""

    def __init__(self, infrastructure: str, message_id: str | None = None) -> None:
        self.infrastructure = infrastructure
        self.message_id = message_id
        super().__init__(
            f"Outbox document {message_id!r} names messaging infrastructure {infrastructure!r}, "
            "for which no publisher is configured; the batch is retried once one is"
        )


class InvalidLeaseDocumentError(ChatterError):
    """A lease document in the lease container does not have the shape the drain writes (F-04)."""

    def __init__(self, lease_id: str, reason: str) -> None:
        self.lease_id = lease_id
        self.reason = reason
        super().__init__(f"Lease document {lease_id!r} is invalid: {reason}")


__all__ = [
    "ChatterError",
    "ConfigurationError",
    "ConfirmationFailed",
    "ContainerContractError",
    "ContainerViolations",
    "DrainSuspendedError",
    "DuplicateSourceError",
    "InvalidLeaseDocumentError",
    "ItemIdTooLongError",
    "LEASE_CONTAINER",
    "MONITORED_CONTAINER",
    "ReservedIdError",
    "UnknownPublisherError",
]

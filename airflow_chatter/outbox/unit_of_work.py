"""The Unit of Work of the document tier: one partition's writes, outbox messages and Inbox Marker, one batch (DTW).

An application stages its own writes (create, upsert, replace with an ETag, patch, delete), the outbox messages
that announce them (OBX-01/02) and, when it handles a delivery, the Inbox Marker as operation 0 (DTI-01). ``commit``
executes all of it as one Cosmos transactional batch, so the business change, the messages and the "handled" record
land together or not at all. Nothing staged means no request at all (DTW-03).

Why the checks run at staging time: Cosmos refuses a batch over 100 operations or about 2 MB, and it refuses it only
when it is sent. Counting here gives the caller a clear error naming the operation that broke the limit before any
write, instead of a 400/413 after the handler already did its work.

Nothing here imports Airflow.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from airflow_chatter.errors import ChatterError, ConfigurationError
from airflow_chatter.outbox.document import OutboxMessage
from airflow_chatter.outbox.item_ids import guard_not_reserved
from airflow_chatter.outbox.partition_keys import canonicalize_paths, recover_partition_key
from airflow_chatter.ports import (
    BatchFailed,
    BatchOperation,
    BatchOperationResult,
    Document,
    DocumentContainer,
    PartitionKey,
    PatchOperation,
)

#: Cosmos DB's transactional batch limits: at most 100 operations, and a request of at most 2 MB.
MAX_BATCH_OPERATIONS = 100
MAX_BATCH_BYTES = 2 * 1024 * 1024

#: What a staged operation is for: the reason a failure report gives, and how a 409 on op 0 is recognised.
OperationRole = Literal["inbox-marker", "outbox", "write"]


class UnitOfWorkError(ChatterError):
    """Base class of the unit of work's errors."""


class BatchLimitError(UnitOfWorkError, ValueError):
    """Staging one more operation would break a transactional-batch limit; nothing was written."""


class UnitOfWorkClosedError(UnitOfWorkError):
    """The unit of work was already committed or discarded; stage into a new one."""


class CommitFailedError(UnitOfWorkError):
    """The batch did not commit: nothing of it was written (DTW-04). Names the operation that failed and why."""

    def __init__(self, failure: BatchFailed, staged: Sequence[StagedOperation]) -> None:
        self.failure = failure
        self.failed_index = failure.failed_index
        self.status_code = failure.status_code
        culprit = staged[failure.failed_index] if 0 <= failure.failed_index < len(staged) else None
        self.role: OperationRole | None = culprit.role if culprit else None
        self.item_id: str | None = culprit.operation.id if culprit else None
        self.kind: str | None = culprit.operation.kind.value if culprit else None
        what = f"{self.kind} of {self.role} {self.item_id!r}" if culprit else "an unknown operation"
        super().__init__(
            f"The unit of work did not commit: operation {failure.failed_index} ({what}) failed with status "
            f"{failure.status_code} ({failure}); nothing of the batch was written"
        )


@dataclass(frozen=True)
class StagedOperation:
    """One staged batch operation, what it is for, and its estimated request size in bytes."""

    operation: BatchOperation
    role: OperationRole
    size: int


def _estimated_size(operation: BatchOperation) -> int:
    """The JSON size of what the operation sends (body or patch operations), plus its id: the batch-size estimate."""
    payload: Any = operation.body
    if operation.patch_operations:
        payload = [p.as_cosmos() for p in operation.patch_operations]
    body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, default=str) if payload is not None else ""
    return len(body.encode()) + len(operation.id.encode()) + 64  # 64: the operation's own envelope, generously


class UnitOfWork:
    """Writes to one partition of one container, committed as one transactional batch.

    ``partition_key_paths`` are the container's partition-key paths (a string or a list for a hierarchical key) and
    ``partition_key`` the partition this unit of work is bound to. Every document staged must carry that partition
    value at those paths (outbox documents have it stamped). Usable as a context manager: a clean exit commits, an
    exception discards (nothing written). One use only: after ``commit`` or ``discard`` further staging raises.
    """

    def __init__(
        self,
        container: DocumentContainer,
        partition_key_paths: str | Sequence[str],
        partition_key: PartitionKey,
    ) -> None:
        self.container = container
        self.partition_key_paths = canonicalize_paths(partition_key_paths)
        # A hierarchical key given as a tuple compares as the list a document's values recover to.
        self.partition_key: PartitionKey = list(partition_key) if isinstance(partition_key, tuple) else partition_key
        self._marker: StagedOperation | None = None
        self._staged: list[StagedOperation] = []
        self._bytes = 0
        self._closed = False

    # -- what is staged ------------------------------------------------------------------------------------

    @property
    def operations(self) -> tuple[StagedOperation, ...]:
        """Every staged operation in batch order: the Inbox Marker (if any) first."""
        return ((self._marker,) if self._marker else ()) + tuple(self._staged)

    def __len__(self) -> int:
        return len(self._staged) + (1 if self._marker else 0)

    @property
    def closed(self) -> bool:
        return self._closed

    # -- the application's writes ---------------------------------------------------------------------------

    def create(self, document: Document) -> None:
        """Stage the creation of an application document (409 at commit if its id exists)."""
        self._stage(BatchOperation.create(self._checked(document)), "write")

    def upsert(self, document: Document, *, if_match: str | None = None) -> None:
        """Stage a create-or-replace of an application document."""
        self._stage(BatchOperation.upsert(self._checked(document), if_match=if_match), "write")

    def replace(self, document: Document, *, if_match: str | None = None) -> None:
        """Stage a replace; with ``if_match`` (the ETag you read) a concurrent change fails the commit with 412."""
        self._stage(BatchOperation.replace(self._checked(document), if_match=if_match), "write")

    def patch(
        self,
        item_id: str,
        operations: Sequence[PatchOperation],
        *,
        if_match: str | None = None,
        filter_predicate: str | None = None,
    ) -> None:
        """Stage a partial update of an application document."""
        self._guard_id(item_id)
        if not operations:
            raise ConfigurationError("operations", operations, "must hold at least one patch operation")
        self._stage(
            BatchOperation.patch(item_id, operations, if_match=if_match, filter_predicate=filter_predicate), "write"
        )

    def delete(self, item_id: str, *, if_match: str | None = None) -> None:
        """Stage the deletion of an application document."""
        self._guard_id(item_id)
        self._stage(BatchOperation.delete(item_id, if_match=if_match), "write")

    # -- framework-owned documents --------------------------------------------------------------------------

    def add_message(self, message: OutboxMessage) -> Document:
        """Stage a pending Outbox Document for ``message`` (OBX-01/02); the drain publishes it after the commit.

        Returns the staged document itself (the dict the batch will write), so a caller can log its id.
        """
        document = message.to_document(self.partition_key_paths, self.partition_key)
        self._stage(BatchOperation.create(document), "outbox")
        return document

    def stage_inbox_marker(self, marker: Document) -> None:
        """Stage the Inbox Marker as operation 0 (DTI-01): a duplicate delivery then fails the batch with 409 on it.

        Framework-owned (the reserved-id guard does not apply). At most one marker per unit of work.
        """
        self._guard_open()
        if self._marker is not None:
            raise UnitOfWorkError("this unit of work already holds an Inbox Marker: one delivery per unit of work")
        staged = self._staged_operation(BatchOperation.create(marker), "inbox-marker")
        self._marker = staged
        self._bytes += staged.size

    # -- commit ---------------------------------------------------------------------------------------------

    def commit(self) -> list[BatchOperationResult]:
        """Execute everything staged as one transactional batch; ``[]`` and no request when nothing is (DTW-03).

        ``CommitFailedError`` (carrying the ``BatchFailed``) when Cosmos refuses the batch: nothing was written.
        Either way the unit of work is closed.
        """
        self._guard_open()
        self._closed = True
        staged = self.operations
        if not staged:
            return []
        try:
            return self.container.execute_batch(self.partition_key, [s.operation for s in staged])
        except BatchFailed as failure:
            raise CommitFailedError(failure, staged) from failure

    def discard(self) -> None:
        """Drop everything staged; nothing is written."""
        self._closed = True
        self._marker = None
        self._staged.clear()
        self._bytes = 0

    def __enter__(self) -> UnitOfWork:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None and not self._closed:
            self.commit()
        elif not self._closed:
            self.discard()

    # -- checks ---------------------------------------------------------------------------------------------

    def _guard_open(self) -> None:
        if self._closed:
            raise UnitOfWorkClosedError("this unit of work was already committed or discarded; open a new one")

    @staticmethod
    def _guard_id(item_id: object) -> None:
        if not isinstance(item_id, str) or not item_id:
            raise ConfigurationError("id", item_id, "must be a non-empty string")
        guard_not_reserved(item_id)  # OBX-05: outbox:/inbox: ids are the framework's

    def _checked(self, document: Document) -> Document:
        if not isinstance(document, dict):
            raise ConfigurationError("document", type(document).__name__, "must be a JSON object (a dict)")
        self._guard_id(document.get("id"))
        carried = recover_partition_key(document, self.partition_key_paths)
        if carried != self.partition_key:
            raise ConfigurationError(
                "document",
                document["id"],
                f"carries partition key {carried!r} at {list(self.partition_key_paths)}, but this unit of work is "
                f"bound to {self.partition_key!r}: a transactional batch writes one partition",
            )
        return document

    def _staged_operation(self, operation: BatchOperation, role: OperationRole) -> StagedOperation:
        staged = StagedOperation(operation, role, _estimated_size(operation))
        if len(self) + 1 > MAX_BATCH_OPERATIONS:
            raise BatchLimitError(
                f"staging {operation.kind.value} of {operation.id!r} would make {len(self) + 1} operations: a "
                f"transactional batch holds at most {MAX_BATCH_OPERATIONS}; nothing was written"
            )
        if self._bytes + staged.size > MAX_BATCH_BYTES:
            raise BatchLimitError(
                f"staging {operation.kind.value} of {operation.id!r} ({staged.size} bytes) would make the batch "
                f"about {self._bytes + staged.size} bytes: a transactional batch is at most {MAX_BATCH_BYTES} bytes; "
                "nothing was written"
            )
        return staged

    def _stage(self, operation: BatchOperation, role: OperationRole) -> None:
        self._guard_open()
        staged = self._staged_operation(operation, role)
        self._staged.append(staged)
        self._bytes += staged.size


__all__ = [
    "MAX_BATCH_BYTES",
    "MAX_BATCH_OPERATIONS",
    "BatchLimitError",
    "CommitFailedError",
    "StagedOperation",
    "UnitOfWork",
    "UnitOfWorkClosedError",
    "UnitOfWorkError",
]

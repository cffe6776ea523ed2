"""F-10: the stamps of one publish run, delivered and undeliverable alike, written together, and what they mean.

In ``batched`` mode the engine hands this the stamps of a run's confirmed prefix in feed order: a delivered stamp
for each confirmed publish, an undeliverable stamp for each document the contract refused (CTR-04) or its publisher
rejected as unsendable, and the delivered stamp of each resolver drop (RSV-02). They go through one
:class:`~airflow_chatter.drain.stamps.StampWriter` call, so they share its per-partition-key transactional batches
(a batch refused as a whole falls back to one by one, so each document gets its own outcome).

What the outcomes mean is what the one-by-one order meant, document by document:

* a landed delivered stamp counts ``delivered``; a landed undeliverable stamp counts ``undeliverable`` and then
  logs its violation (CTR-05: stamp, then count, then log); a failed undeliverable stamp counts and logs nothing;
* a failed delivered stamp of a confirmed publish is a Confirmation Failure: the run raises ``ConfirmationFailed``
  with the first such error in feed order (one per page, SUS-02), before any receipt (SUS-12);
* a failed undeliverable or drop stamp is not (SUS-11/13): when no delivered stamp failed, the run raises that
  stamp's own error (the first in feed order), uncounted. When both kinds fail in one run, the Confirmation Failure
  wins: a message reached Kafka and its stamp did not, which is what Drain Suspension guards against;
* when every stamp landed, the receipt is minted from the last one in feed order (SUS-08: one per run).

Stamps of later documents that landed stay when an earlier one fails (F-10): those documents are finished, and the
page is not checkpointed, so the failed one is offered again.
"""

from __future__ import annotations

from enum import Enum

from airflow_chatter.drain.stamps import StampRequest, StampWriter
from airflow_chatter.drain.summary import DrainCounts
from airflow_chatter.drain.suspension import ConfirmationReceipt
from airflow_chatter.drain.telemetry import OUTCOME_DROPPED, DrainTelemetry
from airflow_chatter.errors import ConfirmationFailed
from airflow_chatter.outbox.document import UNDELIVERABLE
from airflow_chatter.ports import Document, PartitionKey, PatchOperation


class StampKind(Enum):
    """What a stamp records, which decides what its outcome counts and whether its failure is a Confirmation Failure."""

    DELIVERED = "delivered"
    UNDELIVERABLE = "undeliverable"
    DROPPED = "dropped"


class RunStamps:
    """Starts the stamps of a run (``batched``): :meth:`start` returns the run's :class:`StampRun`."""

    def __init__(
        self,
        writer: StampWriter,
        telemetry: DrainTelemetry,
        *,
        delivered_ops: tuple[PatchOperation, ...],
        delivered_value: str,
        undeliverable_ops: tuple[PatchOperation, ...],
    ) -> None:
        self.writer = writer
        self.telemetry = telemetry
        self.delivered_ops = delivered_ops
        self.delivered_value = delivered_value
        self.undeliverable_ops = undeliverable_ops

    def start(self) -> StampRun:
        return StampRun(self)


class StampRun:
    """One run's stamps, added in feed order, then written together by :meth:`write`.

    Kept as parallel lists (each stamp's request, its kind, and the violation text of the undeliverable ones by
    position) rather than one object per stamp: a run holds a whole page of documents.
    """

    __slots__ = ("_kinds", "_requests", "_stamps", "_violations")

    def __init__(self, stamps: RunStamps) -> None:
        self._stamps = stamps
        self._requests: list[StampRequest] = []
        self._kinds: list[StampKind] = []
        self._violations: dict[int, str] = {}

    def delivered(self, document: Document, partition_key: PartitionKey) -> None:
        stamps = self._stamps
        self._requests.append(StampRequest(document["id"], partition_key, stamps.delivered_ops, stamps.delivered_value))
        self._kinds.append(StampKind.DELIVERED)

    def undeliverable(self, document: Document, partition_key: PartitionKey, violation: str) -> None:
        """CTR-04: one op, ``status`` only, no ttl."""
        self._violations[len(self._requests)] = violation
        operations = self._stamps.undeliverable_ops
        self._requests.append(StampRequest(document["id"], partition_key, operations, UNDELIVERABLE))
        self._kinds.append(StampKind.UNDELIVERABLE)

    def dropped(self, document: Document, partition_key: PartitionKey, tally: DrainCounts) -> None:
        """RSV-02: drop-and-acknowledge, counted ``dropped`` when its stamp is tried, as the one-by-one order did."""
        stamps = self._stamps
        tally.dropped += 1
        stamps.telemetry.record_document(OUTCOME_DROPPED)
        self._requests.append(StampRequest(document["id"], partition_key, stamps.delivered_ops, stamps.delivered_value))
        self._kinds.append(StampKind.DROPPED)

    def write(self, tally: DrainCounts) -> ConfirmationReceipt | None:
        """Write the run's stamps together; count and log each landed one; raise as the module says."""
        if not self._requests:
            return None
        outcomes = self._stamps.writer.write(self._requests)
        confirmation_failure: BaseException | None = None
        other_failure: BaseException | None = None
        delivered = StampKind.DELIVERED
        landed_delivered = 0
        for index, (kind, outcome) in enumerate(zip(self._kinds, outcomes, strict=True)):
            if outcome.error is not None:
                if kind is delivered:
                    confirmation_failure = confirmation_failure or outcome.error
                else:
                    other_failure = other_failure or outcome.error
            elif kind is delivered:
                landed_delivered += 1
            elif kind is StampKind.UNDELIVERABLE:
                tally.undeliverable += 1
                self._stamps.telemetry.record_undeliverable(self._violations[index])
        tally.delivered += landed_delivered
        if confirmation_failure is not None:
            raise ConfirmationFailed(confirmation_failure) from confirmation_failure
        if other_failure is not None:
            raise other_failure
        last = outcomes[-1]
        assert last.written is not None
        return ConfirmationReceipt.from_status_write(last.written, last.request.status)


__all__ = ["RunStamps", "StampKind", "StampRun"]

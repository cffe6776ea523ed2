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

from collections.abc import Sequence
from enum import Enum

from airflow_chatter.drain.stamps import StampSheet, StampWriter
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

    Kept as the writer's :class:`~airflow_chatter.drain.stamps.StampSheet` (item ids and partition keys as columns)
    with the kind and violation text of the stamps that are not delivered stamps by position: a run holds a whole
    page of documents, and almost all of them are delivered.
    """

    __slots__ = ("_kinds", "_stamps", "_violations", "sheet")

    def __init__(self, stamps: RunStamps) -> None:
        self._stamps = stamps
        self.sheet = StampSheet(stamps.delivered_ops, stamps.delivered_value)
        self._kinds: dict[int, StampKind] = {}
        self._violations: dict[int, str] = {}

    def delivered(self, document: Document, partition_key: PartitionKey) -> None:
        self.sheet.ids.append(document["id"])
        self.sheet.keys.append(partition_key)

    def all_delivered(self, documents: Sequence[Document], partition_keys: Sequence[PartitionKey]) -> None:
        """A delivered stamp for each of ``documents`` (in ``partition_keys``), in order."""
        self.sheet.ids.extend([document["id"] for document in documents])
        self.sheet.keys.extend(partition_keys)

    def undeliverable(self, document: Document, partition_key: PartitionKey, violation: str) -> None:
        """CTR-04: one op, ``status`` only, no ttl."""
        index = len(self.sheet.ids)
        self._kinds[index] = StampKind.UNDELIVERABLE
        self._violations[index] = violation
        self.sheet.add(document["id"], partition_key, self._stamps.undeliverable_ops, UNDELIVERABLE)

    def dropped(self, document: Document, partition_key: PartitionKey, tally: DrainCounts) -> None:
        """RSV-02: drop-and-acknowledge, counted ``dropped`` when its stamp is tried, as the one-by-one order did."""
        tally.dropped += 1
        self._stamps.telemetry.record_document(OUTCOME_DROPPED)
        self._kinds[len(self.sheet.ids)] = StampKind.DROPPED
        self.delivered(document, partition_key)

    def write(self, tally: DrainCounts) -> ConfirmationReceipt | None:
        """Write the run's stamps together; count and log each landed one; raise as the module says.

        Batched mode only: a sequential writer stops at its first failure and leaves later stamps unreported.
        """
        sheet = self.sheet
        if not sheet.ids:
            return None
        results = self._stamps.writer.write_sheet(sheet)
        errors, kinds = results.errors, self._kinds
        confirmation_failure: BaseException | None = None
        other_failure: BaseException | None = None
        # Every position not in ``kinds`` is a delivered stamp; the failed ones are in ``errors``.
        landed_delivered = len(sheet.ids) - len(kinds)
        for index in sorted(errors):
            kind = kinds.get(index)
            if kind is None:
                confirmation_failure = confirmation_failure or errors[index]
                landed_delivered -= 1
            else:
                other_failure = other_failure or errors[index]
        for index, kind in kinds.items():  # in feed order: positions are added in order
            if kind is StampKind.UNDELIVERABLE and index not in errors:
                tally.undeliverable += 1
                self._stamps.telemetry.record_undeliverable(self._violations[index])
        tally.delivered += landed_delivered
        if confirmation_failure is not None:
            raise ConfirmationFailed(confirmation_failure) from confirmation_failure
        if other_failure is not None:
            raise other_failure
        assert results.last is not None
        return ConfirmationReceipt.from_status_write(results.last, sheet.status_at(len(sheet.ids) - 1))


__all__ = ["RunStamps", "StampKind", "StampRun"]

"""F-10: the stamps of one publish run, delivered and undeliverable alike, written together, and what they mean.

The engine hands this a publish run and its publish outcomes; the stamps of the run's confirmed prefix are written
in feed order, up to the first unconfirmed publish: a delivered stamp for each confirmed
publish, an undeliverable stamp for each document the contract refused (CTR-04) or its publisher rejected as
unsendable, and the delivered stamp of each resolver drop (RSV-02). They go through one
:meth:`~airflow_chatter.drain.stamps.StampWriter.write` call, so they share its per-partition-key batches (a batch
refused as a whole falls back to one by one, so each document gets its own outcome).

What the outcomes mean, document by document:

* a landed delivered stamp counts ``delivered``; a landed undeliverable stamp counts ``undeliverable`` and then
  logs its violation (CTR-05: stamp, then count, then log); a failed undeliverable stamp counts and logs nothing;
* a failed delivered stamp of a confirmed publish is a Confirmation Failure: the run raises ``ConfirmationFailed``
  with the first such error in feed order (one per page, SUS-02), before any receipt (SUS-12);
* a failed undeliverable or drop stamp is not (SUS-11/13): when no delivered stamp failed, the run raises that
  stamp's own error (the first in feed order), uncounted. When both kinds fail in one run, the Confirmation Failure
  wins: a message reached Kafka and its stamp did not, which is what Drain Suspension guards against;
* when every stamp landed, the receipt is minted from the last one in feed order (SUS-08: one per run);
* then an unconfirmed publish fails the run (RLY-05: no stamp for it, not a Confirmation Failure).

Stamps of later documents that landed stay when an earlier one fails (F-10): those documents are finished, and the
page is not checkpointed, so the failed one is offered again. A ``sequential`` writer stops at its first failure;
the stamps after it are not written, so they count nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import Any

from airflow_chatter.drain.options import STATUS_PATCH_PATH, TTL_PATCH_PATH, DeliverySettings
from airflow_chatter.drain.page_run import Run, Subject
from airflow_chatter.drain.stamps import StampRequest, StampWriter
from airflow_chatter.drain.summary import DrainCounts
from airflow_chatter.drain.suspension import ConfirmationReceipt
from airflow_chatter.drain.telemetry import OUTCOME_DROPPED, DrainTelemetry, SendSpan
from airflow_chatter.errors import ConfirmationFailed
from airflow_chatter.outbox.contract import Undeliverable
from airflow_chatter.outbox.document import UNDELIVERABLE
from airflow_chatter.ports import MessageRejected, PatchOperation, PublishError

#: CTR-04: one op, and no ttl: an undeliverable document must outlive any container default.
UNDELIVERABLE_OPERATIONS = (PatchOperation("set", STATUS_PATCH_PATH, UNDELIVERABLE),)


class StampKind(Enum):
    """What a stamp records, which decides what its outcome counts and whether its failure is a Confirmation Failure."""

    DELIVERED = "delivered"
    UNDELIVERABLE = "undeliverable"
    DROPPED = "dropped"


class RunStamps:
    """Writes the stamps of publish runs (F-10) to ``writer``, as the module says."""

    def __init__(self, writer: StampWriter, telemetry: DrainTelemetry, delivery: DeliverySettings) -> None:
        self._writer = writer
        self._telemetry = telemetry
        self._delivered_status = delivery.delivered_status_value
        self._delivered_operations = (
            PatchOperation("set", STATUS_PATCH_PATH, delivery.delivered_status_value),
            PatchOperation("set", TTL_PATCH_PATH, delivery.delivered_ttl_seconds),
        )

    @property
    def writer(self) -> StampWriter:
        """Where the stamps are written (an exactly-once recovery writes a committed page's stamps there too)."""
        return self._writer

    def write(
        self, run: Run, sent: Sequence[tuple[Subject, Any, SendSpan]], tally: DrainCounts
    ) -> ConfirmationReceipt | None:
        """Stamp the confirmed prefix of ``run`` (``sent``: each published subject's outcome and send span, in feed
        order), count and log each landed stamp, and raise as the module says."""
        published = iter(sent)
        # The stamps as columns: each one's request and what it records, and the violation text of the undeliverable.
        requests: list[StampRequest] = []
        kinds: list[StampKind] = []
        violations: dict[int, str] = {}
        failure: BaseException | None = None
        for document, key, disposition in zip(run.documents, run.keys, run.dispositions, strict=True):
            if disposition is None:
                tally.dropped += 1  # RSV-02: drop-and-acknowledge, counted when its stamp is tried
                self._telemetry.record_document(OUTCOME_DROPPED)
                kind = StampKind.DROPPED
            elif isinstance(disposition, Undeliverable):
                violations[len(requests)] = disposition.message
                kind = StampKind.UNDELIVERABLE
            else:
                subject, outcome, span = next(published)
                error = _end_send_span(subject, outcome, span)
                if isinstance(error, MessageRejected):
                    violations[len(requests)] = _rejected_reason(subject, error)
                    kind = StampKind.UNDELIVERABLE
                elif error is not None:
                    failure = error
                    break
                else:
                    kind = StampKind.DELIVERED
            if kind is StampKind.UNDELIVERABLE:
                requests.append(StampRequest(document["id"], key, UNDELIVERABLE_OPERATIONS, UNDELIVERABLE))
            else:
                requests.append(StampRequest(document["id"], key, self._delivered_operations, self._delivered_status))
            kinds.append(kind)
        receipt = self._write(requests, kinds, violations, tally) if requests else None
        if failure is not None:
            raise failure  # RLY-05: no stamp; not a Confirmation Failure
        return receipt

    def _write(
        self, requests: list[StampRequest], kinds: list[StampKind], violations: dict[int, str], tally: DrainCounts
    ) -> ConfirmationReceipt:
        outcomes = self._writer.write(requests)
        confirmation_failure: BaseException | None = None
        other_failure: BaseException | None = None
        for index, (outcome, kind) in enumerate(zip(outcomes, kinds, strict=False)):  # a sequential writer stops early
            if outcome.error is not None:
                if kind is StampKind.DELIVERED:
                    confirmation_failure = confirmation_failure or outcome.error
                else:
                    other_failure = other_failure or outcome.error
            elif kind is StampKind.DELIVERED:
                tally.delivered += 1
            elif kind is StampKind.UNDELIVERABLE:
                tally.undeliverable += 1
                self._telemetry.record_undeliverable(violations[index])
        if confirmation_failure is not None:
            raise ConfirmationFailed(confirmation_failure) from confirmation_failure
        if other_failure is not None:
            raise other_failure
        last = outcomes[-1]
        assert last.written is not None
        return ConfirmationReceipt.from_status_write(last.written, last.request.status)


def _end_send_span(subject: Subject, outcome: Any, span: SendSpan) -> BaseException | None:
    """End a message's send span by its publish outcome; return why it is not delivered, or ``None`` if it is.

    A ``MessageRejected`` (its publisher refuses it as unsendable: stamped undeliverable, CTR-04) or the failure of an
    unconfirmed publish (RLY-05: no stamp, the page fails).
    """
    if isinstance(outcome.error, MessageRejected):
        span.end(outcome.error)
        return outcome.error
    if not outcome.confirmed:
        failure: BaseException = outcome.error or PublishError(f"message {subject.message_id!r} was not confirmed")
        span.end(failure)
        return failure
    span.end()
    return None


def _rejected_reason(subject: Subject, error: MessageRejected) -> str:
    """The violation text of a message its publisher rejected as unsendable (CTR-04), naming the publisher's reason."""
    return f"Outbox document {subject.message_id!r} cannot be published as it is: {error}"[:2000]


__all__ = ["UNDELIVERABLE_OPERATIONS", "RunStamps", "StampKind"]

"""The drain engine: one lease's change feed → Kafka, with stamps, checkpoints and Drain Suspension.

For one *source* and one *lease* (feed range) a drain

1. takes the lease with an ETag-conditional write (a live lease of another drain is left alone);
2. reads the change feed from the lease's continuation in pages of at most ``max_batch_size``;
3. per page: records the batch, consults the persisted Drain Suspension state *before looking at any
   document* (SUS-04), then per document in feed order: pending gate, additional filter (once),
   resolver or Outbox Document Contract → undeliverable stamp, or publish (bounded batches, one
   confirmation per message) → delivered stamp;
4. fails closed at the first failing document (RLY-05..07) and checkpoints a page's continuation only
   after all of the page is confirmed (F-04);
5. updates the suspension state from Confirmation Failures and Receipts, releases the lease and
   returns a ``DrainSummary``.

The monitored container is verified once, when the engine is built (CNT): a container the drain
cannot serve safely is refused with every violation at once, never drained degraded.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from airflow_chatter.clock import Clock, utc_now
from airflow_chatter.drain.identity import SourceIdentity, SourceRegistry, instance_name
from airflow_chatter.drain.leases import ACTIVE, SPLIT, Lease, LeaseHeldError, LeaseStore
from airflow_chatter.drain.monitored_container import verify_containers
from airflow_chatter.drain.options import STATUS_PATCH_PATH, TTL_PATCH_PATH, SourceOptions
from airflow_chatter.drain.pacing import TokenBucket
from airflow_chatter.drain.page_run import PublishRun, Resolved, Run, Subject, Unsent
from airflow_chatter.drain.read_ahead import FeedReader, FeedRequest
from airflow_chatter.drain.request_units import LEASES, MeteredContainer, RequestUnits, ThrottleLimits
from airflow_chatter.drain.run_stamps import RunStamps
from airflow_chatter.drain.stamps import StampWriter
from airflow_chatter.drain.summary import DrainCounts, DrainSummary
from airflow_chatter.drain.suspension import ConfirmationReceipt, DrainGate
from airflow_chatter.drain.telemetry import (
    NO_SPAN,
    OUTCOME_ADMITTED,
    OUTCOME_DROPPED,
    OUTCOME_SKIPPED,
    DrainTelemetry,
    SendSpan,
)
from airflow_chatter.drain.topology import LeaseTopology
from airflow_chatter.errors import (
    ConfigurationError,
    ConfirmationFailed,
    DrainSuspendedError,
    UnknownPublisherError,
)
from airflow_chatter.outbox.contract import Deliverable, Undeliverable, verify
from airflow_chatter.outbox.document import MESSAGE_CONTEXT_FIELD, MESSAGE_ID_FIELD, UNDELIVERABLE, is_pending_outbox
from airflow_chatter.outbox.mapping import TRACE_HEADERS, to_outgoing_message
from airflow_chatter.outbox.partition_keys import partition_key_recoverer
from airflow_chatter.ports import (
    ChangeFeedStart,
    ContainerProperties,
    Document,
    DocumentContainer,
    FeedRange,
    FeedRangeGone,
    MessageRejected,
    OutgoingMessage,
    PartitionKey,
    PatchOperation,
    Publisher,
    PublishError,
)

#: The publisher a document naming no messaging infrastructure goes to (F-03).
DEFAULT_PUBLISHER = "kafka"

_LARGEST_TS = 253402300799  # 9999-12-31T23:59:59Z; a larger ``_ts`` is out of range (MET-01)


@dataclass(frozen=True)
class ResolveContext:
    """What a body resolver is given for one pending document (RSV-04).

    A fresh context is built per admitted document, so a resolver never sees another's state.
    """

    message_id: str
    partition_key: PartitionKey
    partition_key_paths: tuple[str, ...]
    document: Document


#: ``body_resolver(context) -> OutgoingMessage | None``; ``None`` drops and acknowledges (RSV-02).
BodyResolver = Callable[[ResolveContext], "OutgoingMessage | None"]


class DrainEngine:
    """Drains the leases of one source to its publishers.

    ``publishers`` is one ``Publisher`` (the default, for documents naming no messaging infrastructure)
    or a mapping from ``Chatter.Infrastructure.Type`` names to publishers that includes
    ``default_publisher`` (default ``"kafka"``) or has exactly one entry. ``clock`` is the UTC wall
    clock (suspension windows, lease expiry, lag); ``telemetry`` defaults to the global OpenTelemetry
    providers; ``owner`` names this drain on the leases it takes (default: host + uuid); ``registry``
    catches two sources sharing one processor name (SRC-04). ``start_from`` (aware UTC datetime) is where
    the leases this engine creates for new ranges start reading instead of the beginning: a backfill from a
    point in time. Leave it ``None`` for the scheduled drain (RLY-08). ``throttle_limits`` are the Cosmos
    connection's 429 limits (F-11); the source's ``max_throttle_*`` override them, and the default is 9 / 30 s.

    Building the engine verifies the monitored container (CNT) and the lease container (partitioned on
    ``/id``, no default TTL that would purge leases) and raises one ``ContainerContractError`` naming every violation
    of both, each under its own container's name.
    """

    def __init__(
        self,
        source: SourceOptions,
        monitored: DocumentContainer,
        leases: DocumentContainer,
        publishers: Mapping[str, Publisher] | Publisher,
        *,
        clock: Clock = utc_now,
        telemetry: DrainTelemetry | None = None,
        owner: str | None = None,
        default_publisher: str = DEFAULT_PUBLISHER,
        registry: SourceRegistry | None = None,
        start_from: datetime | None = None,
        throttle_limits: ThrottleLimits | None = None,
    ) -> None:
        self.source = source
        self._clock = clock
        # Seconds since the epoch, read once per admitted document (MET-01). For the default clock that is
        # ``time.time()``, the same reading without building an aware ``datetime`` (~1 µs) per document.
        self._timestamp_now: Callable[[], float] = time.time if clock is utc_now else lambda: clock().timestamp()
        self._telemetry = telemetry if telemetry is not None else DrainTelemetry()
        self._lag_metric = self._telemetry.lag_recorder
        # CNT: one error naming every violation of both containers, each under its own name.
        self.properties, lease_properties = verify_containers(monitored, source.partition_key_paths, leases)
        # F-11: every request of the drain is charged, paced under the source's cap and retried on 429 through these.
        cap = source.max_request_units_per_second
        self.request_units = RequestUnits(TokenBucket(cap) if cap is not None else None)
        # The Cosmos connection's 429 limits (``throttle_limits``), each overridden by the source's own.
        self.throttle_limits = (throttle_limits or ThrottleLimits()).overridden(
            source.max_throttle_retries, source.max_throttle_wait_seconds
        )
        self.monitored: DocumentContainer = MeteredContainer(monitored, self.request_units, self.throttle_limits)
        leases = MeteredContainer(leases, self.request_units, self.throttle_limits, kind=LEASES)
        # F-10: the page's delivered stamps, per partition key in batches (or one by one: ``stamp_mode``).
        self._stamps = StampWriter(self.monitored, source.stamp_mode, source.stamp_concurrency)  # type: ignore[arg-type]
        self._feed = FeedReader(self.monitored, read_ahead=source.stamp_mode != "sequential")
        # RLY-04: each document's partition key, recovered from the container's own paths.
        self._partition_key_of = partition_key_recoverer(self.properties.partition_key_paths)
        self.identity = _source_identity(source, self.properties, lease_properties)
        self.source_identity = self.identity.processor_name
        if registry is not None:
            registry.register(self.identity, source.name, source.additional_pending_filter, source.body_resolver)
        self._publishers, self._default_publisher = _publisher_table(publishers, default_publisher)
        self._default = self._publishers[self._default_publisher]
        self._gate = DrainGate(self.source_identity, clock=clock, telemetry=self._telemetry)
        self.store = LeaseStore(
            leases,
            self.source_identity,
            owner=owner or instance_name(),
            lease_prefix=source.lease_prefix,
            lease_duration_seconds=source.lease_duration_seconds,
            clock=clock,
            start_from=start_from,
        )
        self.topology = LeaseTopology(self.store, self.monitored)
        delivery = source.delivery
        self._delivered_value = delivery.delivered_status_value
        self._delivered_ops = (
            PatchOperation("set", STATUS_PATCH_PATH, delivery.delivered_status_value),
            PatchOperation("set", TTL_PATCH_PATH, delivery.delivered_ttl_seconds),
        )
        # CTR-04: one op, and no ttl: an undeliverable document must outlive any container default.
        self._undeliverable_ops = (PatchOperation("set", STATUS_PATCH_PATH, UNDELIVERABLE),)
        # F-10, batched: a run's delivered and undeliverable stamps written together (run_stamps.py says what each
        # outcome counts); sequential mode writes them one by one below, as RLY-07 had it.
        self._run_stamps = RunStamps(
            self._stamps,
            self._telemetry,
            delivered_ops=self._delivered_ops,
            delivered_value=self._delivered_value,
            undeliverable_ops=self._undeliverable_ops,
        )

    # ================================================================== public API

    def close(self) -> None:
        """Stop the threads the drain started (the stamp lanes, the read-ahead); a later drain starts them again.

        Idle, they would end with the process anyway; a task closes its engine so that none outlives the drain.
        """
        self._feed.close()
        self._stamps.close()

    def __enter__(self) -> DrainEngine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def ensure_leases(self) -> list[Lease]:
        """Create leases for the monitored container's current feed ranges; return the active ones."""
        return self.topology.ensure_leases()

    def drain_all(self, *, max_documents: int | None = None, max_seconds: float | None = None) -> list[DrainSummary]:
        """Drain every active lease once (and the children of any that split during the run).

        ``max_documents`` bounds each lease; ``max_seconds`` bounds the whole call. A failing lease
        does not stop its siblings (SUS-14); each summary reports its own lease.
        """
        deadline = None if max_seconds is None else time.monotonic() + max_seconds
        queue = [lease.id for lease in self.ensure_leases()]
        summaries: list[DrainSummary] = []
        while queue:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            summary = self.drain_lease(queue.pop(0), max_documents=max_documents, max_seconds=remaining)
            summaries.append(summary)
            queue.extend(summary.split_into)
        return summaries

    def drain_lease(
        self,
        lease: str | FeedRange,
        *,
        max_documents: int | None = None,
        max_seconds: float | None = None,
    ) -> DrainSummary:
        """Drain one lease (by id or feed range) for at most ``max_documents`` / ``max_seconds``.

        Never raises for a drain failure: the summary carries the original error (F-06), and
        ``raise_for_error()`` re-raises it. A lease held by another live drain is left alone and
        reported in ``lease_held_by``.
        """
        lease_id = lease if isinstance(lease, str) else self.store.lease_id(lease)
        if not isinstance(lease, str) and self.store.find(lease_id) is None:
            self.ensure_leases()  # a current feed range with no lease yet gets one (from its parent, if split)
        tally = DrainCounts(lease_id, source_identity=self.source_identity)
        budget = _Budget(max_documents, max_seconds)
        self.request_units.reset()
        try:
            current = self.store.acquire(lease_id)
        except LeaseHeldError as held:
            tally.lease_held_by = held.owner
            self._telemetry.log_info("Lease %s is held by %s; left alone", lease_id, held.owner)
            return DrainSummary.of(self._charged(tally))
        except Exception as exc:  # noqa: BLE001 - reported with its original type (F-06)
            self._telemetry.record_failure(self.source_identity, lease_id, exc)
            return DrainSummary.of(self._charged(tally), exc)
        tally.lease_token = current.token
        holder = _LeaseHolder(current)
        error: BaseException | None = None
        try:
            self._drain_pages(holder, tally, budget)
        except Exception as exc:  # noqa: BLE001 - reported, not swallowed: see raise_for_error
            error = exc
            self._telemetry.record_failure(self.source_identity, holder.lease.token, exc, lease_id=lease_id)
        finally:
            self._finish(holder, tally)
        summary = DrainSummary.of(self._charged(tally), error)
        self._telemetry.log_info("%s", summary.log_line())
        return summary

    def _charged(self, tally: DrainCounts) -> DrainCounts:
        """``tally`` with this drain's request units and 429s (F-11), which are also recorded as instruments."""
        units = self.request_units
        tally.request_units_by_kind = {kind: round(charge, 2) for kind, charge in units.by_kind().items()}
        tally.request_units = round(sum(tally.request_units_by_kind.values()), 2)
        tally.throttled, tally.throttle_limit_reached = units.throttled, units.throttle_limit_reached
        self._telemetry.record_request_units(tally.request_units_by_kind, units.throttled)
        return tally

    # ================================================================== the page loop

    def _drain_pages(self, holder: _LeaseHolder, tally: DrainCounts, budget: _Budget) -> None:
        if holder.lease.state != ACTIVE:
            # Retired: split (its children carry on; report them so drain_all drains them) or merged into a range
            # whose own lease drains it. Either way there is nothing left to read on this lease.
            if holder.lease.state == SPLIT:
                tally.split_into = tuple(self.store.lease_id(FeedRange(t)) for t in holder.lease.children)
            return
        try:
            self._drain_feed(holder, tally, budget)
        finally:
            self._feed.discard()  # a page read ahead and not consumed is dropped, its request finished (read_ahead.py)

    def _drain_feed(self, holder: _LeaseHolder, tally: DrainCounts, budget: _Budget) -> None:
        while not budget.exhausted(tally.documents):
            if self.store.needs_renewal(holder.lease):
                holder.lease = self.store.renew(holder.lease)
            lease = holder.lease
            try:
                request = self._feed_request(lease, lease.continuation, budget, tally)
                page = self._feed.read(request)
            except FeedRangeGone as gone:
                children = self.topology.split(lease, gone)
                tally.split_into = tuple(child.id for child in children)
                holder.released = True  # the parent is marked split; nothing left to release
                return
            tally.pages += 1
            tally.documents += len(page.documents)
            self._telemetry.record_batch(len(page.documents), self.source_identity, lease.token)
            # SUS-04 / BAT-03: the gate is consulted once per batch, before any document is looked at.
            decision = self._gate.consult(lease.suspension)
            if not decision.permitted:
                tally.refused_batches += 1
                raise DrainSuspendedError(lease.token, self.source_identity, lease_id=lease.id)
            if decision.probe:
                holder.lease = self.store.save_suspension(lease, decision.state)
            if len(page.documents) >= request.max_item_count and not budget.exhausted(tally.documents):
                # F-10 (batched): behind a full page, the next is read while this one is published and stamped.
                self._feed.prefetch(self._feed_request(lease, page.continuation, budget, tally))
            receipt = self._drain_page_or_count_failure(holder, page.documents, tally)
            suspension = holder.lease.suspension
            if receipt is not None:
                suspension = self._gate.present(lease.token, suspension, receipt, lease_id=lease.id)
            # F-04: only now, with every document of the page confirmed, may the continuation move.
            holder.lease = self.store.checkpoint(holder.lease, page.continuation, suspension)
            if not page.documents:
                return  # caught up

    def _feed_request(self, lease: Lease, continuation: str | None, budget: _Budget, tally: DrainCounts) -> FeedRequest:
        # The start is only consulted while there is no continuation. RLY-08: from the beginning, unless the lease
        # was created for a backfill from a point in time.
        start = lease.start_from if lease.start_from is not None else ChangeFeedStart.BEGINNING
        return FeedRequest(
            lease.feed_range, continuation, start, budget.page_size(self.source.max_batch_size, tally.documents)
        )

    def _drain_page_or_count_failure(
        self, holder: _LeaseHolder, documents: Sequence[Document], tally: DrainCounts
    ) -> ConfirmationReceipt | None:
        try:
            return self._drain_page(holder, documents, tally)
        except ConfirmationFailed as carrier:
            tally.confirmation_failures += 1
            lease = holder.lease
            state = self._gate.confirmation_failed(lease.token, lease.suspension, carrier.original, lease_id=lease.id)
            try:
                holder.lease = self.store.save_suspension(lease, state)
            except Exception as exc:  # noqa: BLE001 - the stamp fault is the error to report
                self._telemetry.log_cleanup_failure("saving the suspension state", exc)
            # RLY-06: callers see the stamp's own error type, never the carrier.
            raise carrier.original from None

    def _finish(self, holder: _LeaseHolder, tally: DrainCounts) -> None:
        lease = holder.lease
        tally.suspended = lease.suspension.suspended
        tally.continuation = lease.continuation
        if lease.checkpointed_at is not None:
            tally.continuation_age_seconds = max(0.0, (self._now() - lease.checkpointed_at).total_seconds())
        if holder.released:
            return
        try:
            self.store.release(lease)
        except Exception as exc:  # noqa: BLE001 - LOG-05: cleanup never replaces the drain's outcome
            self._telemetry.log_cleanup_failure(f"releasing lease {lease.id}", exc)

    # ================================================================== one page

    def _drain_page(
        self, holder: _LeaseHolder, documents: Sequence[Document], tally: DrainCounts
    ) -> ConfirmationReceipt | None:
        """Process a page in feed order; return the last receipt, or raise at the first failure.

        MET-02's ``skipped`` and ``admitted`` counts of the page are added once, when it ends (raising or not):
        the same sums as one ``add(1)`` per document, without an instrument call per document.
        """
        skipped, published = tally.skipped, tally.published
        try:
            return self._drain_page_documents(holder, documents, tally)
        finally:
            self._telemetry.record_document(OUTCOME_SKIPPED, tally.skipped - skipped)
            self._telemetry.record_document(OUTCOME_ADMITTED, tally.published - published)

    def _drain_page_documents(
        self, holder: _LeaseHolder, documents: Sequence[Document], tally: DrainCounts
    ) -> ConfirmationReceipt | None:
        def publish(run: Run) -> ConfirmationReceipt | None:
            return self._publish_and_stamp(holder, run, tally)

        def stamp_in_place(unsent: Unsent) -> ConfirmationReceipt:
            return self._stamp_unsent(unsent, tally)

        # F-10: in batched mode a document stamped without a publish rides the pending run (page_run.py).
        in_place = stamp_in_place if self._stamps.mode == "sequential" else None
        admit = self._admit
        with PublishRun(publish, in_place) as run:
            for document in documents:
                admit(document, run, tally)
        return run.receipt

    def _admit(self, document: Document, run: PublishRun, tally: DrainCounts) -> None:
        """Gate one document and hand it to the run: to publish (with its publisher), to stamp, or not at all.

        Runs no stamp itself: ``PublishRun`` keeps feed order (page_run.py): an earlier document is always published
        and stamped before a later one is stamped or fails.
        """
        # BAT-04: the pre-gate is the pure pending predicate; it runs no user code.
        if not is_pending_outbox(document):
            tally.skipped += 1  # MET-02 ``skipped``: added per page by _drain_page
            return
        pending_filter = self.source.additional_pending_filter
        if pending_filter is not None and not bool(pending_filter(document)):  # PND-03: evaluated exactly once
            tally.skipped += 1
            return
        self._record_lag(document, tally)
        partition_key = self._partition_key_of(document)
        if self.source.body_resolver is not None:
            resolved = self._resolve(document, partition_key, document[MESSAGE_ID_FIELD])
            if resolved is None:
                run.stamp(Unsent(document, partition_key))
            else:
                run.add(document, partition_key, resolved, self._default)
            return
        verdict = verify(document)
        if isinstance(verdict, Undeliverable):
            run.stamp(Unsent(document, partition_key, verdict))
            return
        # F-03 UnknownPublisherError: a host concern, retried next run. Most documents name no infrastructure.
        publisher = self._default if verdict.infrastructure is None else self._publisher_for(verdict)
        run.add(document, partition_key, verdict, publisher)

    def _resolve(self, document: Document, partition_key: PartitionKey, message_id: str) -> Resolved | None:
        """RSV-01..06: the resolver replaces verbatim reconstruction; the contract is not evaluated.

        ``None``: the resolver dropped the document (RSV-02). A resolver that raises fails the page here, with no
        stamp (RSV-03); earlier documents are finished first.
        """
        resolver = self.source.body_resolver
        assert resolver is not None
        resolved = resolver(ResolveContext(message_id, partition_key, self.properties.partition_key_paths, document))
        if resolved is None:
            return None
        if not isinstance(resolved, OutgoingMessage):
            raise ConfigurationError("body_resolver", type(resolved).__name__, "must return an OutgoingMessage or None")
        return Resolved(message_id, resolved.topic, _persisted_context(document), resolved)

    def _stamp_unsent(self, unsent: Unsent, tally: DrainCounts) -> ConfirmationReceipt:
        """Sequential mode: the stamp of a document that is not published, written in place."""
        if unsent.verdict is None:
            return self._drop(unsent.document, unsent.partition_key, tally)
        return self._stamp_undeliverable(unsent.document, unsent.partition_key, unsent.verdict, tally)

    def _drop(self, document: Document, partition_key: PartitionKey, tally: DrainCounts) -> ConfirmationReceipt:
        """RSV-02: drop-and-acknowledge. A failure here is an ordinary drain failure (SUS-13)."""
        tally.dropped += 1
        self._telemetry.record_document(OUTCOME_DROPPED)
        written = self.monitored.patch(document["id"], partition_key, self._delivered_ops)
        return ConfirmationReceipt.from_status_write(written, self._delivered_value)

    def _stamp_undeliverable(
        self, document: Document, partition_key: PartitionKey, verdict: Undeliverable, tally: DrainCounts
    ) -> ConfirmationReceipt:
        """CTR-04/05: stamp, then count, then log; a failed stamp reports nothing and propagates."""
        written = self.monitored.patch(document["id"], partition_key, self._undeliverable_ops)
        tally.undeliverable += 1
        self._telemetry.record_undeliverable(verdict.message)
        return ConfirmationReceipt.from_status_write(written, UNDELIVERABLE)

    def _stamp_rejected(
        self,
        document: Document,
        partition_key: PartitionKey,
        subject: Subject,
        error: MessageRejected,
        tally: DrainCounts,
    ) -> None:
        """CTR-04 for a message its publisher rejected as unsendable (an illegal topic name, a field that does not
        encode): no resend can help, so the document is stamped ``undeliverable`` and the lease advances past it,
        instead of failing its page on every run forever. The violation text names the publisher's reason."""
        verdict = Undeliverable(subject.message_id, (), _rejected_reason(subject, error))
        self._stamp_undeliverable(document, partition_key, verdict, tally)

    def _publish_and_stamp(self, holder: _LeaseHolder, run: Run, tally: DrainCounts) -> ConfirmationReceipt | None:
        """Publish a run's documents in one ``send_batch``, then stamp each confirmed message in feed order.

        In batched mode the run also holds the documents stamped without a publish (page_run.py), stamped with it.

        NOTE: a Kafka batch is in flight as a whole, so when message k fails, messages after k may
        already be acknowledged. They are neither stamped nor checkpointed and go out again next run
        (at-least-once; consumers deduplicate on ``message-id``). What fail-closed guarantees is that
        no document after the first failure is *stamped*, and no later publish batch is sent.
        """
        subjects, keys = run.sends()
        if not subjects:
            return self._stamp_run_batched(run, (), (), (), tally)
        publisher = run.publisher
        assert publisher is not None
        written: Document | None = None
        with self._telemetry.send_spans(subjects) as spans:
            messages = self._messages(subjects, keys, spans)
            outcomes = publisher.send_batch(messages)  # PublishError propagates: RLY-05
            if len(outcomes) != len(messages):
                raise PublishError(f"publisher returned {len(outcomes)} outcomes for {len(messages)} messages")
            # MET-02 ``admitted`` (added per page by _drain_page): every message the broker confirmed, counted before
            # any stamp, so a run whose stamps fail still reports what reached Kafka (it goes out again next run).
            confirmed = sum(1 for outcome in outcomes if outcome.confirmed)
            tally.published += confirmed
            # F-04: a publish may take up to the producer's delivery timeout, as long as a lease lasts. Renewed here
            # when half of it is gone, the lease cannot lapse while this page is stamped and another drain take the
            # range over meanwhile; lost already (LeaseLostError), nothing is stamped (the new owner publishes).
            if self.store.needs_renewal(holder.lease):
                holder.lease = self.store.renew(holder.lease)
            if self._stamps.mode != "sequential":
                if confirmed == len(outcomes) and not run.unsent and spans[0] is NO_SPAN:
                    # The common case: every publish confirmed, nothing to stamp otherwise, no span to end.
                    stamps = self._run_stamps.start()
                    stamps.all_delivered(run.documents, run.keys)
                    return stamps.write(tally)
                return self._stamp_run_batched(run, subjects, outcomes, spans, tally)
            # Sequential mode stamps an Unsent in place, so the run holds only published documents.
            for document, key, subject, outcome, span in zip(
                run.documents, keys, subjects, outcomes, spans, strict=True
            ):
                error = _end_send_span(subject, outcome, span)
                if isinstance(error, MessageRejected):
                    self._stamp_rejected(document, key, subject, error, tally)
                    continue
                if error is not None:
                    raise error  # RLY-05: no stamp; not a Confirmation Failure
                written = self._stamp_delivered(document, key, tally)
        # SUS-08: one receipt per run is all the gate is shown (the page presents its last), so it is minted once,
        # from the last stamp that landed, not once per document.
        return None if written is None else ConfirmationReceipt.from_status_write(written, self._delivered_value)

    def _stamp_run_batched(
        self,
        run: Run,
        subjects: Sequence[Subject],
        outcomes: Sequence[Any],
        spans: Sequence[SendSpan],
        tally: DrainCounts,
    ) -> ConfirmationReceipt | None:
        """F-10: stamp the confirmed prefix of a run at once (per partition key, in batches); then fail as RLY-05/06.

        The run's documents, in feed order, up to the first unconfirmed publish: a delivered stamp for each
        confirmed publish, an undeliverable stamp for each rejected message and each Undeliverable verdict, the
        drop stamp of each resolver drop, all written together, each with its own outcome (run_stamps.py: what the
        outcomes count, which failure is a Confirmation Failure). Then an unconfirmed publish fails the page (no
        stamp for it, not a Confirmation Failure). Either way a failing page is not checkpointed.
        """
        sent = iter(zip(subjects, outcomes, spans, strict=True))
        stamps = self._run_stamps.start()
        failure: BaseException | None = None
        unsent = run.unsent
        for index, (document, key) in enumerate(zip(run.documents, run.keys, strict=True)):
            entry = unsent.get(index) if unsent else None
            if entry is not None:
                if entry.verdict is None:
                    stamps.dropped(document, key, tally)
                else:
                    stamps.undeliverable(document, key, entry.verdict.message)
                continue
            subject, outcome, span = next(sent)
            error = _end_send_span(subject, outcome, span)
            if isinstance(error, MessageRejected):
                stamps.undeliverable(document, key, _rejected_reason(subject, error))
                continue
            if error is not None:
                failure = error
                break
            stamps.delivered(document, key)
        receipt = stamps.write(tally)
        if failure is not None:
            raise failure  # RLY-05: no stamp; not a Confirmation Failure
        return receipt

    def _stamp_delivered(self, document: Document, partition_key: PartitionKey, tally: DrainCounts) -> Document:
        # The publish comes before the stamp so that a crash between them costs a duplicate message,
        # never a lost one. A failed stamp here is a Confirmation Failure (RLY-06, SUS-02..13).
        try:
            written = self.monitored.patch(document["id"], partition_key, self._delivered_ops)
        except Exception as exc:
            raise ConfirmationFailed(exc) from exc
        tally.delivered += 1
        return written

    def _messages(
        self, subjects: Sequence[Subject], keys: Sequence[PartitionKey], spans: Sequence[SendSpan]
    ) -> list[OutgoingMessage]:
        """The records of a run's published documents, each with its send span's trace headers (when tracing)."""
        strategy = self.source.key_strategy
        if spans[0] is NO_SPAN:  # tracing is off: no span has headers
            return [
                to_outgoing_message(subject, key, strategy) if isinstance(subject, Deliverable) else subject.message
                for subject, key in zip(subjects, keys, strict=True)
            ]
        return [
            self._message(subject, key, span.headers) for subject, key, span in zip(subjects, keys, spans, strict=True)
        ]

    def _message(self, subject: Subject, key: PartitionKey, headers: Mapping[str, str] | None) -> OutgoingMessage:
        if isinstance(subject, Deliverable):
            return to_outgoing_message(subject, key, self.source.key_strategy, trace_headers=headers)
        resolved = subject.message
        if not headers:
            return resolved
        kept = tuple((k, v) for k, v in resolved.headers if k not in TRACE_HEADERS)
        added = tuple((k, v.encode("utf-8")) for k, v in headers.items() if k in TRACE_HEADERS)
        return OutgoingMessage(resolved.topic, resolved.value, resolved.key, kept + added)

    # ================================================================== helpers

    def _publisher_for(self, deliverable: Deliverable) -> Publisher:
        name = deliverable.infrastructure
        if name is None:
            return self._publishers[self._default_publisher]
        publisher = self._publishers.get(name) or self._publishers.get(name.strip().lower())
        if publisher is None:
            raise UnknownPublisherError(name, deliverable.message_id)
        return publisher

    def _record_lag(self, document: Document, tally: DrainCounts) -> None:
        """MET-01: at admission, ``max(0, now - _ts)`` for an integer ``_ts`` in range."""
        ts = document.get("_ts")
        if type(ts) is not int and (isinstance(ts, bool) or not isinstance(ts, int)):
            return
        if not 0 <= ts <= _LARGEST_TS:
            return
        lag = max(0.0, self._timestamp_now() - ts)
        tally.lag(lag)
        self._lag_metric(lag)  # the histogram's own record: once per admitted document

    def _now(self) -> datetime:
        return self._clock().astimezone(UTC)


@dataclass
class _LeaseHolder:
    """The lease as last written by this drain (every write returns a new ETag)."""

    lease: Lease
    released: bool = False


@dataclass
class _Budget:
    max_documents: int | None
    max_seconds: float | None
    started: float = field(default_factory=time.monotonic)

    def exhausted(self, documents: int) -> bool:
        if self.max_documents is not None and documents >= self.max_documents:
            return True
        return self.max_seconds is not None and time.monotonic() - self.started >= self.max_seconds

    def page_size(self, max_batch_size: int, documents: int) -> int:
        if self.max_documents is None:
            return max_batch_size
        return max(1, min(max_batch_size, self.max_documents - documents))


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


def _persisted_context(document: Document) -> Mapping[str, Any]:
    """The persisted trace context of a document, for the resolver path's send span."""
    raw = document.get(MESSAGE_CONTEXT_FIELD)
    if not isinstance(raw, str) or not raw.strip():
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _source_identity(
    source: SourceOptions, monitored: ContainerProperties, lease: ContainerProperties
) -> SourceIdentity:
    """SRC-02: the declared pair when given, else the ground truth of both containers."""
    if source.monitored_source_identity is not None and source.lease_source_identity is not None:
        return SourceIdentity.declared(source.monitored_source_identity, source.lease_source_identity)
    return SourceIdentity.ground_truth(monitored, lease)


def _publisher_table(publishers: Mapping[str, Publisher] | Publisher, default: str) -> tuple[dict[str, Publisher], str]:
    if isinstance(publishers, Publisher):
        return {default: publishers}, default
    table = dict(publishers)
    if not table or not all(isinstance(p, Publisher) for p in table.values()):
        raise ConfigurationError("publishers", sorted(table), "must map infrastructure names to Publishers")
    if default not in table:
        if len(table) != 1:
            raise ConfigurationError("publishers", sorted(table), f"must include the default publisher {default!r}")
        default = next(iter(table))
    return table, default


__all__ = ["DEFAULT_PUBLISHER", "BodyResolver", "DrainCounts", "DrainEngine", "DrainSummary", "ResolveContext"]

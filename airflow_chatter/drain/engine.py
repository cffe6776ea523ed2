"""The drain engine: one lease's change feed → Kafka, with stamps, checkpoints and Drain Suspension.

For one *source* and one *lease* (feed range) a drain

1. takes the lease with an ETag-conditional write (a live lease of another drain is left alone);
2. reads the change feed from the lease's continuation in pages of at most ``max_batch_size``;
3. per page: records the batch, consults the persisted Drain Suspension state *before looking at any
   document* (SUS-04), then per document in feed order: pending gate, additional filter (once),
   resolver or Outbox Document Contract → undeliverable stamp, or publish (bounded batches, one confirmation per
   message) → delivered stamp; exactly once: the page in one Kafka transaction, stamped after it (exactly_once.py);
4. fails closed at the first failing document (RLY-05..07) and checkpoints a page's continuation only
   after all of the page is confirmed (F-04);
5. updates the suspension state from Confirmation Failures and Receipts, releases the lease and
   returns a ``DrainSummary``.

The containers are verified once, when the source's leases are opened (source.py, CNT): a container the drain
cannot serve safely is refused with every violation at once, never drained degraded.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Unpack

from airflow_chatter.drain.budget import DrainBudget
from airflow_chatter.drain.exactly_once import page_delivery
from airflow_chatter.drain.follow import Follow
from airflow_chatter.drain.identity import SourceRegistry
from airflow_chatter.drain.leases import ACTIVE, SPLIT, Lease, LeaseHeldError
from airflow_chatter.drain.options import SourceOptions
from airflow_chatter.drain.page_run import PublishRun, ResolveContext, Resolved, Run, Subject
from airflow_chatter.drain.publishers import DEFAULT_PUBLISHER, PublisherTable
from airflow_chatter.drain.read_ahead import FeedReader, FeedRequest
from airflow_chatter.drain.run_stamps import RunStamps
from airflow_chatter.drain.source import LeaseOpening, SourceLeases
from airflow_chatter.drain.stamps import StampWriter
from airflow_chatter.drain.summary import DrainCounts, DrainSummary
from airflow_chatter.drain.suspension import ConfirmationReceipt, DrainGate
from airflow_chatter.drain.telemetry import OUTCOME_ADMITTED, OUTCOME_SKIPPED, DrainTelemetry, error_type
from airflow_chatter.drain.tries import Attempt, earlier_tries, run_tries, try_entry
from airflow_chatter.errors import (
    ConfigurationError,
    ConfirmationFailed,
    DrainSuspendedError,
)
from airflow_chatter.outbox.contract import Deliverable, Undeliverable, verify
from airflow_chatter.outbox.document import MESSAGE_ID_FIELD, is_pending_outbox
from airflow_chatter.outbox.formats import to_cloudevent
from airflow_chatter.outbox.mapping import to_outgoing_message, with_trace_headers
from airflow_chatter.outbox.partition_keys import partition_key_recoverer
from airflow_chatter.ports import (
    ChangeFeedStart,
    Document,
    DocumentContainer,
    FeedRange,
    FeedRangeGone,
    OutgoingMessage,
    PartitionKey,
    Publisher,
    PublishError,
)

_LARGEST_TS = 253402300799  # 9999-12-31T23:59:59Z; a larger ``_ts`` is out of range (MET-01)


class DrainEngine:
    """Drains the leases of one source to its publishers.

    ``leases`` is the source's opened :class:`~airflow_chatter.drain.source.SourceLeases` (its containers already
    verified); :meth:`open` opens them and builds the engine in one call. ``publishers`` is one ``Publisher`` (the
    default, for documents naming no messaging infrastructure) or a mapping from ``Chatter.Infrastructure.Type``
    names to publishers that includes ``default_publisher`` (default ``"kafka"``) or has exactly one entry.

    ``telemetry`` defaults to the global OpenTelemetry providers; ``registry`` catches two sources sharing one
    processor name (SRC-04). Building the engine does no I/O.
    """

    def __init__(
        self,
        leases: SourceLeases,
        publishers: Mapping[str, Publisher] | Publisher,
        *,
        telemetry: DrainTelemetry | None = None,
        default_publisher: str = DEFAULT_PUBLISHER,
        registry: SourceRegistry | None = None,
    ) -> None:
        source = leases.source
        self.leases = leases
        self.source = source
        self.properties = leases.properties
        self.identity = leases.identity
        self.source_identity = leases.identity.processor_name
        self.monitored = leases.monitored
        self.store = leases.store
        self.topology = leases.topology
        self.request_units = leases.request_units
        self.throttle_limits = leases.throttle_limits
        self._clock = leases.clock
        self._telemetry = telemetry if telemetry is not None else DrainTelemetry()
        if registry is not None:
            registry.register(self.identity, source.name, source.additional_pending_filter, source.body_resolver)
        self._gate = DrainGate(self.source_identity, clock=self._clock, telemetry=self._telemetry)
        # RLY-04: each document's partition key, recovered from the container's own paths.
        self._partition_key_of = partition_key_recoverer(self.properties.partition_key_paths)
        # F-10: a run's stamps, per partition key in batches (or one by one: ``stamp_mode``).
        self._stamps = StampWriter(self.monitored, source.stamp_mode, source.stamp_concurrency)
        self._run_stamps = RunStamps(self._stamps, self._telemetry, source.delivery)
        # How a page reaches Kafka and its stamps: at least once, or in one transaction per page (exactly_once.py).
        table = PublisherTable(publishers, default_publisher)
        self._delivery = page_delivery(source, table, self._run_stamps, self.store, self._telemetry)
        self._feed = FeedReader(self.monitored, read_ahead=source.stamp_mode != "sequential")

    @classmethod
    def open(
        cls,
        source: SourceOptions,
        monitored: DocumentContainer,
        leases: DocumentContainer,
        publishers: Mapping[str, Publisher] | Publisher,
        *,
        telemetry: DrainTelemetry | None = None,
        default_publisher: str = DEFAULT_PUBLISHER,
        registry: SourceRegistry | None = None,
        **opening: Unpack[LeaseOpening],
    ) -> DrainEngine:
        """Open the source's leases (``SourceLeases.open``: verifies both containers, as ``opening`` says) and build
        its engine on them."""
        opened = SourceLeases.open(source, monitored, leases, **opening)
        return cls(opened, publishers, telemetry=telemetry, default_publisher=default_publisher, registry=registry)

    # ================================================================== public API

    def close(self) -> None:
        """Stop the drain's threads (stamp lanes, read-ahead), so none outlives it; a later drain restarts them."""
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

        A source with ``follow`` (F-12) follows its lease: it does not return when caught up, only at its bounds, a
        lost lease or a split. It needs the source to have one active lease (a second would wait for the first's
        bounds): with more, ``ConfigurationError`` names ``follow`` before any lease is taken (follow each lease in a
        ``drain_lease`` of its own, as the Airflow DAG maps one task per lease). The children of a split drain once.
        """
        deadline = None if max_seconds is None else time.monotonic() + max_seconds
        queue = [lease.id for lease in self.ensure_leases()]
        if self.source.follow and len(queue) > 1:
            raise ConfigurationError(
                "follow",
                True,
                f"follows one lease per drain; drain_all found {len(queue)}: follow each lease in a "
                "drain_lease of its own",
            )
        summaries: list[DrainSummary] = []
        follow: Follow | None = None  # the first lease: the source's own (it follows if the source says so)
        while queue:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            summary = self.drain_lease(queue.pop(0), max_documents=max_documents, max_seconds=remaining, follow=follow)
            summaries.append(summary)
            queue.extend(summary.split_into)
            follow = Follow.none()
        return summaries

    def drain_lease(
        self,
        lease: str | FeedRange,
        *,
        max_documents: int | None = None,
        max_seconds: float | None = None,
        follow: Follow | None = None,
        attempt: Attempt | None = None,
    ) -> DrainSummary:
        """Drain one lease (by id or feed range) for at most ``max_documents`` / ``max_seconds``; see follow.py.

        Never raises for a drain failure: the summary carries the original error (F-06), and
        ``raise_for_error()`` re-raises it. A lease held by another live drain is left alone and
        reported in ``lease_held_by``. With ``attempt`` (which try of which task run this is) the try's counts are
        recorded on the lease as it is released, and the summary's ``earlier_tries`` has those of the tries before it
        (``drain/tries.py``). Without ``follow`` the drain follows as the source says (F-12: ``follow``,
        ``follow_poll_seconds``); ``Follow.none()`` makes it a short drain whatever the source says.
        """
        lease_id = lease if isinstance(lease, str) else self.store.lease_id(lease)
        if not isinstance(lease, str) and self.store.find(lease_id) is None:
            self.ensure_leases()  # a current feed range with no lease yet gets one (from its parent, if split)
        tally = DrainCounts(lease=lease_id, source_identity=self.source_identity)
        budget = DrainBudget(max_documents, max_seconds)
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
        holder = _LeaseHolder(current, follow or self._source_follow(), attempt=attempt)
        error: BaseException | None = None
        try:
            self._drain_pages(holder, tally, budget)
        except Exception as exc:  # noqa: BLE001 - reported, not swallowed: see raise_for_error
            error = exc
            self._telemetry.record_failure(self.source_identity, holder.lease.token, exc, lease_id=lease_id)
        finally:
            self._delivery.close()
            self._finish(holder, tally, error)
        summary = DrainSummary.of(self._charged(tally), error)
        self._telemetry.log_info("%s", summary.log_line())
        return summary

    def _source_follow(self) -> Follow:
        """F-12: the source's own follow mode, for a drain the caller gives no ``Follow``."""
        return Follow(self.source.follow_poll_seconds) if self.source.follow else Follow.none()

    def _charged(self, tally: DrainCounts) -> DrainCounts:
        """``tally`` with this drain's request units and 429s (F-11), which are also recorded as instruments."""
        units = self.request_units
        tally.request_units_by_kind = {kind: round(charge, 2) for kind, charge in units.by_kind().items()}
        tally.request_units = round(sum(tally.request_units_by_kind.values()), 2)
        tally.throttled, tally.throttle_limit_reached = units.throttled, units.throttle_limit_reached
        tally.throttle_waited_seconds = round(units.throttle_waited_seconds, 3)
        rate = units.paced_rate
        tally.paced_request_units_per_second = round(rate, 1) if rate is not None else None
        self._telemetry.record_request_units(
            tally.request_units_by_kind,
            units.throttled,
            waited_seconds=tally.throttle_waited_seconds,
            paced_rate=tally.paced_request_units_per_second,
            source_identity=self.source_identity,
        )
        return tally

    # ================================================================== the page loop

    def _drain_pages(self, holder: _LeaseHolder, tally: DrainCounts, budget: DrainBudget) -> None:
        if holder.lease.state != ACTIVE:
            # Retired: split (its children carry on; report them so drain_all drains them) or merged into a range
            # whose own lease drains it. Either way there is nothing left to read on this lease.
            if holder.lease.state == SPLIT:
                tally.split_into = tuple(self.store.lease_id(FeedRange(t)) for t in holder.lease.children)
            return
        holder.lease = self._delivery.open(holder.lease, tally)  # exactly once: fence, then finish a committed page
        try:
            self._drain_feed(holder, tally, budget)
        finally:
            self._feed.discard()  # a page read ahead and not consumed is dropped, its request finished (read_ahead.py)

    def _drain_feed(self, holder: _LeaseHolder, tally: DrainCounts, budget: DrainBudget) -> None:
        while not budget.exhausted(tally.documents) and not (follow := holder.follow).stop_requested():
            follow.mark_units(self.request_units, self._telemetry)
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
                if follow.suspended(lease, budget, self._clock()):
                    continue  # following: wait for the probe window, publishing nothing
                raise DrainSuspendedError(lease.token, self.source_identity, lease_id=lease.id)
            if decision.probe:
                holder.lease = self.store.save_suspension(lease, decision.state)
            if len(page.documents) >= request.max_item_count and not budget.exhausted(tally.documents):
                # F-10 (batched): behind a full page, the next is read while this one is published and stamped.
                self._feed.prefetch(self._feed_request(lease, page.continuation, budget, tally))
            follow.before_publish(self.store, holder.lease, tally, bool(page.documents))  # a stolen lease, here
            receipt = self._drain_page(holder, page.documents, tally, page.continuation)
            suspension = holder.lease.suspension
            if receipt is not None:
                suspension = self._gate.present(lease.token, suspension, receipt, lease_id=lease.id)
            if not page.documents and suspension == holder.lease.suspension:
                following = follow.caught_up(self.store, holder.lease, page.continuation, tally, budget)
                if following is not None:
                    holder.lease = following
                    continue
            # F-04: only now, with every document of the page confirmed, may the continuation move. A following
            # drain's checkpoint carries its live counts too (a short drain's lease is written as it was).
            lease = follow.with_counts(holder.lease, tally, self.store)
            holder.lease = self.store.checkpoint(lease, page.continuation, suspension)
            if not page.documents:
                return  # caught up

    def _feed_request(
        self, lease: Lease, continuation: str | None, budget: DrainBudget, tally: DrainCounts
    ) -> FeedRequest:
        # The start is only consulted while there is no continuation. RLY-08: from the beginning, unless the lease
        # was created for a backfill from a point in time.
        start = lease.start_from if lease.start_from is not None else ChangeFeedStart.BEGINNING
        return FeedRequest(
            lease.feed_range, continuation, start, budget.page_size(self.source.max_batch_size, tally.documents)
        )

    def _drain_page(
        self, holder: _LeaseHolder, documents: Sequence[Document], tally: DrainCounts, after: str
    ) -> ConfirmationReceipt | None:
        """Drain a page; a Confirmation Failure is counted and shown to the gate, then raised as its stamp's error."""
        try:
            return self._publish_page(holder, documents, tally, after)
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

    def _finish(self, holder: _LeaseHolder, tally: DrainCounts, error: BaseException | None) -> None:
        lease = holder.lease
        tally.suspended = lease.suspension.suspended
        tally.continuation = lease.continuation
        if lease.checkpointed_at is not None:
            tally.continuation_age_seconds = max(0.0, (self._clock() - lease.checkpointed_at).total_seconds())
        record = None
        if holder.attempt is not None:
            # Every try counts: this try's counts ride on the release, the tries before it go into the summary.
            tally.earlier_tries = earlier_tries(lease.document, holder.attempt)
            entry = try_entry(
                holder.attempt, tally, self.request_units.total, error_type(error) if error is not None else None
            )
            record = run_tries(holder.attempt, tally.earlier_tries, entry)
        if holder.released:
            return
        try:
            self.store.release(lease, run_tries=record)
        except Exception as exc:  # noqa: BLE001 - LOG-05: cleanup never replaces the drain's outcome
            self._telemetry.log_cleanup_failure(f"releasing lease {lease.id}", exc)

    # ================================================================== one page

    def _publish_page(
        self, holder: _LeaseHolder, documents: Sequence[Document], tally: DrainCounts, after: str
    ) -> ConfirmationReceipt | None:
        """Process a page in feed order; return the last receipt, or raise at the first failure."""

        def publish(run: Run) -> ConfirmationReceipt | None:
            return self._publish_and_stamp(holder, run, tally)

        # F-10: a document stamped without a publish rides the pending run; sequential gives it a run of its own.
        with self._delivery.page(holder.lease, after, tally):
            with PublishRun(publish, ends_at_unsent=self.source.stamp_mode == "sequential") as run:
                for document in documents:
                    self._admit(document, run, tally, holder.follow)
            return self._delivery.finish(run.receipt, tally)

    def _admit(self, document: Document, run: PublishRun, tally: DrainCounts, follow: Follow) -> None:
        """Gate one document and hand it to the run: to publish (with its publisher), to stamp, or not at all.

        Runs no stamp itself: ``PublishRun`` keeps feed order (page_run.py): an earlier document is always published
        and stamped before a later one is stamped or fails.
        """
        # BAT-04: the pre-gate is the pure pending predicate; it runs no user code.
        pending_filter = self.source.additional_pending_filter
        if not is_pending_outbox(document) or (
            pending_filter is not None and not bool(pending_filter(document))  # PND-03: evaluated exactly once
        ):
            tally.skipped += 1
            self._telemetry.record_document(OUTCOME_SKIPPED)
            return
        self._record_lag(document, tally, follow)
        partition_key = self._partition_key_of(document)
        if self.source.body_resolver is not None:
            resolved = self._resolve(document, partition_key, document[MESSAGE_ID_FIELD])
            if resolved is None:
                run.stamp(document, partition_key, None)
            else:
                run.add(document, partition_key, resolved, self._delivery.publishers.default)
            return
        verdict = verify(document)
        if isinstance(verdict, Undeliverable):
            run.stamp(document, partition_key, verdict)
            return
        run.add(document, partition_key, verdict, self._delivery.publishers.publisher_for(verdict))

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
        return Resolved.of(message_id, resolved, document)

    def _publish_and_stamp(self, holder: _LeaseHolder, run: Run, tally: DrainCounts) -> ConfirmationReceipt | None:
        """Publish a run's subjects in one ``send_batch``, then stamp its confirmed prefix in feed order.

        NOTE: a Kafka batch is in flight as a whole, so when message k fails, messages after k may
        already be acknowledged. They are neither stamped nor checkpointed and go out again next run
        (at-least-once; consumers deduplicate on ``message-id``). What fail-closed guarantees is that
        no document after the first failure is *stamped*, and no later publish batch is sent.
        """
        subjects, keys = run.sends()
        if not subjects:
            return self._delivery.stamps(run, [], tally)
        assert run.publisher is not None
        with self._telemetry.send_spans(subjects) as spans:
            messages = [self._message(s, k, span.headers) for s, k, span in zip(subjects, keys, spans, strict=True)]
            outcomes = run.publisher.send_batch(messages)  # PublishError propagates: RLY-05
            if len(outcomes) != len(messages):
                raise PublishError(f"publisher returned {len(outcomes)} outcomes for {len(messages)} messages")
            # MET-02 ``admitted``: every message the broker confirmed, counted before any stamp, so a run whose stamps
            # fail still reports what reached Kafka (it goes out again next run).
            confirmed = sum(1 for outcome in outcomes if outcome.confirmed)
            tally.published += confirmed
            self._telemetry.record_document(OUTCOME_ADMITTED, confirmed)
            # F-04: a publish may take up to the producer's delivery timeout, as long as a lease lasts. Renewed here
            # when half of it is gone, the lease cannot lapse while this page is stamped and another drain take the
            # range over meanwhile; lost already (LeaseLostError), nothing is stamped (the new owner publishes).
            if self.store.needs_renewal(holder.lease):
                holder.lease = self.store.renew(holder.lease)
            return self._delivery.stamps(run, list(zip(subjects, outcomes, spans, strict=True)), tally)

    def _message(self, subject: Subject, key: PartitionKey, headers: Mapping[str, str] | None) -> OutgoingMessage:
        """The record of a published document, with its send span's trace headers (when tracing)."""
        if isinstance(subject, Deliverable):
            message = to_outgoing_message(subject, key, self.source.key_strategy, trace_headers=headers)
            if self.source.message_format == "cloudevents":  # F-13
                return to_cloudevent(message, subject, self.source_identity, self._clock().timestamp())
            return message
        return with_trace_headers(subject.message, headers)

    def _record_lag(self, document: Document, tally: DrainCounts, follow: Follow | None = None) -> None:
        """MET-01: at admission, ``max(0, now - _ts)`` for an integer ``_ts`` in range."""
        ts = document.get("_ts")
        if isinstance(ts, bool) or not isinstance(ts, int) or not 0 <= ts <= _LARGEST_TS:
            return
        lag = max(0.0, self._clock().timestamp() - ts)
        tally.lag(lag)
        if follow is not None:
            follow.admitted(lag)
        self._telemetry.record_lag(lag)


@dataclass
class _LeaseHolder:
    """The lease as last written by this drain (every write returns a new ETag)."""

    lease: Lease
    follow: Follow
    released: bool = False
    attempt: Attempt | None = None


__all__ = ["DrainEngine"]

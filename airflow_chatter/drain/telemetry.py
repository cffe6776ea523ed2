"""The drain's telemetry: seven OpenTelemetry instruments, guarded always-on logs, send spans.

Metrics (MET-01..09, F-09) go through the OpenTelemetry *API* only. Without an SDK the global meter
provider is a no-op, so nothing is recorded and draining is unchanged (MET-08). Logs (LOG-01..05) go
through standard ``logging`` on the ``airflow_chatter.drain`` logger and are always on; every log call
is guarded so that a broken logger, filter or handler never changes which error a caller sees.

Trace context (RLY-09): when a tracer provider is configured, each published message gets a PRODUCER
span that is a child of the context persisted in the document's ``MessageContext``, and the outgoing
``traceparent``/``tracestate`` come from that span. Without one, the persisted entries ride out
unchanged (the mapping copies them from the context).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from opentelemetry import metrics, trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

#: F-09: the meter (and tracer) name; the reference's is ``Chatter.MessageBrokers.Reliability.Cosmos``.
METER_NAME = "airflow_chatter"
#: LOG-01..05 are written here.
LOGGER_NAME = "airflow_chatter.drain"

LAG = "chatter.messaging.outbox.drain.lag"
DOCUMENTS = "chatter.messaging.outbox.drain.documents"
BATCH_SIZE = "chatter.messaging.outbox.drain.batch.size"
BATCHES = "chatter.messaging.outbox.drain.batches"
FAILURES = "chatter.messaging.outbox.drain.failures"
UNDELIVERABLE = "chatter.messaging.outbox.drain.undeliverable"
SUSPENSIONS = "chatter.messaging.outbox.drain.suspensions"
#: F-11: request units charged to the drain, by kind; and 429s answered to it.
REQUEST_UNITS = "chatter.messaging.outbox.drain.request_units"
THROTTLED = "chatter.messaging.outbox.drain.throttled"
THROTTLE_WAIT = "chatter.messaging.outbox.drain.throttle_wait"
PACED_RATE = "chatter.messaging.outbox.drain.paced_rate"
ATTR_REQUEST_KIND = "chatter.messaging.outbox.request_kind"
#: Follow mode (drain/follow.py): change-feed polls of a caught-up drain, those that found nothing, and what the
#: empty ones cost (an idle lease's whole bill).
POLLS = "chatter.messaging.outbox.drain.follow.polls"
EMPTY_POLLS = "chatter.messaging.outbox.drain.follow.empty_polls"
EMPTY_POLL_REQUEST_UNITS = "chatter.messaging.outbox.drain.follow.empty_poll_request_units"
#: Exactly-once drains (drain/exactly_once.py): page transactions by outcome (committed, aborted), drains fenced by
#: a takeover, and committed pages a drain found unstamped on taking its lease and finished without republishing.
TRANSACTIONS = "chatter.messaging.outbox.drain.transactions"
FENCED = "chatter.messaging.outbox.drain.fenced"
RECOVERED_PAGES = "chatter.messaging.outbox.drain.recovered_pages"
TRANSACTION_COMMITTED = "committed"
TRANSACTION_ABORTED = "aborted"

ATTR_OUTCOME = "chatter.messaging.outbox.drain.outcome"
ATTR_LEASE_TOKEN = "chatter.messaging.outbox.lease_token"
ATTR_SOURCE_IDENTITY = "chatter.messaging.outbox.source_identity"
ATTR_ERROR_TYPE = "error.type"

OUTCOME_ADMITTED = "admitted"
OUTCOME_SKIPPED = "skipped"
OUTCOME_DROPPED = "dropped"

#: Advised histogram buckets (contract, MET section).
LAG_BUCKETS: tuple[float, ...] = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 600)
BATCH_SIZE_BUCKETS: tuple[float, ...] = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000)

#: The drain's counters: name -> (unit, description). One ``create_counter`` call makes them all.
_COUNTERS: dict[str, tuple[str, str]] = {
    DOCUMENTS: ("{document}", "Documents handed to the drain, by outcome."),
    BATCHES: ("{batch}", "Change-feed batches handed to the drain."),
    FAILURES: ("{failure}", "Faults reported for a lease (batch raised)."),
    UNDELIVERABLE: ("{document}", "Documents stamped undeliverable."),
    SUSPENSIONS: ("{suspension}", "Drain Suspensions opened."),
    REQUEST_UNITS: ("{request_unit}", "Request units charged to drains, by kind of request."),
    THROTTLED: ("{response}", "429 (throttled) answers to drain requests."),
    THROTTLE_WAIT: ("s", "Wall-clock seconds drains waited on 429s (overlapping waits once)."),
    POLLS: ("{poll}", "Change-feed polls of following drains (after a wait)."),
    EMPTY_POLLS: ("{poll}", "Polls of following drains that found no new page."),
    EMPTY_POLL_REQUEST_UNITS: ("{request_unit}", "Request units charged to the empty polls of following drains."),
    TRANSACTIONS: ("{transaction}", "Page transactions of exactly-once drains, by outcome."),
    FENCED: ("{drain}", "Exactly-once drains stopped because a takeover fenced them."),
    RECOVERED_PAGES: ("{page}", "Committed pages stamped by recovery, never republished."),
}

_PROPAGATOR = TraceContextTextMapPropagator()


def error_type(error: BaseException) -> str:
    """The ``error.type`` attribute value: the error's class name (the unwrapped fault, MET-05)."""
    return type(error).__name__


class DrainTelemetry:
    """Instruments, logs and spans for one drain engine.

    ``meter_provider`` / ``tracer_provider`` default to the global ones (no-ops without an SDK);
    ``logger`` defaults to ``logging.getLogger("airflow_chatter.drain")``.
    """

    def __init__(
        self,
        meter_provider: metrics.MeterProvider | None = None,
        tracer_provider: trace.TracerProvider | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        provider = meter_provider if meter_provider is not None else metrics.get_meter_provider()
        meter = provider.get_meter(METER_NAME)
        self._lag = meter.create_histogram(
            LAG,
            unit="s",
            description="Age of an admitted outbox document at admission.",
            explicit_bucket_boundaries_advisory=LAG_BUCKETS,
        )
        self._batch_size = meter.create_histogram(
            BATCH_SIZE,
            unit="{document}",
            description="Documents per change-feed batch.",
            explicit_bucket_boundaries_advisory=BATCH_SIZE_BUCKETS,
        )
        self._paced_rate = meter.create_gauge(
            PACED_RATE,
            unit="{request_unit}/s",
            description="The RU/s a drain paced itself to at its end (its cap, or lower after 429s), by source.",
        )
        self._counters = {
            name: meter.create_counter(name, unit=unit, description=text) for name, (unit, text) in _COUNTERS.items()
        }
        self._tracer_provider = tracer_provider
        self._logger = logger if logger is not None else logging.getLogger(LOGGER_NAME)

    # ---------------------------------------------------------------- metrics (MET-01..07)

    def record_lag(self, seconds: float) -> None:
        """MET-01: one value per admitted document that carries an integer ``_ts``."""
        self._lag.record(seconds)

    def record_document(self, outcome: str, count: int = 1) -> None:
        """MET-02: ``admitted`` after publish returns, ``dropped`` on a null resolve, ``skipped``.

        ``count``: how many documents had this outcome (a publish run's confirmed messages are ``admitted`` at once).
        """
        if count:
            self._counters[DOCUMENTS].add(count, {ATTR_OUTCOME: outcome})

    def record_request_units(
        self,
        by_kind: Mapping[str, float],
        throttled: int,
        *,
        waited_seconds: float = 0.0,
        paced_rate: float | None = None,
        source_identity: str | None = None,
    ) -> None:
        """F-11: once per drain, its charges by kind (``feed``, ``stamps``, ``leases``, ``other``), its 429s, the
        time it waited on them and the rate it paced itself to (when paced)."""
        for kind, charge in by_kind.items():
            if charge:
                self._counters[REQUEST_UNITS].add(charge, {ATTR_REQUEST_KIND: kind})
        if throttled:
            self._counters[THROTTLED].add(throttled)
        if waited_seconds:
            self._counters[THROTTLE_WAIT].add(waited_seconds)
        if paced_rate is not None:
            self._paced_rate.set(paced_rate, {ATTR_SOURCE_IDENTITY: source_identity or ""})

    def record_transaction(self, outcome: str, source_identity: str, lease_token: str) -> None:
        """An exactly-once page's transaction ended: ``committed`` or ``aborted``."""
        self._counters[TRANSACTIONS].add(1, {ATTR_OUTCOME: outcome, **_lease_attributes(source_identity, lease_token)})

    def record_fenced(self, source_identity: str, lease_token: str) -> None:
        """An exactly-once drain stopped: another drain took its lease and fenced its producer."""
        self._counters[FENCED].add(1, _lease_attributes(source_identity, lease_token))

    def record_recovered_page(self, source_identity: str, lease_token: str) -> None:
        """A committed page found unstamped when its lease was taken, stamped without republishing."""
        self._counters[RECOVERED_PAGES].add(1, _lease_attributes(source_identity, lease_token))

    def record_poll(self, source_identity: str, lease_token: str, *, empty: bool, request_units: float = 0.0) -> None:
        """Follow mode: one poll of a caught-up lease; an empty one also counts its request units."""
        attributes = _lease_attributes(source_identity, lease_token)
        self._counters[POLLS].add(1, attributes)
        if empty:
            self._counters[EMPTY_POLLS].add(1, attributes)
            if request_units:
                self._counters[EMPTY_POLL_REQUEST_UNITS].add(request_units, attributes)

    def record_batch(self, size: int, source_identity: str, lease_token: str) -> None:
        """MET-03/04: always paired, same attributes, once per batch before any document."""
        attributes = _lease_attributes(source_identity, lease_token)
        self._batch_size.record(size, attributes)
        self._counters[BATCHES].add(1, attributes)

    def record_failure(
        self, source_identity: str, lease_token: str, error: BaseException, *, lease_id: str | None = None
    ) -> None:
        """MET-05 + LOG-01: one fault reported for a lease, under the unwrapped error's type.

        The log names the lease by ``lease_id`` (as the summary does), with its feed range as the detail; the
        metric's ``lease_token`` attribute stays the range token (MET-05).
        """
        attributes = dict(_lease_attributes(source_identity, lease_token))
        attributes[ATTR_ERROR_TYPE] = error_type(error)
        self._counters[FAILURES].add(1, attributes)
        self._log(
            logging.ERROR,
            "Drain of lease %s failed: %s: %s",
            lease_label(lease_id, lease_token),
            error_type(error),
            error,
            exc_info=error,
        )

    def record_undeliverable(self, violation_text: str) -> None:
        """MET-06 + LOG-02: after the undeliverable stamp landed; the full text, no exception."""
        self._counters[UNDELIVERABLE].add(1)
        self._log(logging.ERROR, "Outbox document stamped undeliverable: %s", violation_text)

    def record_suspension_opened(
        self,
        source_identity: str,
        lease_token: str,
        consecutive_failures: int,
        fault: BaseException,
        *,
        lease_id: str | None = None,
    ) -> None:
        """MET-07 + LOG-03: once per opening, never on re-arm or close; the log names ``lease_id`` (range as detail)."""
        self._counters[SUSPENSIONS].add(1, _lease_attributes(source_identity, lease_token))
        self._log(
            logging.ERROR,
            "Drain Suspension opened for lease %s after %d consecutive confirmation failures; last stamp fault: %s: %s",
            lease_label(lease_id, lease_token),
            consecutive_failures,
            error_type(fault),
            fault,
            exc_info=fault,
        )

    def log_suspension_closed(self, lease_token: str, *, lease_id: str | None = None) -> None:
        """LOG-04: a Confirmation Receipt lifted the suspension of a lease that was suspended."""
        self._log(
            logging.INFO,
            "Drain Suspension of lease %s lifted by a confirmation receipt",
            lease_label(lease_id, lease_token),
        )

    def log_cleanup_failure(self, what: str, error: BaseException) -> None:
        """LOG-05: a cleanup after a failure could not complete; the original error is preserved."""
        self._log(logging.ERROR, "Cleanup failed (%s): %s: %s", what, error_type(error), error, exc_info=error)

    def log_info(self, message: str, *args: Any) -> None:
        """Guarded information log (run summaries, lease reports)."""
        self._log(logging.INFO, message, *args)

    def _log(self, level: int, message: str, *args: Any, exc_info: BaseException | None = None) -> None:
        # INVARIANT: a broken logger never changes the outcome. Pinned by
        # tests/unit/drain/test_drain_telemetry.py::test_log_broken_logger_never_changes_the_outcome; removing this
        # try/except makes that test see the logger's error instead of the drain's.
        try:
            self._logger.log(level, message, *args, exc_info=exc_info)
        except Exception:  # noqa: BLE001, S110 - deliberate: logging must never fail a drain
            pass

    # ---------------------------------------------------------------- trace context (RLY-09)

    @contextmanager
    def send_spans(self, messages: Sequence[SendSubject]) -> Iterator[list[SendSpan]]:
        """Start one PRODUCER span per message: its ``destination``, ``message_id`` and persisted ``context``.

        Yields handles whose ``headers`` are the ``traceparent``/``tracestate`` to put on the
        outgoing message, or ``None`` when tracing is off (then the persisted entries ride out
        unchanged). Spans still open when the block exits are ended (with an error status if it raised).
        """
        tracer = trace.get_tracer(METER_NAME, tracer_provider=self._tracer_provider)
        spans = [SendSpan.start(tracer, m.destination, m.message_id, m.context) for m in messages[:1]]
        traced = bool(spans) and spans[0] is not NO_SPAN
        if traced:
            spans.extend(SendSpan.start(tracer, m.destination, m.message_id, m.context) for m in messages[1:])
        else:
            # Tracing is off (a provider-wide fact): skip parsing every persisted context of the batch. A span
            # without a tracer span holds no state (``end`` does nothing), so one instance serves them all, and
            # there is nothing to end when the block exits.
            spans.extend([NO_SPAN] * (len(messages) - 1))
        try:
            yield spans
        except BaseException as exc:
            if traced:
                for span in spans:
                    span.end(exc)
            raise
        if traced:
            for span in spans:
                span.end()


class SendSubject(Protocol):
    """What a send span is started from: the message's destination, its id, and its persisted trace context."""

    @property
    def destination(self) -> str: ...

    @property
    def message_id(self) -> str: ...

    @property
    def context(self) -> Mapping[str, Any]: ...


class SendSpan:
    """One message's send span, and the trace headers derived from it."""

    def __init__(self, span: trace.Span | None, headers: dict[str, str] | None) -> None:
        self._span = span
        self.headers = headers
        self._ended = False

    @classmethod
    def start(cls, tracer: trace.Tracer, destination: str, message_id: str, context: Mapping[str, Any]) -> SendSpan:
        carrier = {k: v for k in ("traceparent", "tracestate") if isinstance(v := context.get(k), str)}
        parent = _PROPAGATOR.extract(carrier)
        parent_id = trace.get_current_span(parent).get_span_context().span_id
        span = tracer.start_span(
            f"send {destination}",
            context=parent,
            kind=SpanKind.PRODUCER,
            attributes={
                "messaging.system": "kafka",
                "messaging.operation.type": "send",
                "messaging.destination.name": destination,
                "messaging.message.id": message_id,
            },
        )
        span_context = span.get_span_context()
        # NOTE: the no-op tracer hands back the parent's context; only a real provider mints a new
        # span id. That difference is how "tracing enabled" is detected without peeking at SDK types.
        if not span_context.is_valid or span_context.span_id == parent_id:
            return NO_SPAN
        headers: dict[str, str] = {}
        _PROPAGATOR.inject(headers, context=trace.set_span_in_context(span))
        return cls(span, headers)

    def end(self, error: BaseException | None = None) -> None:
        """End the span once; an error marks it failed."""
        if self._span is None or self._ended:
            return
        self._ended = True
        if error is not None:
            self._span.set_status(Status(StatusCode.ERROR, str(error)))
            self._span.set_attribute(ATTR_ERROR_TYPE, error_type(error))
        self._span.end()


#: The send span of every message while tracing is off: no tracer span, no headers, nothing to end.
NO_SPAN = SendSpan(None, None)


def lease_label(lease_id: str | None, lease_token: str) -> str:
    """How logs and errors name a lease: its id (what the summary, XCom and the lease container show), with its feed
    range as the detail; just the token when no id is known."""
    if lease_id is None or lease_id == lease_token:
        return lease_token
    return f"{lease_id} (feed range {lease_token})"


def _lease_attributes(source_identity: str, lease_token: str) -> dict[str, str]:
    return {ATTR_SOURCE_IDENTITY: source_identity, ATTR_LEASE_TOKEN: lease_token}

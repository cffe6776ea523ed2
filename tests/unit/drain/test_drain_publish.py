"""Reconstruct, publish, delivered stamp (RLY-01..09), the pending gate (PND) and the contract path (CTR) in a drain."""

from __future__ import annotations

import json
import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from airflow_chatter.adapters.memory.faults import OperationCall, fail
from airflow_chatter.drain.telemetry import DOCUMENTS, UNDELIVERABLE
from airflow_chatter.outbox.document import UNDELIVERABLE as UNDELIVERABLE_STATUS
from airflow_chatter.ports import BatchOperation, BatchOperationKind, PublishError, ServiceUnavailable
from airflow_chatter.testing.fakes import FakePublisher, fail_all, fail_nth, unreachable
from airflow_chatter.testing.handlers import first_of

from ._drain_support import (
    ABSENT,
    Rig,
    calls,
    clear_faults,
    domain_doc,
    fail_operation,
    fail_stamp,
    header,
    outbox_doc,
)

SYSTEM = {"_etag", "_ts", "_lsn", "_rid", "_self", "_attachments"}


def _fields(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k not in SYSTEM}


@pytest.fixture
def rig() -> Rig:
    return Rig()


# ----------------------------------------------------------------------------------------- RLY


def test_rly_01_verbatim_reconstruction_to_kafka_record(rig: Rig) -> None:
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    doc = outbox_doc(
        "msg-1", "tenant-1", body='{"total": 5}', context={"traceparent": parent, "retries": 2, "who": "svc"}
    )
    rig.seed(doc)
    summary = rig.drain()
    assert summary.error is None and summary.published == 1
    (message,) = rig.publisher.sent
    assert message.topic == "orders", "topic = Destination"
    assert message.value == b'{"total": 5}', "value = the UTF-8 of MessageBody, verbatim"
    assert message.key == b"tenant-1", "key = the partition-key value (F-02)"
    assert header(message, "message-id") == b"msg-1" and header(message, "content-type") == b"application/json"
    assert header(message, "retries") == b"2" and header(message, "who") == b"svc", "every context entry rides out"
    assert header(message, "traceparent") == parent.encode(), "RLY-09: tracing off, persisted context unchanged"


def test_rly_02_sequential_publishing_never_writes_a_new_outbox_document(rig: Rig) -> None:
    rig.seed(outbox_doc("msg-1"), outbox_doc("msg-2"))
    rig.drain(rig.engine(stamp_mode="sequential"))
    assert calls(rig.monitored, "create") == 2, "only the two seeded documents were ever created"
    assert calls(rig.monitored, "upsert") == 0 and calls(rig.monitored, "execute_batch") == 0


def test_rly_02_f10_batched_publishing_never_writes_a_new_outbox_document_its_batches_only_patch(rig: Rig) -> None:
    rig.seed(outbox_doc("msg-1"), outbox_doc("msg-2"), outbox_doc("msg-u", Destination=ABSENT))
    batches: list[list[BatchOperation]] = []

    def record(call: OperationCall) -> bool:  # a fault rule that only watches: it never fires
        batches.append(list(call.arguments["operations"]))
        return False

    rig.monitored.handler = first_of(
        rig.monitored.handler, fail("execute_batch", error=AssertionError("never raised"), when=record)
    )
    summary = rig.drain(rig.engine(stamp_mode="batched"))
    assert (summary.delivered, summary.undeliverable) == (2, 1)
    assert calls(rig.monitored, "create") == 3, "only the three seeded documents were ever created"
    assert calls(rig.monitored, "upsert") == 0 and calls(rig.monitored, "replace") == 0
    assert len(batches) == 1, "one partition key, one transactional batch"
    assert {op.kind for op in batches[0]} == {BatchOperationKind.PATCH}, "the batch only patches: no op writes a body"
    assert sorted(op.id for op in batches[0]) == sorted(d["id"] for d in rig.monitored.query("SELECT * FROM c"))


def test_rly_03_delivered_stamp_is_one_patch_of_status_and_ttl(rig: Rig) -> None:
    (seeded,) = rig.seed(outbox_doc("msg-1", "t1"))
    rig.drain()
    after = rig.current(seeded)
    assert after["status"] == "delivered" and after["ttl"] == 86400
    assert {k: v for k, v in _fields(after).items() if k not in ("status", "ttl")} == {
        k: v for k, v in _fields(seeded).items() if k != "status"
    }, "a patch, not a replace: every other field is untouched"
    assert calls(rig.monitored, "patch") == 1, "exactly one patch for one document"


def test_rly_03_delivered_stamp_uses_the_configured_ttl(rig: Rig) -> None:
    from airflow_chatter.drain.options import DeliverySettings

    (seeded,) = rig.seed(outbox_doc("msg-1"))
    rig.drain(rig.engine(delivery=DeliverySettings(delivered_ttl_seconds=600, delivered_status_value="sent")))
    after = rig.current(seeded)
    assert after["status"] == "sent" and after["ttl"] == 600


def test_rly_04_partition_key_recovered_from_hierarchical_paths_keeps_json_kinds() -> None:
    rig = Rig(paths=("/tenant/id", "/region"))
    (seeded,) = rig.seed(outbox_doc("msg-1", ["t1", 5], paths=rig.paths))
    summary = rig.drain()
    assert summary.delivered == 1, "the stamp addressed the right logical partition"
    assert rig.current(seeded)["status"] == "delivered"
    assert rig.publisher.sent[0].key == b'["t1",5]', "hierarchical key = compact JSON array, number kept"


def test_rly_05_publish_failure_leaves_the_document_pending_and_the_lease_unmoved(rig: Rig) -> None:
    (seeded,) = rig.seed(outbox_doc("msg-1"))
    rig.publisher.handler = fail_all(PublishError("topic refused"))
    engine = rig.engine()
    summary = rig.drain(engine)
    assert summary.error_type == "PublishError" and "topic refused" in (summary.error_message or "")
    assert calls(rig.monitored, "patch") == 0, "no stamp after a failed publish"
    assert rig.current(seeded)["status"] == "pending"
    assert rig.lease(engine).continuation is None, "nothing checkpointed past the failing document"
    assert summary.confirmation_failures == 0, "a publish failure is not a Confirmation Failure"
    rig.publisher.handler = None
    assert rig.drain(engine).delivered == 1, "the document is re-offered next run"


def test_rly_05_broker_unreachable_for_the_whole_batch(rig: Rig) -> None:
    rig.seed(outbox_doc("msg-1"))
    rig.publisher.handler = unreachable(PublishError("no broker"))
    summary = rig.drain()
    assert summary.error_type == "PublishError" and summary.published == 0
    assert calls(rig.monitored, "patch") == 0


def test_rly_06_stamp_failure_after_publish_republishes_and_reports_the_original_error(rig: Rig) -> None:
    (seeded,) = rig.seed(outbox_doc("msg-1"))
    fail_operation(rig.monitored, "patch", ServiceUnavailable("patch down"))
    engine = rig.engine()
    first = rig.drain(engine)
    assert first.error_type == "ServiceUnavailable", "callers see the stamp's own type, never the carrier"
    assert isinstance(first.error, ServiceUnavailable)
    assert first.published == 1 and first.delivered == 0 and first.confirmation_failures == 1
    assert rig.current(seeded)["status"] == "pending"
    second = rig.drain(engine)
    assert second.published == 1, "at-least-once: one Kafka message per pass"
    assert len(rig.publisher.sent) == 2
    with pytest.raises(ServiceUnavailable):
        second.raise_for_error()


def test_rly_07_sequential_fail_closed_stops_the_rest_of_the_batch(rig: Rig) -> None:
    a = outbox_doc("msg-a")
    u = outbox_doc("msg-u", Destination=ABSENT)
    c = outbox_doc("msg-c")
    rig.seed(a, u, c)
    rig.publisher.handler = fail_nth(1, PublishError("a refused"))
    engine = rig.engine(stamp_mode="sequential")
    summary = rig.drain(engine)
    assert summary.error_type == "PublishError"
    assert rig.current(u)["status"] == "pending", "a later document is not stamped undeliverable"
    assert rig.current(c)["status"] == "pending", "a later document is not stamped"
    assert [m.topic for m in rig.publisher.attempted] == ["orders"], "a later document is not even published"
    assert rig.lease(engine).continuation is None
    rig.publisher.handler = None
    again = rig.drain(engine)
    assert (again.delivered, again.undeliverable) == (2, 1), "the whole page is re-offered and finished"


def test_rly_07_f10_batched_fail_closed_stamps_nothing_after_the_first_unconfirmed_publish(rig: Rig) -> None:
    # Batched, the undeliverable document rides the run instead of flushing it (page_run.py), so a and c go out in
    # one send_batch: c is in flight with the failing a, exactly as two publishable documents in one batch are
    # (test_rly_07_messages_in_flight_...). Nothing after a is stamped, and the page is not checkpointed.
    a = outbox_doc("msg-a")
    u = outbox_doc("msg-u", Destination=ABSENT)
    c = outbox_doc("msg-c")
    rig.seed(a, u, c)
    rig.publisher.handler = fail_nth(1, PublishError("a refused"))
    engine = rig.engine(stamp_mode="batched")
    summary = rig.drain(engine)
    assert summary.error_type == "PublishError" and summary.confirmation_failures == 0
    assert (summary.delivered, summary.undeliverable) == (0, 0)
    assert rig.current(u)["status"] == "pending", "a later document is not stamped undeliverable"
    assert rig.current(c)["status"] == "pending", "a later document is not stamped"
    assert len(rig.publisher.batches) == 1, "the undeliverable document between them cut no send_batch"
    assert rig.lease(engine).continuation is None
    rig.publisher.handler = None
    again = rig.drain(engine)
    assert (again.delivered, again.undeliverable) == (2, 1), "the whole page is re-offered and finished"
    assert {rig.current(d)["status"] for d in (a, c)} == {"delivered"} and rig.current(u)[
        "status"
    ] == UNDELIVERABLE_STATUS


def test_rly_07_sequential_a_stamp_failure_stops_the_stamps_of_the_rest_of_the_batch(rig: Rig) -> None:
    docs = rig.seed(outbox_doc("msg-a"), outbox_doc("msg-b"), outbox_doc("msg-c"))
    fail_operation(rig.monitored, "patch", ServiceUnavailable("second stamp"), on_call=2)
    summary = rig.drain(rig.engine(stamp_mode="sequential"))
    assert summary.delivered == 1 and summary.confirmation_failures == 1
    assert [rig.current(d)["status"] for d in docs] == ["delivered", "pending", "pending"]
    assert calls(rig.monitored, "patch") == 2, "no stamp is attempted after the first failing one"


def test_rly_07_f10_batched_a_stamp_failure_leaves_only_its_document_pending_and_the_page_unconfirmed(
    rig: Rig,
) -> None:
    docs = rig.seed(outbox_doc("msg-a"), outbox_doc("msg-b"), outbox_doc("msg-c"))
    fail_stamp(rig.monitored, docs[1]["id"], ServiceUnavailable("second stamp"))
    engine = rig.engine(stamp_mode="batched")
    summary = rig.drain(engine)
    assert summary.error_type == "ServiceUnavailable" and summary.confirmation_failures == 1
    assert summary.delivered == 2, "F-10: the later stamp landed and stays (c is delivered, not republished)"
    assert [rig.current(d)["status"] for d in docs] == ["delivered", "pending", "delivered"]
    assert calls(rig.monitored, "execute_batch") == 1 and calls(rig.monitored, "patch") == 3, "refused, one by one"
    assert rig.lease(engine).continuation is None, "never past the unconfirmed document"
    clear_faults(rig.monitored)
    assert rig.drain(engine).delivered == 1
    assert [dict(m.headers)["message-id"] for m in rig.publisher.sent].count(b"msg-b") == 2, "b is published again"


def test_rly_07_an_undeliverable_verdict_does_not_abort_the_batch(rig: Rig) -> None:
    u, a = rig.seed(outbox_doc("msg-u", Destination=ABSENT), outbox_doc("msg-a"))
    summary = rig.drain()
    assert summary.error is None and summary.undeliverable == 1 and summary.delivered == 1
    assert rig.current(u)["status"] == "undeliverable" and rig.current(a)["status"] == "delivered"


def test_rly_08_a_new_drain_starts_from_the_beginning_of_the_change_feed(rig: Rig) -> None:
    rig.seed(*(outbox_doc(f"early-{i}") for i in range(3)))
    engine = rig.engine()  # built after the documents were written
    assert rig.drain(engine).published == 3


def test_rly_09_tracing_on_overwrites_traceparent_with_a_child_send_span(rig: Rig) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    rig.telemetry = rig.metrics.telemetry(tracer_provider=provider)
    persisted = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with_parent, _root = rig.seed(outbox_doc("msg-1", context={"traceparent": persisted}), outbox_doc("msg-2"))
    rig.drain()
    first, second = rig.publisher.sent
    child = header(first, "traceparent")
    assert child is not None and child.decode() != persisted
    assert child.decode().split("-")[1] == "0af7651916cd43dd8448eb211c80319c", "same trace: a child span"
    spans = {s.attributes["messaging.message.id"]: s for s in exporter.get_finished_spans()}
    assert spans["msg-1"].parent is not None and format(spans["msg-1"].parent.span_id, "016x") == "b7ad6b7169203331"
    assert spans["msg-2"].parent is None, "no persisted context: a new root"
    assert header(second, "traceparent") is not None
    assert json.loads(rig.current(with_parent)["MessageContext"]) == {"traceparent": persisted}, "never rewritten"


# ----------------------------------------------------------------------------------------- PND


def test_pnd_02_non_pending_documents_are_skipped_without_publish_or_patch(rig: Rig) -> None:
    rig.seed(
        domain_doc("order-1"),
        outbox_doc("msg-d", status="delivered"),
        outbox_doc("msg-u", status="undeliverable"),
        outbox_doc("msg-i", _chatterType="inbox"),
        outbox_doc("msg-f", id="app-authored-id"),
        outbox_doc("msg-o", id="outbox:b3RoZXI"),
    )
    summary = rig.drain()
    assert summary.published == 0 and summary.skipped == 6
    assert calls(rig.monitored, "patch") == 0
    assert rig.metrics.counter(DOCUMENTS, chatter__messaging__outbox__drain__outcome="skipped") == 6


def test_pnd_03_additional_filter_only_narrows_and_runs_once_per_document(rig: Rig) -> None:
    seen: list[str] = []

    def only_tenant_1(doc: dict) -> bool:
        seen.append(doc["id"])
        return doc["tenantId"] == "t1"

    kept, narrowed, domain = rig.seed(outbox_doc("msg-1", "t1"), outbox_doc("msg-2", "t2"), domain_doc(tenant="t1"))
    summary = rig.drain(rig.engine(additional_pending_filter=only_tenant_1))
    assert summary.published == 1 and rig.publisher.sent[0].key == b"t1"
    assert rig.current(narrowed)["status"] == "pending", "a filtered pending doc is not stamped"
    assert seen.count(kept["id"]) == 1 and seen.count(narrowed["id"]) == 1, "evaluated exactly once"
    assert domain["id"] not in seen, "a filter that says yes cannot admit a domain document"
    assert summary.skipped >= 2


def test_pnd_04_the_drains_own_stamps_are_skipped_and_never_republished(rig: Rig) -> None:
    rig.seed(outbox_doc("msg-1"), outbox_doc("msg-2", Destination=ABSENT))
    engine = rig.engine()
    first = rig.drain(engine)
    assert first.skipped == 2, "both stamps came back on the feed as self-events"
    second = rig.drain(engine)
    assert second.published == 0 and second.documents == 0 and len(rig.publisher.sent) == 1


# ----------------------------------------------------------------------------------------- CTR


def test_ctr_04_undeliverable_is_one_op_patch_without_ttl_and_the_lease_advances(rig: Rig) -> None:
    (seeded,) = rig.seed(outbox_doc("msg-1", Destination=ABSENT))
    engine = rig.engine()
    summary = rig.drain(engine)
    assert rig.publisher.sent == [], "no Kafka message"
    after = rig.current(seeded)
    assert after["status"] == "undeliverable" and "ttl" not in after
    assert calls(rig.monitored, "patch") == 1
    assert summary.error is None and rig.lease(engine).continuation is not None


def test_ctr_05_counted_and_logged_after_the_stamp_with_no_outcome(rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    rig.seed(outbox_doc("msg-1", Destination=ABSENT))
    with caplog.at_level(logging.ERROR, logger="airflow_chatter.drain"):
        rig.drain()
    assert rig.metrics.counter(UNDELIVERABLE) == 1
    (point,) = rig.metrics.points(UNDELIVERABLE)
    assert dict(point.attributes or {}) == {}, "the undeliverable counter has no attributes"
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "Destination" in errors[0].getMessage() and "msg-1" in errors[0].getMessage()
    assert errors[0].exc_info is None, "no exception attached"
    outcomes = {p.attributes["chatter.messaging.outbox.drain.outcome"] for p in rig.metrics.points(DOCUMENTS)}
    assert "admitted" not in outcomes, "no drain.documents outcome for an undeliverable document"


def test_ctr_05_a_failed_undeliverable_stamp_propagates_and_reports_nothing(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    (seeded,) = rig.seed(outbox_doc("msg-1", Destination=ABSENT))
    fail_operation(rig.monitored, "patch", ServiceUnavailable("patch down"), on_call=1)
    engine = rig.engine()
    with caplog.at_level(logging.ERROR, logger="airflow_chatter.drain"):
        summary = rig.drain(engine)
    assert summary.error_type == "ServiceUnavailable" and summary.confirmation_failures == 0
    assert rig.metrics.counter(UNDELIVERABLE) == 0
    assert not any("undeliverable" in r.getMessage() and "Destination" in r.getMessage() for r in caplog.records)
    clear_faults(rig.monitored)
    assert rig.drain(engine).undeliverable == 1, "the next pass reaches the same verdict"
    assert rig.current(seeded)["status"] == "undeliverable"


@pytest.mark.parametrize(
    ("context", "field"),
    [
        ({"Chatter.ContentType": 7}, "MessageContentType"),
        ({"Chatter.Infrastructure.Type": 7}, "Chatter.Infrastructure.Type"),
    ],
)
def test_ctr_06_non_string_persisted_values_are_undeliverable_not_a_fault(
    rig: Rig, caplog: pytest.LogCaptureFixture, context: dict, field: str
) -> None:
    overrides = {"MessageContentType": ABSENT} if field == "MessageContentType" else {}
    (seeded,) = rig.seed(outbox_doc("msg-1", context=context, **overrides))
    with caplog.at_level(logging.ERROR, logger="airflow_chatter.drain"):
        summary = rig.drain()
    assert summary.error is None and summary.undeliverable == 1 and rig.publisher.sent == []
    assert rig.current(seeded)["status"] == "undeliverable"
    assert any(field in r.getMessage() for r in caplog.records)


def test_ctr_07_absent_messaging_system_publishes_with_the_default(rig: Rig) -> None:
    (seeded,) = rig.seed(outbox_doc("msg-1", context={"Chatter.Infrastructure.Type": None}))
    assert rig.drain().delivered == 1 and rig.current(seeded)["ttl"] == 86400


# ----------------------------------------------------------------------------------------- F-02 / F-03


def test_f03_named_infrastructure_routes_to_its_publisher(rig: Rig) -> None:
    other = FakePublisher()
    rig.seed(outbox_doc("msg-1"), outbox_doc("msg-2", context={"Chatter.Infrastructure.Type": "audit"}))
    summary = rig.drain(rig.engine({"kafka": rig.publisher, "audit": other}))
    assert summary.delivered == 2
    assert [m.key for m in rig.publisher.sent] == [b"t1"] and len(other.sent) == 1


def test_f03_unknown_infrastructure_fails_the_batch_and_is_not_a_confirmation_failure(rig: Rig) -> None:
    first, unknown = rig.seed(outbox_doc("msg-1"), outbox_doc("msg-2", context={"Chatter.Infrastructure.Type": "sb"}))
    engine = rig.engine()
    summary = rig.drain(engine)
    assert summary.error_type == "UnknownPublisherError" and summary.confirmation_failures == 0
    assert rig.current(first)["status"] == "delivered", "the earlier document was finished first"
    assert rig.current(unknown)["status"] == "pending" and rig.lease(engine).continuation is None


def test_f02_key_strategy_message_id(rig: Rig) -> None:
    rig.seed(outbox_doc("msg-1"))
    rig.drain(rig.engine(key_strategy="message_id"))
    assert rig.publisher.sent[0].key == b"msg-1"


def test_rly_07_messages_in_flight_with_the_failing_one_are_acknowledged_but_never_stamped(rig: Rig) -> None:
    """Pins the one place a batch publish differs from one-at-a-time: Kafka had the whole batch in flight.

    Documents after the first failure in the *same* send_batch may reach Kafka; they are not stamped and not
    checkpointed, so the next run publishes them again (at-least-once; consumers dedupe on message-id).
    """
    docs = rig.seed(outbox_doc("msg-a"), outbox_doc("msg-b"), outbox_doc("msg-c"))
    rig.publisher.handler = fail_nth(2, PublishError("b refused"))
    engine = rig.engine()
    summary = rig.drain(engine)
    assert summary.error_type == "PublishError" and summary.delivered == 1
    assert [rig.current(d)["status"] for d in docs] == ["delivered", "pending", "pending"]
    assert [dict(m.headers)["message-id"] for m in rig.publisher.sent] == [b"msg-a", b"msg-c"]
    assert summary.published == len(rig.publisher.sent) == 2, "published counts what the broker confirmed: a and c"
    assert rig.lease(engine).continuation is None
    rig.publisher.handler = None
    assert rig.drain(engine).published == 2, "b and c again; c is a duplicate downstream dedupes"


def test_rly_06_stamps_failing_after_a_confirmed_publish_still_count_every_message_the_broker_confirmed(
    rig: Rig,
) -> None:
    """The issue's run: three records reached Kafka, every stamp failed, and the summary said ``published=1``."""
    docs = rig.seed(outbox_doc("msg-a"), outbox_doc("msg-b"), outbox_doc("msg-c"))
    for doc in docs:  # every stamp, one by one or in a batch (F-10)
        fail_stamp(rig.monitored, doc["id"], ServiceUnavailable("stamp down"))
    summary = rig.drain()
    assert summary.error_type == "ServiceUnavailable" and summary.confirmation_failures == 1
    assert len(rig.publisher.sent) == 3, "one send_batch: the broker confirmed all three"
    assert summary.published == len(rig.publisher.sent) and summary.delivered == 0
    assert "published=3 delivered=0 " in summary.log_line() and summary.to_dict()["published"] == 3
    assert [rig.current(d)["status"] for d in docs] == ["pending"] * 3, "nothing stamped: all go out again"


def _json_values() -> st.SearchStrategy[object]:
    scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
    return st.recursive(
        scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3), max_leaves=6
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    fields=st.dictionaries(
        st.sampled_from(["Destination", "MessageBody", "MessageContentType", "MessageContext"]),
        _json_values() | st.text(),
    )
)
def test_ctr_02_arbitrary_field_values_never_fault_the_drain(fields: dict) -> None:
    rig = Rig()
    doc = outbox_doc("msg-1", Destination=ABSENT, MessageBody=ABSENT, MessageContentType=ABSENT, MessageContext=ABSENT)
    doc.update(fields)
    (seeded,) = rig.seed(doc)
    summary = rig.drain()
    assert summary.error is None, summary.error_message
    assert rig.current(seeded)["status"] in ("delivered", "undeliverable"), "every admitted doc reaches a verdict"
    assert summary.delivered + summary.undeliverable == 1

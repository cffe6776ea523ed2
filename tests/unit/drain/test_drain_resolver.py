"""The body-resolver seam (RSV-01..07)."""

from __future__ import annotations

import pytest

from airflow_chatter.drain.page_run import ResolveContext
from airflow_chatter.drain.telemetry import DOCUMENTS
from airflow_chatter.ports import OutgoingMessage

from ._drain_support import ABSENT, Rig, calls, domain_doc, outbox_doc


@pytest.fixture
def rig() -> Rig:
    return Rig()


def _thin(message_id: str, tenant: str = "t1") -> dict:
    """A thin trigger: no destination, body, content type or context (legal on the resolver path)."""
    return outbox_doc(
        message_id, tenant, Destination=ABSENT, MessageBody=ABSENT, MessageContentType=ABSENT, MessageContext=ABSENT
    )


def test_rsv_01_a_resolved_message_is_published_and_stamped_without_the_contract(rig: Rig) -> None:
    (doc,) = rig.seed(_thin("msg-1"))
    resolved = OutgoingMessage("invoices", b"from the aggregate", b"k", (("message-id", b"msg-1"),))
    summary = rig.drain(rig.engine(body_resolver=lambda ctx: resolved))
    assert summary.delivered == 1 and summary.undeliverable == 0
    assert rig.publisher.sent == [resolved]
    after = rig.current(doc)
    assert after["status"] == "delivered" and after["ttl"] == 86400


def test_rsv_02_a_null_resolve_drops_and_acknowledges(rig: Rig) -> None:
    (doc,) = rig.seed(_thin("msg-1"))
    summary = rig.drain(rig.engine(body_resolver=lambda ctx: None))
    assert summary.dropped == 1 and summary.published == 0 and rig.publisher.attempted == []
    assert rig.current(doc)["status"] == "delivered" and rig.current(doc)["ttl"] == 86400
    assert rig.metrics.counter(DOCUMENTS, chatter__messaging__outbox__drain__outcome="dropped") == 1


def test_rsv_03_a_raising_resolver_stamps_nothing_and_fails_the_page(rig: Rig) -> None:
    (doc,) = rig.seed(_thin("msg-1"))

    def broken(ctx: ResolveContext) -> OutgoingMessage:
        raise LookupError("aggregate gone")

    engine = rig.engine(body_resolver=broken)
    summary = rig.drain(engine)
    assert summary.error_type == "LookupError" and calls(rig.monitored, "patch") == 0
    assert rig.current(doc)["status"] == "pending" and rig.lease(engine).continuation is None


def test_rsv_04_the_resolver_gets_message_id_partition_key_paths_and_the_raw_document(rig: Rig) -> None:
    (doc,) = rig.seed(_thin("msg-1", "tenant-9"))
    seen: list[ResolveContext] = []
    rig.drain(rig.engine(body_resolver=lambda ctx: seen.append(ctx)))
    (ctx,) = seen
    assert ctx.message_id == "msg-1" and ctx.partition_key == "tenant-9"
    assert ctx.partition_key_paths == ("/tenantId",) and ctx.document["id"] == doc["id"]


def test_rsv_05_only_admitted_pending_documents_reach_the_resolver(rig: Rig) -> None:
    seen: list[str] = []
    rig.seed(domain_doc(), _thin("msg-1", "t1"), _thin("msg-2", "t2"))
    rig.drain(
        rig.engine(
            body_resolver=lambda ctx: seen.append(ctx.message_id),
            additional_pending_filter=lambda d: d["tenantId"] == "t1",
        )
    )
    assert seen == ["msg-1"], "no user code for non-pending docs; a filtered doc is never resolved"


def test_rsv_06_a_resolver_returning_something_else_is_a_configuration_error(rig: Rig) -> None:
    (doc,) = rig.seed(_thin("msg-1"))
    summary = rig.drain(rig.engine(body_resolver=lambda ctx: {"topic": "x"}))
    assert summary.error_type == "ConfigurationError" and "body_resolver" in (summary.error_message or "")
    assert rig.current(doc)["status"] == "pending", "never silently falls back to verbatim"


def test_rsv_07_a_thin_trigger_without_a_resolver_is_undeliverable(rig: Rig) -> None:
    (doc,) = rig.seed(_thin("msg-1"))
    summary = rig.drain()
    assert summary.undeliverable == 1 and rig.current(doc)["status"] == "undeliverable"


def test_rly_09_a_resolved_message_carries_the_send_spans_trace_context(rig: Rig) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    from ._drain_support import header

    rig.telemetry = rig.metrics.telemetry(tracer_provider=TracerProvider())
    persisted = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    rig.seed(outbox_doc("msg-1", context={"traceparent": persisted}))
    resolved = OutgoingMessage("invoices", b"v", None, (("traceparent", persisted.encode()), ("x", b"1")))
    rig.drain(rig.engine(body_resolver=lambda ctx: resolved))
    (sent,) = rig.publisher.sent
    traceparent = header(sent, "traceparent")
    assert traceparent is not None and traceparent.decode().split("-")[1] == persisted.split("-")[1]
    assert traceparent.decode() != persisted and header(sent, "x") == b"1"
    assert [k for k, _ in sent.headers].count("traceparent") == 1

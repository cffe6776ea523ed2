"""ChatterReceiveOperator and ChatterInboxHook without services: arguments are refused early, naming the field,
and the hook hands back the core's receiver without I/O. The receiving itself runs in test_consume.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_chatter.adapters.memory.container import MemoryDocumentContainer
from airflow_chatter.adapters.memory.faults import fail
from airflow_chatter.airflow.hooks.cosmos import ChatterCosmosHook
from airflow_chatter.airflow.hooks.inbox import ChatterInboxHook
from airflow_chatter.airflow.operators.receive import ChatterReceiveOperator
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.inbox.markers import marker_id
from airflow_chatter.inbox.receiver import DeliveryOutcome, IdempotentReceiver
from airflow_chatter.ports import NotFound, ReceivedMessage, Throttled

BASE: dict[str, Any] = {
    "task_id": "receive",
    "topic": "orders",
    "group_id": "g",
    "handler": "airflow_chatter.examples.orders.record_order_receipt",
    "container": "orders",
    "partition_key_paths": "/customerId",
}


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"handler": "not_dotted"}, "handler='not_dotted' must be a dotted import path"),
        ({"identity": "nodot"}, "identity='nodot' must be a dotted import path"),
        ({"tier": "sql"}, "tier='sql' must be 'document' or 'standalone'"),
        ({"partition_key_paths": ()}, "partition_key_paths=.* is required in the document tier"),
    ],
)
def test_bad_operator_arguments_are_refused_when_the_dag_is_built(change: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        ChatterReceiveOperator(**{**BASE, **change})


@pytest.fixture
def cosmos_conn(monkeypatch: pytest.MonkeyPatch) -> str:
    conn = {
        "conn_type": "chattercosmos",
        "host": "https://127.0.0.1:1/",
        "password": "k",
        "extra": {"connection_verify": False},
    }
    monkeypatch.setenv("AIRFLOW_CONN_INBOX_COSMOS", json.dumps(conn))
    return "inbox_cosmos"


def test_the_hook_builds_a_document_tier_receiver_scoped_to_its_name_without_io(cosmos_conn: str) -> None:
    hook = ChatterInboxHook(cosmos_conn, database_name="shop")
    receiver = hook.get_receiver(lambda d: None, name="billing", container_name="orders", partition_key_paths="/c")
    assert isinstance(receiver, IdempotentReceiver)
    assert (receiver.name, receiver.tier, receiver.partition_key_paths) == ("billing", "document", ("/c",))


def test_the_hook_builds_a_standalone_receiver_whose_inbox_is_scoped_to_its_name(cosmos_conn: str) -> None:
    hook = ChatterInboxHook(cosmos_conn, database_name="shop")
    receiver = hook.get_receiver(lambda d: None, name="billing", container_name="inbox", tier="standalone")
    assert receiver.inbox is not None and receiver.inbox.options.receiver == "billing"


def test_the_operator_fails_at_once_without_retries_on_a_rendered_max_messages_that_is_not_a_positive_integer(
    cosmos_conn: str,
) -> None:
    from airflow.sdk.exceptions import AirflowFailException

    operator = ChatterReceiveOperator(**{**BASE, "max_messages": "zero"}, chatter_cosmos_conn_id=cosmos_conn)
    with pytest.raises(AirflowFailException, match="max_messages='zero' must be a positive int") as caught:
        operator.execute({})  # type: ignore[arg-type]
    assert isinstance(caught.value.__cause__, ConfigurationError), "a retry would meet the same refusal"


# -- 429s: the project's clients leave them to the caller; the hook's receiver retries them within bounds -----------


def _throttled_inbox(monkeypatch: pytest.MonkeyPatch, **when: Any) -> MemoryDocumentContainer:
    """The hook's containers are this in-memory Inbox Marker container, whose marker creates answer 429."""
    inbox = MemoryDocumentContainer(partition_key_paths=("/idempotencyKey",))
    inbox.handler = fail("create", error=Throttled("429 request rate is large", retry_after_ms=1), **when)
    monkeypatch.setattr(ChatterCosmosHook, "get_container", lambda self, name, *, database_name=None: inbox)
    return inbox


def _delivery() -> ReceivedMessage:
    return ReceivedMessage("orders", 0, 7, b"k", b"{}", headers=(("message-id", b"m-1"),))


def test_inb_06_a_throttled_marker_is_retried_and_the_handler_runs_once_after_the_claim(
    cosmos_conn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    inbox = _throttled_inbox(monkeypatch, times=2)
    runs: list[str] = []
    receiver = ChatterInboxHook(cosmos_conn, database_name="shop").get_receiver(
        lambda delivery: runs.append(delivery.identity), name="billing", container_name="inbox", tier="standalone"
    )
    assert receiver.handle_delivery(_delivery()) is DeliveryOutcome.PROCESSED
    assert runs == ["m-1"] and inbox.calls["create"] == 3, "two 429s retried, then the claim, then the handler"
    assert inbox.read(marker_id("m-1", "billing"), "m-1")["Completed"] is True


def test_inb_06_a_receiver_on_a_connection_that_sets_no_limit_stops_a_throttled_marker_at_9_retries(
    cosmos_conn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The receiver is no drain: its budget is per request, and keeps the SDK's 9 retries where the connection sets
    no ``max_throttle_retries`` (a drain's default bound is time alone)."""
    inbox = _throttled_inbox(monkeypatch)
    runs: list[str] = []
    receiver = ChatterInboxHook(cosmos_conn, database_name="shop").get_receiver(
        lambda delivery: runs.append(delivery.identity), name="billing", container_name="inbox", tier="standalone"
    )
    with pytest.raises(Throttled, match=r"met 10 429s in a row .*\(max_throttle_retries=9\): raise max_throttle"):
        receiver.handle_delivery(_delivery())
    assert runs == [] and inbox.calls["create"] == 10, "the claim was never written: the handler did not run"


def test_inb_06_a_marker_throttled_past_the_connections_limits_raises_and_the_handler_does_not_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    conn = {
        "conn_type": "chattercosmos",
        "host": "https://127.0.0.1:1/",
        "password": "k",
        "extra": {"connection_verify": False, "max_throttle_retries": 2},
    }
    monkeypatch.setenv("AIRFLOW_CONN_INBOX_LIMITED", json.dumps(conn))
    inbox = _throttled_inbox(monkeypatch)
    runs: list[str] = []
    receiver = ChatterInboxHook("inbox_limited", database_name="shop").get_receiver(
        lambda delivery: runs.append(delivery.identity), name="billing", container_name="inbox", tier="standalone"
    )
    with pytest.raises(Throttled, match=r"\(max_throttle_retries=2\): raise max_throttle_retries"):
        receiver.handle_delivery(_delivery())
    assert runs == [] and inbox.calls["create"] == 3, "the claim was never written: the handler did not run"
    with pytest.raises(NotFound):
        inbox.read(marker_id("m-1", "billing"), "m-1")

"""ChatterReceiveOperator and ChatterInboxHook without services: arguments are refused early, naming the field,
and the hook hands back the core's receiver without I/O. The receiving itself runs in test_consume.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_chatter.airflow.hooks.inbox import ChatterInboxHook
from airflow_chatter.airflow.operators.receive import ChatterReceiveOperator
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.inbox.receiver import IdempotentReceiver

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

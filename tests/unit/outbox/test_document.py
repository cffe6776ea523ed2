"""OBX-01..03: the outbox document's shape; PND-01/02: the pending predicate."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_chatter.errors import ConfigurationError, ItemIdTooLongError
from airflow_chatter.outbox.document import (
    DELIVERED,
    PENDING,
    RESERVED_ROOT_FIELDS,
    UNDELIVERABLE,
    OutboxMessage,
    is_pending_outbox,
)
from airflow_chatter.outbox.item_ids import build_item_id, encode_message_id

CONTEXT = {"tenant": "acme", "attempt": 2, "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}


def message(**changes: Any) -> OutboxMessage:
    fields: dict[str, Any] = {
        "message_id": "msg-1",
        "destination": "orders",
        "body": '{"orderId": 1}',
        "content_type": "application/json",
        "context": CONTEXT,
    }
    fields.update(changes)
    return OutboxMessage(**fields)


def pending_document(**changes: Any) -> dict[str, Any]:
    """A genuine pending document with exactly the given fields changed (or removed when the value is ...)."""
    document = message().to_document("/tenantId", "tenant-1")
    for name, value in changes.items():
        if value is ...:
            document.pop(name, None)
        else:
            document[name] = value
    return document


def test_obx_01_document_has_exactly_the_outbox_fields() -> None:
    """OBX-01: one document with the deterministic id, discriminator, pending status and verbatim fields."""
    document = message().to_document("/tenantId", "tenant-1")
    assert document == {
        "id": "outbox:bXNnLTE",
        "_chatterType": "outbox",
        "status": "pending",
        "MessageId": "msg-1",
        "Destination": "orders",
        "MessageBody": '{"orderId": 1}',
        "MessageContentType": "application/json",
        "MessageContext": json.dumps(CONTEXT, separators=(",", ":")),
        "tenantId": "tenant-1",
    }


def test_obx_01_message_context_is_a_json_string_not_an_object() -> None:
    document = message().to_document("/tenantId", "tenant-1")
    assert isinstance(document["MessageContext"], str), "the context is persisted as a JSON string field"
    assert json.loads(document["MessageContext"]) == CONTEXT, "and it round-trips"


def test_obx_01_writes_no_ttl() -> None:
    """OBX-01: a pending document must never expire before it is published."""
    assert "ttl" not in message().to_document("/tenantId", "t")


def test_obx_01_empty_context_is_an_empty_json_object() -> None:
    assert message(context={}).to_document("/k", "v")["MessageContext"] == "{}"


def test_obx_01_rejects_an_unserialisable_context() -> None:
    with pytest.raises(ConfigurationError, match=r"context=.* is not JSON-serialisable"):
        message(context={"when": object()}).to_document("/k", "v")


@pytest.mark.parametrize("message_id", ["", "   ", None])
def test_obx_01_rejects_a_blank_message_id(message_id: Any) -> None:
    """DTW-05: a message without an id can never be deduplicated downstream."""
    with pytest.raises(ConfigurationError, match=r"message_id=.* must be a non-blank string"):
        message(message_id=message_id)


def test_obx_02_stamps_hierarchical_partition_values_with_their_kinds() -> None:
    """OBX-02: ``["/tenant/id", "/region"]`` with ``("t1", 5)``."""
    document = message().to_document(["/tenant/id", "/region"], ("t1", 5))
    assert document["tenant"] == {"id": "t1"} and document["region"] == 5


@pytest.mark.parametrize("root", sorted(RESERVED_ROOT_FIELDS))
def test_obx_03_rejects_a_reserved_partition_root(root: str) -> None:
    """OBX-03: a partition value stamped at a reserved root would overwrite an outbox field."""
    with pytest.raises(ConfigurationError) as caught:
        message().to_document([f"/{root}/x"], "v")
    assert root in str(caught.value), "the error names the reserved field"


def test_obx_03_reserved_set_is_exactly_the_eight_fields() -> None:
    """OBX-03: ``ttl`` and ``_ts`` belong to Cosmos, not to the outbox document."""
    assert RESERVED_ROOT_FIELDS == {
        "id",
        "_chatterType",
        "status",
        "MessageId",
        "Destination",
        "MessageBody",
        "MessageContentType",
        "MessageContext",
    }
    document = message().to_document(["/ttl"], 5)
    assert document["ttl"] == 5, "a container partitioned on /ttl is refused at drain start (CNT-03), not here"


def test_obx_03_checks_run_before_the_id_is_built() -> None:
    """OBX-03/04: the reserved-root error wins over an over-long id: nothing is built for a bad partition path."""
    with pytest.raises(ConfigurationError, match="rooted at the reserved outbox field 'id'"):
        message(message_id="a" * 2000).to_document("/id", "v")


def test_obx_04_over_long_message_id_is_refused_before_any_document_exists() -> None:
    with pytest.raises(ItemIdTooLongError, match="1025 characters long, over the Cosmos DB id limit of 1023"):
        message(message_id="a" * 763).to_document("/k", "v")


def test_pnd_01_admits_a_genuine_pending_document() -> None:
    assert is_pending_outbox(pending_document()), "a document this library minted, still pending, is drained"


@pytest.mark.parametrize(
    "changes",
    [
        {"_chatterType": "inbox"},
        {"_chatterType": "aggregate"},
        {"_chatterType": "Outbox"},
        {"_chatterType": ...},
        {"_chatterType": 1},
        {"status": DELIVERED},
        {"status": UNDELIVERABLE},
        {"status": ...},
        {"status": ""},
        {"status": "   "},
        {"status": "Pending"},
        {"status": None},
        {"id": "app-authored-id"},
        {"id": build_item_id("outbox", "another-message")},
        {"id": ...},
        {"id": 7},
        {"MessageId": ...},
        {"MessageId": ""},
        {"MessageId": 1},
        {"MessageId": "another-message"},
    ],
    ids=repr,
)
def test_pnd_02_rejects_each_non_pending_shape(changes: dict[str, Any]) -> None:
    """PND-02: a document differing from a genuine one in one field is not drained (nothing published, no patch)."""
    assert not is_pending_outbox(pending_document(**changes))


def test_pnd_02_message_id_too_long_to_encode_is_not_pending_and_does_not_raise() -> None:
    """PND-02: the id builder would throw; that means 'not ours', never a batch fault."""
    document = pending_document(MessageId="a" * 763, id="outbox:" + "x" * 1018)
    assert is_pending_outbox(document) is False


def test_pnd_02_unencodable_message_id_is_not_pending() -> None:
    assert is_pending_outbox(pending_document(MessageId="bad\ud800")) is False


@pytest.mark.parametrize("document", [None, 1, "outbox", [], [pending_document()], True, 1.5, object()], ids=repr)
def test_pnd_02_non_objects_are_not_pending(document: object) -> None:
    assert is_pending_outbox(document) is False


def test_pnd_04_own_stamps_are_not_pending() -> None:
    """PND-04: the drain's delivered and undeliverable patches re-appear on the feed and must be skipped."""
    assert not is_pending_outbox(pending_document(status=DELIVERED, ttl=86400))
    assert not is_pending_outbox(pending_document(status=UNDELIVERABLE))
    assert PENDING == "pending"


#: Text as json.loads can return it, lone surrogates (from "\\ud800" escapes) included.
any_char = st.characters(exclude_categories=())
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(any_char),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(any_char, max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)

pending_like = st.fixed_dictionaries(
    {},
    optional={
        "id": st.one_of(st.just("outbox:bXNnLTE"), json_values),
        "_chatterType": st.one_of(st.just("outbox"), json_values),
        "status": st.one_of(st.just("pending"), json_values),
        "MessageId": st.one_of(st.just("msg-1"), json_values),
    },
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(json_values, pending_like))
def test_pnd_01_predicate_is_total_and_deterministic_over_arbitrary_json(document: object) -> None:
    """PND-01/02 (BAT-04): pure and total: any JSON yields a bool, the same one twice, and only genuine ids pass."""
    first = is_pending_outbox(document)
    assert first is is_pending_outbox(document), "the same input yields the same verdict"
    assert isinstance(first, bool)
    if first:
        assert isinstance(document, dict) and document["id"] == build_item_id("outbox", document["MessageId"])


# --- str subclasses and the id's exact boundaries -----------------------------------------------------------


class _Text(str):
    """A str subclass: equal to its text, but not what JSON yields."""


class _Lying(str):
    """A str subclass whose == says the opposite."""

    def __eq__(self, other: object) -> bool:
        return not str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return str.__eq__(self, other)

    __hash__ = str.__hash__


@pytest.mark.parametrize(
    ("changes", "pending"),
    [
        ({}, True),
        ({"_chatterType": None}, False),
        ({"_chatterType": ...}, False),
        ({"_chatterType": _Text("outbox")}, True),
        ({"_chatterType": _Lying("outbox")}, False),
        ({"_chatterType": _Lying("inbox")}, True),
        ({"status": _Text("pending")}, True),
        ({"status": _Lying("delivered")}, True),
        ({"status": False}, False),
        ({"MessageId": _Text("msg-1")}, True),
        ({"MessageId": _Text("")}, False),
        ({"id": _Text("outbox:bXNnLTE")}, True),
        ({"id": "outbox:bXNnLTE="}, False),  # padded: not the id build_item_id mints
        ({"id": "bXNnLTE"}, False),
        ({"id": "inbox:bXNnLTE"}, False),
        ({"id": "outbox:bXNnLTE "}, False),
        ({"MessageId": "\u00e9", "id": "outbox:w6k"}, True),
        ({"MessageId": "\ud800", "id": "outbox:7aCA"}, False),  # surrogatepass bytes: never minted
        ({"MessageId": "a" * 762, "id": build_item_id("outbox", "a" * 762)}, True),  # exactly 1023
        ({"MessageId": "a" * 763, "id": "outbox:" + encode_message_id("a" * 763)}, False),  # 1025: never minted
        ({"MessageId": "\u00e9" * 381, "id": "outbox:" + encode_message_id("\u00e9" * 381)}, True),  # 1023
        ({"MessageId": "\u00e9" * 382, "id": "outbox:" + encode_message_id("\u00e9" * 382)}, False),
    ],
    ids=lambda v: repr(v)[:60],
)
def test_pnd_02_fast_and_general_paths_meet_at_the_boundaries(changes: dict[str, Any], pending: bool) -> None:
    assert is_pending_outbox(pending_document(**changes)) is pending

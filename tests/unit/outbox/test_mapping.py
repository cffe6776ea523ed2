"""F-02, RLY-01, RLY-09: a verified document becomes one Kafka record."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_chatter.outbox.contract import Deliverable, verify
from airflow_chatter.outbox.mapping import header_value, record_key, to_outgoing_message
from airflow_chatter.ports import OutgoingMessage

PERSISTED_PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
SEND_SPAN = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"


def deliverable(**changes: Any) -> Deliverable:
    fields: dict[str, Any] = {
        "message_id": "msg-1",
        "destination": "orders",
        "body": '{"orderId": "é"}',
        "content_type": "application/json",
        "context": {"tenant": "acme", "attempt": 2, "nested": {"a": [1, True, None]}, "ok": False, "none": None},
        "infrastructure": None,
    }
    fields.update(changes)
    return Deliverable(**fields)


def headers_of(message: Any) -> dict[str, bytes]:
    return dict(message.headers)


def test_f_02_topic_is_destination_and_value_is_utf8_body() -> None:
    message = to_outgoing_message(deliverable(), "tenant-1")
    assert message.topic == "orders"
    assert message.value == '{"orderId": "é"}'.encode(), "the body is published as its UTF-8 bytes, verbatim"


def test_f_02_empty_body_is_an_empty_value() -> None:
    assert to_outgoing_message(deliverable(body=""), "t").value == b""


@pytest.mark.parametrize(
    ("pk", "key"), [("tenant-1", b"tenant-1"), (5, b"5"), (["t1", 5], b'["t1",5]'), (None, b"null")]
)
def test_f_02_default_key_is_the_partition_key(pk: Any, key: bytes) -> None:
    """F-02: one aggregate's messages share a key, so they land in one Kafka partition in feed order."""
    assert to_outgoing_message(deliverable(), pk).key == key


def test_f_02_key_strategy_message_id_and_none() -> None:
    assert to_outgoing_message(deliverable(), "t", "message_id").key == b"msg-1"
    assert to_outgoing_message(deliverable(), "t", "none").key is None


def test_f_02_unknown_key_strategy_is_refused() -> None:
    with pytest.raises(ValueError, match="key_strategy must be one of .* not 'random'"):
        to_outgoing_message(deliverable(), "t", "random")  # type: ignore[arg-type]


def test_f_02_headers_start_with_message_id_and_content_type_then_context_in_order() -> None:
    message = to_outgoing_message(deliverable(), "t")
    assert [name for name, _ in message.headers] == [
        "message-id",
        "content-type",
        "tenant",
        "attempt",
        "nested",
        "ok",
        "none",
    ]
    assert message.headers[0] == ("message-id", b"msg-1"), "the downstream inbox deduplicates on this (F-07)"
    assert message.headers[1] == ("content-type", b"application/json")


def test_f_02_context_strings_are_utf8_and_other_values_compact_json() -> None:
    headers = headers_of(
        to_outgoing_message(
            deliverable(context={"s": "é", "i": 2, "f": 1.5, "o": {"a": [1, True, None]}, "b": False, "n": None}), "t"
        )
    )
    assert headers["s"] == "é".encode()
    assert headers["i"] == b"2" and headers["f"] == b"1.5"
    assert headers["o"] == b'{"a":[1,true,null]}', "compact JSON, no spaces"
    assert headers["b"] == b"false" and headers["n"] == b"null"


@pytest.mark.parametrize("name", ["message-id", "content-type", "Message-Id", "CONTENT-TYPE"])
def test_f_02_context_entry_never_overrides_message_id_or_content_type(name: str) -> None:
    """F-02: a context entry cannot change the identity the inbox deduplicates on or the declared content type."""
    message = to_outgoing_message(deliverable(context={name: "forged"}), "t")
    values = [value for header, value in message.headers if header.lower() == name.lower()]
    assert values == ([b"msg-1"] if name.lower() == "message-id" else [b"application/json"]), "exactly one, ours"


def test_rly_09_tracing_off_persisted_trace_context_rides_out_unchanged() -> None:
    ctx = {"traceparent": PERSISTED_PARENT, "tracestate": "k=v"}
    headers = headers_of(to_outgoing_message(deliverable(context=ctx), "t"))
    assert headers["traceparent"] == PERSISTED_PARENT.encode() and headers["tracestate"] == b"k=v"


def test_rly_09_tracing_on_overwrites_traceparent_and_tracestate_only() -> None:
    ctx = {"traceparent": PERSISTED_PARENT, "tracestate": "k=v", "tenant": "acme"}
    source = deliverable(context=ctx)
    message = to_outgoing_message(
        source, "t", trace_headers={"traceparent": SEND_SPAN, "tracestate": "k=w", "message-id": "x", "tenant": "y"}
    )
    headers = headers_of(message)
    assert headers["traceparent"] == SEND_SPAN.encode(), "the send span's context replaces the persisted one"
    assert headers["tracestate"] == b"k=w"
    assert headers["tenant"] == b"acme" and headers["message-id"] == b"msg-1", "nothing else is overwritten"
    assert [n for n, _ in message.headers].count("traceparent") == 1, "replaced, not duplicated"
    assert source.context["traceparent"] == PERSISTED_PARENT, "the verified (persisted) context is never changed"


def test_rly_09_document_without_trace_context_gets_the_new_root() -> None:
    headers = headers_of(to_outgoing_message(deliverable(context={}), "t", trace_headers={"traceparent": SEND_SPAN}))
    assert headers["traceparent"] == SEND_SPAN.encode()
    assert "tracestate" not in headers


#: Text as json.loads can return it, lone surrogates (from "\\ud800" escapes) included.
any_char = st.characters(exclude_categories=())
any_text = st.text(any_char)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | any_text,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(any_char, max_size=6), children, max_size=3)
    ),
    max_leaves=12,
)
documents = st.fixed_dictionaries(
    # MessageId stays encodable: the pending predicate admits no other (PND-02), and only admitted documents map.
    {"MessageId": st.text(min_size=1), "Destination": any_text, "MessageBody": any_text},
    optional={
        "MessageContentType": any_text,
        "MessageContext": st.one_of(
            any_text,
            st.dictionaries(
                st.sampled_from(["Chatter.ContentType", "content-type", "traceparent", "x", "é"]), json_values
            ).map(json.dumps),
        ),
    },
)
partition_keys = st.one_of(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | any_text,
    st.lists(st.none() | st.integers() | any_text, min_size=2, max_size=3),
)


@settings(max_examples=300, deadline=None)
@given(documents, partition_keys, st.sampled_from(["partition_key", "message_id", "none"]))
def test_f_02_every_deliverable_maps_without_raising(doc: dict[str, Any], pk: Any, strategy: Any) -> None:
    """F-02: whatever the contract lets through maps to a Kafka record; a failure here would wedge a lease."""
    verdict = verify(doc)
    if not isinstance(verdict, Deliverable):
        return
    message = to_outgoing_message(verdict, pk, strategy)
    assert message.topic == verdict.destination and message.headers[0] == ("message-id", verdict.message_id.encode())
    names = [name.lower() for name, _ in message.headers]
    assert names.count("message-id") == 1 and names.count("content-type") == 1


# --- the inlined common cases (a str header value, a str partition key) against the general helpers ------------


class _Text(str):
    """A str subclass: takes the general helpers, which must give the same bytes."""


def reference_message(
    verdict: Deliverable, pk: Any, strategy: Any, trace_headers: dict[str, str] | None = None
) -> OutgoingMessage:
    """to_outgoing_message as its docstring defines it, spelled with the general helpers only."""
    context = dict(verdict.context)
    for name in ("traceparent", "tracestate"):
        if trace_headers and name in trace_headers:
            context[name] = trace_headers[name]
    headers = [("message-id", verdict.message_id.encode("utf-8")), ("content-type", verdict.content_type.encode())]
    headers += [(n, header_value(v)) for n, v in context.items() if n.lower() not in ("message-id", "content-type")]
    return OutgoingMessage(
        topic=verdict.destination,
        value=verdict.body.encode("utf-8"),
        key=record_key(verdict, pk, strategy),
        headers=tuple(headers),
    )


@pytest.mark.parametrize(
    "value",
    ["", "\u00e9", _Text("x"), True, False, 0, 1, -(10**30), 2.5, None, [1, "a"], {"b": None}],
    ids=repr,
)
def test_f_02_every_header_value_kind_is_encoded_as_the_general_helper_does(value: Any) -> None:
    message = to_outgoing_message(deliverable(context={"h": value}), "t")
    assert message.headers[2] == ("h", header_value(value))
    assert message == reference_message(deliverable(context={"h": value}), "t", "partition_key")


@pytest.mark.parametrize(
    "pk",
    ["", "t", "\u00e9", "\ud800", _Text("t"), _Text("\udc00"), 0, True, None, 1.5, ["a", 1], ("a",)],
    ids=repr,
)
@pytest.mark.parametrize("strategy", ["partition_key", "message_id", "none"])
def test_f_02_every_partition_key_kind_keys_as_record_key_does(pk: Any, strategy: Any) -> None:
    message = to_outgoing_message(deliverable(), pk, strategy)
    assert message.key == record_key(deliverable(), pk, strategy)
    assert message == reference_message(deliverable(), pk, strategy)


@settings(max_examples=300, deadline=None)
@given(
    documents,
    partition_keys,
    st.sampled_from(["partition_key", "message_id", "none"]),
    st.none() | st.dictionaries(st.sampled_from(["traceparent", "tracestate", "other"]), st.text(max_size=8)),
)
def test_f_02_record_equals_its_definition_in_general_helpers(
    doc: dict[str, Any], pk: Any, strategy: Any, trace_headers: dict[str, str] | None
) -> None:
    verdict = verify(doc)
    if not isinstance(verdict, Deliverable):
        return
    expected = reference_message(verdict, pk, strategy, trace_headers)
    assert to_outgoing_message(verdict, pk, strategy, trace_headers=trace_headers) == expected


def test_f_02_only_a_name_of_a_reserved_length_can_lower_case_to_a_reserved_name() -> None:
    """The reserved-name test looks at the length first; this holds for every code point Python lower-cases."""
    longer = {chr(c): chr(c).lower() for c in range(sys.maxunicode + 1) if len(chr(c).lower()) != 1}
    assert longer == {"\u0130": "i\u0307"}, "str.lower keeps every other character one character"
    assert not any(lowered.isascii() for lowered in longer.values())
    for name in ["MESSAGE-ID", "Content-Type", "\u0130message-id", "message-\u0130d", "content-type ", "message_id"]:
        message = to_outgoing_message(deliverable(context={name: "x"}), "t")
        assert (name in headers_of(message)) == (name.lower() not in ("message-id", "content-type")), name
    kelvin = "\u212a"  # KELVIN SIGN lower-cases to ASCII "k": one character, so length still decides correctly
    assert kelvin.lower() == "k"


def test_f_02_a_str_subclass_header_name_is_asked_for_its_own_lower_case() -> None:
    class Shouting(str):
        def lower(self) -> str:
            return "message-id"

    message = to_outgoing_message(deliverable(context={Shouting("x"): "v"}), "t")
    assert [name for name, _ in message.headers] == ["message-id", "content-type"]

"""CTR-01..03, CTR-06/07, F-03: the Outbox Document Contract's verdicts."""

from __future__ import annotations

import dataclasses
import json
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_chatter.outbox.contract import Deliverable, Undeliverable, verify
from airflow_chatter.outbox.document import OutboxMessage

MESSAGE_ID = "msg-1"
ORDER = ("Destination", "MessageBody", "MessageContext", "MessageContentType", "Chatter.Infrastructure.Type")


def document(**changes: Any) -> dict[str, Any]:
    """A well-formed admitted document with exactly the given fields changed; ``...`` removes a field."""
    base = OutboxMessage(MESSAGE_ID, "dest", "{}", "application/json", {}).to_document("/tenantId", "t1")
    for name, value in changes.items():
        if value is ...:
            base.pop(name, None)
        else:
            base[name] = value
    return base


def context(**entries: Any) -> str:
    return json.dumps(entries)


def violations_of(doc: object) -> tuple[str, ...]:
    verdict = verify(doc)
    assert isinstance(verdict, Undeliverable), f"expected a violation, got {verdict!r}"
    return verdict.violations


def test_ctr_01_well_formed_document_is_deliverable_with_every_field() -> None:
    verdict = verify(document(MessageContext=context(tenant="acme")))
    assert verdict == Deliverable(
        message_id=MESSAGE_ID,
        destination="dest",
        body="{}",
        content_type="application/json",
        context={"tenant": "acme"},
        infrastructure=None,
    ), "the descriptor carries every value the publish reads, so nothing is re-read off the document"


@pytest.mark.parametrize("destination", [..., "", "   ", 7, None, ["dest"], {"a": 1}], ids=repr)
def test_ctr_01_names_an_absent_non_string_or_blank_destination(destination: Any) -> None:
    assert violations_of(document(Destination=destination)) == ("Destination",)


@pytest.mark.parametrize("body", [..., 7, None, {"a": 1}, ["x"]], ids=repr)
def test_ctr_01_names_an_absent_or_non_string_body(body: Any) -> None:
    assert violations_of(document(MessageBody=body)) == ("MessageBody",)


def test_ctr_01_accepts_an_empty_body() -> None:
    """CTR-01.2: an empty body publishes as an empty value."""
    verdict = verify(document(MessageBody=""))
    assert isinstance(verdict, Deliverable) and verdict.body == ""


@pytest.mark.parametrize("raw", ["not json", "[1,2]", "5", "null", '"text"', "{", "NaN", '{"a": NaN}', '{"a": 1e400}'])
def test_ctr_01_names_a_context_that_is_not_a_json_object(raw: str) -> None:
    """CTR-01.3: text that does not parse to an object (or parses to null) is a violation."""
    assert violations_of(document(MessageContext=raw)) == ("MessageContext",)


@pytest.mark.parametrize("raw", [None, 5, {"a": 1}, [1]], ids=repr)
def test_ctr_01_names_a_context_field_that_is_not_a_string(raw: Any) -> None:
    """CTR-01.3: the context is persisted as a JSON string (OBX-01); JSON null or a native value is not one.

    NOTE: the reference reads a non-string context as absent; we report it, because publishing without the context
    the writer meant to send would silently drop its headers.
    """
    assert violations_of(document(MessageContext=raw)) == ("MessageContext",)


@pytest.mark.parametrize("raw", [..., "", "   "], ids=repr)
def test_ctr_01_accepts_an_absent_or_blank_context_as_empty(raw: Any) -> None:
    verdict = verify(document(MessageContext=raw))
    assert isinstance(verdict, Deliverable) and verdict.context == {}, "absent or blank context is the empty context"


@pytest.mark.parametrize("own", [..., "", "   ", None, 7], ids=repr)
def test_ctr_01_resolves_content_type_from_context_when_document_has_none(own: Any) -> None:
    verdict = verify(document(MessageContentType=own, MessageContext=context(**{"Chatter.ContentType": "text/plain"})))
    assert isinstance(verdict, Deliverable) and verdict.content_type == "text/plain"


def test_ctr_01_document_content_type_wins_over_context() -> None:
    verdict = verify(document(MessageContext=context(**{"Chatter.ContentType": "text/plain"})))
    assert isinstance(verdict, Deliverable) and verdict.content_type == "application/json"


@pytest.mark.parametrize("in_context", [..., 7, "", "  ", None, ["text/plain"]], ids=repr)
def test_ctr_01_names_an_unresolvable_content_type(in_context: Any) -> None:
    """CTR-01.4 / CTR-06: a non-string or blank context content type resolves nothing."""
    ctx = {} if in_context is ... else {"Chatter.ContentType": in_context}
    assert violations_of(document(MessageContentType=..., MessageContext=json.dumps(ctx))) == ("MessageContentType",)


def test_ctr_01_unusable_context_adds_no_content_type_violation_when_document_has_one() -> None:
    assert violations_of(document(MessageContext="not json")) == ("MessageContext",)


def test_ctr_01_unusable_context_and_no_own_content_type_names_both() -> None:
    assert violations_of(document(MessageContentType=..., MessageContext="not json")) == (
        "MessageContext",
        "MessageContentType",
    )


@pytest.mark.parametrize("kind", [7, 1.5, True, False, {"name": "asb"}, ["asb"]], ids=repr)
def test_ctr_06_names_a_non_string_infrastructure_type(kind: Any) -> None:
    """CTR-01.5 / CTR-06: a non-string messaging system can never name a publisher."""
    verdict = verify(document(MessageContext=context(**{"Chatter.Infrastructure.Type": kind})))
    assert isinstance(verdict, Undeliverable)
    assert verdict.violations == ("Chatter.Infrastructure.Type",)
    assert "Chatter.Infrastructure.Type" in verdict.message, "the Error log carries the field name"


@pytest.mark.parametrize("kind", [None, "", "   "], ids=repr)
def test_ctr_07_absent_null_or_blank_infrastructure_selects_the_default_publisher(kind: Any) -> None:
    """CTR-07 / F-03: not a violation; ``infrastructure`` is None, meaning the source's default publisher."""
    verdict = verify(document(MessageContext=context(**{"Chatter.Infrastructure.Type": kind})))
    assert isinstance(verdict, Deliverable) and verdict.infrastructure is None


def test_f_03_named_infrastructure_is_carried_even_if_unknown() -> None:
    """F-03: an unconfigured publisher name is a host concern, decided by the engine, never a violation."""
    verdict = verify(document(MessageContext=context(**{"Chatter.Infrastructure.Type": "asb"})))
    assert isinstance(verdict, Deliverable) and verdict.infrastructure == "asb"


def test_f_03_iso_8601_strings_are_ordinary_strings() -> None:
    """F-03: unlike the .NET reference, an ISO-8601 value is not a date, so it is a valid (string) name."""
    verdict = verify(
        document(MessageContext=context(**{"Chatter.Infrastructure.Type": "2026-09-03T12:00:00Z", "at": "2026-09-03"}))
    )
    assert isinstance(verdict, Deliverable)
    assert verdict.infrastructure == "2026-09-03T12:00:00Z" and verdict.context["at"] == "2026-09-03"


def test_rly_01_context_values_keep_their_json_kinds() -> None:
    verdict = verify(document(MessageContext=context(i=1, f=1.5, b=True, n=None, o={"x": [1]}, s="s")))
    assert isinstance(verdict, Deliverable)
    assert verdict.context == {"i": 1, "f": 1.5, "b": True, "n": None, "o": {"x": [1]}, "s": "s"}


def test_ctr_03_message_names_every_violated_field() -> None:
    """CTR-03: destination, body and content type absent and context ``not json`` → exactly four violations."""
    verdict = verify(document(Destination=..., MessageBody=..., MessageContentType=..., MessageContext="not json"))
    assert isinstance(verdict, Undeliverable)
    assert verdict.violations == ("Destination", "MessageBody", "MessageContext", "MessageContentType")
    for field_name in verdict.violations:
        assert field_name in verdict.message, f"the message must name {field_name} so one fix covers all"
    assert MESSAGE_ID in verdict.message and verdict.message_id == MESSAGE_ID, "the message names the MessageId"


def test_ctr_03_violations_follow_the_fixed_field_order() -> None:
    """CTR-03: the order is Destination, MessageBody, MessageContext, MessageContentType, Infrastructure."""
    ctx = context(**{"Chatter.ContentType": 7, "Chatter.Infrastructure.Type": 7})
    verdict = verify(document(Destination=..., MessageBody=7, MessageContentType=..., MessageContext=ctx))
    assert isinstance(verdict, Undeliverable)
    assert verdict.violations == ("Destination", "MessageBody", "MessageContentType", "Chatter.Infrastructure.Type")
    positions = [verdict.message.index(f"'{name}'") for name in verdict.violations]
    assert positions == sorted(positions), "the message lists the fields in the same order"
    assert set(verdict.violations) <= set(ORDER)


def test_ctr_03_a_message_without_a_message_id_says_it_has_none_and_names_every_violation() -> None:
    verdict = verify({})
    assert isinstance(verdict, Undeliverable) and verdict.message_id is None
    assert verdict.violations == ("Destination", "MessageBody", "MessageContentType")
    assert verdict.message.startswith("Outbox document (no MessageId) cannot be published"), verdict.message
    for field_name in verdict.violations:
        assert f"'{field_name}'" in verdict.message, f"the message must name {field_name}"


def test_ctr_01_text_without_utf8_bytes_is_reported_not_left_to_fail_the_produce() -> None:
    """A lone surrogate would fail the Kafka produce on every pass; the contract reports it under its field."""
    assert violations_of(document(Destination="d\ud800")) == ("Destination",)
    assert violations_of(document(MessageBody="b\ud800")) == ("MessageBody",)
    assert violations_of(document(MessageContext='{"a": "\\ud800"}')) == ("MessageContext",)


@pytest.mark.parametrize(
    "context",
    [
        '{"a": "\\ud800"}',  # an escape
        '{"a": "\ud800"}',  # the character itself, in a value
        '{"\\udfff": 1}',  # in a key
        '{"a": {"b": ["\\ud800"]}}',  # nested
        '{"a": "\\\\ud800", "b": "\\ud800"}',  # an escaped backslash first, then a real escape
    ],
)
def test_ctr_01_a_lone_surrogate_anywhere_in_the_context_is_a_context_violation(context: str) -> None:
    assert violations_of(document(MessageContext=context)) == ("MessageContext",)


@pytest.mark.parametrize(
    ("context", "expected"),
    [
        ('{"a": "\\\\ud800"}', {"a": "\\ud800"}),  # an escaped backslash followed by text: no surrogate
        ('{"a": "\\u00e9", "b": "\u00e9"}', {"a": "\u00e9", "b": "\u00e9"}),
        ('{"a": {"b": [1, "x"]}, "n": 2.5}', {"a": {"b": [1, "x"]}, "n": 2.5}),
    ],
)
def test_ctr_01_contexts_that_encode_are_deliverable(context: str, expected: dict[str, Any]) -> None:
    verdict = verify(document(MessageContext=context))
    assert isinstance(verdict, Deliverable) and dict(verdict.context) == expected


def test_ctr_01_a_context_with_a_byte_order_mark_is_not_json() -> None:
    verdict = verify(document(MessageContext='\ufeff{"a": 1}'))
    assert isinstance(verdict, Undeliverable) and verdict.violations == ("MessageContext",)
    assert "is not JSON (JSONDecodeError)" in verdict.message


@pytest.mark.parametrize(
    "doc",
    [
        None,
        0,
        1.5,
        True,
        "text",
        [],
        [1, {"a": 2}],
        {},
        {"Destination": {"x": 1}, "MessageBody": [1]},
        {"MessageContext": "[" * 100_000},
        {"MessageContext": '{"a":' * 5000 + "1" + "}" * 5000},
        object(),
    ],
    ids=lambda d: repr(d)[:40],
)
def test_ctr_02_never_raises_for_any_document_shape(doc: object) -> None:
    """CTR-02: total and pure: the same input yields an equal verdict every time."""
    first = verify(doc)
    assert first == verify(doc), "no retry counter: the second evaluation is the first"


#: Text as json.loads can return it, lone surrogates (from "\\ud800" escapes) included.
any_char = st.characters(exclude_categories=())
any_text = st.text(any_char)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | any_text,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(any_char, max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
context_texts = st.one_of(
    any_text,
    json_values.map(lambda v: json.dumps(v)),
    st.dictionaries(
        st.sampled_from(["Chatter.ContentType", "Chatter.Infrastructure.Type", "traceparent", "x"]), json_values
    ).map(lambda v: json.dumps(v)),
)
document_like = st.fixed_dictionaries(
    {},
    optional={
        "MessageId": json_values,
        "Destination": json_values,
        "MessageBody": json_values,
        "MessageContentType": json_values,
        "MessageContext": st.one_of(context_texts, json_values),
    },
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(json_values, document_like))
def test_ctr_02_total_and_deterministic_over_arbitrary_json(doc: object) -> None:
    """CTR-02: for any JSON, verify returns a verdict (never raises) and the same verdict twice."""
    first = verify(doc)
    assert isinstance(first, (Deliverable, Undeliverable))
    assert first == verify(doc)
    if isinstance(first, Undeliverable):
        assert first.violations, "an undeliverable verdict names at least one field"
        assert list(first.violations) == [f for f in ORDER if f in first.violations], "fixed order"
        assert all(name in first.message for name in first.violations)
    else:
        assert first.destination.strip() and isinstance(first.body, str) and first.content_type.strip()


@pytest.mark.parametrize(
    ("raw", "verdict"),
    [
        ("{}", {}),
        ('{"a":1}', {"a": 1}),
        ('{"a": 1}}', "is not JSON (JSONDecodeError)"),
        ("{}{}", "is not JSON (JSONDecodeError)"),
        ('{"a": x}', "is not JSON (JSONDecodeError)"),
        ('{"a":[}', "is not JSON (JSONDecodeError)"),
        ("{", "is not JSON (JSONDecodeError)"),
        ('{"a": NaN}', "is not JSON (ValueError)"),
        ('{"a": 1e400}', "is not JSON (ValueError)"),
        ('{"a": ' + "1" * 5000 + "}", "is not JSON (ValueError)"),
        ('{"a":' * 5000 + "1" + "}" * 5000, "is not JSON (RecursionError)"),
        ("\ufeff{}", "is not JSON (JSONDecodeError)"),
        ('{"a": "\ud800"}', "holds text that is not valid Unicode"),
        ('{"a": {"b": "\\ud800"}}', "holds text that is not valid Unicode"),
        ('{"a": ["x"], "b": "\u00e9"}', {"a": ["x"], "b": "\u00e9"}),
    ],
    ids=lambda r: repr(r)[:40],
)
def test_ctr_01_brace_wrapped_context_verdicts_are_pinned(raw: str, verdict: dict[str, Any] | str) -> None:
    result = verify(document(MessageContext=raw))
    if isinstance(verdict, dict):
        assert isinstance(result, Deliverable) and result.context == verdict
        assert type(result.context) is dict
    else:
        assert isinstance(result, Undeliverable) and result.violations == ("MessageContext",)
        assert f"its 'MessageContext' {verdict}" in result.message


class _Text(str):
    """A str subclass: not what JSON yields, but verify is total over it and keeps the caller's object."""


@pytest.mark.parametrize(
    ("field", "value", "deliverable"),
    [
        ("Destination", "d\u00e9st", True),
        ("Destination", "\u4e2d", True),
        ("Destination", "\ud800", False),
        ("Destination", "d\udfff", False),
        ("Destination", " \t\n", False),
        ("Destination", "\ufeff", True),  # a BOM is not whitespace: a (strange) topic name
        ("Destination", _Text("dest"), True),
        ("Destination", _Text(" "), False),
        ("Destination", _Text("\ud800"), False),
        ("Destination", True, False),
        ("MessageBody", "\u00e9" * 2000, True),
        ("MessageBody", "x" * 2000 + "\ud800", False),
        ("MessageBody", "   ", True),
        ("MessageBody", _Text("b"), True),
        ("MessageBody", _Text("\udc00"), False),
        ("MessageBody", 0, False),
        ("MessageContentType", "t\u00e9xt/plain", True),
        ("MessageContentType", "text\ud800", False),
        ("MessageContentType", _Text("text/plain"), True),
        ("MessageContentType", _Text("\ud800"), False),
        ("MessageContentType", False, False),
    ],
    ids=repr,
)
def test_ctr_01_field_text_checks_at_the_ascii_boundary(field: str, value: Any, deliverable: bool) -> None:
    verdict = verify(document(**{field: value}))
    if deliverable:
        assert isinstance(verdict, Deliverable)
        kept = {
            "Destination": verdict.destination,
            "MessageBody": verdict.body,
            "MessageContentType": verdict.content_type,
        }
        assert kept[field] is value, "the verdict carries the document's own object"
    else:
        assert isinstance(verdict, Undeliverable) and verdict.violations == (field,)


def test_ctr_01_deliverable_is_an_ordinary_frozen_dataclass() -> None:
    values = ("m", "d", "b", "t", {"a": 1}, None)
    by_position = Deliverable(*values)
    by_keyword = Deliverable(
        message_id="m", destination="d", body="b", content_type="t", context={"a": 1}, infrastructure=None
    )
    assert by_position == by_keyword and repr(by_position) == repr(by_keyword)
    assert [f.name for f in dataclasses.fields(Deliverable)] == [
        "message_id",
        "destination",
        "body",
        "content_type",
        "context",
        "infrastructure",
        "written_at",
    ]
    assert dataclasses.astuple(by_position) == (*values, None), "written_at defaults to None"
    assert dataclasses.replace(by_position, body="c") == Deliverable("m", "d", "c", "t", {"a": 1}, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        by_position.body = "x"  # type: ignore[misc]
    hashable = Deliverable("m", "d", "b", "t", frozenset(), None)  # type: ignore[arg-type]
    assert hash(hashable) == hash(Deliverable("m", "d", "b", "t", frozenset(), None))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Deliverable("m", "d", "b", "t", {})  # type: ignore[call-arg]
    assert pickle.loads(pickle.dumps(by_position)) == by_position


def test_ctr_01_a_str_subclass_own_content_type_wins_over_the_context_s() -> None:
    own = _Text("text/own")
    verdict = verify(document(MessageContentType=own, MessageContext=context(**{"Chatter.ContentType": "x/y"})))
    assert isinstance(verdict, Deliverable) and verdict.content_type is own

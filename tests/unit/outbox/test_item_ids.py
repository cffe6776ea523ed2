"""OBX-04 / OBX-05: deterministic item ids, the 1023 bound, and the reserved namespace."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_chatter.errors import ItemIdTooLongError, ReservedIdError
from airflow_chatter.outbox.item_ids import (
    MAX_ITEM_ID_LENGTH,
    build_item_id,
    encode_message_id,
    guard_not_reserved,
    is_reserved_id,
)


def test_obx_04_builds_outbox_and_inbox_ids_from_the_reference_vector() -> None:
    """OBX-04: ``msg-1`` is ``bXNnLTE`` under either kind."""
    assert build_item_id("outbox", "msg-1") == "outbox:bXNnLTE", "the reference test vector must hold"
    assert build_item_id("inbox", "msg-1") == "inbox:bXNnLTE", "inbox ids use the same encoding"


@pytest.mark.parametrize(
    ("message_id", "encoded"),
    [("a/b?c#d\\e+", "YS9iP2MjZFxlKw"), ("é", "w6k")],
)
def test_obx_04_encodes_reserved_characters_url_safe(message_id: str, encoded: str) -> None:
    """OBX-04: ``/ \\ ? #`` and non-ASCII become URL-safe base64 of UTF-8, with no padding."""
    assert encode_message_id(message_id) == encoded, "Cosmos ids may not carry / \\ ? #, so they must be encoded"
    assert not set(encoded) & set("/\\?#+="), "the encoding is URL-safe and unpadded"


def test_obx_04_same_message_id_always_yields_the_same_id() -> None:
    """OBX-04: determinism is what makes a second write of one message a conflict, not a duplicate."""
    assert build_item_id("outbox", "order-42") == build_item_id("outbox", "order-42")


def test_obx_04_accepts_762_ascii_characters_for_outbox() -> None:
    """OBX-04: 762 ASCII characters compose to exactly 1023, the longest accepted id."""
    item_id = build_item_id("outbox", "a" * 762)
    assert len(item_id) == MAX_ITEM_ID_LENGTH == 1023, "the bound is inclusive"


def test_obx_04_rejects_763_ascii_characters_for_outbox_naming_length_and_limit() -> None:
    """OBX-04: one more character crosses Cosmos's id limit and is refused before any write."""
    with pytest.raises(ItemIdTooLongError) as caught:
        build_item_id("outbox", "a" * 763)
    assert isinstance(caught.value, ValueError), "an over-long id is an argument error"
    assert "1025" in str(caught.value) and "1023" in str(caught.value), "the message names the length and the limit"


def test_obx_04_unencodable_message_id_is_an_argument_error() -> None:
    """OBX-04: a lone surrogate has no UTF-8 bytes; replacing it would map two message ids onto one item id."""
    with pytest.raises(UnicodeEncodeError, match="surrogates not allowed"):
        build_item_id("outbox", "bad\ud800")


@pytest.mark.parametrize("item_id", ["outbox:bXNnLTE", "inbox:x", "outbox:", "inbox:"])
def test_obx_05_reserved_prefixes_are_refused(item_id: str) -> None:
    """OBX-05: the framework's namespace is closed to application writes."""
    assert is_reserved_id(item_id)
    with pytest.raises(ReservedIdError) as caught:
        guard_not_reserved(item_id)
    assert item_id in str(caught.value), "the error names the refused id"


@pytest.mark.parametrize("item_id", ["Outbox:x", "INBOX:x", "order-1", " outbox:x", "outbox", "my-outbox:x"])
def test_obx_05_reserved_test_is_an_ordinal_prefix_test(item_id: str) -> None:
    """OBX-05: only the exact, case-sensitive prefixes are reserved."""
    assert not is_reserved_id(item_id), "anything else is an application id"
    guard_not_reserved(item_id)


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(exclude_categories=("Cs",))) | st.text(st.sampled_from("\x00\xff\u07ff\uffff+/=~?")))
def test_obx_04_encoding_is_unpadded_urlsafe_base64_of_utf8(message_id: str) -> None:
    expected = base64.urlsafe_b64encode(message_id.encode("utf-8")).rstrip(b"=").decode("ascii")
    assert encode_message_id(message_id) == expected
    assert build_item_id("inbox", message_id[:300]) == "inbox:" + encode_message_id(message_id[:300])

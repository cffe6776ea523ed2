"""The Idempotency-Key header value (RFC 8941 sf-string) and the request fingerprint (IDM-O03, IDM-O06)."""

from __future__ import annotations

import pytest

from airflow_chatter.idempotency import InvalidIdempotencyRequestError
from airflow_chatter.idempotency.fingerprint import (
    canonical_query,
    parse_sf_string,
    request_fingerprint,
    serialize_sf_string,
)


@pytest.mark.parametrize(
    ("header", "key"),
    [('"abc"', "abc"), ('  "a b"  ', "a b"), (r'"q\"uote"', 'q"uote'), (r'"back\\slash"', "back\\slash")],
)
def test_an_sf_string_header_value_is_unquoted(header: str, key: str) -> None:
    assert parse_sf_string(header) == key
    assert parse_sf_string(serialize_sf_string(key)) == key


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        ("abc", "must be a quoted"),
        ('"abc', "no closing quote"),
        ('"a"b', "after the closing quote"),
        ('"a";p=1', "after the closing quote"),
        (r'"a\nb"', "may escape only"),
        ('"caf\u00e9"', "printable ASCII only"),
        ('"tab\there"', "printable ASCII only"),
        ('"', "must be a quoted"),
    ],
)
def test_a_header_value_that_is_not_an_sf_string_is_refused_naming_the_header(header: str, reason: str) -> None:
    with pytest.raises(InvalidIdempotencyRequestError, match=f"Idempotency-Key header .*{reason}"):
        parse_sf_string(header)


def test_serializing_refuses_what_an_sf_string_cannot_hold() -> None:
    with pytest.raises(InvalidIdempotencyRequestError, match="printable ASCII"):
        serialize_sf_string("caf\u00e9")


def test_the_canonical_query_sorts_and_re_encodes_parameters() -> None:
    assert canonical_query("b=2&a=1&a=0") == canonical_query("a=0&a=1&b=2") == "a=0&a=1&b=2"
    assert canonical_query("q=a+b") == canonical_query("q=a%20b")
    assert canonical_query("flag") == "flag="


def _fp(**changes: object) -> str:
    arguments: dict[str, object] = {
        "method": "POST",
        "path": "/orders",
        "query": "a=1&b=2",
        "body": b'{"n":1}',
        "content_type": "application/json",
        "content_encoding": None,
    } | changes
    return request_fingerprint(**arguments)  # type: ignore[arg-type]


def test_idm_o06_the_fingerprint_is_unpadded_urlsafe_sha256_and_stable_under_equivalent_spellings() -> None:
    fingerprint = _fp()
    assert len(fingerprint) == 43 and "=" not in fingerprint and "+" not in fingerprint and "/" not in fingerprint
    assert _fp(method="post", query="b=2&a=1", content_type="Application/JSON") == fingerprint


@pytest.mark.parametrize(
    "change",
    [
        {"method": "PATCH"},
        {"path": "/orders/1"},
        {"query": "a=1&b=3"},
        {"body": b'{"n":2}'},
        {"content_type": "text/plain"},
        {"content_encoding": "gzip"},
        {"extra_headers": [("X-Tenant", "t1")]},
    ],
    ids=lambda change: next(iter(change)),
)
def test_idm_o06_each_part_of_the_request_changes_the_fingerprint(change: dict[str, object]) -> None:
    assert _fp(**change) != _fp()


def test_parts_are_length_prefixed_so_moving_bytes_between_them_changes_the_fingerprint() -> None:
    assert _fp(path="/a", body=b"bc") != _fp(path="/ab", body=b"c")

"""The request side of the IETF Idempotency-Key draft, without any web framework: the header value and the
request fingerprint (IDM-O03, IDM-O06; draft-ietf-httpapi-idempotency-key-header).

The header's value is an RFC 8941 sf-string (``Idempotency-Key: "8e03978e-40d5"``): a quoted string of printable
ASCII where only ``\\"`` and ``\\\\`` are escapes. Anything else is refused rather than guessed at, because two
servers guessing differently would give one client two keys.

The fingerprint is SHA-256, URL-safe base64 without padding, over the canonical request: method, path, query
(parameters sorted), content type, content encoding, any extra headers named, and the body. Each part is
length-prefixed, so no two different requests can canonicalise to the same bytes.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from urllib.parse import parse_qsl, quote, urlencode

from airflow_chatter.ports.idempotency import InvalidIdempotencyRequestError

HEADER_NAME = "Idempotency-Key"


def parse_sf_string(value: str, *, field: str = f"{HEADER_NAME} header") -> str:
    """Return the string an RFC 8941 sf-string header value holds (§4.2.5); raise naming ``field`` otherwise."""
    text = value.strip(" ")
    if len(text) < 2 or text[0] != '"':
        raise InvalidIdempotencyRequestError(field, 'must be a quoted structured-field string, e.g. "a1b2c3"')
    out: list[str] = []
    index = 1
    while index < len(text):
        char = text[index]
        if char == "\\":
            if index + 1 >= len(text) or text[index + 1] not in '"\\':
                raise InvalidIdempotencyRequestError(field, 'may escape only \\" and \\\\ (RFC 8941 sf-string)')
            out.append(text[index + 1])
            index += 2
            continue
        if char == '"':
            if index != len(text) - 1:
                raise InvalidIdempotencyRequestError(field, "has characters after the closing quote")
            return "".join(out)
        if not 0x20 <= ord(char) <= 0x7E:
            raise InvalidIdempotencyRequestError(
                field, f"holds character {char!r}; an sf-string holds printable ASCII only"
            )
        out.append(char)
        index += 1
    raise InvalidIdempotencyRequestError(field, "has no closing quote")


def serialize_sf_string(value: str) -> str:
    """Quote ``value`` as an RFC 8941 sf-string; refuse characters an sf-string cannot hold."""
    if any(not 0x20 <= ord(char) <= 0x7E for char in value):
        raise InvalidIdempotencyRequestError(HEADER_NAME, "can hold printable ASCII only (RFC 8941 sf-string)")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def canonical_query(query: str) -> str:
    """The query string with its parameters decoded, sorted, and re-encoded one way (``b=2&a=1`` → ``a=1&b=2``)."""
    pairs = sorted(parse_qsl(query, keep_blank_values=True))
    return urlencode(pairs, quote_via=quote)


def _media_type(value: str | None) -> str:
    return ";".join(part.strip() for part in (value or "").lower().split(";") if part.strip())


def request_fingerprint(
    method: str,
    path: str,
    query: str = "",
    body: bytes = b"",
    *,
    content_type: str | None = None,
    content_encoding: str | None = None,
    extra_headers: Iterable[tuple[str, str]] = (),
) -> str:
    """SHA-256 (URL-safe base64, unpadded) of the canonical request; see the module docstring."""
    parts: list[bytes] = [
        b"idempotency-fingerprint-v1",
        method.upper().encode("ascii"),
        path.encode("utf-8", "surrogateescape"),
        canonical_query(query).encode("utf-8"),
        _media_type(content_type).encode("latin-1"),
        (content_encoding or "").strip().lower().encode("latin-1"),
    ]
    parts.extend(f"{name.lower()}:{value.strip()}".encode("latin-1") for name, value in sorted(extra_headers))
    parts.append(body)
    digest = hashlib.sha256()
    for part in parts:
        digest.update(f"{len(part)}:".encode("ascii"))
        digest.update(part)
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode("ascii")


__all__ = ["HEADER_NAME", "canonical_query", "parse_sf_string", "request_fingerprint", "serialize_sf_string"]

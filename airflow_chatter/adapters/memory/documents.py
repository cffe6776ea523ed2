"""What Cosmos DB accepts as a document and as a container definition: ids, ttl, size, partition-key paths.

The limits are the service's. They are constants, not settings: a test that passes only with a bigger limit
would fail against the real service.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from jsonpointer import JsonPointer, JsonPointerException

from airflow_chatter.ports import BadRequest, ContainerError, Document

MAX_BATCH_OPERATIONS = 100
MAX_PATCH_OPERATIONS = 10
MAX_ID_BYTES = 1023
MAX_DOCUMENT_BYTES = 2 * 1024 * 1024
MAX_PARTITION_KEY_LEVELS = 3
#: ``ttl`` and ``defaultTtl`` are signed 32-bit seconds on the service; a larger value is a 400.
MAX_TTL_SECONDS = 2**31 - 1
#: Properties the service owns: never patched, and a body's own values for them are ignored on every write.
SYSTEM_PROPERTIES = frozenset({"_rid", "_self", "_etag", "_attachments", "_ts", "_lsn"})

_FORBIDDEN_ID_CHARACTERS = frozenset("/\\?#")


def normalised_body(document: Any) -> Document:
    """A checked copy of a body: JSON within 2 MB, a legal id and ttl, without system properties.

    The JSON round trip copies the body (the caller keeps theirs) and normalises it as the service would store
    it (tuples become lists, keys strings). The size is measured before system properties are dropped, so a
    patched copy of a stored document is measured as a reader gets it back.
    """
    if not isinstance(document, dict):
        raise BadRequest("a document must be a JSON object")
    try:
        encoded = json.dumps(document, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise BadRequest(f"the document is not JSON: {error}") from error
    if len(encoded) > MAX_DOCUMENT_BYTES:  # ASCII text (ensure_ascii): characters are bytes
        raise ContainerError("the document exceeds 2 MB", status_code=413)
    body: Document = json.loads(encoded)
    _check_id(body.get("id"))
    if not _legal_ttl(body.get("ttl")):
        raise BadRequest(f"an item ttl is -1 or 1..{MAX_TTL_SECONDS} whole seconds, not {body['ttl']!r}")
    for name in SYSTEM_PROPERTIES:
        body.pop(name, None)
    return body


def path_tokens(path: str) -> tuple[str, ...]:
    """Split a JSON pointer into its unescaped tokens; ``BadRequest`` for anything that is not one."""
    try:
        tokens = tuple(JsonPointer(path).parts)
    except JsonPointerException as error:
        raise BadRequest(f"path {path!r} is not a JSON pointer: {error}") from error
    if not tokens or tokens == ("",):
        raise BadRequest(f"path {path!r} must name a property below the document root")
    return tokens


def expiry(ts: int, item_ttl: int | None, default_ttl: int | None) -> int | None:
    """When a version written at ``ts`` expires: ``_ts`` + the item's ``ttl`` over the container default;
    ``None`` (never) with TTL off or an effective ttl of -1."""
    if default_ttl is None:
        return None
    effective = default_ttl if item_ttl is None else item_ttl
    return None if effective == -1 else ts + effective


def _check_id(item_id: Any) -> None:
    if not isinstance(item_id, str) or not item_id:
        raise BadRequest(f"a document needs a non-empty string id, not {item_id!r}")
    if len(item_id.encode("utf-8")) > MAX_ID_BYTES:
        raise BadRequest(f"an id is at most {MAX_ID_BYTES} bytes")
    if any(character in item_id for character in _FORBIDDEN_ID_CHARACTERS):
        raise BadRequest(f"an id may not contain any of {''.join(sorted(_FORBIDDEN_ID_CHARACTERS))}")


def _legal_ttl(ttl: Any) -> bool:
    """An item's ``ttl`` or a container's ``defaultTtl``: absent, -1 (never expires) or 1..2**31-1 seconds."""
    return ttl is None or (type(ttl) is int and (ttl == -1 or 0 < ttl <= MAX_TTL_SECONDS))


def validated_paths(paths: Sequence[str]) -> tuple[str, ...]:
    """A container's partition-key paths: one to three JSON pointers (a string is one path)."""
    checked = (paths,) if isinstance(paths, str) else tuple(paths)
    if not 1 <= len(checked) <= MAX_PARTITION_KEY_LEVELS:
        raise ValueError(f"a container has 1 to {MAX_PARTITION_KEY_LEVELS} partition-key paths, not {checked}")
    for path in checked:
        path_tokens(path)
    return checked


def validated_default_ttl(default_ttl: int | None) -> int | None:
    if not _legal_ttl(default_ttl):
        raise ValueError(f"default_ttl is None, -1 or a positive number of seconds, not {default_ttl!r}")
    return default_ttl

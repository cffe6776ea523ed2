"""Deterministic Cosmos item ids for framework-owned documents (OBX-04, OBX-05).

An outbox or inbox document's id is ``{kind}:{b64url(utf8(message id))}``: deterministic, so the same message can
never be written twice into one partition, and URL-safe, because Cosmos ids may not contain ``/ \\ ? #``. The
``outbox:`` and ``inbox:`` prefixes are reserved for airflow-chatter; application writes are refused there.
"""

from __future__ import annotations

import base64
from typing import Literal

from airflow_chatter.errors import ItemIdTooLongError, ReservedIdError

#: Cosmos DB's item id limit. base64url output is ASCII, so characters and bytes coincide.
MAX_ITEM_ID_LENGTH = 1023

ItemKind = Literal["outbox", "inbox"]

_KINDS: frozenset[str] = frozenset({"outbox", "inbox"})
_RESERVED_PREFIXES: tuple[str, ...] = ("outbox:", "inbox:")


def encode_message_id(message_id: str) -> str:
    """Return the URL-safe base64 of the message id's UTF-8 bytes, without ``=`` padding.

    A message id that is not encodable as UTF-8 (a lone surrogate) raises ``UnicodeEncodeError`` (a ``ValueError``)
    rather than being replaced, because a replacement would map two distinct ids onto one item id.
    """
    return base64.urlsafe_b64encode(message_id.encode("utf-8")).rstrip(b"=").decode("ascii")


def build_item_id(kind: ItemKind, message_id: str) -> str:
    """Compose ``{kind}:{encoded message id}``; ``ItemIdTooLongError`` if it exceeds the Cosmos id limit."""
    if kind not in _KINDS:
        raise ValueError(f"item kind must be 'outbox' or 'inbox', not {kind!r}")
    item_id = f"{kind}:{encode_message_id(message_id)}"
    if len(item_id) > MAX_ITEM_ID_LENGTH:
        raise ItemIdTooLongError(len(item_id), MAX_ITEM_ID_LENGTH, kind)
    return item_id


def is_reserved_id(item_id: str) -> bool:
    """Whether ``item_id`` lies in the framework's namespace (ordinal, case-sensitive prefix test)."""
    return isinstance(item_id, str) and item_id.startswith(_RESERVED_PREFIXES)


def guard_not_reserved(item_id: str) -> None:
    """Refuse an application-authored id in the reserved namespace; framework writes do not call this."""
    if is_reserved_id(item_id):
        raise ReservedIdError(item_id)


__all__ = [
    "MAX_ITEM_ID_LENGTH",
    "ItemKind",
    "build_item_id",
    "encode_message_id",
    "guard_not_reserved",
    "is_reserved_id",
]

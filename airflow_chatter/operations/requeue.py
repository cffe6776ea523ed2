"""Requeueing undeliverable Outbox Documents: back to pending, each conditional on the ETag it was read with."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow_chatter.errors import ConfigurationError
from airflow_chatter.outbox.document import PENDING, STATUS_FIELD
from airflow_chatter.outbox.partition_keys import recover_partition_key
from airflow_chatter.ports import Document, DocumentContainer, NotFound, PatchOperation, PreconditionFailed

#: What ``all_undeliverable`` selects: every document (the undeliverable condition is always added).
EVERY_DOCUMENT = "IS_DEFINED(c.id)"


def requeue_selection(
    document_ids: Sequence[str], where: str | None, *, all_undeliverable: bool = False
) -> tuple[list[str], str | None]:
    """What a requeue selects: item ids and/or a condition on ``c`` (blank: none), or, with ``all_undeliverable``,
    every undeliverable document and nothing else. Refused naming the field: no selection at all, or
    ``all_undeliverable`` with another selection (which of the two was meant?)."""
    condition = (where or "").strip() or None
    if all_undeliverable:
        if document_ids or condition:
            raise ConfigurationError(
                "all_undeliverable", True, "cannot be combined with message_ids, document_ids or where"
            )
        return [], EVERY_DOCUMENT
    if not document_ids and not condition:
        raise ConfigurationError(
            "message_ids/document_ids/where",
            None,
            "select documents by message id, by item id, by a where condition, or all_undeliverable",
        )
    return list(document_ids), condition


@dataclass(frozen=True)
class RequeueResult:
    requeued: tuple[str, ...]
    changed_meanwhile: tuple[str, ...]
    not_found: tuple[str, ...]
    #: Asked for, but pending already (requeued before, e.g. a repeated requeue): nothing to do.
    already_pending: tuple[str, ...] = ()
    #: Asked for, but delivered already (requeued and published since): nothing to requeue.
    already_delivered: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) for k, v in dataclasses.asdict(self).items()}


def requeue_undeliverable(
    container: DocumentContainer,
    partition_key_paths: Sequence[str],
    documents: Sequence[Document],
    *,
    requested: Sequence[str] = (),
) -> RequeueResult:
    """Set ``status`` back to ``pending`` on each document, conditional on the ETag it was read with.

    The patch is an update, so the document re-enters the change feed after every lease checkpoint and
    the next scheduled drain verifies and publishes it again. A document changed since it was read is
    left alone and reported in ``changed_meanwhile``; one deleted since it was read (or expired) in ``not_found``,
    and the others are still requeued.
    """
    requeued: list[str] = []
    changed: list[str] = []
    gone: list[str] = []
    for document in documents:
        key = recover_partition_key(document, partition_key_paths)
        try:
            container.patch(
                document["id"],
                key,
                [PatchOperation("set", f"/{STATUS_FIELD}", PENDING)],
                if_match=document.get("_etag"),
            )
            requeued.append(document["id"])
        except PreconditionFailed:
            changed.append(document["id"])
        except NotFound:
            gone.append(document["id"])
    found = {d["id"] for d in documents}
    missing = [i for i in requested if i not in found]
    return RequeueResult(tuple(requeued), tuple(changed), tuple(missing + [i for i in gone if i not in missing]))

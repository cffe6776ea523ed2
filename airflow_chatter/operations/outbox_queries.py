"""Every query the operations make of the monitored container by Outbox Document status: one condition, always
parameterised (the adapters' SQL subset supports it), and always bounded or a count."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from airflow_chatter.outbox.document import (
    MESSAGE_ID_FIELD,
    OUTBOX_TYPE,
    PENDING,
    STATUS_FIELD,
    TYPE_FIELD,
    UNDELIVERABLE,
)
from airflow_chatter.ports import Document, DocumentContainer

#: The condition every status query starts with, on ``@type`` and ``@status``.
STATUS_WHERE = f"c.{TYPE_FIELD} = @type AND c.{STATUS_FIELD} = @status"


def _with_status(status: str) -> dict[str, Any]:
    return {"@type": OUTBOX_TYPE, "@status": status}


def _count(container: DocumentContainer, where: str, parameters: dict[str, Any]) -> int:
    return sum(int(n) for n in container.query(f"SELECT VALUE COUNT(1) FROM c WHERE {where}", parameters))


def count_pending(container: DocumentContainer, *, since: datetime | None = None) -> int:
    """Count pending outbox documents (one cross-partition query; a dry run's estimate).

    ``since`` counts those with ``_ts`` at or after its whole second: what leases starting at ``since`` read
    (``LeaseStore`` floors a start to the second the same way).
    """
    where, parameters = STATUS_WHERE, _with_status(PENDING)
    if since is not None:
        where += " AND c._ts >= @since"
        parameters["@since"] = int(since.astimezone(UTC).timestamp())
    return _count(container, where, parameters)


def count_undeliverable(container: DocumentContainer) -> int:
    """How many undeliverable Outbox Documents the container holds (one parameterised count query)."""
    return _count(container, STATUS_WHERE, _with_status(UNDELIVERABLE))


def select_undeliverable(
    container: DocumentContainer,
    *,
    document_ids: Sequence[str] | None = None,
    where: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    limit: int = 1000,
    status: str = UNDELIVERABLE,
) -> list[Document]:
    """Undeliverable outbox documents by id and/or a query condition on ``c`` (at most ``limit``); ``status`` picks
    another status (a requeue tells "already pending" from "not found" with it)."""
    if not document_ids and not where:
        raise ValueError("select undeliverable documents by document_ids or by a where condition")
    sql = f"SELECT * FROM c WHERE {STATUS_WHERE}"
    params = _with_status(status)
    if document_ids:
        # OR of equalities rather than ARRAY_CONTAINS: every adapter's SQL subset supports it.
        names = [f"@id{i}" for i in range(len(document_ids))]
        sql += " AND (" + " OR ".join(f"c.id = {name}" for name in names) + ")"
        params.update(zip(names, document_ids, strict=True))
    if where:
        sql += f" AND ({where})"
        params.update(parameters or {})
    found: list[Document] = []
    for document in container.query(sql, params):
        found.append(document)
        if len(found) >= limit:
            break
    return found


def undeliverable_after(
    container: DocumentContainer, *, top: int, after: str | None = None, message_id: str | None = None
) -> list[Document]:
    """At most ``top`` undeliverable documents by item id, those after ``after`` (keyset paging: no OFFSET scan);
    ``message_id`` keeps those whose MessageId starts with it."""
    sql = f"SELECT TOP {int(top)} * FROM c WHERE {STATUS_WHERE}"
    parameters = _with_status(UNDELIVERABLE)
    if message_id:
        sql += f" AND STARTSWITH(c.{MESSAGE_ID_FIELD}, @messageId)"
        parameters["@messageId"] = message_id
    if after is not None:
        sql += " AND c.id > @after"
        parameters["@after"] = after
    sql += " ORDER BY c.id"
    return [document for document in container.query(sql, parameters) if isinstance(document, dict)]

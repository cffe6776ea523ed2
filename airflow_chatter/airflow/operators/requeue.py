"""``ChatterRequeueUndeliverableOperator``: set undeliverable outbox documents back to pending, logging who and
what."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from airflow_chatter.airflow.operators.base import ChatterSourceBaseOperator, task_scope
from airflow_chatter.airflow.operators.lineage import ChatterLineage, LineageRecord
from airflow_chatter.airflow.utils.values import as_bool, as_int, as_list

if TYPE_CHECKING:
    from airflow.sdk import Context


class ChatterRequeueUndeliverableOperator(ChatterLineage, ChatterSourceBaseOperator):
    """Set undeliverable outbox documents back to pending once their writer is fixed; log who and what.

    Select by ``message_ids`` (the outbox messages' ids) or ``document_ids`` (outbox item ids), by ``where`` (a
    Cosmos SQL condition on ``c``, with ``parameters``), by both, or every one with ``all_undeliverable``. Each
    document is patched conditionally on the ETag it was read with. The next scheduled drain verifies and publishes
    them again.

    :param message_ids: (templated) message ids; a list, a JSON list or a comma-separated string.
    :param document_ids: (templated) item ids; a list, a JSON list or a comma-separated string.
    :param all_undeliverable: (templated) select every undeliverable document (up to ``limit``); refused together
        with a selection by id or ``where``.
    :param where: (templated) e.g. ``"c.Destination = @topic"``; combined with the undeliverable filter.
    :param parameters: query parameters for ``where``, e.g. ``{"@topic": "orders"}``.
    :param limit: (templated) most documents to requeue in one run; default 1000.
    :param requested_by: (templated) who asked; default the user who triggered the DAG run.
    :param plan_only: (templated) a dry run: select and log, change nothing.

    OpenLineage: the monitored container in and out (``outputStatistics.rowCount``: documents requeued), run facet
    ``chatter_requeue``.
    """

    template_fields: Sequence[str] = (
        "source_name",
        "message_ids",
        "document_ids",
        "all_undeliverable",
        "where",
        "limit",
        "requested_by",
        "plan_only",
    )

    def __init__(
        self,
        *,
        message_ids: Any = None,
        document_ids: Any = None,
        all_undeliverable: Any = False,
        where: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        limit: Any = 1000,
        requested_by: str | None = None,
        plan_only: Any = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.message_ids = message_ids
        self.document_ids = document_ids
        self.all_undeliverable = all_undeliverable
        self.where = where
        self.parameters = dict(parameters or {})
        self.limit = limit
        self.requested_by = requested_by
        self.plan_only = plan_only

    def lineage_before_run(self) -> LineageRecord:
        container = self.monitored_dataset()
        return LineageRecord(inputs=[container], outputs=[container])

    def _requeue_lineage(self, requeued: int, changed: int, not_found: int, *, dry_run: bool) -> None:
        container = self.monitored_dataset()
        counts = {"requeued": requeued, "changed_meanwhile": changed, "not_found": not_found, "dry_run": dry_run}
        self.record_lineage(
            LineageRecord(
                inputs=[container],
                outputs=[replace(container, rows=requeued)],
                facet=("chatter_requeue", counts),
            )
        )

    def _who(self, context: Context | Mapping[str, Any]) -> str:
        if self.requested_by:
            return str(self.requested_by)
        dag_run = context.get("dag_run") if context else None
        return str(getattr(dag_run, "triggering_user_name", None) or "unknown")

    @task_scope
    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_chatter.operations.outbox_queries import select_undeliverable
        from airflow_chatter.operations.requeue import requeue_selection, requeue_undeliverable
        from airflow_chatter.outbox.item_ids import build_item_id

        ids = as_list(self.document_ids, "document_ids")
        ids += [build_item_id("outbox", m) for m in as_list(self.message_ids, "message_ids")]
        ids, where = requeue_selection(
            ids, self.where, all_undeliverable=as_bool(self.all_undeliverable, "all_undeliverable")
        )
        limit = as_int(self.limit, "limit")
        who = self._who(context)
        monitored, _ = self.containers()
        documents = select_undeliverable(
            monitored, document_ids=ids or None, where=where, parameters=self.parameters, limit=limit
        )
        selection = {"document_ids": ids, "where": where, "parameters": self.parameters}
        if as_bool(self.plan_only, "plan_only"):
            found = [d["id"] for d in documents]
            self.log.info(
                "Dry run by %s: would requeue %d document(s) %s (selection %s)", who, len(found), found, selection
            )
            self._requeue_lineage(0, 0, 0, dry_run=True)
            return {"requested_by": who, "dry_run": True, "would_requeue": found}
        paths = self.config.to_options().partition_key_paths
        result = requeue_undeliverable(monitored, paths, documents, requested=ids)
        self.log.info(
            "%s requeued %d undeliverable document(s) to pending: %s "
            "(selection %s; changed meanwhile %s; not found %s)",
            who,
            len(result.requeued),
            list(result.requeued),
            selection,
            list(result.changed_meanwhile),
            list(result.not_found),
        )
        self._requeue_lineage(len(result.requeued), len(result.changed_meanwhile), len(result.not_found), dry_run=False)
        return {"requested_by": who, "dry_run": False, **result.to_dict()}

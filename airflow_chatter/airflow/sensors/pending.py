"""A sensor that waits until a source's lease has pending outbox documents after its checkpoint."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue

from airflow_chatter.airflow.operators.base import ChatterSourceBaseOperator, task_scope
from airflow_chatter.airflow.triggers.pending import ChatterPendingOutboxTrigger, check_poll_interval
from airflow_chatter.airflow.utils.values import as_list

if TYPE_CHECKING:
    from airflow.sdk import Context


class ChatterPendingOutboxSensor(ChatterSourceBaseOperator, BaseSensorOperator):
    """Wait until one of a source's leases has a pending outbox document after its checkpoint.

    Deferrable by default: the wait happens in the triggerer (``ChatterPendingOutboxTrigger``) and
    holds no worker slot. With ``deferrable=False`` it pokes, in ``mode="poke"`` or
    ``mode="reschedule"``; each poke reads at most ``max_pages`` change-feed pages per lease. Returns
    (XCom) ``{"lease_id", "pending", "documents"}`` of the lease that has work.

    :param source: the source config (or ``source_name`` with ``sources``).
    :param lease_ids: (templated) leases to watch; default every active lease of the lease set.
    :param poll_interval: seconds between trigger polls (1 to 600); default ``poke_interval``.
    :param page_size: documents per change-feed page; default 100.
    :param max_pages: pages per lease per peek; default 5.
    :param deferrable: wait in the triggerer; default True.
    """

    template_fields: Sequence[str] = ("source_name", "lease_ids")

    def __init__(
        self,
        *,
        lease_ids: Any = None,
        poll_interval: float | None = None,
        page_size: int = 100,
        max_pages: int = 5,
        deferrable: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.lease_ids = lease_ids
        self.poll_interval = check_poll_interval(poll_interval if poll_interval is not None else self.poke_interval)
        self.page_size = page_size
        self.max_pages = max_pages
        self.deferrable = deferrable

    def _lease_ids(self, context: Context) -> list[str]:
        wanted = as_list(self.lease_ids, "lease_ids")
        if wanted:
            return wanted
        return [lease.id for lease in self.source_leases(context).topology.ensure_leases()]

    @task_scope
    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        config = self.config
        lease_ids = self._lease_ids(context)
        self.defer(
            trigger=ChatterPendingOutboxTrigger(
                cosmos_conn_id=self.cosmos_conn_id or config.cosmos_conn_id,
                database=config.database,
                monitored_container=config.monitored_container,
                lease_container=config.lease_container,
                lease_ids=lease_ids,
                poll_interval=self.poll_interval,
                page_size=self.page_size,
                max_pages=self.max_pages,
                cosmos_http_logging=config.cosmos_http_logging,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        if event.get("status") != "pending":
            raise RuntimeError(f"Pending-outbox trigger failed: {event.get('message')}")
        self.log.info("Lease %s has %s pending outbox document(s)", event["lease_id"], event["pending"])
        return {k: event[k] for k in ("lease_id", "pending", "documents")}

    def poke(self, context: Context) -> bool | PokeReturnValue:
        from airflow_chatter.operations.pending import peek_pending

        monitored, leases = self.containers()
        for lease_id in self._lease_ids(context):
            peek = peek_pending(monitored, leases, lease_id, page_size=self.page_size, max_pages=self.max_pages)
            if peek.pending:
                self.log.info("Lease %s has %d pending outbox document(s)", lease_id, peek.pending)
                return PokeReturnValue(
                    is_done=True,
                    xcom_value={"lease_id": lease_id, "pending": peek.pending, "documents": peek.documents},
                )
        return False

"""The one task of the DAG that stands in for a source whose sources-file entry is broken."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

if TYPE_CHECKING:
    from airflow.sdk import Context


class ChatterInvalidSourceOperator(BaseOperator):
    """Fail at once, without retries, naming what is wrong with the source's entry in the sources file.

    The DAG factory puts it in ``chatter_drain_<name>`` when that entry does not validate, so the DAG id stays
    visible with the reason (in its description and here) while the file's other sources keep draining.

    The stand-in has no schedule, so only a *manual* run is one somebody triggered for it. A run of another type was
    started by the real drain DAG before its entry broke: Airflow adds this task to it when the DAG is re-parsed
    (its drain tasks become "removed"), and failing it would report a failure nobody asked about. Such a run is
    skipped here instead, with a warning naming the problem.
    """

    ui_color = "#f8d7da"

    def __init__(self, *, path: str, problems: Sequence[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.path = path
        self.problems = list(problems)

    def execute(self, context: Context) -> None:
        from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

        reason = f"{self.path}: {'; '.join(self.problems)}"
        run_type = getattr((context or {}).get("dag_run"), "run_type", None)
        kind = str(getattr(run_type, "value", run_type)) if run_type is not None else None
        if kind is not None and kind != "manual":
            self.log.warning("The source's entry broke while this %s run was in flight: %s", kind, reason)
            raise AirflowSkipException(
                f"not failing this {kind} run: the drain DAG started it before its entry broke ({reason}); "
                "its drain tasks were removed, so it drained nothing since"
            )
        raise AirflowFailException(f"{reason} (fix the entry; the DAG drains nothing)")

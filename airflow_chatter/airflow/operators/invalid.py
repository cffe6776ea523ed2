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
    """

    ui_color = "#f8d7da"

    def __init__(self, *, path: str, problems: Sequence[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.path = path
        self.problems = list(problems)

    def execute(self, context: Context) -> None:
        from airflow.sdk.exceptions import AirflowFailException

        raise AirflowFailException(f"{self.path}: {'; '.join(self.problems)} (fix the entry; the DAG drains nothing)")

"""The base of the package's connection hooks: a connection is read once per hook, and once per task process.

A lookup may be a request to Airflow's API server or a secrets backend, and a task's hook asks for its connection
many times (endpoint, credentials, settings, test): one read serves them all.

A task process also parses the task's DAG file before the task runs (Airflow's task runner, under the parsing
context that names the task), and a DAG file may read a connection while it is parsed: the example receiver's file
names its topic's ``kafka://`` asset from the Kafka connection's first bootstrap server (docs/decisions.md D-09).
That read and the task's hooks share one read. Only a task process has a parsing context, so the DAG processor, the
triggerer and the API server still read afresh for every hook: a changed connection reaches their next parse,
trigger or test.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow.sdk import BaseHook, get_parsing_context

if TYPE_CHECKING:
    from airflow.sdk import Connection

#: The connections read in a task process, by (DAG id, task id, connection id). A task process runs one task try,
#: so an entry lives no longer than the task.
_TASK_READS: dict[tuple[str, str, str], Connection] = {}


class ReadOnceHook(BaseHook):
    """A hook whose :meth:`connection` reads ``conn_id``'s connection on first use and keeps it."""

    conn_id: str
    _connection: Connection | None = None

    def connection(self) -> Connection:
        """The Airflow connection, read on first use and kept: one read per hook, and in a task process one read
        for the process (its DAG file's parse and its hooks)."""
        if self._connection is None:
            self._connection = self._read()
        return self._connection

    def _read(self) -> Connection:
        # INVARIANT: a receive task's process reads each connection once, its DAG file's parse included; pinned by
        # tests/airflow/operators/test_connection_reads.py (..._with_its_dag_files_parse), which fails when this
        # reads past the memo.
        task = get_parsing_context()
        if task.dag_id is None or task.task_id is None:
            return self.get_connection(self.conn_id)
        key = (task.dag_id, task.task_id, self.conn_id)
        if key not in _TASK_READS:
            _TASK_READS[key] = self.get_connection(self.conn_id)
        return _TASK_READS[key]


__all__ = ["ReadOnceHook"]

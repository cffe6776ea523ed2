"""The base of the package's connection hooks: the Airflow connection is read once per hook and kept.

A lookup may be a request to Airflow's API server or a secrets backend, and a task's hook asks for its connection
many times (endpoint, credentials, settings, test): one read serves them all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow.sdk import BaseHook

if TYPE_CHECKING:
    from airflow.sdk import Connection


class ReadOnceHook(BaseHook):
    """A hook whose :meth:`connection` reads ``conn_id``'s connection on first use and keeps it."""

    conn_id: str
    _connection: Connection | None = None

    def connection(self) -> Connection:
        """The Airflow connection, read on first use and kept: one read per hook (a lookup may be a request to
        Airflow's API server or a secrets backend)."""
        if self._connection is None:
            self._connection = self.get_connection(self.conn_id)
        return self._connection


__all__ = ["ReadOnceHook"]

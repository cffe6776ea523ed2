"""The name of the connection a hook's ``test_connection`` reports on.

Airflow 3.3's Test button (``POST /api/v2/connections/test``) copies the connection under a random id
(``transient_conn_id``, exported as ``AIRFLOW_CONN_<ID>`` for the test) and builds the hook with that id, so a
message naming ``self.conn_id`` names an id nobody configured. The endpoint's frame still holds the request body
(``test_body.connection_id``): when the hook's id is that frame's ``transient_conn_id``, the body's id is the
connection's name. Anywhere else (a task, the CLI) the hook's own id is the name. Read-only; stdlib only.
"""

from __future__ import annotations

import sys

#: Frames looked at, at most (the endpoint calls ``Connection.test_connection`` → the hook: a few frames up).
_MAX_FRAMES = 12


def tested_connection_id(conn_id: str) -> str:
    """The connection's own id when Airflow's Test endpoint tests it under a transient id, else ``conn_id``."""
    frame = sys._getframe(1)
    for _ in range(_MAX_FRAMES):
        frame = frame.f_back  # type: ignore[assignment]
        if frame is None:
            break
        local = frame.f_locals
        if local.get("transient_conn_id") == conn_id:
            named = getattr(local.get("test_body"), "connection_id", None)
            return named if isinstance(named, str) and named else conn_id
    return conn_id

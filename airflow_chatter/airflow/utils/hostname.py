"""The hostname a task instance records, for several Airflow workers on one host.

Airflow stores ``[core] hostname_callable()`` as each task instance's ``hostname`` (REST, UI). Two Celery workers
on one machine would both record the machine's name; with
``AIRFLOW__CORE__HOSTNAME_CALLABLE=airflow_chatter.airflow.utils.hostname.worker_hostname`` and
``CHATTER_WORKER_NAME`` set per worker (``scripts/airflow-live.sh`` does both), each records
``<worker name>@<host>``, the same name ``airflow celery worker -H`` gives the worker. Without
``CHATTER_WORKER_NAME`` it is the host's FQDN, like Airflow's default.
"""

from __future__ import annotations

import os
import socket

WORKER_NAME_ENV = "CHATTER_WORKER_NAME"


def worker_hostname() -> str:
    """``$CHATTER_WORKER_NAME@<fqdn>``, or the FQDN when the variable is unset or blank."""
    fqdn = socket.getfqdn()
    name = os.environ.get(WORKER_NAME_ENV, "").strip()
    return f"{name}@{fqdn}" if name else fqdn

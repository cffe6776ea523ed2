"""The hostname task instances record when several Celery workers share a host (``[core] hostname_callable``)."""

from __future__ import annotations

import socket

import pytest

from airflow_chatter.airflow.utils.hostname import WORKER_NAME_ENV, worker_hostname


def test_a_named_worker_records_its_name_at_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WORKER_NAME_ENV, "worker2")
    assert worker_hostname() == f"worker2@{socket.getfqdn()}"


@pytest.mark.parametrize("value", [None, "", "  "])
def test_without_a_worker_name_it_is_the_hosts_fqdn_like_airflows_default(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv(WORKER_NAME_ENV, raising=False)
    else:
        monkeypatch.setenv(WORKER_NAME_ENV, value)
    assert worker_hostname() == socket.getfqdn()

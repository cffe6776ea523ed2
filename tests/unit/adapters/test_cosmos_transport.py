"""The Cosmos client's HTTP transport reads the proxy and CA-bundle environment once per host, with requests' answers.

``requests`` reads ``os.environ`` on every request; the drain's client reads it once per scheme and host
(adapters/cosmos/transport.py). These tests hold that the answers are the ones ``requests`` gives, that a proxy from
the environment is really used, and that the environment is not read again for a host already seen.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest
import requests
from azure.core.pipeline.transport import HttpRequest

from airflow_chatter.adapters.cosmos.transport import EnvironmentOnceSession, EnvironmentOnceTransport

ACCOUNT = "https://myaccount.documents.azure.com:443/dbs/db/colls/c/docs/1"
ENVIRONMENTS: dict[str, dict[str, str]] = {
    "nothing set": {},
    "a proxy": {"HTTPS_PROXY": "http://proxy.example:3128"},
    "a proxy with a login": {"https_proxy": "http://user:secret@proxy.example:3128"},
    "a proxy the host bypasses": {"HTTPS_PROXY": "http://proxy.example:3128", "NO_PROXY": ".documents.azure.com"},
    "a proxy another host bypasses": {"HTTPS_PROXY": "http://proxy.example:3128", "NO_PROXY": "other.example"},
    "a CA bundle": {"REQUESTS_CA_BUNDLE": "/etc/ssl/corp.pem"},
    "curl's CA bundle": {"CURL_CA_BUNDLE": "/etc/ssl/curl.pem"},
}
_NAMES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy")


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in (*_NAMES, "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize("verify", [True, False, "/tmp/emulator.pem", None])
@pytest.mark.parametrize("case", sorted(ENVIRONMENTS))
def test_the_session_gives_requests_answers_for_proxies_and_the_ca_bundle(
    environment: pytest.MonkeyPatch, case: str, verify: Any
) -> None:
    for name, value in ENVIRONMENTS[case].items():
        environment.setenv(name, value)
    ours = EnvironmentOnceSession().merge_environment_settings(ACCOUNT, {}, None, verify, None)
    theirs = requests.Session().merge_environment_settings(ACCOUNT, {}, None, verify, None)
    assert ours == theirs


def test_with_use_env_settings_off_nothing_is_read_from_the_environment(environment: pytest.MonkeyPatch) -> None:
    environment.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    environment.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/corp.pem")
    ours, theirs = EnvironmentOnceSession(), requests.Session()
    ours.trust_env = theirs.trust_env = False
    assert ours.merge_environment_settings(ACCOUNT, {}, None, True, None) == {
        "proxies": {},
        "stream": False,
        "verify": True,
        "cert": None,
    }
    assert ours.merge_environment_settings(ACCOUNT, {}, None, True, None) == theirs.merge_environment_settings(
        ACCOUNT, {}, None, True, None
    )


def test_the_environment_is_read_once_per_host_and_a_new_session_reads_it_again(
    environment: pytest.MonkeyPatch,
) -> None:
    environment.setenv("HTTPS_PROXY", "http://first.example:3128")
    session = EnvironmentOnceSession()
    assert session.merge_environment_settings(ACCOUNT, {}, None, True, None)["proxies"]["https"] == (
        "http://first.example:3128"
    )
    environment.setenv("HTTPS_PROXY", "http://second.example:3128")
    again = session.merge_environment_settings(ACCOUNT + "?page=2", {}, None, True, None)
    assert again["proxies"]["https"] == "http://first.example:3128", "the same host is not read again"
    other = session.merge_environment_settings("https://other.documents.azure.com/", {}, None, True, None)
    assert other["proxies"]["https"] == "http://second.example:3128", "another host is read when first seen"
    fresh = EnvironmentOnceSession().merge_environment_settings(ACCOUNT, {}, None, True, None)
    assert fresh["proxies"]["https"] == "http://second.example:3128"


class _RecordingProxy:
    """A TCP listener on 127.0.0.1 that records the first line of each connection (a proxy's CONNECT) and hangs up."""

    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._server.accept()
            except OSError:
                return
            with connection:
                connection.settimeout(5)
                data = b""
                while b"\r\n" not in data:
                    chunk = connection.recv(1024)
                    if not chunk:
                        break
                    data += chunk
                self.lines.append(data.split(b"\r\n", 1)[0].decode("latin-1"))

    def close(self) -> None:
        self._server.close()


def _send(url: str) -> None:
    transport = EnvironmentOnceTransport()
    try:
        with pytest.raises(Exception):  # noqa: B017, PT011 - the recording proxy hangs up; only what it saw matters
            transport.send(HttpRequest("GET", url), connection_timeout=5, read_timeout=5)
    finally:
        transport.close()


def test_a_proxy_from_the_environment_carries_the_request_and_no_proxy_bypasses_it(
    environment: pytest.MonkeyPatch,
) -> None:
    proxy = _RecordingProxy()
    try:
        environment.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
        _send("https://account.invalid:443/dbs")
        assert proxy.lines and proxy.lines[0].startswith("CONNECT account.invalid:443 "), proxy.lines
        environment.setenv("NO_PROXY", "account.invalid")
        seen = len(proxy.lines)
        _send("https://account.invalid:443/dbs")
        assert len(proxy.lines) == seen, "NO_PROXY names the host: the request does not go to the proxy"
    finally:
        proxy.close()


def test_the_transport_sets_its_session_up_the_way_azure_core_does() -> None:
    transport = EnvironmentOnceTransport()
    transport.open()
    try:
        assert isinstance(transport.session, EnvironmentOnceSession)
        adapter = transport.session.get_adapter("https://account.documents.azure.com/")
        assert type(adapter).__name__ == "BiggerBlockSizeHTTPAdapter", "azure-core's own adapter is mounted"
        assert adapter.max_retries.total is False, "urllib3 retries stay off: azure-core's policies retry"
    finally:
        transport.close()

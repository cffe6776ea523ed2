"""The HTTP transport under the ``CosmosClient``: ``requests``, with its environment read once per host.

``requests`` reads its proxy settings (``HTTPS_PROXY``, ``NO_PROXY``, ...) and its CA bundle (``REQUESTS_CA_BUNDLE``,
``CURL_CA_BUNDLE``) from ``os.environ`` on every request. A stamp is one request, and a drain makes one per batch or
per document. Scanning the whole environment each time was about a tenth of the Python process's CPU per Cosmos
request, measured (docs/benchmarks.md, "The client's CPU per request"), and the drain's throughput against a store
is bound by that CPU. :class:`EnvironmentOnceSession` gives the same answers, but reads the proxies once per
scheme and host, and the CA bundle once, when the session is made. A client made after the environment changes sees
the change; a client already made keeps what it read (an Airflow task makes its client when it starts).

``.netrc`` is not consulted: ``requests`` would put a ``.netrc`` login on a request that carries no ``auth`` of its
own. A Cosmos request authenticates with its own ``Authorization`` header, so a login for the account's host would
only get in the way.

:class:`EnvironmentOnceTransport` is azure-core's ``RequestsTransport`` with that session. azure-core still sets the
session up itself (its adapters, and ``use_env_settings``, which here decides whether the environment is read at
all).
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

import requests
from azure.core.pipeline.transport import RequestsTransport
from requests.utils import get_environ_proxies

__all__ = ["EnvironmentOnceSession", "EnvironmentOnceTransport"]


class EnvironmentOnceSession(requests.Session):
    """A ``requests.Session`` that reads the proxy environment once per scheme and host, and the CA bundle once.

    ``trust_env`` keeps its meaning (whether the environment is read at all), but ``requests`` itself is never let
    read it: :meth:`merge_environment_settings` does, from what it read before.
    """

    def __init__(self) -> None:
        self._read_environment = True
        super().__init__()
        self._ca_bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
        self._proxies: dict[tuple[str, str, str | None], dict[str, str]] = {}

    # ``requests`` checks ``trust_env`` before each environment read (proxies, CA bundle, .netrc): it is told False,
    # and what it was set to is kept for this class's own, cached, reads.
    @property
    def trust_env(self) -> bool:
        return False

    @trust_env.setter
    def trust_env(self, value: bool) -> None:
        self._read_environment = value

    def merge_environment_settings(self, url: str, proxies: Any, stream: Any, verify: Any, cert: Any) -> dict[str, Any]:
        if self._read_environment:
            no_proxy = proxies.get("no_proxy") if proxies is not None else None
            scheme, netloc, *_ = urlsplit(url)
            key = (scheme, netloc, no_proxy)
            environ_proxies = self._proxies.get(key)
            if environ_proxies is None:
                environ_proxies = self._proxies[key] = get_environ_proxies(url, no_proxy=no_proxy)
            if proxies is not None:
                for scheme_or_host, proxy in environ_proxies.items():
                    proxies.setdefault(scheme_or_host, proxy)
            if (verify is True or verify is None) and self._ca_bundle:
                verify = self._ca_bundle
        # ``trust_env`` reads False here, so this only merges the request's settings with the session's.
        merged: dict[str, Any] = super().merge_environment_settings(url, proxies, stream, verify, cert)
        return merged


class EnvironmentOnceTransport(RequestsTransport):  # type: ignore[misc]  # azure-core ships no types for it
    """azure-core's ``RequestsTransport``, opening an :class:`EnvironmentOnceSession` instead of a plain one."""

    session: requests.Session | None

    def open(self) -> None:
        if not self.session and self._session_owner:
            session = EnvironmentOnceSession()
            self._init_session(session)  # azure-core's adapters, and ``trust_env`` from ``use_env_settings``
            self.session = session
        super().open()

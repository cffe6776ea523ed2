"""Clients: building a ``CosmosClient`` (with TLS really verified), and opening a container that exists.

Separate from the container adapter because it changes for other reasons: how a connection's endpoint, key and TLS
settings become a client, and what a user is told when the account, database or container is not what they named.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlparse

from azure.cosmos import ContainerProxy, CosmosClient, exceptions
from azure.cosmos._retry_options import RetryOptions
from azure.cosmos.documents import ConnectionPolicy, SSLConfiguration

from airflow_chatter.adapters.cosmos.errors import translated_errors
from airflow_chatter.adapters.cosmos.transport import EnvironmentOnceTransport
from airflow_chatter.errors import ConfigurationError

__all__ = ["SDK_HTTP_LOGGER", "check_tls_verification", "make_cosmos_client", "open_container"]

#: The logger every client built here hands the SDK's HTTP logging policy: WARNING unless someone lowers it, so
#: the SDK's per-request URL-and-headers lines (INFO) stay out of every process by default (the trigger, the
#: api-server's plugin, the CLI, tasks), whatever the root logger's level. ``cosmos_http_logging: true`` lowers it
#: for a task (``airflow/utils/sdk_logging.py``).
SDK_HTTP_LOGGER = "airflow_chatter.cosmos.sdk_http"
_sdk_http_logger = logging.getLogger(SDK_HTTP_LOGGER)
if _sdk_http_logger.level == logging.NOTSET:
    _sdk_http_logger.setLevel(logging.WARNING)

#: Host names azure-cosmos does not verify TLS for unless a CA is given (``_synchronized_request``).
_UNVERIFIED_HOSTS = frozenset({"localhost", "127.0.0.1"})


def check_tls_verification(endpoint: str, verify: bool | str, *, option: str = "ca_cert_path") -> None:
    """Refuse "verify TLS" without a CA for a loopback endpoint: azure-cosmos would not verify it at all.

    azure-cosmos turns verification off for ``localhost`` / ``127.0.0.1`` unless an ``ssl_config`` carries a CA
    (``_synchronized_request``), so "verify on" would silently mean "verify off". Refusing, rather than warning,
    keeps the setting's meaning: a warning in a task log is read by nobody, and a drain would then run unverified
    for good. Give the CA (the emulator's certificate), or turn verification off to connect unverified on purpose.
    """
    host = (urlparse(endpoint).hostname or "").lower()
    if verify is True and host in _UNVERIFIED_HOSTS:
        raise ConfigurationError(
            option,
            None,
            f"is required to verify TLS for the loopback endpoint {endpoint}: azure-cosmos skips verification for "
            "localhost/127.0.0.1 unless a CA certificate is given; set it to the emulator's certificate (PEM), or "
            "turn TLS verification off to connect unverified on purpose",
        )


def make_cosmos_client(endpoint: str, key: Any, *, verify: bool | str = True, **kwargs: Any) -> CosmosClient:
    """Build a ``CosmosClient`` for an account or the project emulator. Connects (reads the account) at once.

    ``verify`` is ``True`` (system CAs), ``False`` (no verification) or a CA bundle path (the emulator's generated
    certificate). azure-cosmos skips verification for 127.0.0.1 / localhost unless an ``ssl_config`` is given, so
    a path is passed through one: the emulator's certificate is then really verified; ``True`` for such an
    endpoint is refused (:func:`check_tls_verification`). ``key`` is an account key or a credential object.

    Requests go through :class:`~airflow_chatter.adapters.cosmos.transport.EnvironmentOnceTransport` (proxies and CA
    bundle from the environment, read once per host instead of on every request) unless ``transport`` is given.

    The SDK retries no 429 (F-11): its own throttle retries (9, up to 30 s per request, by default) were invisible
    to the drain, so ``throttled``, ``max_throttle_retries`` and ``max_throttle_wait_seconds`` missed every 429 it
    absorbed. Every 429 now reaches the caller as ``Throttled`` (with the server's retry-after); the drain retries
    it within its limits and counts it. A ``connection_policy`` or ``retry_throttle_total`` given keeps the caller's.
    The SDK's HTTP logging goes to :data:`SDK_HTTP_LOGGER` (quiet) unless a ``logger`` is given.
    """
    check_tls_verification(endpoint, verify)
    if "connection_policy" not in kwargs and "retry_throttle_total" not in kwargs:
        policy = ConnectionPolicy()
        policy.RetryOptions = RetryOptions(max_retry_attempt_count=0)
        kwargs["connection_policy"] = policy
    kwargs.setdefault("logger", _sdk_http_logger)
    if isinstance(verify, str):
        ssl_config = SSLConfiguration()
        ssl_config.SSLCaCerts = verify
        kwargs.setdefault("ssl_config", ssl_config)
        kwargs.setdefault("connection_verify", verify)
    else:
        kwargs.setdefault("connection_verify", verify)
    kwargs.setdefault("transport", EnvironmentOnceTransport())
    with translated_errors():
        return CosmosClient(endpoint, credential=key, **kwargs)


def open_container(client: CosmosClient, database_id: str, container_id: str) -> ContainerProxy:
    """The container's proxy, once it is known to exist; otherwise an error naming what is missing.

    A missing database or container otherwise surfaces, at the first request, as a bare ``404 {"message":""}``
    (the emulator) or "Resource Not Found", which names neither. One read of the container (and, only when that
    fails, of the database) tells which one is missing; the error names both, and the account.
    """
    database = client.get_database_client(database_id)
    container = database.get_container_client(container_id)
    try:
        container.read()
        return container
    except exceptions.CosmosResourceNotFoundError:
        pass
    account = getattr(client, "url_connection", None) or "the Cosmos account"
    try:
        database.read()
    except exceptions.CosmosResourceNotFoundError:
        raise ConfigurationError(
            "database", database_id, f"does not exist in {account} (wanted for container {container_id!r})"
        ) from None
    raise ConfigurationError("container", container_id, f"does not exist in database {database_id!r} of {account}")

"""The Cosmos DB hook: connection type ``chattercosmos``, handing out document containers.

Builds on ``AzureCosmosDBHook`` (password = account key, same Entra ID extras) and adds what a drain needs: TLS
settings for a local emulator, a data-plane Entra ID credential when no key is given, and
``CosmosDocumentContainer`` adapters for named containers.

The endpoint is the connection's ``host``: that is the address Airflow's Test Connection guard compares before it
reuses a stored key, so a test naming another endpoint must bring its own key.

NOTE: ``CosmosClient(...)`` does network I/O in its constructor, so it is built lazily, on first use
inside a task, never when the hook (or a DAG) is constructed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.providers.microsoft.azure.hooks.cosmos import AzureCosmosDBHook

from airflow_chatter.airflow.hooks._connection import ReadOnceHook
from airflow_chatter.airflow.hooks.cosmos_settings import CosmosConnectionSettings
from airflow_chatter.airflow.utils.secrets import mask, scrub
from airflow_chatter.errors import ConfigurationError

if TYPE_CHECKING:
    from azure.cosmos import CosmosClient

    from airflow_chatter.ports import DocumentContainer
    from airflow_chatter.ports.throttle import ThrottleLimits


class ChatterCosmosHook(ReadOnceHook, AzureCosmosDBHook):
    """Connect to a Cosmos DB (NoSQL) account and hand out ``DocumentContainer`` adapters.

    Connection: host is the account endpoint (``https://<account>.documents.azure.com:443/``); password is the
    account key. Without a key the hook
    authenticates with Entra ID through ``DefaultAzureCredential`` (data-plane RBAC), or, when the
    extra ``resource_group_name`` is set, fetches the key through the management plane as the azure
    provider does. Extras: ``database_name`` (the default database), ``connection_verify`` (default
    true), ``ca_cert_path`` (a PEM file to verify a local emulator), ``connection_timeout`` (seconds,
    default 10), ``max_throttle_retries`` / ``max_throttle_wait_seconds`` (the 429 limits of every drain and other
    caller through this connection, F-11; a source's own values win; default 30 s, and no retry count for a drain,
    9 per request for any other caller), and the azure provider's
    ``subscription_id``, ``resource_group_name``, ``managed_identity_client_id`` and ``workload_identity_tenant_id``:
    the fields of ``CosmosConnectionSettings``, which validates them once and generates the connection form.

    The hook reads its connection once (:meth:`connection`): a task that builds its hooks once reads each of its
    connections once.

    :param chatter_cosmos_conn_id: the connection id; default ``chatter_cosmos_default``.
    :param database_name: overrides the connection's ``database_name`` extra.
    """

    conn_name_attr = "chatter_cosmos_conn_id"
    default_conn_name = "chatter_cosmos_default"
    conn_type = "chattercosmos"
    hook_name = "Chatter Cosmos DB"

    def __init__(
        self,
        chatter_cosmos_conn_id: str = default_conn_name,
        *,
        database_name: str | None = None,
    ) -> None:
        super().__init__(azure_cosmos_conn_id=chatter_cosmos_conn_id)
        self.database_name = database_name
        self._secrets: list[str] = []
        self._settings: CosmosConnectionSettings | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(conn_id={self.conn_id!r}, database_name={self.database_name!r})"

    # -- connection --------------------------------------------------------------------------

    def settings(self) -> CosmosConnectionSettings:
        """The connection's extras, validated once; a bad one is refused naming the connection and the extra."""
        if self._settings is None:
            try:
                self._settings = CosmosConnectionSettings.from_extras(self.connection().extra_dejson)
            except ConfigurationError as error:
                raise ConfigurationError(
                    f"connection {self.conn_id!r} {error.option}", error.value, error.reason
                ) from None
        return self._settings

    def endpoint(self) -> str:
        """The account endpoint (the connection's host). No network I/O."""
        conn = self.connection()
        host = (conn.host or "").strip()
        if not host:
            raise ConfigurationError(f"connection {self.conn_id!r} host", None, "must be the Cosmos endpoint URI")
        if "://" not in host:
            host = f"https://{host}:{conn.port or 443}/"  # a bare host name, as a URI would carry it
        return host

    def throttle_limits(self) -> ThrottleLimits:
        """The connection's 429 limits (F-11), from its extras ``max_throttle_retries`` (an integer >= 0: retries per
        request after the server's retry-after) and ``max_throttle_wait_seconds`` (a finite number >= 0: seconds of
        429 waits without service); unset: no retry count (``None``; 9 per request for the callers that are not a
        drain, :meth:`retrying`) and 30. No network I/O. A source's own limits override these."""
        return self.settings().throttle_limits()

    def retrying(self, container: DocumentContainer) -> DocumentContainer:
        """``container`` with its 429s retried within :meth:`throttle_limits` per request (an unset retry limit: 9),
        for the callers that are not a drain (``airflow_chatter.ports.throttle``): the receiver, the idempotent HTTP
        hook's store, the deferrable sensor's trigger. A drain meters, limits and counts its 429s itself (F-11)."""
        from airflow_chatter.ports.throttle import ThrottleRetrying

        return ThrottleRetrying(container, self.throttle_limits())

    def _verify(self) -> bool | str:
        """What TLS verification the client gets: off, on, or on against the CA file of ``ca_cert_path``.

        Refuses "verify TLS" without a CA path for a loopback endpoint, which azure-cosmos would not verify.
        """
        from airflow_chatter.adapters.cosmos.client import check_tls_verification

        settings = self.settings()
        verify: bool | str = settings.connection_verify
        if settings.ca_cert_path and verify:
            verify = settings.ca_cert_path
        check_tls_verification(self.endpoint(), verify, option=f"connection {self.conn_id!r} extra ca_cert_path")
        return verify

    def client_kwargs(self) -> dict[str, Any]:
        """Return ``CosmosClient`` keyword arguments from the connection (no network I/O but a management-plane
        key lookup, when ``resource_group_name`` asks for one)."""
        conn = self.connection()
        endpoint = self.endpoint()
        settings = self.settings()  # a bad extra is refused before any I/O (and by Test Connection), naming it
        verify = self._verify()
        self._secrets = [s for s in (conn.password,) if s]
        mask(*self._secrets)
        return {
            "url": endpoint,
            "credential": self._credential(conn.password, settings),
            "connection_verify": verify,
            "connection_timeout": settings.connection_timeout,
            "user_agent_suffix": "airflow-chatter",
        }

    def _credential(self, key: str | None, settings: CosmosConnectionSettings) -> Any:
        if key:
            return key
        if settings.resource_group_name:
            # The azure provider's path: fetch the account key through the management plane.
            return self._management_plane_key(settings)
        from airflow.providers.microsoft.azure.utils import get_sync_default_azure_credential

        return get_sync_default_azure_credential(
            managed_identity_client_id=settings.managed_identity_client_id,
            workload_identity_tenant_id=settings.workload_identity_tenant_id,
        )

    def _management_plane_key(self, settings: CosmosConnectionSettings) -> str:
        from urllib.parse import urlparse

        from airflow.providers.microsoft.azure.utils import get_sync_default_azure_credential
        from azure.mgmt.cosmosdb import CosmosDBManagementClient

        group = str(settings.resource_group_name)
        if not settings.subscription_id:
            raise ConfigurationError(
                f"connection {self.conn_id!r} extra subscription_id",
                None,
                f"is required with resource_group_name={group!r}",
            )
        credential = get_sync_default_azure_credential(
            managed_identity_client_id=settings.managed_identity_client_id,
            workload_identity_tenant_id=settings.workload_identity_tenant_id,
        )
        client = CosmosDBManagementClient(credential=credential, subscription_id=settings.subscription_id)
        account = urlparse(self.endpoint()).netloc.split(".")[0]
        keys = client.database_accounts.list_keys(group, account)
        key = str(keys.primary_master_key)
        self._secrets.append(key)
        mask(key)
        return key

    def get_conn(self) -> CosmosClient:
        """Return the (cached) ``CosmosClient``; the first call talks to the account."""
        if self._conn is None:
            from airflow_chatter.adapters.cosmos.client import make_cosmos_client

            kwargs = self.client_kwargs()
            failure: RuntimeError | None = None
            try:
                # make_cosmos_client passes a CA path through an SSLConfiguration: azure-cosmos otherwise
                # skips verification for 127.0.0.1 (the local emulator).
                self._conn = make_cosmos_client(
                    kwargs.pop("url"), kwargs.pop("credential"), verify=kwargs.pop("connection_verify"), **kwargs
                )
            except Exception as error:  # noqa: BLE001 - any SDK error: re-raised cleaned of secrets
                failure = self._clean(error)
            if failure is not None:
                # Raised outside the except block so that not even __context__ keeps the original text.
                raise failure
        assert self._conn is not None
        return self._conn

    def _clean(self, error: BaseException) -> RuntimeError:
        """An error whose text names the connection and contains no secret (the cause is dropped)."""
        message = scrub(f"{type(error).__name__}: {error}", self._secrets)
        return RuntimeError(f"Cosmos connection {self.conn_id!r} failed: {message}")

    def _database(self, database_name: str | None) -> str:
        name = database_name or self.database_name or self.settings().database_name
        if not name:
            raise ConfigurationError(
                "database_name", None, f"must be given (or set as the extra of connection {self.conn_id!r})"
            )
        return name

    def database(self, database_name: str | None = None) -> str:
        """The database a container of this hook lives in: ``database_name``, the hook's, or the connection's
        ``database_name`` extra. No network I/O."""
        return self._database(database_name)

    # -- what a drain needs -----------------------------------------------------------------

    def get_container(self, container_name: str, *, database_name: str | None = None) -> DocumentContainer:
        """Return a ``CosmosDocumentContainer`` for a container of the (default) database.

        The adapter builds the client on its first call, so this does no network I/O.
        """
        from airflow_chatter.adapters.cosmos.client import open_container
        from airflow_chatter.adapters.cosmos.container import CosmosDocumentContainer

        self._verify()  # a refused TLS setting or extra is named before any I/O
        database = self._database(database_name)

        def container():  # type: ignore[no-untyped-def]
            # On first use: names a missing database or container instead of a bare 404 at the first request.
            return open_container(self.get_conn(), database, container_name)

        return CosmosDocumentContainer(
            container_factory=container,
            account_endpoint=self.endpoint(),
            database_id=database,
            container_id=container_name,
        )

    def test_connection(self) -> tuple[bool, str]:
        """Read the database (or list databases): proves endpoint, credential and TLS settings."""
        from azure.cosmos.exceptions import CosmosResourceNotFoundError

        try:
            endpoint = self.endpoint()
            client = self.get_conn()
            database = self.database_name or self.settings().database_name
            if database:
                try:
                    client.get_database_client(database).read()
                except CosmosResourceNotFoundError:
                    return False, f"Connected to Cosmos DB at {endpoint}, but database {database!r} does not exist."
                return True, f"Connected to Cosmos DB; database {database!r} exists."
            next(iter(client.list_databases()), None)
            return True, "Connected to Cosmos DB."
        except Exception as error:  # noqa: BLE001 - the UI's Test button shows the reason instead
            if isinstance(error, RuntimeError):  # already cleaned by get_conn
                return False, scrub(str(error), self._secrets)
            return False, str(self._clean(error))

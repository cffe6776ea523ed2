"""``CosmosDocumentContainer``: the document-container port over azure-cosmos (sync, 4.17.1).

SDK objects and SDK errors stop here. Every call runs inside :func:`translated_errors` (``errors.py``), the one place
where an azure-cosmos / azure-core exception becomes a :class:`~airflow_chatter.ports.ContainerError`. Building
clients and opening containers is ``client.py``; both keep their names importable from here.

Change-feed continuations are read per call, never from ``client_connection.last_response_headers``: that attribute
is shared by every request on the client, so a concurrent reader (another feed range, another container, any write)
overwrites it between our request and our read of it (azure-sdk-for-python #35328). Each
:meth:`CosmosDocumentContainer.read_change_feed` call passes its own ``response_hook``. The SDK hands that hook the
very headers mapping of *this* call's response and afterwards rewrites its ``etag`` entry, in place, into its
composite continuation token (``ChangeFeedFetcherV2.fetch_change_feed_items``). Keeping a reference to the mapping
therefore yields this page's token and nobody else's. The captured list is local to the call, so concurrent readers
need no lock and no client of their own; a lock guards only the lazy construction of the container proxy.

Request charges (F-11) are read the same way: every call passes ``response_hook=capture()``, which adds that
response's own ``x-ms-request-charge`` to the charge sink of the thread that made the call
(``airflow_chatter.ports.request_charges``; the drain sets one per kind of request). Every data-plane call also
carries the priority its thread set (``airflow_chatter.ports.request_priority``: the relay's requests are low,
the Unit of Work's writes set none and go out high, the SDK's default).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from azure.core import MatchConditions
from azure.cosmos import ContainerProxy, CosmosClient, DatabaseProxy, PartitionKey
from azure.cosmos.partition_key import NonePartitionKeyValue
from typing_extensions import override

from airflow_chatter.adapters.cosmos.client import check_tls_verification, make_cosmos_client, open_container
from airflow_chatter.adapters.cosmos.continuations import fix_point_in_time_token, narrow_continuation
from airflow_chatter.adapters.cosmos.errors import translate_error, translated_errors
from airflow_chatter.ports import (
    BadRequest,
    BatchOperation,
    BatchOperationKind,
    BatchOperationResult,
    ChangeFeedPage,
    ChangeFeedStart,
    ContainerError,
    ContainerProperties,
    Document,
    DocumentContainer,
    FeedRange,
    FeedRangeGone,
    PatchOperation,
)
from airflow_chatter.ports import (
    PartitionKey as PartitionKeyValue,
)
from airflow_chatter.ports.request_charges import capture
from airflow_chatter.ports.request_priority import current_priority

__all__ = [
    "EMULATOR_KEY",
    "CosmosDocumentContainer",
    "check_tls_verification",
    "create_container",
    "ensure_database",
    "make_cosmos_client",
    "open_container",
    "translate_error",
    "translated_errors",
]

#: The Cosmos DB emulator's well-known account key (any base64 key works with the project's emulator).
EMULATOR_KEY = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="

# --------------------------------------------------------------------------------------------------------------
# Helpers.
# --------------------------------------------------------------------------------------------------------------


def _per_request(extra: Callable[[Mapping[str, Any], Any], None] | None = None) -> dict[str, Any]:
    """The keywords every data-plane request carries: its own charge hook (F-11) and, when the caller set one, its
    priority (``ports/request_priority.py``: the SDK sends it as ``x-ms-cosmos-priority-level``)."""
    options: dict[str, Any] = {"response_hook": capture(extra)}
    priority = current_priority()
    if priority is not None:
        options["priority"] = "Low" if priority == "low" else "High"
    return options


def _sdk_partition_key(value: PartitionKeyValue) -> Any:
    """Our partition key value as the SDK takes it: hierarchical keys as lists, JSON null as ``None``."""
    if isinstance(value, tuple):
        return list(value)
    return value


def _extract_partition_key(document: Document, paths: Sequence[str]) -> PartitionKeyValue:
    """The partition key value a document carries (``NonePartitionKeyValue`` marks an absent component)."""
    values: list[Any] = []
    for path in paths:
        node: Any = document
        for segment in path.lstrip("/").split("/"):
            if isinstance(node, dict) and segment in node:
                node = node[segment]
            else:
                node = NonePartitionKeyValue
                break
        values.append(node)
    return values[0] if len(values) == 1 else values


def _key_components(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


def _same_key(a: Any, b: Any) -> bool:
    return json.dumps(_key_components(a), sort_keys=True, default=str) == json.dumps(
        _key_components(b), sort_keys=True, default=str
    )


def _sdk_batch_operation(operation: BatchOperation) -> tuple[Any, ...]:
    options: dict[str, Any] = {}
    if operation.if_match is not None:
        options["if_match_etag"] = operation.if_match
    kind = operation.kind
    if kind is BatchOperationKind.CREATE:
        return ("create", (operation.body,), options)
    if kind is BatchOperationKind.UPSERT:
        return ("upsert", (operation.body,), options)
    if kind is BatchOperationKind.REPLACE:
        return ("replace", (operation.id, operation.body), options)
    if kind is BatchOperationKind.READ:
        return ("read", (operation.id,), options)
    if kind is BatchOperationKind.DELETE:
        return ("delete", (operation.id,), options)
    if kind is BatchOperationKind.PATCH:
        if operation.filter_predicate is not None:
            options["filter_predicate"] = operation.filter_predicate
        return ("patch", (operation.id, [op.as_cosmos() for op in operation.patch_operations]), options)
    raise BadRequest(f"unknown batch operation kind {kind!r}")


# --------------------------------------------------------------------------------------------------------------
# The adapter.
# --------------------------------------------------------------------------------------------------------------


class CosmosDocumentContainer(DocumentContainer):
    """The document-container port over an azure-cosmos ``ContainerProxy``.

    Give either ``container`` or ``container_factory`` (called once, on first use, so constructing the adapter does
    no network I/O; ``CosmosClient(...)`` reads the account when it is built). ``account_endpoint`` overrides the
    endpoint reported by :meth:`properties` (default: the client's URL). ``database_id``/``container_id`` name the
    container before it is built (a hook knows them), so that an error of the first read says which one failed;
    with ``container`` they are taken from its link.
    """

    def __init__(
        self,
        container: ContainerProxy | None = None,
        *,
        container_factory: Callable[[], ContainerProxy] | None = None,
        account_endpoint: str | None = None,
        database_id: str | None = None,
        container_id: str | None = None,
    ) -> None:
        if (container is None) == (container_factory is None):
            raise ValueError("give exactly one of container or container_factory")
        link = str(getattr(container, "container_link", "") or "").split("/")
        if len(link) >= 4 and link[0] == "dbs" and link[2] == "colls":
            database_id, container_id = link[1], link[3]
        self.database_id = database_id
        self.container_id = container_id
        self._container = container
        self._factory = container_factory
        self._account_endpoint = account_endpoint
        self._lock = threading.Lock()
        self._partition_key_paths: tuple[str, ...] | None = None

    # -- plumbing ----------------------------------------------------------------------------------------------

    @property
    def container(self) -> ContainerProxy:
        """The SDK container proxy, built on first use."""
        if self._container is None:
            with self._lock:
                if self._container is None:
                    assert self._factory is not None
                    with translated_errors():
                        self._container = self._factory()
        return self._container

    def _where(self) -> str | None:
        """The container and database requests go to."""
        if self.container_id is None or self.database_id is None:
            return None
        return f"container {self.container_id!r} in database {self.database_id!r}"

    def _paths(self) -> tuple[str, ...]:
        if self._partition_key_paths is None:
            self._partition_key_paths = self.properties().partition_key_paths
        return self._partition_key_paths

    def _check_partition_key(self, document: Document, partition_key: PartitionKeyValue) -> None:
        """Real Cosmos DB answers 400 when the body's key differs from the request's; the SDK sends only the body's."""
        carried = _extract_partition_key(document, self._paths())
        if not _same_key(carried, partition_key):
            raise BadRequest(
                f"partition key {partition_key!r} differs from the document's {carried!r} ({', '.join(self._paths())})"
            )

    # -- metadata ------------------------------------------------------------------------------------------------

    @override
    def properties(self) -> ContainerProperties:
        with translated_errors(self._where):
            container = self.container
            raw = container.read(response_hook=capture())
            endpoint = self._account_endpoint or container.client_connection.url_connection
        paths = tuple((raw.get("partitionKey") or {}).get("paths") or ())
        self._partition_key_paths = paths
        # container_link is "dbs/{database id}/colls/{container id}".
        database_id = str(container.container_link).split("/")[1]
        return ContainerProperties(
            account_endpoint=str(endpoint),
            database_id=database_id,
            container_id=str(raw["id"]),
            partition_key_paths=paths,
            default_ttl=raw.get("defaultTtl"),
        )

    # -- point operations ----------------------------------------------------------------------------------------

    @override
    def create(self, document: Document, partition_key: PartitionKeyValue) -> Document:
        self._check_partition_key(document, partition_key)
        with translated_errors(self._where):
            return dict(self.container.create_item(body=document, **_per_request()))

    @override
    def read(self, item_id: str, partition_key: PartitionKeyValue) -> Document:
        with translated_errors(self._where):
            return dict(
                self.container.read_item(
                    item=item_id, partition_key=_sdk_partition_key(partition_key), **_per_request()
                )
            )

    @override
    def replace(
        self,
        item_id: str,
        partition_key: PartitionKeyValue,
        document: Document,
        *,
        if_match: str | None = None,
    ) -> Document:
        self._check_partition_key(document, partition_key)
        if str(document.get("id")) != item_id:
            raise BadRequest(f"document id {document.get('id')!r} differs from {item_id!r}")
        with translated_errors(self._where):
            return dict(
                self.container.replace_item(item=item_id, body=document, **_per_request(), **self._if_match(if_match))
            )

    @override
    def upsert(self, document: Document, partition_key: PartitionKeyValue, *, if_match: str | None = None) -> Document:
        self._check_partition_key(document, partition_key)
        with translated_errors(self._where):
            return dict(self.container.upsert_item(body=document, **_per_request(), **self._if_match(if_match)))

    @override
    def delete(self, item_id: str, partition_key: PartitionKeyValue, *, if_match: str | None = None) -> None:
        with translated_errors(self._where):
            self.container.delete_item(
                item=item_id,
                partition_key=_sdk_partition_key(partition_key),
                **_per_request(),
                **self._if_match(if_match),
            )

    @override
    def patch(
        self,
        item_id: str,
        partition_key: PartitionKeyValue,
        operations: Sequence[PatchOperation],
        *,
        if_match: str | None = None,
        filter_predicate: str | None = None,
    ) -> Document:
        kwargs = self._if_match(if_match)
        if filter_predicate is not None:
            kwargs["filter_predicate"] = filter_predicate
        with translated_errors(self._where):
            return dict(
                self.container.patch_item(
                    item=item_id,
                    partition_key=_sdk_partition_key(partition_key),
                    patch_operations=[op.as_cosmos() for op in operations],
                    **_per_request(),
                    **kwargs,
                )
            )

    @staticmethod
    def _if_match(if_match: str | None) -> dict[str, Any]:
        if if_match is None:
            return {}
        return {"etag": if_match, "match_condition": MatchConditions.IfNotModified}

    # -- batch ---------------------------------------------------------------------------------------------------

    @override
    def execute_batch(
        self, partition_key: PartitionKeyValue, operations: Sequence[BatchOperation]
    ) -> list[BatchOperationResult]:
        for operation in operations:
            if operation.body is not None:
                self._check_partition_key(operation.body, partition_key)
        sdk_operations = [_sdk_batch_operation(op) for op in operations]
        with translated_errors(self._where):
            results = self.container.execute_item_batch(
                batch_operations=sdk_operations,
                partition_key=_sdk_partition_key(partition_key),
                **_per_request(),
            )
        return [
            BatchOperationResult(
                status_code=int(r.get("statusCode", 0)),
                etag=r.get("eTag"),
                body=dict(r["resourceBody"]) if r.get("resourceBody") else None,
            )
            for r in results
        ]

    # -- queries -------------------------------------------------------------------------------------------------

    @override
    def query(
        self,
        sql: str,
        parameters: Mapping[str, Any] | None = None,
        *,
        partition_key: PartitionKeyValue | None = None,
    ) -> Iterator[Any]:
        sdk_parameters = [
            {"name": name if name.startswith("@") else f"@{name}", "value": value}
            for name, value in (parameters or {}).items()
        ]
        kwargs: dict[str, Any] = {"query": sql, "parameters": sdk_parameters or None, **_per_request()}
        if partition_key is None:
            kwargs["enable_cross_partition_query"] = True
        else:
            kwargs["partition_key"] = _sdk_partition_key(partition_key)

        def rows() -> Iterator[Document]:
            # Lazy: errors surface while iterating, so translation wraps the iteration too.
            with translated_errors(self._where):
                for row in self.container.query_items(**kwargs):
                    yield dict(row) if isinstance(row, dict) else row

        return rows()

    # -- feed ranges and the change feed -------------------------------------------------------------------------

    @override
    def read_feed_ranges(self, *, force_refresh: bool = False) -> list[FeedRange]:
        with translated_errors(self._where):
            ranges = list(self.container.read_feed_ranges(force_refresh=force_refresh))
        return [FeedRange(token=json.dumps(r, sort_keys=True)) for r in ranges]

    @override
    def is_feed_range_subset(self, parent: FeedRange, child: FeedRange) -> bool:
        with translated_errors(self._where):
            return bool(self.container.is_feed_range_subset(json.loads(parent.token), json.loads(child.token)))

    @override
    def feed_range_overlap(self, a: FeedRange, b: FeedRange) -> FeedRange | None:
        # Pure: EPK strings order as strings, as the SDK's routing ranges compare them; no request is made.
        spans = []
        for feed_range in (a, b):
            span = feed_range.epk_bounds()
            if span is None:
                raise BadRequest(f"not an EPK feed range of this container: {feed_range.token!r}")
            spans.append(span)
        low, high = max(spans[0][0], spans[1][0]), min(spans[0][1], spans[1][1])
        if not low < high:
            return None
        if (low, high) == spans[0]:
            return a
        if (low, high) == spans[1]:
            return b
        return FeedRange.from_epk_bounds(low, high)

    def _raise_if_split(self, feed_range: FeedRange) -> None:
        """``FeedRangeGone`` when no current feed range holds ``feed_range`` whole: it split (the port's contract).

        WHY: azure-cosmos fans a read of a split range out over the children itself, so without this a lease would
        never learn of the split and one task would keep draining what the children's leases should share. The
        SDK's cached routing map is consulted (no request); it learns of a split on the first 410, after which
        this raises. A token that is not an EPK range is left to the SDK.
        """
        try:
            wanted = json.loads(feed_range.token)
        except ValueError:
            return
        if not isinstance(wanted, dict) or "Range" not in wanted:
            return
        with translated_errors(self._where):
            current = list(self.container.read_feed_ranges())
            if any(self.container.is_feed_range_subset(r, wanted) for r in current):
                return
        raise FeedRangeGone(f"the feed range {feed_range.token} is no longer within one partition key range (split)")

    @override
    def read_change_feed(
        self,
        feed_range: FeedRange,
        *,
        continuation: str | None = None,
        start: ChangeFeedStart | datetime = ChangeFeedStart.BEGINNING,
        max_item_count: int = 100,
    ) -> ChangeFeedPage:
        self._raise_if_split(feed_range)
        # This call's own response headers; see the module docstring for why they are not read from the client.
        responses: list[Mapping[str, Any]] = []

        def keep(headers: Mapping[str, Any], _body: Any) -> None:
            responses.append(headers)

        kwargs: dict[str, Any] = {"max_item_count": max_item_count, **_per_request(keep)}
        if continuation is not None:
            kwargs["continuation"] = narrow_continuation(continuation, feed_range)
        else:
            kwargs["feed_range"] = json.loads(feed_range.token)
            if isinstance(start, datetime):
                kwargs["start_time"] = start if start.tzinfo else start.replace(tzinfo=UTC)
            else:
                kwargs["start_time"] = "Now" if start is ChangeFeedStart.NOW else "Beginning"
        with translated_errors(self._where):
            pages = self.container.query_items_change_feed(**kwargs).by_page()
            try:
                documents = tuple(dict(d) for d in next(pages))
            except StopIteration:
                documents = ()
        if not responses or not responses[-1].get("etag"):
            raise ContainerError("the change feed answered without a continuation (ETag)")
        token = fix_point_in_time_token(str(responses[-1]["etag"]))
        return ChangeFeedPage(documents=documents, continuation=token)


# --------------------------------------------------------------------------------------------------------------
# Clients and containers: for the emulator, a real account, and tests.
# --------------------------------------------------------------------------------------------------------------


def create_container(
    database: DatabaseProxy,
    container_id: str,
    partition_key_paths: Sequence[str] = ("/pk",),
    *,
    default_ttl: int | None = None,
) -> ContainerProxy:
    """Create a container with these partition key paths (two or three make a hierarchical key) and TTL."""
    paths = list(partition_key_paths)
    if len(paths) == 1:
        key = PartitionKey(path=paths[0])
    else:
        key = PartitionKey(path=paths, kind="MultiHash")
    kwargs: dict[str, Any] = {}
    if default_ttl is not None:
        kwargs["default_ttl"] = default_ttl
    with translated_errors():
        container: ContainerProxy = database.create_container(id=container_id, partition_key=key, **kwargs)
    return container


def ensure_database(client: CosmosClient, database_id: str) -> DatabaseProxy:
    """Return the database, creating it if needed."""
    with translated_errors():
        return client.create_database_if_not_exists(id=database_id)

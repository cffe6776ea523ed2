"""The container contract suite, run against ``CosmosDocumentContainer``.

Against the project emulator by default, or a real account when ``COSMOS_ENDPOINT``/``COSMOS_KEY`` are set
(tests/fixtures/cosmos.py). Capabilities the emulator structurally lacks are not claimed:

* splits are claimed on the project emulator only: its compat layer splits a partition key range on demand
  (``POST /_chatter/split``, docs/emulator.md); a real account cannot be split on demand;
* fault injection: neither the emulator nor a real account fails on request (429/503/408 mapping is pinned by the
  adapter's own error-translation tests instead.

Hierarchical-key prefix queries are claimed: azure-cosmos sends a prefix as a hashed effective-partition-key range,
which the emulator's compat layer evaluates (``fixEffectivePartitionKeyRangeScope`` in server.js).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from azure.core.exceptions import ServiceRequestError, ServiceResponseTimeoutError
from azure.cosmos import ContainerProxy, exceptions

from airflow_chatter.adapters.cosmos.container import CosmosDocumentContainer, translated_errors
from airflow_chatter.ports import (
    BadRequest,
    BatchFailed,
    Conflict,
    ContainerError,
    DocumentContainer,
    FeedRange,
    FeedRangeGone,
    NotFound,
    PreconditionFailed,
    RequestTimeout,
    ServiceUnavailable,
    Throttled,
)
from airflow_chatter.testing.contracts.container import DocumentContainerContract
from tests.fixtures.cosmos import (
    ContainerFactory,
    CosmosEndpoint,
    emulator_admin,
    emulator_configured,
    sdk_feed_range_halves,
)

pytestmark = pytest.mark.cosmos


class TestCosmosContainerContract(DocumentContainerContract):
    supports_clock_control = False
    supports_splits = False
    supports_sub_ranges = True
    supports_fault_injection = False
    supports_hierarchical_prefix_queries = True

    @pytest.fixture(autouse=True)
    def _use_cosmos(self, cosmos_endpoint: CosmosEndpoint, cosmos_container_factory: ContainerFactory) -> None:
        self._endpoint = cosmos_endpoint
        self._new_container = cosmos_container_factory
        self.supports_splits = cosmos_endpoint.is_emulator

    def make_container(
        self, partition_key_paths: Sequence[str] = ("/pk",), default_ttl: int | None = -1
    ) -> DocumentContainer:
        return CosmosDocumentContainer(self._new_container(partition_key_paths, default_ttl))

    def halve_feed_range(self, container: DocumentContainer, feed_range: FeedRange) -> tuple[FeedRange, FeedRange]:
        return sdk_feed_range_halves(feed_range)

    def split_feed_range(self, container: DocumentContainer, feed_range: FeedRange) -> tuple[FeedRange, FeedRange]:
        assert isinstance(container, CosmosDocumentContainer)
        children = split_emulator_feed_range(self._endpoint, container.container, feed_range)
        # The backend's listing shows the split at once, as the contract expects; a client of an account learns of
        # it on its first 410 (or a forced refresh), which the SDK's own routing-map tests in
        # test_emulator_compat.py show.
        container.read_feed_ranges(force_refresh=True)
        return children


def split_emulator_feed_range(
    endpoint: CosmosEndpoint, proxy: ContainerProxy, feed_range: FeedRange
) -> tuple[FeedRange, FeedRange]:
    """Split the partition key range that is exactly ``feed_range`` on the emulator; its two children, as feed
    ranges spelled as the adapter's ``read_feed_ranges`` spells them."""
    span = json.loads(feed_range.token)["Range"]
    ranges = emulator_admin(endpoint, "GET", "ranges", params={"container": proxy.container_link})["ranges"]
    [range_id] = [r["id"] for r in ranges if (r["minInclusive"], r["maxExclusive"]) == (span["min"], span["max"])]
    split = emulator_admin(endpoint, "POST", "split", body={"container": proxy.container_link, "range_id": range_id})

    def as_feed_range(child: dict[str, Any]) -> FeedRange:
        body = {
            "Range": {
                "isMaxInclusive": False,
                "isMinInclusive": True,
                "max": child["maxExclusive"],
                "min": child["minInclusive"],
            }
        }
        return FeedRange(token=json.dumps(body, sort_keys=True))

    left, right = split["children"]
    return as_feed_range(left), as_feed_range(right)


# ----------------------------------------------------------------------------------------------------------------
# Beyond the contract: what is specific to the azure-cosmos adapter.
# ----------------------------------------------------------------------------------------------------------------


def _sdk_error(status: int, headers: dict[str, str] | None = None) -> exceptions.CosmosHttpResponseError:
    error = exceptions.CosmosHttpResponseError(status_code=status, message=f"status {status}")
    error.headers = headers or {}
    return error


@pytest.mark.parametrize(
    ("sdk_error", "expected", "status"),
    [
        (exceptions.CosmosResourceNotFoundError(status_code=404, message="nf"), NotFound, 404),
        (exceptions.CosmosResourceExistsError(status_code=409, message="ex"), Conflict, 409),
        (exceptions.CosmosAccessConditionFailedError(status_code=412, message="pf"), PreconditionFailed, 412),
        (_sdk_error(400), BadRequest, 400),
        (_sdk_error(408), RequestTimeout, 408),
        (_sdk_error(410, {"x-ms-substatus": "1002"}), FeedRangeGone, 410),
        (_sdk_error(429, {"x-ms-retry-after-ms": "250"}), Throttled, 429),
        (_sdk_error(503), ServiceUnavailable, 503),
        (_sdk_error(413), ContainerError, 413),
        (exceptions.CosmosClientTimeoutError(), RequestTimeout, 408),
        (ServiceRequestError("connection refused"), ServiceUnavailable, 503),
        (ServiceResponseTimeoutError("read timed out"), RequestTimeout, 408),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, BaseException) else str(value),
)
def test_sdk_errors_are_translated_once_to_the_port_errors(
    sdk_error: BaseException, expected: type[ContainerError], status: int
) -> None:
    with pytest.raises(expected) as caught, translated_errors():
        raise sdk_error
    assert type(caught.value) is expected, "the most specific port error, not just a ContainerError"
    assert caught.value.status_code == status
    assert caught.value.__cause__ is sdk_error, "the SDK error stays reachable for diagnosis"
    if expected is Throttled:
        assert caught.value.retry_after_ms == 250, "the drain backs off by what the service asked for"


def test_a_batch_operation_error_becomes_batch_failed_with_every_status() -> None:
    error = exceptions.CosmosBatchOperationError(
        error_index=1,
        headers={},
        status_code=409,
        message="conflict",
        operation_responses=[{"statusCode": 424}, {"statusCode": 409}, {"statusCode": 424}],
    )
    with pytest.raises(BatchFailed) as caught, translated_errors():
        raise error
    assert caught.value.failed_index == 1 and caught.value.status_code == 409
    assert caught.value.operation_statuses == (424, 409, 424)


def test_non_sdk_exceptions_pass_through_untranslated() -> None:
    with pytest.raises(KeyError), translated_errors():
        raise KeyError("a bug of ours is not a container error")


def test_construction_does_no_network_io() -> None:
    calls: list[str] = []

    def factory() -> Any:
        calls.append("built")
        raise exceptions.CosmosHttpResponseError(status_code=503, message="unreachable")

    adapter = CosmosDocumentContainer(container_factory=factory)
    assert calls == [], "the factory (and with it CosmosClient) runs on first use only"
    with pytest.raises(ServiceUnavailable):
        adapter.properties()


def _container_rid_of(continuation: str) -> str:
    return str(json.loads(base64.b64decode(continuation))["containerRid"])


class _InterleavingProxy:
    """A ContainerProxy stand-in: right after each change-feed page is fetched, and before the adapter takes its
    continuation, it runs ``meanwhile`` (another reader's request on the same client)."""

    def __init__(self, proxy: ContainerProxy, meanwhile: Callable[[], object]) -> None:
        self._proxy = proxy
        self._meanwhile = meanwhile
        self.interleaved = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._proxy, name)

    def query_items_change_feed(self, **kwargs: Any) -> Any:
        pager = self._proxy.query_items_change_feed(**kwargs)
        outer = self

        class _Paged:
            def by_page(self) -> Iterator[Any]:
                for page in pager.by_page():
                    documents = list(page)
                    outer.interleaved += 1
                    outer._meanwhile()
                    yield iter(documents)

        return _Paged()


@pytest.mark.usefixtures("cosmos_endpoint")
class TestChangeFeedContinuationsArePerReader:
    """azure-sdk-for-python #35328: the client-wide ``last_response_headers`` is shared."""

    def test_a_reader_on_another_container_of_the_same_client_cannot_swap_the_token(
        self, cosmos_container_factory: ContainerFactory
    ) -> None:
        left = cosmos_container_factory(("/pk",))
        right = cosmos_container_factory(("/pk",))
        assert left.client_connection is right.client_connection, "one client: one last_response_headers"
        right.create_item({"id": "r1", "pk": "p"})
        left.create_item({"id": "l1", "pk": "p"})
        right_reader = CosmosDocumentContainer(right)
        right_range = right_reader.read_feed_ranges()[0]
        proxy = _InterleavingProxy(left, lambda: right_reader.read_change_feed(right_range))
        left_reader = CosmosDocumentContainer(proxy)  # type: ignore[arg-type]

        page = left_reader.read_change_feed(left_reader.read_feed_ranges()[0])

        assert proxy.interleaved == 1, "the other reader really ran between our fetch and our token"
        shared = left.client_connection.last_response_headers["etag"]
        assert _container_rid_of(shared) == right.read()["_rid"], "negative control: the shared header is theirs"
        assert [d["id"] for d in page.documents] == ["l1"]
        assert _container_rid_of(page.continuation) == left.read()["_rid"], "our token is ours"
        left.create_item({"id": "l2", "pk": "p"})
        resumed = CosmosDocumentContainer(left).read_change_feed(
            left_reader.read_feed_ranges()[0], continuation=page.continuation
        )
        assert [d["id"] for d in resumed.documents] == ["l2"], "and it resumes exactly after our page"

    def test_two_readers_of_one_adapter_interleaving_keep_their_own_positions(
        self, cosmos_container_factory: ContainerFactory
    ) -> None:
        container = cosmos_container_factory(("/pk",))
        for i in range(4):
            container.create_item({"id": f"d{i}", "pk": "p"})
        plain = CosmosDocumentContainer(container)
        feed_range = plain.read_feed_ranges()[0]
        behind = plain.read_change_feed(feed_range, max_item_count=1)  # reader B is after d0
        tokens_of_b: list[str] = []
        proxy = _InterleavingProxy(
            container,
            lambda: tokens_of_b.append(
                plain.read_change_feed(feed_range, continuation=behind.continuation, max_item_count=1).continuation
            ),
        )
        shared = CosmosDocumentContainer(proxy)  # type: ignore[arg-type]

        ahead = shared.read_change_feed(feed_range, max_item_count=3)  # reader A reads d0..d2 meanwhile B reads d1

        assert [d["id"] for d in ahead.documents] == ["d0", "d1", "d2"]
        after_a = plain.read_change_feed(feed_range, continuation=ahead.continuation, max_item_count=10)
        after_b = plain.read_change_feed(feed_range, continuation=tokens_of_b[0], max_item_count=10)
        assert [d["id"] for d in after_a.documents] == ["d3"], "A resumes after its own page, not after B's"
        assert [d["id"] for d in after_b.documents] == ["d2", "d3"], "B resumes after its own page"

    def test_concurrent_readers_on_one_client_each_get_their_own_tokens(
        self, cosmos_container_factory: ContainerFactory
    ) -> None:
        proxies = [cosmos_container_factory(("/pk",)) for _ in range(3)]
        assert len({id(p.client_connection) for p in proxies}) == 1, "one shared client"
        rids = [p.read()["_rid"] for p in proxies]
        for i, proxy in enumerate(proxies):
            proxy.create_item({"id": f"c{i}", "pk": "p"})
        readers = [CosmosDocumentContainer(p) for p in proxies]
        ranges = [r.read_feed_ranges()[0] for r in readers]

        def poll(index: int) -> list[str]:
            wrong = []
            for _ in range(15):
                page = readers[index].read_change_feed(ranges[index])
                if _container_rid_of(page.continuation) != rids[index]:
                    wrong.append(page.continuation)
            return wrong

        with ThreadPoolExecutor(max_workers=3) as pool:
            results = list(pool.map(poll, range(3)))
        assert results == [[], [], []], "no reader was handed another container's continuation"


class TestCosmosContainerContractOnSeveralRanges(TestCosmosContainerContract):
    """The same contract where every container has four partition key ranges, as on an account with four physical
    partitions: leases per range, feed reads routed by range, splits of one range among several (emulator only)."""

    @pytest.fixture(autouse=True)
    def _several_ranges(self, cosmos_endpoint: CosmosEndpoint) -> Iterator[None]:
        if not cosmos_endpoint.is_emulator:
            pytest.skip("a real account's partition count is not chosen by the test")
        with emulator_configured(cosmos_endpoint, partition_ranges=4):
            yield

    def test_its_containers_have_four_feed_ranges_edge_to_edge(self) -> None:
        spans = [json.loads(r.token)["Range"] for r in self.make_container().read_feed_ranges()]
        assert [(s["min"], s["max"]) for s in spans][0][0] == "" and spans[-1]["max"] == "FF"
        assert len(spans) == 4 and all(a["max"] == b["min"] for a, b in zip(spans, spans[1:], strict=False))

"""How the Cosmos adapter cuts feed ranges and resumes a continuation on a narrower one (F-04), checked with
azure-cosmos's own change-feed state: the token it is handed back is parsed by the SDK, and the SDK's own request
headers show which EPK range it would read. No network: the emulator and account runs of the same behaviour are
``test_f04_halves_resumed_from_the_whole_range_continuation_see_only_their_own_changes_once`` (contract suite) and
tests/integration/test_drain_split_cosmos.py.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from azure.cosmos import http_constants
from azure.cosmos._change_feed.change_feed_start_from import ChangeFeedStartFromBeginning
from azure.cosmos._change_feed.change_feed_state import ChangeFeedStateV2
from azure.cosmos._change_feed.feed_range_internal import FeedRangeInternalEpk
from azure.cosmos._routing.routing_range import Range

from airflow_chatter.adapters.cosmos.container import CosmosDocumentContainer
from airflow_chatter.adapters.cosmos.continuations import narrow_continuation
from airflow_chatter.ports import BadRequest, FeedRange

_LINK = "dbs/db/colls/orders"
_RID = "rid-of-orders"
_HEADERS = http_constants.HttpHeaders


def _feed_range(low: str, high: str) -> FeedRange:
    body = {"Range": {"isMaxInclusive": False, "isMinInclusive": True, "max": high, "min": low}}
    return FeedRange(token=json.dumps(body, sort_keys=True))


def _sdk_token(low: str, high: str, etag: str = '"42"') -> str:
    """A continuation as azure-cosmos writes it after reading ``[low, high)`` up to ``etag``."""
    state = ChangeFeedStateV2(
        _LINK, _RID, FeedRangeInternalEpk(Range(low, high, True, False)), ChangeFeedStartFromBeginning(), None, None
    )
    state.apply_server_response_continuation(etag, True)
    return base64.b64encode(json.dumps(state.to_dict()).encode()).decode()


def _composite(outer: tuple[str, str], positions: list[tuple[str, str, str]]) -> str:
    """A v2 continuation with several per-range positions (what the SDK holds after a split it handled itself)."""
    state = json.loads(base64.b64decode(_sdk_token(*outer)))
    state["continuation"]["continuation"] = [
        {"token": etag, "range": {"min": a, "max": b, "isMinInclusive": True, "isMaxInclusive": False}}
        for a, b, etag in positions
    ]
    return base64.b64encode(json.dumps(state).encode()).decode()


def _parsed(token: str) -> ChangeFeedStateV2:
    return ChangeFeedStateV2.from_continuation(_LINK, _RID, json.loads(base64.b64decode(token)))


def _positions(token: str) -> list[tuple[str, str, str | None]]:
    scope = _parsed(token)._continuation
    return [(p.feed_range.min, p.feed_range.max, p.token) for p in scope._continuation]


class _OnePartition:
    """The SDK's routing provider for a container with one physical partition ``["", "FF")``."""

    def get_overlapping_ranges(self, _link: str, _ranges: Any, _options: Any = None) -> list[dict[str, str]]:
        return [{"id": "0", "minInclusive": "", "maxExclusive": "FF"}]


def _request_headers(token: str) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    _parsed(token).populate_request_headers(_OnePartition(), headers)
    return headers


def test_f04_a_parent_token_resumed_on_a_child_reads_the_child_only_from_the_parent_position() -> None:
    parent = _sdk_token("", "FF")
    # The cause: handed to the SDK as it is, the parent's token reads the whole partition, whatever range was asked.
    assert _HEADERS.StartEpkString not in _request_headers(parent)

    child = narrow_continuation(parent, _feed_range("", "20"))

    assert _positions(child) == [("", "20", '"42"')], "the child's bounds, the parent's position"
    headers = _request_headers(child)
    assert (headers[_HEADERS.StartEpkString], headers[_HEADERS.EndEpkString]) == ("", "20")
    assert headers[_HEADERS.PartitionKeyRangeID] == "0"
    assert headers[_HEADERS.IfNoneMatch] == '"42"', "resumes after the parent's last change"


def test_f04_each_position_of_a_composite_token_is_cut_to_the_child_and_those_outside_it_dropped() -> None:
    token = _composite(("", "FF"), [("", "20", '"10"'), ("20", "80", '"11"'), ("80", "FF", '"12"')])

    child = narrow_continuation(token, _feed_range("18", "30"))

    assert _positions(child) == [("18", "20", '"10"'), ("20", "30", '"11"')]
    assert _parsed(child)._continuation.feed_range.get_normalized_range() == Range("18", "30", True, False)


def test_f04_positions_wider_than_the_lease_range_are_cut_back_to_it() -> None:
    # What the SDK writes when the partition under a sub-range position split: the children's whole ranges.
    token = _composite(("", "20"), [("", "10", '"7"'), ("10", "40", '"7"')])

    narrowed = narrow_continuation(token, _feed_range("", "20"))

    assert _positions(narrowed) == [("", "10", '"7"'), ("10", "20", '"7"')]


def test_a_token_for_exactly_the_requested_range_is_passed_on_unchanged() -> None:
    token = _sdk_token("", "20")
    assert narrow_continuation(token, _feed_range("", "20")) is token


@pytest.mark.parametrize(
    ("token_range", "requested"),
    [(("", "20"), ("20", "FF")), (("", "20"), ("10", "30")), (("20", "40"), ("", "FF"))],
)
def test_f04_a_token_is_refused_for_a_range_it_does_not_contain(
    token_range: tuple[str, str], requested: tuple[str, str]
) -> None:
    with pytest.raises(BadRequest, match="does not contain the requested feed range"):
        narrow_continuation(_sdk_token(*token_range), _feed_range(*requested))


def test_a_token_without_a_position_inside_the_requested_range_is_refused() -> None:
    token = _composite(("", "FF"), [("", "20", '"10"')])  # malformed: nothing covers ["40", "FF")
    with pytest.raises(BadRequest, match="no position inside"):
        narrow_continuation(token, _feed_range("40", "FF"))


@pytest.mark.parametrize(
    "token",
    [
        '"17"',  # a bare ETag (the v1 change feed)
        "not base64 at all",
        base64.b64encode(b'{"v": "V2"}').decode(),
        base64.b64encode(json.dumps({"continuation": {"PK": ["a"], "continuation": []}}).encode()).decode(),
    ],
)
def test_a_token_this_adapter_cannot_read_is_left_to_the_sdk(token: str) -> None:
    assert narrow_continuation(token, _feed_range("", "20")) is token


def _adapter() -> CosmosDocumentContainer:
    def unreachable() -> Any:
        raise AssertionError("feed_range_overlap makes no request")

    return CosmosDocumentContainer(container_factory=unreachable)


def test_f04_the_overlap_across_an_edge_is_the_common_part_as_a_token_the_sdk_reads() -> None:
    piece = _adapter().feed_range_overlap(_feed_range("", "30"), _feed_range("20", "FF"))

    assert piece == _feed_range("20", "30"), "the same token form as read_feed_ranges lists"
    # A continuation resumed on the piece reads exactly its bounds (see the narrowing tests above).
    headers = _request_headers(narrow_continuation(_sdk_token("", "FF"), piece))
    assert (headers[_HEADERS.StartEpkString], headers[_HEADERS.EndEpkString]) == ("20", "30")


def test_f04_overlaps_of_nested_and_disjoint_sdk_ranges() -> None:
    adapter = _adapter()
    outer, inner = _feed_range("", "FF"), _feed_range("10", "20")
    assert adapter.feed_range_overlap(outer, inner) is inner and adapter.feed_range_overlap(inner, outer) is inner
    assert adapter.feed_range_overlap(_feed_range("", "20"), _feed_range("20", "FF")) is None


def test_an_overlap_of_a_token_that_is_no_epk_range_is_refused() -> None:
    with pytest.raises(BadRequest, match="not an EPK feed range"):
        _adapter().feed_range_overlap(_feed_range("", "FF"), FeedRange(token='{"PK": ["a"]}'))

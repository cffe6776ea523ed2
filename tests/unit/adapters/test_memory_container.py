"""``MemoryDocumentContainer``: the contract suite, plus what only the in-memory adapter can show.

The contract runs three times: with a controllable clock and one feed range, with four feed ranges (so no
contract test may assume a single range), and on the wall clock (which exercises the suite's polling paths that
the emulator and real-account subclasses rely on).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_chatter.adapters.memory import (
    EPK_SPACE,
    OPERATIONS,
    MemoryDocumentContainer,
    OperationCall,
    parse_query,
)
from airflow_chatter.adapters.memory.faults import fail
from airflow_chatter.ports import (
    BadRequest,
    BatchFailed,
    BatchOperation,
    ChangeFeedStart,
    Conflict,
    ContainerError,
    DocumentContainer,
    FeedRange,
    FeedRangeGone,
    NotFound,
    PatchOperation,
    PreconditionFailed,
    RequestTimeout,
    ServiceUnavailable,
    Throttled,
)
from airflow_chatter.testing.clock import DEFAULT_START, ManualClock
from airflow_chatter.testing.contracts.container import DocumentContainerContract, feed_ids
from airflow_chatter.testing.handlers import first_of

_EPOCH = DEFAULT_START


class TestMemoryDocumentContainer(DocumentContainerContract):
    supports_clock_control = True
    supports_splits = True
    supports_sub_ranges = True
    supports_fault_injection = True
    feed_range_count: ClassVar[int] = 1

    def setup_method(self) -> None:
        self.clock = ManualClock()

    def make_container(
        self, partition_key_paths: Sequence[str] = ("/pk",), default_ttl: int | None = -1
    ) -> DocumentContainer:
        return MemoryDocumentContainer(
            partition_key_paths=partition_key_paths,
            default_ttl=default_ttl,
            clock=self.clock,
            feed_range_count=self.feed_range_count,
        )

    def advance_clock(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def split_feed_range(self, container: DocumentContainer, feed_range: FeedRange) -> tuple[FeedRange, FeedRange]:
        assert isinstance(container, MemoryDocumentContainer)
        return container.split_feed_range(feed_range)

    def halve_feed_range(self, container: DocumentContainer, feed_range: FeedRange) -> tuple[FeedRange, FeedRange]:
        assert isinstance(container, MemoryDocumentContainer)
        return container.halve_feed_range(feed_range)

    def inject_fault(self, container: DocumentContainer, operation: str, error: ContainerError) -> None:
        assert isinstance(container, MemoryDocumentContainer)
        container.handler = first_of(container.handler, fail(operation, times=1, error=error))


class TestMemoryDocumentContainerWithFourFeedRanges(TestMemoryDocumentContainer):
    feed_range_count = 4


class TestMemoryDocumentContainerOnTheWallClock(TestMemoryDocumentContainer):
    """The suite's real-time paths (sleep for time, poll for expiry), as the emulator subclass runs them."""

    supports_clock_control = False
    ttl_poll_interval_seconds = 0.05

    def make_container(
        self, partition_key_paths: Sequence[str] = ("/pk",), default_ttl: int | None = -1
    ) -> DocumentContainer:
        return MemoryDocumentContainer(partition_key_paths=partition_key_paths, default_ttl=default_ttl)


# ================================================================================================================
# Memory-only behaviour.
# ================================================================================================================


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def container(clock: ManualClock) -> MemoryDocumentContainer:
    return MemoryDocumentContainer(default_ttl=-1, clock=clock)


def _doc(item_id: str, pk: Any = "p", **fields: Any) -> dict[str, Any]:
    return {"id": item_id, "pk": pk, **fields}


def _set_n(n: int) -> list[PatchOperation]:
    return [PatchOperation("set", "/n", n)]


# -- fault injection -----------------------------------------------------------------------------------------


def test_fault_on_the_third_patch_fails_only_that_call(container: MemoryDocumentContainer) -> None:
    container.create(_doc("a", n=0), "p")
    container.handler = fail("patch", on_call=3, error=Throttled(retry_after_ms=5))
    container.patch("a", "p", _set_n(1))
    container.patch("a", "p", _set_n(2))
    with pytest.raises(Throttled) as caught:
        container.patch("a", "p", _set_n(3))
    assert caught.value.retry_after_ms == 5
    container.patch("a", "p", _set_n(4))
    assert container.read("a", "p")["n"] == 4, "the third patch failed before applying; the others applied"
    assert container.calls["patch"] == 4, "failed calls are counted too"


def test_fault_for_the_next_n_calls_then_recovers(container: MemoryDocumentContainer) -> None:
    container.handler = fail("create", times=2, error=ServiceUnavailable())
    for _ in range(2):
        with pytest.raises(ServiceUnavailable):
            container.create(_doc("a"), "p")
    container.create(_doc("a"), "p")
    assert container.calls["create"] == 3


def test_fault_on_every_call_until_cleared(container: MemoryDocumentContainer) -> None:
    container.handler = fail("read", error=RequestTimeout())
    for _ in range(3):
        with pytest.raises(RequestTimeout):
            container.read("a", "p")
    container.handler = None
    with pytest.raises(NotFound):
        container.read("a", "p")


def test_fault_with_a_predicate_fails_only_matching_calls(container: MemoryDocumentContainer) -> None:
    container.create(_doc("poison", n=0), "p")
    container.create(_doc("healthy", n=0), "p")
    container.handler = fail("patch", when=lambda call: call.item_id == "poison", error=PreconditionFailed())
    container.patch("healthy", "p", _set_n(1))
    with pytest.raises(PreconditionFailed):
        container.patch("poison", "p", _set_n(1))
    assert container.read("poison", "p")["n"] == 0 and container.read("healthy", "p")["n"] == 1


def test_fault_on_call_counts_only_matching_calls(container: MemoryDocumentContainer) -> None:
    for item_id in ("x", "y"):
        container.create(_doc(item_id, n=0), "p")
    container.handler = fail("patch", on_call=2, when=lambda call: call.item_id == "x", error=Throttled())
    container.patch("x", "p", _set_n(1))
    container.patch("y", "p", _set_n(1))  # does not match, so it does not count
    with pytest.raises(Throttled):
        container.patch("x", "p", _set_n(2))


def test_fault_after_apply_writes_and_then_raises(container: MemoryDocumentContainer) -> None:
    """The ambiguous outcome: the caller sees a timeout, but the write landed."""
    container.create(_doc("a", n=0), "p")
    container.handler = fail("patch", times=1, after_apply=True, error=RequestTimeout())
    with pytest.raises(RequestTimeout):
        container.patch("a", "p", _set_n(1))
    assert container.read("a", "p")["n"] == 1, "an after-apply fault must not roll the write back"


def test_fault_error_factory_receives_the_call(container: MemoryDocumentContainer) -> None:
    seen: list[OperationCall] = []

    def build(call: OperationCall) -> ContainerError:
        seen.append(call)
        return Throttled(f"throttled {call.item_id}")

    container.handler = fail("create", times=1, error=build)
    with pytest.raises(Throttled, match="throttled a"):
        container.create(_doc("a"), "p")
    assert seen[0].operation == "create" and seen[0].partition_key == "p" and seen[0].number == 1
    assert seen[0].arguments["document"]["id"] == "a"


def test_wildcard_fault_fails_every_operation(container: MemoryDocumentContainer) -> None:
    container.handler = fail("*", error=ServiceUnavailable())
    with pytest.raises(ServiceUnavailable):
        container.read_feed_ranges()
    with pytest.raises(ServiceUnavailable):
        list(container.query("SELECT * FROM c"))


def test_a_misspelt_operation_is_refused_so_a_fault_never_silently_misses() -> None:
    container = MemoryDocumentContainer()
    with pytest.raises(ValueError, match="unknown operation"):
        container.handler = fail("pach", error=Throttled())


def test_call_counters_prove_no_patch_was_issued(container: MemoryDocumentContainer) -> None:
    container.create(_doc("a"), "p")
    container.read("a", "p")
    assert container.calls["patch"] == 0, "absence of a call is observable"
    assert container.calls["create"] == 1 and container.calls["read"] == 1


def test_a_subclass_can_override_the_check_hook() -> None:
    class ReadOnlyContainer(MemoryDocumentContainer):
        def check(self, call: OperationCall) -> None:
            if call.operation in ("create", "upsert", "replace", "patch", "delete", "execute_batch"):
                raise ServiceUnavailable("read-only")
            super().check(call)

    container = ReadOnlyContainer()
    with pytest.raises(ServiceUnavailable):
        container.create(_doc("a"), "p")
    assert list(container.query("SELECT * FROM c")) == []


def test_the_hooks_see_every_call_as_a_plain_operation_call() -> None:
    """``check`` and ``after_apply`` get, for every operation, the very call ``OperationCall(...)`` builds: same
    fields, equality and repr, frozen, numbered per operation; ``after_apply`` sees the result."""
    seen: list[tuple[str, OperationCall, Any]] = []

    class Recording(MemoryDocumentContainer):
        def check(self, call: OperationCall) -> None:
            seen.append(("check", call, None))
            super().check(call)

        def after_apply(self, call: OperationCall, result: Any) -> None:
            seen.append(("after", call, result))
            super().after_apply(call, result)

    container = Recording()
    body = _doc("a", n=0)
    created = container.create(body, "p")
    operations = [PatchOperation("set", "/n", 1), PatchOperation("set", "/ttl", 60)]
    patched = container.patch("a", "p", operations, if_match=created["_etag"])
    container.patch("a", "p", operations[:1])
    container.read("a", "p")
    expected = [
        OperationCall("create", 1, "a", "p", {"document": body}),
        OperationCall(
            "patch",
            1,
            "a",
            "p",
            {"operations": tuple(operations), "if_match": created["_etag"], "filter_predicate": None},
        ),
        OperationCall(
            "patch", 2, "a", "p", {"operations": tuple(operations[:1]), "if_match": None, "filter_predicate": None}
        ),
        OperationCall("read", 1, "a", "p", {}),
    ]
    assert [when for when, _, _ in seen] == ["check", "after"] * 4
    for index, call in enumerate(expected):
        before, after = seen[2 * index][1], seen[2 * index + 1][1]
        assert before is after, "one call object per operation"
        assert before == call and repr(before) == repr(call)
        assert type(before) is OperationCall and vars(before) == vars(call)
        with pytest.raises(AttributeError):
            before.number = 7  # type: ignore[misc]
    assert seen[3][2] == patched and container.calls == {"create": 1, "patch": 2, "read": 1}


def test_a_fault_on_a_batch_fails_it_whole(container: MemoryDocumentContainer) -> None:
    container.handler = fail("execute_batch", times=1, error=Throttled())
    with pytest.raises(Throttled):
        container.execute_batch("p", [BatchOperation.create(_doc("a"))])
    with pytest.raises(NotFound):
        container.read("a", "p")


# -- feed ranges and splits ----------------------------------------------------------------------------------


def _keys_in(container: MemoryDocumentContainer, feed_range: FeedRange, count: int) -> list[str]:
    """Find ``count`` partition keys that hash into ``feed_range``."""
    keys: list[str] = []
    candidate = 0
    while len(keys) < count:
        key = f"k{candidate}"
        if container.feed_range_of(key) == feed_range:
            keys.append(key)
        candidate += 1
    return keys


def _read_to_end(
    container: MemoryDocumentContainer, feed_range: FeedRange, continuation: str | None
) -> tuple[list[str], str]:
    seen: list[str] = []
    while True:
        page = container.read_change_feed(feed_range, continuation=continuation, max_item_count=3)
        continuation = page.continuation
        if not page.documents:
            return seen, continuation
        seen.extend(feed_ids(page.documents))


def test_feed_ranges_tile_the_epk_space() -> None:
    container = MemoryDocumentContainer(feed_range_count=3)
    ranges = container.read_feed_ranges()
    assert len(ranges) == 3
    whole = FeedRange(json.dumps({"Range": {"isMinInclusive": True, "max": f"{EPK_SPACE:016X}", "min": 16 * "0"}}))
    assert all(container.is_feed_range_subset(whole, r) for r in ranges)
    for i in range(30):
        assert container.feed_range_of(f"k{i}") in ranges, "every key lands in exactly one range"


def test_a_split_mid_stream_loses_and_duplicates_nothing(container: MemoryDocumentContainer) -> None:
    parent = container.read_feed_ranges()[0]
    for i in range(10):
        container.create(_doc(f"before-{i}", f"k{i}"), f"k{i}")
    first = container.read_change_feed(parent, max_item_count=4)
    seen = feed_ids(first.documents)
    left, right = container.split_feed_range(parent)
    for i in range(10):
        container.create(_doc(f"after-{i}", f"k{i}"), f"k{i}")
    with pytest.raises(FeedRangeGone):
        container.read_change_feed(parent, continuation=first.continuation)
    left_ids, _ = _read_to_end(container, left, first.continuation)
    right_ids, _ = _read_to_end(container, right, first.continuation)
    seen += left_ids + right_ids
    assert len(seen) == len(set(seen)) == 20, "every document exactly once across parent and children"
    assert left_ids and right_ids, "the keys spread over both children"
    for item_id in left_ids:
        key = item_id.split("-")[1]
        assert container.feed_range_of(f"k{key}") == left, "a child delivers only its own keys"


def test_a_second_split_resumes_grandchildren_from_the_childs_continuation() -> None:
    container = MemoryDocumentContainer()
    left, right = container.split_feed_range(container.read_feed_ranges()[0])
    keys = _keys_in(container, left, 6)
    for key in keys:
        container.create(_doc(f"one-{key}", key), key)
    seen, continuation = _read_to_end(container, left, None)
    grandchildren = container.split_feed_range(left)
    for key in keys:
        container.create(_doc(f"two-{key}", key), key)
    for grandchild in grandchildren:
        assert container.is_feed_range_subset(left, grandchild)
        seen += _read_to_end(container, grandchild, continuation)[0]
    assert sorted(seen) == sorted([f"one-{k}" for k in keys] + [f"two-{k}" for k in keys])
    assert container.read_feed_ranges() == [*grandchildren, right]


def test_splitting_a_gone_range_raises_410() -> None:
    container = MemoryDocumentContainer()
    parent = container.read_feed_ranges()[0]
    container.split_feed_range(parent)
    with pytest.raises(FeedRangeGone):
        container.split_feed_range(parent)


def test_a_continuation_of_one_range_is_refused_for_a_sibling() -> None:
    container = MemoryDocumentContainer(feed_range_count=2)
    first, second = container.read_feed_ranges()
    token = container.read_change_feed(first).continuation
    with pytest.raises(BadRequest, match="feed range"):
        container.read_change_feed(second, continuation=token)


def test_a_continuation_of_another_container_is_refused() -> None:
    one, other = MemoryDocumentContainer(), MemoryDocumentContainer()
    token = one.read_change_feed(one.read_feed_ranges()[0]).continuation
    with pytest.raises(BadRequest, match="another container"):
        other.read_change_feed(other.read_feed_ranges()[0], continuation=token)


def test_a_garbage_continuation_or_feed_range_is_400(container: MemoryDocumentContainer) -> None:
    feed_range = container.read_feed_ranges()[0]
    with pytest.raises(BadRequest):
        container.read_change_feed(feed_range, continuation="not-json")
    with pytest.raises(BadRequest):
        container.read_change_feed(FeedRange("nope"))


def test_a_batch_shares_one_lsn_and_is_never_split_across_pages(container: MemoryDocumentContainer) -> None:
    container.execute_batch("p", [BatchOperation.create(_doc(f"b{i}")) for i in range(3)])
    container.create(_doc("after"), "p")
    feed_range = container.read_feed_ranges()[0]
    page = container.read_change_feed(feed_range, max_item_count=2)
    assert feed_ids(page.documents) == ["b0", "b1", "b2"], "one transactional write is delivered whole"
    assert len({document["_lsn"] for document in page.documents}) == 1
    rest = container.read_change_feed(feed_range, continuation=page.continuation, max_item_count=2)
    assert feed_ids(rest.documents) == ["after"]


def test_change_feed_from_a_time_after_every_write_resumes_with_later_writes(
    container: MemoryDocumentContainer, clock: ManualClock
) -> None:
    container.create(_doc("old"), "p")
    feed_range = container.read_feed_ranges()[0]
    page = container.read_change_feed(feed_range, start=clock() + timedelta(seconds=60))
    assert page.documents == ()
    clock.advance(120)
    container.create(_doc("new"), "p")
    resumed = container.read_change_feed(feed_range, continuation=page.continuation)
    assert feed_ids(resumed.documents) == ["new"], "an empty time-started page must not rewind to the beginning"


def test_read_and_query_documents_carry_no_lsn_but_feed_documents_do(container: MemoryDocumentContainer) -> None:
    """As on the service: ``_lsn`` is a change-feed property; code must not rely on it elsewhere."""
    container.create(_doc("a"), "p")
    assert "_lsn" not in container.read("a", "p")
    assert "_lsn" not in next(container.query("SELECT * FROM c"))
    feed = container.read_change_feed(container.read_feed_ranges()[0], start=ChangeFeedStart.BEGINNING)
    assert feed.documents[0]["_lsn"] == container.last_lsn


# -- isolation: callers and stored state never share a mutable object ----------------------------------------


def _nested(item_id: str) -> dict[str, Any]:
    return _doc(item_id, tags=["x"], meta={"level": {"deep": [1, {"k": "v"}]}}, n=0)


def _scribble(document: dict[str, Any]) -> None:
    """Mutate every mutable part of a returned document."""
    document["tags"].append("mutated")
    document["meta"]["level"]["deep"][1]["k"] = "mutated"
    document["meta"]["added"] = True
    document["n"] = 99


def test_no_returned_document_shares_a_mutable_part_with_stored_state(container: MemoryDocumentContainer) -> None:
    feed_range = container.read_feed_ranges()[0]
    returned = [
        container.create(_nested("a"), "p"),
        container.read("a", "p"),
        container.patch("a", "p", [PatchOperation("set", "/status", "delivered")]),
        next(container.query("SELECT * FROM c")),
        container.read_change_feed(feed_range).documents[0],
        container.execute_batch("p", [BatchOperation.read("a")])[0].body,
    ]
    for document in returned:
        assert document is not None
        _scribble(document)
    stored = container.read("a", "p")
    assert stored["tags"] == ["x"] and stored["meta"] == {"level": {"deep": [1, {"k": "v"}]}} and stored["n"] == 0
    assert container.read_change_feed(feed_range).documents[0]["tags"] == ["x"]


def test_a_flat_document_stays_isolated_as_patches_nest_and_flatten_it(container: MemoryDocumentContainer) -> None:
    """A document with no dict or list member, once a patch nests a value in it (or removes its only nested member):
    every returned copy stays independent of stored state."""
    feed_range = container.read_feed_ranges()[0]
    container.create(_doc("a", n=0, status="pending"), "p")
    container.patch("a", "p", [PatchOperation("set", "/status", "delivered"), PatchOperation("set", "/ttl", 60)])
    nested = container.patch("a", "p", [PatchOperation("set", "/meta", {"tags": ["x"]})])
    returned = [
        nested,
        container.read("a", "p"),
        container.read_change_feed(feed_range).documents[0],
        next(container.query("SELECT * FROM c")),
        container.patch("a", "p", [PatchOperation("set", "/n", 1)]),
    ]
    for document in returned:
        document["meta"]["tags"].append("mutated")
        document["meta"]["added"] = True
    assert container.read("a", "p")["meta"] == {"tags": ["x"]}
    flattened = container.patch("a", "p", [PatchOperation("remove", "/meta")])
    flattened["n"] = 99
    again = container.patch("a", "p", [PatchOperation("set", "/list", [1])])
    again["list"].append(2)
    stored = container.read("a", "p")
    assert stored["n"] == 1 and stored["list"] == [1] and "meta" not in stored
    assert stored["status"] == "delivered" and stored["ttl"] == 60


def test_a_write_never_changes_a_document_a_caller_already_holds(container: MemoryDocumentContainer) -> None:
    feed_range = container.read_feed_ranges()[0]
    container.create(_nested("a"), "p")
    held = [container.read("a", "p"), container.read_change_feed(feed_range).documents[0]]
    before = [json.dumps(document, sort_keys=True) for document in held]
    container.patch("a", "p", [PatchOperation("set", "/status", "delivered"), PatchOperation("incr", "/n", 1)])
    container.patch("a", "p", [PatchOperation("add", "/tags/-", "y"), PatchOperation("set", "/meta/level/deep/0", 2)])
    container.patch("a", "p", [PatchOperation("remove", "/meta/level")])
    assert [json.dumps(document, sort_keys=True) for document in held] == before


def test_the_objects_a_caller_writes_stay_the_callers(container: MemoryDocumentContainer) -> None:
    """A body or patch value the caller keeps (and mutates later) is copied in, not stored by reference."""
    body = _nested("a")
    container.create(body, "p")
    _scribble(body)
    value = {"list": [1, 2]}
    container.patch("a", "p", [PatchOperation("set", "/value", value), PatchOperation("add", "/tags/-", value)])
    value["list"].append(3)
    stored = container.read("a", "p")
    assert stored["tags"] == ["x", {"list": [1, 2]}] and stored["value"] == {"list": [1, 2]}
    assert stored["meta"] == {"level": {"deep": [1, {"k": "v"}]}} and stored["n"] == 0


def test_a_patch_value_that_is_not_json_is_400_and_writes_nothing(container: MemoryDocumentContainer) -> None:
    container.create(_doc("a", n=1), "p")
    etag = container.read("a", "p")["_etag"]
    for value in ({1, 2}, float("nan"), float("inf")):
        with pytest.raises(BadRequest):
            container.patch("a", "p", [PatchOperation("set", "/n", 2), PatchOperation("set", "/bad", value)])
    assert container.read("a", "p")["_etag"] == etag and container.read("a", "p")["n"] == 1


def test_a_failing_operation_is_reported_before_a_value_that_is_not_json(container: MemoryDocumentContainer) -> None:
    """Every operation applies (or fails) before the patched document is measured, which is where a NaN or an
    infinity is refused, as encoding the document would refuse it."""
    container.create(_doc("a", n=1), "p")
    with pytest.raises(BadRequest, match="absent"):
        container.patch("a", "p", [PatchOperation("set", "/x", float("nan")), PatchOperation("remove", "/absent")])
    with pytest.raises(BadRequest, match="not JSON"):
        container.patch("a", "p", [PatchOperation("set", "/x", float("-inf")), PatchOperation("set", "/y", True)])
    scalars = [
        PatchOperation("set", "/f", 0.1),
        PatchOperation("set", "/t", True),
        PatchOperation("set", "/b", False),
        PatchOperation("set", "/z", None),
        PatchOperation("incr", "/n", 1.5),
        PatchOperation("set", "/big", -(10**30)),
    ]
    patched = container.patch("a", "p", scalars)
    assert (patched["f"], patched["t"], patched["b"], patched["z"], patched["n"]) == (0.1, True, False, None, 2.5)
    assert patched["big"] == -(10**30) and "x" not in patched and "y" not in patched


def test_patch_values_are_stored_as_json_would_read_them_back(container: MemoryDocumentContainer) -> None:
    container.create(_doc("a"), "p")
    patched = container.patch("a", "p", [PatchOperation("set", "/t", (1, 2)), PatchOperation("set", "/m", {3: "x"})])
    assert patched["t"] == [1, 2] and patched["m"] == {"3": "x"}
    assert container.read("a", "p")["t"] == [1, 2]


def _json_length(document: dict[str, Any]) -> int:
    return len(json.dumps(document, allow_nan=False))


def test_a_document_over_2_mb_is_413_whether_written_whole_or_grown_by_patches(
    container: MemoryDocumentContainer,
) -> None:
    limit = 2 * 1024 * 1024
    with pytest.raises(ContainerError) as whole:
        container.create(_doc("big", pad="x" * limit), "p")
    assert whole.value.status_code == 413
    created = container.create(_doc("a", pad="x" * (limit - 2000)), "p")
    room = limit - _json_length(created)
    assert 0 < room < 2000
    # Small scalar patches far below the limit, then ones that end exactly at it and one character past it.
    for n in range(50):
        container.patch("a", "p", [PatchOperation("set", "/n", n), PatchOperation("set", "/status", "delivered")])
    stored = container.read("a", "p")
    room = limit - _json_length(stored)
    fits = "y" * (room - len(', "fill": ""'))
    filled = container.patch("a", "p", [PatchOperation("set", "/fill", fits)])
    assert _json_length(filled) == limit
    etag = filled["_etag"]
    for too_much in ([PatchOperation("set", "/fill", fits + "y")], [PatchOperation("incr", "/n", 10**6)]):
        with pytest.raises(ContainerError) as grown:
            container.patch("a", "p", too_much)
        assert grown.value.status_code == 413
    with pytest.raises(ContainerError) as nested:
        container.patch("a", "p", [PatchOperation("set", "/fill", [fits])])
    assert nested.value.status_code == 413
    assert container.read("a", "p")["_etag"] == etag, "a refused patch writes nothing"
    assert container.patch("a", "p", [PatchOperation("remove", "/fill")])["n"] == 49


def test_a_document_rewritten_many_times_is_in_the_feed_once_in_its_latest_version(
    container: MemoryDocumentContainer,
) -> None:
    """Thousands of superseded versions (enough to compact the change log) never resurface or reorder the feed."""
    feed_range = container.read_feed_ranges()[0]
    for name in ("a", "b", "c", "d"):
        container.create(_doc(name, n=0), "p")
    for n in range(1, 3001):
        container.patch("b", "p", _set_n(n))
        if n == 1500:
            container.delete("c", "p")
    container.patch("a", "p", _set_n(7))
    seen: list[dict[str, Any]] = []
    continuation = None
    while True:
        page = container.read_change_feed(feed_range, continuation=continuation, max_item_count=1)
        if not page.documents:
            break
        seen.extend(page.documents)
        continuation = page.continuation
    assert feed_ids(seen) == ["d", "b", "a"]
    assert [document["n"] for document in seen] == [0, 3000, 7]
    assert [document["_lsn"] for document in seen] == sorted(document["_lsn"] for document in seen)
    container.patch("d", "p", _set_n(1))
    assert feed_ids(container.read_change_feed(feed_range, continuation=continuation).documents) == ["d"]


# -- TTL on a controlled clock -------------------------------------------------------------------------------


def test_a_document_is_readable_until_the_instant_ts_plus_ttl(clock: ManualClock) -> None:
    container = MemoryDocumentContainer(default_ttl=10, clock=clock)
    container.create(_doc("a"), "p")
    clock.advance(9.999)
    assert container.read("a", "p")
    clock.advance(0.001)
    with pytest.raises(NotFound):
        container.read("a", "p")


def test_an_expired_document_frees_its_id(container: MemoryDocumentContainer, clock: ManualClock) -> None:
    container.create(_doc("a", ttl=5), "p")
    with pytest.raises(Conflict):
        container.create(_doc("a"), "p")
    clock.advance(5)
    container.create(_doc("a"), "p")


def test_an_update_restarts_the_ttl_clock(container: MemoryDocumentContainer, clock: ManualClock) -> None:
    container.create(_doc("a", ttl=10), "p")
    clock.advance(8)
    container.patch("a", "p", _set_n(1))
    clock.advance(8)
    assert container.read("a", "p")["n"] == 1, "TTL counts from the latest _ts"
    clock.advance(2)
    with pytest.raises(NotFound):
        container.read("a", "p")


@pytest.mark.parametrize("ttl", [0, -2, 1.5, "10", True, 2**31])
def test_an_invalid_item_ttl_is_400(container: MemoryDocumentContainer, ttl: Any) -> None:
    with pytest.raises(BadRequest):
        container.create(_doc("a", ttl=ttl), "p")


@pytest.mark.parametrize("default_ttl", [0, -2, 1.5, 2**31])
def test_an_invalid_default_ttl_is_refused(default_ttl: Any) -> None:
    with pytest.raises(ValueError):
        MemoryDocumentContainer(default_ttl=default_ttl)


def test_the_largest_32_bit_ttl_is_accepted(container: MemoryDocumentContainer) -> None:
    assert container.create(_doc("a", ttl=2**31 - 1), "p")["ttl"] == 2**31 - 1


def test_ts_comes_from_the_injected_clock(container: MemoryDocumentContainer, clock: ManualClock) -> None:
    clock.advance(42.7)
    assert container.create(_doc("a"), "p")["_ts"] == int(_EPOCH.timestamp()) + 42


# -- documents, keys and patches -----------------------------------------------------------------------------


@pytest.mark.parametrize("item_id", ["", "a/b", "a\\b", "a?b", "a#b", 7, None, "x" * 1024])
def test_an_illegal_id_is_400(container: MemoryDocumentContainer, item_id: Any) -> None:
    with pytest.raises(BadRequest):
        container.create({"id": item_id, "pk": "p"}, "p")


def test_system_properties_in_a_body_are_ignored(container: MemoryDocumentContainer) -> None:
    created = container.create(_doc("a", _etag="forged", _ts=1, _lsn=99), "p")
    assert created["_etag"] != "forged" and created["_ts"] != 1 and "_lsn" not in created


def test_a_non_json_document_is_400(container: MemoryDocumentContainer) -> None:
    with pytest.raises(BadRequest):
        container.create(_doc("a", when=datetime.now()), "p")
    with pytest.raises(BadRequest):
        container.create(_doc("a", n=float("nan")), "p")


def test_numbers_in_partition_keys_compare_as_json_doubles() -> None:
    container = MemoryDocumentContainer()
    container.create({"id": "a", "pk": 1}, 1)
    assert container.read("a", 1.0)["pk"] == 1
    with pytest.raises(NotFound):
        container.read("a", True)  # JSON true is not the number 1
    with pytest.raises(NotFound):
        container.read("a", "1")


def test_a_document_without_its_partition_key_lives_under_none() -> None:
    container = MemoryDocumentContainer()
    container.create({"id": "a"}, None)
    assert container.read("a", None)["id"] == "a"


@pytest.mark.parametrize("partition_key", ["t1", ["t1"], ["t1", "u1", "x"]])
def test_a_hierarchical_point_operation_needs_the_full_key(partition_key: Any) -> None:
    container = MemoryDocumentContainer(partition_key_paths=("/tenant", "/user"))
    with pytest.raises(BadRequest):
        container.read("a", partition_key)


def test_a_nested_partition_key_path_is_read_from_the_body() -> None:
    container = MemoryDocumentContainer(partition_key_paths=("/owner/tenant",))
    container.create({"id": "a", "owner": {"tenant": "t1"}}, "t1")
    with pytest.raises(BadRequest):
        container.patch("a", "t1", [PatchOperation("set", "/owner", {})])


@pytest.mark.parametrize("path", ["/id", "/pk", "/_etag"])
def test_patching_the_id_the_partition_key_or_a_system_property_is_400(
    container: MemoryDocumentContainer, path: str
) -> None:
    container.create(_doc("a"), "p")
    with pytest.raises(BadRequest):
        container.patch("a", "p", [PatchOperation("set", path, "x")])


@pytest.mark.parametrize("stored_tenant", ["t1", None, "absent"])
@pytest.mark.parametrize("op", ["set", "add", "incr"])
def test_a_patch_below_a_partition_key_path_is_400_and_leaves_the_key(stored_tenant: Any, op: str) -> None:
    # A stored partition-key value is a scalar or absent, so no patch path can lead below it.
    container = MemoryDocumentContainer(partition_key_paths=("/owner/tenant",))
    owner = {} if stored_tenant == "absent" else {"tenant": stored_tenant}
    key = None if stored_tenant == "absent" else stored_tenant
    container.create({"id": "a", "owner": owner}, key)
    with pytest.raises(BadRequest):
        container.patch("a", key, [PatchOperation(op, "/owner/tenant/x", 1)])
    assert container.read("a", key)["owner"] == owner


@pytest.mark.parametrize(
    "operation",
    [
        PatchOperation("set", "/missing/child", 1),
        PatchOperation("incr", "/text", 1),
        PatchOperation("incr", "/n", "1"),
        PatchOperation("add", "/tags/5", "x"),
        PatchOperation("remove", "/tags/1"),
        PatchOperation("set", "no-slash", 1),
    ],
    ids=["missing-parent", "incr-text", "incr-by-text", "add-past-end", "remove-past-end", "not-a-pointer"],
)
def test_an_ill_targeted_patch_is_400(container: MemoryDocumentContainer, operation: PatchOperation) -> None:
    container.create(_doc("a", n=0, text="x", tags=["only"]), "p")
    with pytest.raises(BadRequest):
        container.patch("a", "p", [operation])


def test_patch_paths_unescape_json_pointer_tokens(container: MemoryDocumentContainer) -> None:
    container.create(_doc("a", **{"a/b": 1, "m~n": 2}), "p")
    patched = container.patch("a", "p", [PatchOperation("incr", "/a~1b", 1), PatchOperation("incr", "/m~0n", 1)])
    assert patched["a/b"] == 2 and patched["m~n"] == 3


def test_patch_set_on_an_array_index_overwrites_the_element(container: MemoryDocumentContainer) -> None:
    container.create(_doc("a", tags=["x", "y"]), "p")
    patched = container.patch("a", "p", [PatchOperation("set", "/tags/1", "z"), PatchOperation("set", "/tags/2", "w")])
    assert patched["tags"] == ["x", "z", "w"]


def test_a_path_patched_before_keeps_every_operations_semantics(container: MemoryDocumentContainer) -> None:
    """Patching one path again and again: a refused path stays refused, and an accepted one behaves per operation
    each time (and keeps the members' order: new ones last, before the system properties)."""
    container.create(_doc("a", n=0), "p")
    for _ in range(3):
        with pytest.raises(BadRequest):
            container.patch("a", "p", [PatchOperation("set", "/n", 1), PatchOperation("set", "/pk", "x")])
        with pytest.raises(BadRequest):
            container.patch("a", "p", [PatchOperation("set", "/n", 1), PatchOperation("set", "/_ts", 1)])
        assert container.read("a", "p")["n"] == 0
    absent = object()
    steps: list[tuple[PatchOperation, Any]] = [
        (PatchOperation("set", "/m", 1), 1),
        (PatchOperation("incr", "/m", 2), 3),
        (PatchOperation("replace", "/m", "x"), "x"),
        (PatchOperation("set", "/m", None), None),
        (PatchOperation("remove", "/m"), absent),
        (PatchOperation("remove", "/m"), BadRequest),
        (PatchOperation("replace", "/m", 1), BadRequest),
        (PatchOperation("add", "/m", 5), 5),
        (PatchOperation("incr", "/m", "1"), BadRequest),
        (PatchOperation("set", "/m", [1]), [1]),
        (PatchOperation("set", "/m/0", 7), [7]),
        (PatchOperation("set", "/m", 2.5), 2.5),
    ]
    for operation, expected in steps:
        before = container.read("a", "p")
        if expected is BadRequest:
            with pytest.raises(BadRequest):
                container.patch("a", "p", [operation])
            assert container.read("a", "p") == before
            continue
        patched = container.patch("a", "p", [operation])
        assert patched.get("m", absent) == expected
        assert list(patched) == ["id", "pk", "n", *(["m"] if expected is not absent else []), "_rid", "_etag", "_ts"]
    stamped = container.patch("a", "p", [PatchOperation("set", "/n", 1), PatchOperation("set", "/status", "done")])
    assert list(stamped) == ["id", "pk", "n", "m", "status", "_rid", "_etag", "_ts"] and stamped["n"] == 1


def test_an_empty_patch_is_400(container: MemoryDocumentContainer) -> None:
    container.create(_doc("a"), "p")
    with pytest.raises(BadRequest):
        container.patch("a", "p", [])


def test_upsert_with_if_match_on_a_missing_document_is_412(container: MemoryDocumentContainer) -> None:
    with pytest.raises(PreconditionFailed):
        container.upsert(_doc("a"), "p", if_match='"anything"')


def test_replace_with_a_different_body_id_is_400(container: MemoryDocumentContainer) -> None:
    container.create(_doc("a"), "p")
    with pytest.raises(BadRequest):
        container.replace("a", "p", _doc("b"))


def test_an_empty_batch_is_400_and_a_body_with_another_key_fails_its_index(container: MemoryDocumentContainer) -> None:
    with pytest.raises(BadRequest):
        container.execute_batch("p", [])
    with pytest.raises(BatchFailed) as caught:
        container.execute_batch("p", [BatchOperation.create(_doc("a")), BatchOperation.create(_doc("b", "q"))])
    assert caught.value.failed_index == 1 and caught.value.operation_statuses == (424, 400)


def test_a_batch_reads_its_own_earlier_writes(container: MemoryDocumentContainer) -> None:
    results = container.execute_batch(
        "p",
        [
            BatchOperation.create(_doc("a", n=0)),
            BatchOperation.patch("a", [PatchOperation("incr", "/n", 1)]),
            BatchOperation.read("a"),
            BatchOperation.delete("a"),
        ],
    )
    assert [r.status_code for r in results] == [201, 200, 200, 204]
    assert results[2].body is not None and results[2].body["n"] == 1
    with pytest.raises(NotFound):
        container.read("a", "p")


def test_concurrent_creates_of_one_id_have_exactly_one_winner() -> None:
    container = MemoryDocumentContainer()
    barrier = threading.Barrier(8)
    outcomes: list[str] = []

    def attempt(n: int) -> None:
        barrier.wait()
        try:
            container.create(_doc("a", n=n), "p")
            outcomes.append("created")
        except Conflict:
            outcomes.append("conflict")

    threads = [threading.Thread(target=attempt, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert sorted(outcomes) == ["conflict"] * 7 + ["created"]


def test_concurrent_conditional_increments_never_lose_an_update() -> None:
    """Optimistic concurrency under the lock: every read-modify-write either lands or gets 412 and retries."""
    container = MemoryDocumentContainer()
    container.create(_doc("counter", n=0), "p")

    def increment_five_times() -> None:
        for _ in range(5):
            while True:
                current = container.read("counter", "p")
                try:
                    container.replace("counter", "p", {**current, "n": current["n"] + 1}, if_match=current["_etag"])
                    break
                except PreconditionFailed:
                    continue  # another writer got there first: re-read and retry

    threads = [threading.Thread(target=increment_five_times) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert container.read("counter", "p")["n"] == 30, "no increment was lost to a concurrent writer"


def test_properties_are_configurable() -> None:
    container = MemoryDocumentContainer(
        partition_key_paths=("/tenant", "/user", "/session"),
        default_ttl=60,
        account_endpoint="https://acct.documents.azure.com:443/",
        database_id="db",
        container_id="orders",
    )
    properties = container.properties()
    assert properties.account_endpoint == "https://acct.documents.azure.com:443/"
    assert (properties.database_id, properties.container_id) == ("db", "orders")
    assert properties.partition_key_paths == ("/tenant", "/user", "/session") and properties.default_ttl == 60


@pytest.mark.parametrize("paths", [(), ("/a", "/b", "/c", "/d"), ("nope",)])
def test_invalid_partition_key_paths_are_refused(paths: tuple[str, ...]) -> None:
    with pytest.raises((ValueError, BadRequest)):
        MemoryDocumentContainer(partition_key_paths=paths)


# -- the SQL subset ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "named"),
    [
        ("SELECT c.id FROM c", "projection"),
        ("SELECT * FROM c GROUP BY c.pk", "GROUP"),
        ("SELECT * FROM c OFFSET 0 LIMIT 1", "OFFSET"),
        ("SELECT * FROM c JOIN t IN c.tags", "JOIN"),
        ("SELECT * FROM c WHERE c.n IN (1, 2)", "IN"),
        ("SELECT * FROM c WHERE ARRAY_CONTAINS(c.tags, 'x')", "ARRAY_CONTAINS"),
        ("SELECT * FROM c WHERE c.n + 1 = 2", "'+'"),
        ("SELECT VALUE COUNT(c.id) FROM c", "COUNT(c"),
        ("SELECT DISTINCT * FROM c", "DISTINCT"),
        ("SELECT VALUE COUNT(1) FROM c ORDER BY c.n", "ORDER BY"),
    ],
)
def test_sql_outside_the_subset_is_400_naming_what_is_unsupported(
    container: MemoryDocumentContainer, sql: str, named: str
) -> None:
    with pytest.raises(BadRequest) as caught:
        container.query(sql)
    assert named in str(caught.value)


@pytest.mark.parametrize(
    "sql",
    [
        "",
        "SELECT",
        "SELECT * FROM",
        "SELECT * FROM c WHERE (c.n = 1",
        "SELECT * FROM c WHERE d.n = 1",
        "SELECT * FROM c c d",
    ],
)
def test_malformed_sql_is_400(container: MemoryDocumentContainer, sql: str) -> None:
    with pytest.raises(BadRequest):
        container.query(sql)


def test_a_parameter_that_was_not_supplied_is_400(container: MemoryDocumentContainer) -> None:
    with pytest.raises(BadRequest, match="@missing"):
        container.query("SELECT * FROM c WHERE c.n = @missing")


def test_parameters_may_come_in_the_sdk_list_form_or_without_at(container: MemoryDocumentContainer) -> None:
    container.create(_doc("a", n=1), "p")
    sdk_form: Any = [{"name": "@n", "value": 1}]
    assert feed_ids(list(container.query("SELECT * FROM c WHERE c.n = @n", sdk_form))) == ["a"]
    assert feed_ids(list(container.query("SELECT * FROM c WHERE c.n = @n", {"n": 1}))) == ["a"]


def test_query_top_keywords_any_case_and_other_aliases(container: MemoryDocumentContainer) -> None:
    for i in range(5):
        container.create(_doc(f"d{i}", n=i), "p")
    found = container.query("select top 2 * from root r where r.n >= 1 order by r.n desc")
    assert feed_ids(list(found)) == ["d4", "d3"]


def test_query_literals_and_undefined_semantics(container: MemoryDocumentContainer) -> None:
    container.create(_doc("a", tags=["x", "y"], obj={"k": 1}, flag=True, nothing=None, f=1.5), "p")
    matches = [
        "c.tags = ['x', 'y']",
        'c.obj = {"k": 1}',
        "c.flag = true",
        "c.flag",
        "c.nothing = null",
        "c.f > 1",
        "c.tags[1] = 'y'",
        "STARTSWITH(c.id, 'A', true)",
        "NOT (c.missing = 1) OR c.flag",
        'c.id = "a"',
        "c.id = 'it\\'s' OR c.id = 'a'",
    ]
    for condition in matches:
        assert feed_ids(list(container.query(f"SELECT * FROM c WHERE {condition}"))) == ["a"], condition
    misses = ["NOT (c.missing = 1)", "c.tags < ['z']", "c.flag = 1", "STARTSWITH(c.n, 'a')", "c.missing != 1"]
    for condition in misses:
        assert list(container.query(f"SELECT * FROM c WHERE {condition}")) == [], condition


def test_order_by_sorts_across_types_in_cosmos_order(container: MemoryDocumentContainer) -> None:
    values: list[Any] = ["s", 2, True, None, 1]
    for i, value in enumerate(values):
        container.create(_doc(f"d{i}", v=value), "p")
    container.create(_doc("undefined"), "p")
    ordered = feed_ids(list(container.query("SELECT * FROM c ORDER BY c.v")))
    assert ordered == ["undefined", "d3", "d2", "d4", "d1", "d0"]


def test_parsed_queries_are_cached_and_reusable() -> None:
    assert parse_query("SELECT * FROM c") is parse_query("SELECT * FROM c")


def test_a_malformed_filter_predicate_is_400(container: MemoryDocumentContainer) -> None:
    container.create(_doc("a"), "p")
    with pytest.raises(BadRequest):
        container.patch("a", "p", _set_n(1), filter_predicate="WHERE c.n = 1")


# -- a property: a split-following reader misses nothing and repeats nothing ---------------------------------

_KEYS = [f"key-{i}" for i in range(6)]
_IDS = ["x", "y", "z"]

_steps = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.sampled_from(_KEYS), st.sampled_from(_IDS)),
        st.tuples(st.just("delete"), st.sampled_from(_KEYS), st.sampled_from(_IDS)),
        st.tuples(st.just("batch"), st.sampled_from(_KEYS), st.integers(1, 3)),
        st.tuples(st.just("split"), st.integers(0, 7), st.just(0)),
        st.tuples(st.just("poll"), st.integers(1, 4), st.just(0)),
    ),
    max_size=40,
)


class _SplitFollowingReader:
    """Reads every range from its own continuation; on 410 hands the continuation to the range's children.

    This is the lease algorithm the drain uses (drain/topology.py), reduced to its feed bookkeeping.
    """

    def __init__(self, container: MemoryDocumentContainer) -> None:
        self.container = container
        self.positions: dict[str, str | None] = {r.token: None for r in container.read_feed_ranges()}
        self.seen: list[tuple[str, str, str]] = []

    def poll(self, page_size: int) -> None:
        pending = list(self.positions)
        for _ in range(10_000):  # a feed that never answers empty is a bug, not a reason to hang
            if not pending:
                return
            token = pending.pop()
            try:
                page = self.container.read_change_feed(
                    FeedRange(token), continuation=self.positions[token], max_item_count=page_size
                )
            except FeedRangeGone:
                continuation = self.positions.pop(token)
                for child in self.container.read_feed_ranges(force_refresh=True):
                    if self.container.is_feed_range_subset(FeedRange(token), child):
                        self.positions[child.token] = continuation
                        pending.append(child.token)
                continue
            self.positions[token] = page.continuation
            self.seen.extend((d["pk"], d["id"], d["_etag"]) for d in page.documents)
            if page.documents:
                pending.append(token)
        pytest.fail("the change feed never settled")


@settings(max_examples=60, deadline=None)
@given(steps=_steps, feed_range_count=st.integers(1, 3))
def test_a_split_following_reader_sees_every_latest_version_exactly_once(
    steps: list[tuple[str, Any, Any]], feed_range_count: int
) -> None:
    container = MemoryDocumentContainer(feed_range_count=feed_range_count)
    reader = _SplitFollowingReader(container)
    for action, first, second in steps:
        if action == "write":
            container.upsert(_doc(second, first, n=len(reader.seen)), first)
        elif action == "delete":
            try:
                container.delete(second, first)
            except NotFound:
                pass
        elif action == "batch":
            container.execute_batch(first, [BatchOperation.upsert(_doc(f"b{i}", first)) for i in range(second)])
        elif action == "split":
            ranges = container.read_feed_ranges()
            container.split_feed_range(ranges[first % len(ranges)])
        else:
            reader.poll(first)
    reader.poll(2)
    assert len(reader.seen) == len(set(reader.seen)), "no version is delivered twice"
    live = {(d["pk"], d["id"], d["_etag"]) for d in container.query("SELECT * FROM c")}
    assert live <= set(reader.seen), "every document's latest version reached the reader"


def test_a_fault_can_target_every_port_method() -> None:
    # A port method missing from OPERATIONS could never be failed on purpose (fail() refuses unknown names).
    assert set(OPERATIONS) == set(DocumentContainer.__abstractmethods__)

"""Lease documents (F-04): ids, ETag-conditional ownership, checkpoints, splits and merges (LeaseTopology), malformed
documents, and the feed-range token format the topology reads."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from airflow_chatter.adapters.memory.faults import fail
from airflow_chatter.drain.leases import ACTIVE, SPLIT, LeaseHeldError, LeaseLostError, LeaseStore, lease_id_for
from airflow_chatter.drain.suspension import SuspensionState
from airflow_chatter.drain.topology import LeaseTopology
from airflow_chatter.errors import ConfigurationError, InvalidLeaseDocumentError
from airflow_chatter.ports import BadRequest, FeedRange, FeedRangeGone, ServiceUnavailable
from airflow_chatter.testing.handlers import first_of

from ._drain_support import T0, ManualClock, memory_container, split

PROCESSOR = "chatter-cosmos-outbox-relay:abc"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def monitored(clock: ManualClock):  # type: ignore[no-untyped-def]
    return memory_container(clock)


@pytest.fixture
def container(clock: ManualClock):  # type: ignore[no-untyped-def]
    return memory_container(clock, paths=("/id",), container_id="leases")


def _store(container, clock: ManualClock, owner: str = "a", prefix: str = "", start_from=None) -> LeaseStore:  # type: ignore[no-untyped-def]
    return LeaseStore(
        container,
        PROCESSOR,
        owner=owner,
        lease_prefix=prefix,
        lease_duration_seconds=60,
        clock=clock,
        start_from=start_from,
    )


def test_f04_lease_id_is_deterministic_prefixed_and_url_safe() -> None:
    token = '{"Range":{"min":"","max":"FF"}}'
    first = lease_id_for(PROCESSOR, "nightly-", FeedRange(token))
    assert first == lease_id_for(PROCESSOR, "nightly-", FeedRange(token)), "every process derives the same id"
    assert first.startswith("nightly-" + PROCESSOR + ":")
    assert not set("/\\?#") & set(first), "Cosmos ids may not contain / \\ ? #"
    assert lease_id_for(PROCESSOR, "", FeedRange("x" * 5000)).__len__() < 200, "long tokens are hashed"
    assert first != lease_id_for(PROCESSOR, "other-", FeedRange(token)), "the prefix separates lease sets"
    assert first != lease_id_for(PROCESSOR, "nightly-", FeedRange('{"Range":{"min":"","max":"7F"}}'))


def test_f04_lease_id_does_not_look_like_a_jwt_to_log_maskers() -> None:
    # Airflow's secrets masker redacts anything shaped like a JWT (base64 of JSON starts "eyJ"); a lease id
    # in a task log must stay readable.
    lease_id = lease_id_for(PROCESSOR, "", FeedRange('{"Range":{"min":"","max":"FF"}}'))
    assert "eyJ" not in lease_id


def test_f04_ensure_leases_creates_one_lease_per_range_starting_at_the_beginning(
    monitored,
    container,
    clock: ManualClock,  # type: ignore[no-untyped-def]
) -> None:
    store = _store(container, clock)
    leases = LeaseTopology(store, monitored).ensure_leases()
    assert [lease.token for lease in leases] == [r.token for r in monitored.read_feed_ranges()]
    (lease,) = leases
    assert lease.continuation is None and lease.owner is None, "RLY-08: a new lease starts at the beginning, free"
    assert lease.suspension == SuspensionState()
    assert LeaseTopology(store, monitored).ensure_leases() == leases, "idempotent: nothing is recreated"
    assert container.read(lease.id, lease.id)["_chatterType"] == "lease", "partitioned on /id"


def test_f04_acquire_takes_a_free_lease(monitored, container, clock: ManualClock) -> None:  # type: ignore[no-untyped-def]
    store = _store(container, clock)
    (lease,) = LeaseTopology(store, monitored).ensure_leases()
    taken = store.acquire(lease.id)
    assert taken.owner == "a" and taken.expires_at is not None
    assert (taken.expires_at - clock.now).total_seconds() == 60, "live for the lease duration"


def test_f04_a_live_lease_of_another_drain_is_reported_and_left_alone(
    monitored,
    container,
    clock: ManualClock,  # type: ignore[no-untyped-def]
) -> None:
    a, b = _store(container, clock, "a"), _store(container, clock, "b")
    (lease,) = LeaseTopology(a, monitored).ensure_leases()
    held = a.acquire(lease.id)
    with pytest.raises(LeaseHeldError) as caught:
        b.acquire(lease.id)
    assert caught.value.owner == "a"
    assert container.read(lease.id, lease.id)["_etag"] == held.etag, "left alone: not even touched"


def test_f04_an_expired_lease_can_be_taken_over(monitored, container, clock: ManualClock) -> None:  # type: ignore[no-untyped-def]
    a, b = _store(container, clock, "a"), _store(container, clock, "b")
    (lease,) = LeaseTopology(a, monitored).ensure_leases()
    held = a.acquire(lease.id)
    clock.advance(61)
    assert b.acquire(lease.id).owner == "b"
    with pytest.raises(LeaseLostError):  # the old owner's ETag is stale: it cannot checkpoint any more
        a.checkpoint(held, "c1")


def test_f04_a_lost_race_is_reported_as_held(monitored, container, clock: ManualClock) -> None:  # type: ignore[no-untyped-def]
    a, b = _store(container, clock, "a"), _store(container, clock, "b")
    (lease,) = LeaseTopology(a, monitored).ensure_leases()
    # b read the free lease, then a wrote it first: b's conditional write must lose.
    stale = b.get(lease.id)
    a.acquire(lease.id)
    with pytest.raises(LeaseLostError):
        b.renew(stale)
    with pytest.raises(LeaseHeldError):
        b.acquire(lease.id)


def test_f04_checkpoint_renew_and_release(monitored, container, clock: ManualClock) -> None:  # type: ignore[no-untyped-def]
    store = _store(container, clock)
    (lease,) = LeaseTopology(store, monitored).ensure_leases()
    lease = store.acquire(lease.id)
    clock.advance(10)
    lease = store.checkpoint(lease, "cont-1")
    assert lease.continuation == "cont-1" and lease.checkpointed_at == clock.now
    assert (lease.expires_at - clock.now).total_seconds() == 60, "a checkpoint renews too"
    clock.advance(35)
    assert store.needs_renewal(lease)
    lease = store.renew(lease)
    assert not store.needs_renewal(lease)
    released = store.release(lease)
    assert released is not None and released.owner is None and released.continuation == "cont-1"
    assert _store(container, clock, "b").acquire(lease.id).owner == "b", "a released lease is free at once"


def test_f04_split_children_resume_from_parent(monitored, container, clock: ManualClock) -> None:  # type: ignore[no-untyped-def]
    store = _store(container, clock)
    (parent,) = LeaseTopology(store, monitored).ensure_leases()
    parent = store.checkpoint(store.acquire(parent.id), "parent-cont")
    left, right = split(monitored, parent.feed_range)
    children = LeaseTopology(store, monitored).split(parent, FeedRangeGone("gone"))
    assert sorted(c.token for c in children) == sorted([left.token, right.token])
    assert all(c.continuation == "parent-cont" for c in children), "no document skipped: children resume there"
    marked = store.get(parent.id)
    assert marked.state == SPLIT and set(marked.children) == {left.token, right.token} and marked.owner is None
    assert [lease.token for lease in LeaseTopology(store, monitored).ensure_leases()] == [left.token, right.token]


def test_f04_ensure_leases_maps_a_split_it_discovers_onto_the_parent(
    monitored,
    container,
    clock: ManualClock,  # type: ignore[no-untyped-def]
) -> None:
    store = _store(container, clock)
    (parent,) = LeaseTopology(store, monitored).ensure_leases()
    store.checkpoint(store.acquire(parent.id), "parent-cont")
    split(monitored, parent.feed_range)
    children = LeaseTopology(store, monitored).ensure_leases()
    assert len(children) == 2 and all(c.continuation == "parent-cont" for c in children)
    assert store.get(parent.id).state == SPLIT


def _overlapping_active_leases(store: LeaseStore) -> list[tuple[str, str]]:
    """Pairs of active leases whose ranges overlap, from the EPK bounds of their tokens."""
    active = [lease for lease in store.list_leases() if lease.state == ACTIVE]
    pairs = []
    for i, a in enumerate(active):
        for b in active[i + 1 :]:
            a_bounds, b_bounds = a.feed_range.epk_bounds(), b.feed_range.epk_bounds()
            assert a_bounds is not None and b_bounds is not None
            if a_bounds[0] < b_bounds[1] and b_bounds[0] < a_bounds[1]:
                pairs.append((a.id, b.id))
    return pairs


@pytest.mark.parametrize("crash_at_write", [1, 2, 3, 4])
def test_f04_a_split_found_without_feed_range_overlap_never_leaves_two_active_leases_on_one_range(
    monitored,
    container,
    clock: ManualClock,  # type: ignore[no-untyped-def]
    crash_at_write: int,
) -> None:
    # The parent splits in three; the container cannot compute overlaps (BadRequest, as for a token not in the EPK
    # format), so the topology finds the children through is_feed_range_subset. The listing crashes at its n-th
    # write to the lease container: after every write the leases must still cover each range once, and the next
    # listing must carry the split through from the parent's position (its children recorded, nothing skipped).
    store = _store(container, clock)
    (parent,) = LeaseTopology(store, monitored).ensure_leases()
    store.release(store.checkpoint(store.acquire(parent.id), "parent-cont"))
    left, right = split(monitored, parent.feed_range)
    split(monitored, left)
    children = monitored.read_feed_ranges(force_refresh=True)
    monitored.handler = first_of(
        monitored.handler, fail("feed_range_overlap", error=BadRequest("the ranges cannot be compared"))
    )
    container.handler = first_of(
        container.handler,
        fail(
            "*",
            error=ServiceUnavailable("the listing stops here"),
            on_call=crash_at_write,
            when=lambda call: call.operation in ("create", "replace"),
        ),
    )
    with pytest.raises(ServiceUnavailable, match="the listing stops here"):
        LeaseTopology(store, monitored).ensure_leases()
    assert _overlapping_active_leases(store) == [], f"two active leases overlap after write {crash_at_write - 1}"
    container.handler = None
    leases = LeaseTopology(store, monitored).ensure_leases()
    assert sorted(lease.token for lease in leases) == sorted(r.token for r in children)
    assert all(lease.continuation == "parent-cont" for lease in leases), "every child resumes at the parent's position"
    retired = store.get(parent.id)
    assert retired.state == SPLIT and set(retired.children) == {r.token for r in children}
    assert _overlapping_active_leases(store) == []


def test_f04_a_split_with_no_children_reraises_gone(monitored, container, clock: ManualClock) -> None:  # type: ignore[no-untyped-def]
    store = _store(container, clock)
    (lease,) = LeaseTopology(store, monitored).ensure_leases()
    gone = FeedRangeGone("vanished")
    with pytest.raises(FeedRangeGone):
        LeaseTopology(store, monitored).split(lease, gone)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"_chatterType": "outbox"}, "_chatterType"),
        ({"feed_range": None}, "feed_range"),
        ({"continuation": 5}, "continuation"),
        ({"expires_at": "soon"}, "expires_at"),
        ({"suspension": {"consecutive_failures": "x"}}, "consecutive_failures"),
        ({"state": "weird"}, "state"),
        ({"processor": ""}, "processor"),
        ({"start_from": "last tuesday"}, "start_from"),
        ({"start_from": "2026-11-30T06:00:00"}, "start_from"),  # no UTC offset: ambiguous
        ({"start_from": 1764482400}, "start_from"),
    ],
)
def test_f04_malformed_lease_document_names_the_lease(
    monitored,
    container,
    clock: ManualClock,
    change: dict,
    named: str,  # type: ignore[no-untyped-def]
) -> None:
    store = _store(container, clock)
    (lease,) = LeaseTopology(store, monitored).ensure_leases()
    doc = container.read(lease.id, lease.id)
    doc.update(change)
    container.replace(lease.id, lease.id, doc)
    with pytest.raises(InvalidLeaseDocumentError) as caught:
        store.acquire(lease.id)
    assert lease.id in str(caught.value) and named in str(caught.value)


def test_f04_unknown_fields_survive_a_write(monitored, container, clock: ManualClock) -> None:  # type: ignore[no-untyped-def]
    store = _store(container, clock)
    (lease,) = LeaseTopology(store, monitored).ensure_leases()
    doc = container.read(lease.id, lease.id)
    doc["operator_note"] = "paused for migration"
    container.replace(lease.id, lease.id, doc)
    store.checkpoint(store.acquire(lease.id), "c")
    assert container.read(lease.id, lease.id)["operator_note"] == "paused for migration"


def test_f04_ensure_leases_records_the_start_from_of_a_point_in_time_store(
    monitored,
    container,
    clock: ManualClock,  # type: ignore[no-untyped-def]
) -> None:
    start = clock.now - timedelta(hours=2)
    (lease,) = LeaseTopology(_store(container, clock, start_from=start), monitored).ensure_leases()
    assert lease.continuation is None and lease.start_from == start
    assert container.read(lease.id, lease.id)["start_from"] == "2026-11-30T04:00:00+00:00", "stored as ISO-8601 UTC"
    (plain,) = LeaseTopology(_store(container, clock, prefix="scheduled-"), monitored).ensure_leases()
    assert plain.start_from is None, "RLY-08: without a start_from a new lease starts at the beginning"


def test_f04_start_from_is_stored_as_utc_whole_seconds(monitored, container, clock: ManualClock) -> None:  # type: ignore[no-untyped-def]
    # _ts and the change feed's start time are whole seconds: flooring reads that whole second, never less.
    start = datetime(2026, 11, 30, 7, 30, 5, 750_000, tzinfo=timezone(timedelta(hours=2)))
    (lease,) = LeaseTopology(_store(container, clock, start_from=start), monitored).ensure_leases()
    assert lease.start_from == datetime(2026, 11, 30, 5, 30, 5, tzinfo=UTC)


@pytest.mark.parametrize("bad", [datetime(2026, 11, 30, 6, 0, 0), "2026-11-30T06:00:00Z"])
def test_f04_start_from_must_be_an_aware_datetime(container, clock: ManualClock, bad: object) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigurationError, match="start_from"):
        _store(container, clock, start_from=bad)


def test_f04_split_children_of_a_never_checkpointed_point_in_time_lease_keep_its_start(
    monitored,
    container,
    clock: ManualClock,  # type: ignore[no-untyped-def]
) -> None:
    start = clock.now - timedelta(minutes=5)
    store = _store(container, clock, start_from=start)
    (parent,) = LeaseTopology(store, monitored).ensure_leases()
    split(monitored, parent.feed_range)
    children = LeaseTopology(store, monitored).split(store.acquire(parent.id), FeedRangeGone("gone"))
    assert len(children) == 2
    assert all(c.continuation is None and c.start_from == start for c in children), "nothing before the start"


def test_f04_split_children_take_the_parents_start_not_the_stores(
    monitored,
    container,
    clock: ManualClock,  # type: ignore[no-untyped-def]
) -> None:
    # a lease that starts at the beginning
    (parent,) = LeaseTopology(_store(container, clock), monitored).ensure_leases()
    split(monitored, parent.feed_range)
    later = _store(container, clock, start_from=clock.now)
    children = LeaseTopology(later, monitored).ensure_leases()
    assert len(children) == 2
    assert all(c.start_from is None for c in children), "a child carries on its parent's stream: from the beginning"


def test_f04_split_children_of_a_checkpointed_point_in_time_lease_resume_from_its_continuation(
    monitored,
    container,
    clock: ManualClock,  # type: ignore[no-untyped-def]
) -> None:
    store = _store(container, clock, start_from=clock.now)
    (parent,) = LeaseTopology(store, monitored).ensure_leases()
    parent = store.checkpoint(store.acquire(parent.id), "parent-cont")
    split(monitored, parent.feed_range)
    children = LeaseTopology(store, monitored).ensure_leases()
    assert len(children) == 2 and all(c.continuation == "parent-cont" for c in children)


from airflow_chatter.drain.topology import _tiles  # noqa: E402 - next to the tests that use it


def _range(low: str, high: str) -> FeedRange:
    return FeedRange(json.dumps({"Range": {"isMinInclusive": True, "max": high, "min": low}}, sort_keys=True))


@pytest.mark.parametrize(
    ("whole", "parts", "tiled"),
    [
        # the SDK's shape: "" is the lowest EPK, "FF" the highest, variable-length uppercase hex
        (("", "FF"), [("", "7F"), ("7F", "FF")], True),
        (("", "FF"), [("7F", "FF"), ("", "7F")], True),
        (("", "FF"), [("", "3F"), ("3F", "7F"), ("7F", "FF")], True),
        (("", "FF"), [("", "7F")], False),
        (("", "FF"), [("", "3F"), ("7F", "FF")], False),
        (("", "FF"), [("", "7F"), ("70", "FF")], False),
    ],
)
def test_f04_merge_parts_must_tile_the_merged_range_edge_to_edge(
    whole: tuple[str, str], parts: list[tuple[str, str]], tiled: bool
) -> None:
    assert _tiles(_range(*whole), [_range(*p) for p in parts]) is tiled


def test_f04_ranges_that_cannot_be_compared_never_count_as_a_merge() -> None:
    assert not _tiles(FeedRange("opaque"), [FeedRange("a"), FeedRange("b")])
    assert not _tiles(_range("", "FF"), [_range("", "7F"), FeedRange('{"Range": {"min": 1, "max": 2}}')])


def test_f04_a_feed_range_token_round_trips_its_epk_bounds_in_the_sdk_shape() -> None:
    feed_range = FeedRange.from_epk_bounds("", "7F")
    assert json.loads(feed_range.token) == {
        "Range": {"min": "", "max": "7F", "isMinInclusive": True, "isMaxInclusive": False}
    }
    assert feed_range.epk_bounds() == ("", "7F")
    assert FeedRange.from_epk_bounds("", "7F") == feed_range, "the same range is the same token (lease ids)"
    assert _range("00", "7F").epk_bounds() == ("00", "7F"), "isMaxInclusive may be absent, as the SDK reads it"


@pytest.mark.parametrize(
    "token",
    [
        "opaque",
        "[1, 2]",
        '{"Range": "x"}',
        '{"Range": {"min": 1, "max": 2}}',
        '{"Range": {"min": "7F", "max": "00"}}',
        '{"Range": {"min": "", "max": "7F", "isMaxInclusive": true}}',
        '{"Range": {"min": "", "max": "7F", "isMinInclusive": false}}',
    ],
)
def test_f04_a_token_not_in_the_format_has_no_epk_bounds(token: str) -> None:
    assert FeedRange(token).epk_bounds() is None


def test_f04_the_memory_containers_feed_ranges_are_in_the_one_token_format() -> None:
    from airflow_chatter.adapters.memory.container import MemoryDocumentContainer

    ranges = MemoryDocumentContainer(feed_range_count=3).read_feed_ranges()
    bounds = [r.epk_bounds() for r in ranges]
    assert len(bounds) == 3 and None not in bounds, bounds
    assert [FeedRange.from_epk_bounds(*b) for b in bounds if b is not None] == ranges, "written by from_epk_bounds"
    low, high = min(b[0] for b in bounds if b is not None), max(b[1] for b in bounds if b is not None)
    assert _tiles(FeedRange.from_epk_bounds(low, high), ranges), "the topology reads them edge to edge"


def test_f04_a_merged_lease_document_parses_and_an_unknown_state_is_named(container, clock: ManualClock) -> None:  # type: ignore[no-untyped-def]
    store = _store(container, clock)
    lease = store.create(FeedRange("r"), None, None)
    doc = {**container.read(lease.id, lease.id), "state": "merged", "children": ["m"]}
    container.replace(lease.id, lease.id, doc)
    assert store.get(lease.id).state == "merged"
    container.replace(lease.id, lease.id, {**doc, "state": "gone"})
    with pytest.raises(InvalidLeaseDocumentError, match="state must be 'active', 'split' or 'merged', got 'gone'"):
        store.get(lease.id)

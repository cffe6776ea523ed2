"""A drain and its lease (F-04): ownership between drains, splits mid-drain, start-time checks (CNT, SRC), summaries."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

import pytest

from airflow_chatter.drain.engine import DrainEngine
from airflow_chatter.drain.identity import SourceRegistry
from airflow_chatter.errors import ContainerContractError, DuplicateSourceError
from airflow_chatter.ports import FeedRange, OutgoingMessage, PublishOutcome
from airflow_chatter.testing.fakes import FakePublisher

from ._drain_support import Rig, memory_container, merge, outbox_doc, split
from ._stateful_support import StampPoint


def _point_in_time_engine(rig: Rig, start_from: datetime, **source_kwargs: object) -> DrainEngine:
    """An engine whose new leases start at ``start_from`` (what a backfill from a point in time builds)."""
    return DrainEngine.open(
        rig.source(**source_kwargs),
        rig.monitored,
        rig.leases,
        rig.publisher,
        clock=rig.clock,
        telemetry=rig.telemetry,
        owner="backfill",
        start_from=start_from,
    )


def _published(rig: Rig) -> list[str]:
    return [dict(m.headers)["message-id"].decode() for m in rig.publisher.sent]


class HookedPublisher(FakePublisher):
    """Runs ``during`` inside ``send_batch``: something happening while a drain is mid-page."""

    def __init__(self) -> None:
        super().__init__()
        self.during: list = []  # type: ignore[type-arg]

    def send_batch(self, messages: Sequence[OutgoingMessage]) -> list[PublishOutcome]:
        while self.during:
            self.during.pop(0)()
        return super().send_batch(messages)


def test_f04_two_engines_on_one_lease_never_both_drain_it() -> None:
    rig = Rig()
    rig.publisher = HookedPublisher()
    rig.seed(*(outbox_doc(f"msg-{i}") for i in range(5)))
    first = rig.engine(owner="scheduled")
    second = rig.engine(FakePublisher(), owner="backfill")
    seen: list = []  # type: ignore[type-arg]
    rig.publisher.during.append(lambda: seen.append(rig.drain(second)))
    summary = rig.drain(first)
    (concurrent,) = seen
    assert concurrent.lease_held_by == "scheduled" and concurrent.published == 0 and concurrent.error is None
    assert summary.published == 5 and summary.error is None
    assert rig.lease(first).owner is None, "released at the end of the run"
    assert rig.drain(second).documents == 0, "after release the other drain may take it (and finds nothing new)"


def test_f04_a_split_listed_while_another_drain_holds_the_parent_waits_until_it_lets_go() -> None:
    rig = Rig()
    rig.publisher = HookedPublisher()
    rig.seed(*(outbox_doc(f"msg-{i}", f"tenant-{i}") for i in range(6)))
    first = rig.engine(owner="scheduled", max_batch_size=3)
    other_publisher = FakePublisher()
    second = rig.engine(other_publisher, owner="backfill", max_batch_size=3)
    (parent,) = first.ensure_leases()
    seen: list = []  # type: ignore[type-arg]

    def the_range_splits_and_the_other_drain_runs() -> None:
        split(rig.monitored, parent.feed_range)
        seen.extend(second.drain_all())  # lists the ranges: the parent is held, so its children must not exist yet

    rig.publisher.during.append(the_range_splits_and_the_other_drain_runs)
    summaries = first.drain_all()

    assert [(s.lease, s.lease_held_by, s.published) for s in seen] == [(parent.id, "scheduled", 0)]
    assert summaries[0].lease == parent.id and summaries[0].split_into, "the holder splits it when its read finds out"
    assert other_publisher.sent == [], "the other drain published nothing the holder had in flight"
    first.drain_all()
    ids = _published(rig)
    assert sorted(ids) == sorted(f"msg-{i}" for i in range(6)), "every document once"


def test_f04_a_slow_publish_renews_the_lease_so_it_cannot_lapse_while_the_page_is_stamped() -> None:
    # Lease 60 s, renewed before the page. The publish takes 45 s (a slow broker: up to delivery_timeout_ms), the
    # stamps 20 s more: without a renewal in between the lease lapses mid-page and another drain takes the range.
    rig = Rig()
    stamps = StampPoint(partition_key_paths=("/tenantId",), default_ttl=-1, clock=rig.clock)
    rig.monitored = stamps
    rig.publisher = HookedPublisher()
    rig.seed(*(outbox_doc(f"msg-{i}") for i in range(3)))
    slow = rig.engine(owner="slow", lease_duration_seconds=60)
    other_publisher = FakePublisher()
    other = rig.engine(other_publisher, owner="other", lease_duration_seconds=60)
    seen: list = []  # type: ignore[type-arg]

    def stamping_takes_a_while_and_the_other_drain_runs() -> None:
        rig.clock.advance(20)
        seen.extend(other.drain_all())

    rig.publisher.during.append(lambda: rig.clock.advance(45))
    stamps.queued.append(stamping_takes_a_while_and_the_other_drain_runs)
    (summary,) = slow.drain_all()

    assert summary.error is None and summary.delivered == 3
    assert [(s.lease_held_by, s.published) for s in seen] == [("slow", 0)], "still held: renewed after the publish"
    assert other_publisher.sent == []


def test_f04_an_expired_lease_is_taken_over_and_the_old_owner_stops_at_its_next_write() -> None:
    rig = Rig()
    rig.publisher = HookedPublisher()
    rig.seed(outbox_doc("msg-1"))
    slow = rig.engine(owner="slow")
    fast = rig.engine(FakePublisher(), owner="fast")
    taken: list = []  # type: ignore[type-arg]

    def lease_expires_and_is_taken() -> None:
        rig.clock.advance(120)
        taken.append(rig.drain(fast))

    rig.publisher.during.append(lease_expires_and_is_taken)
    summary = rig.drain(slow)
    assert taken[0].error is None and taken[0].lease_held_by is None, "an expired lease can be taken over"
    assert summary.error_type == "LeaseLostError", "the old owner cannot checkpoint over the new owner"


def test_f04_no_document_is_skipped_or_lost_across_a_split() -> None:
    rig = Rig()
    rig.seed(*(outbox_doc(f"before-{i}", f"tenant-{i}") for i in range(40)))
    engine = rig.engine(max_batch_size=7)
    first = rig.drain(engine, max_documents=10)
    assert 0 < first.published < 40
    (parent,) = rig.monitored.read_feed_ranges()
    split(rig.monitored, parent)
    rig.seed(*(outbox_doc(f"after-{i}", f"tenant-{i}") for i in range(40)))
    summaries = engine.drain_all()
    assert len(summaries) == 2 and all(s.error is None for s in summaries)
    ids = [dict(m.headers)["message-id"].decode() for m in rig.publisher.sent]
    assert len(ids) == len(set(ids)), "nothing published twice"
    assert set(ids) == {f"before-{i}" for i in range(40)} | {f"after-{i}" for i in range(40)}, "nothing lost"


def test_f04_a_range_that_splits_mid_drain_is_replaced_by_its_children() -> None:
    rig = Rig()
    rig.publisher = HookedPublisher()
    rig.seed(*(outbox_doc(f"msg-{i}", f"tenant-{i}") for i in range(30)))
    engine = rig.engine(max_batch_size=10)
    (parent,) = rig.monitored.read_feed_ranges()
    rig.publisher.during.append(lambda: split(rig.monitored, parent))
    summaries = engine.drain_all()
    assert len(summaries[0].split_into) == 2, "the gone range reported its children"
    assert len(summaries) == 3 and all(s.error is None for s in summaries)
    ids = [dict(m.headers)["message-id"].decode() for m in rig.publisher.sent]
    assert sorted(ids) == sorted(f"msg-{i}" for i in range(30)) and len(ids) == 30


def _two_ranges_drained_then_merged(rig: Rig, engine: DrainEngine) -> tuple[list[str], str]:
    """40 documents over two ranges, drained and checkpointed; then the ranges merge. Returns (lease ids, merged)."""
    (whole,) = rig.monitored.read_feed_ranges()
    left, right = split(rig.monitored, whole)
    rig.seed(*(outbox_doc(f"before-{i}", f"tenant-{i}") for i in range(40)))
    drained = engine.drain_all()
    assert sum(s.published for s in drained) == 40 and all(s.error is None for s in drained)
    part_ids = sorted(engine.store.lease_id(r) for r in (left, right))
    assert sorted(s.lease for s in drained) == part_ids
    merged = merge(rig.monitored, left, right)
    return part_ids, engine.store.lease_id(merged)


def test_f04_a_merge_keeps_the_leases_of_its_parts_and_re_reads_nothing() -> None:
    rig = Rig()
    engine = rig.engine(max_batch_size=7)
    part_ids, merged_id = _two_ranges_drained_then_merged(rig, engine)
    rig.seed(*(outbox_doc(f"after-{i}", f"tenant-{i}") for i in range(40)))
    summaries = engine.drain_all()
    assert sorted(s.lease for s in summaries) == part_ids, "each part keeps draining its own range"
    assert all(s.error is None for s in summaries)
    assert engine.store.find(merged_id) is None, "no lease for the merged range: it would re-read everything"
    ids = _published(rig)
    assert len(ids) == len(set(ids)) == 80, "nothing published twice"
    assert set(ids) == {f"before-{i}" for i in range(40)} | {f"after-{i}" for i in range(40)}, "nothing lost"
    assert engine.drain_all() and len(_published(rig)) == 80, "caught up"


def test_f04_a_merge_the_leases_do_not_cover_gets_its_own_lease_from_the_start_and_retires_the_rest() -> None:
    rig = Rig()
    engine = rig.engine(max_batch_size=7)
    part_ids, merged_id = _two_ranges_drained_then_merged(rig, engine)
    lost = engine.store.get(part_ids[1])
    rig.leases.delete(lost.id, lost.id)  # a part without a lease: the merged range is not covered
    rig.seed(*(outbox_doc(f"after-{i}", f"tenant-{i}") for i in range(40)))
    summaries = engine.drain_all()
    assert [s.lease for s in summaries] == [merged_id] and summaries[0].error is None
    retired = engine.store.get(part_ids[0])
    assert retired.state == "merged" and retired.children == (engine.store.get(merged_id).token,)
    ids = _published(rig)
    assert set(ids) == {f"before-{i}" for i in range(40)} | {f"after-{i}" for i in range(40)}, "nothing lost"
    assert len(ids) == 80, "read again from the start, but delivered documents are not pending: no duplicates"
    retired_run = engine.drain_lease(part_ids[0])
    assert (retired_run.documents, retired_run.error, retired_run.split_into) == (0, None, ()), "retired: no reading"


def _merged_then_split_at_another_boundary(rig: Rig, engine: DrainEngine) -> dict[str, FeedRange]:
    """Leases on [0, 1/4), [1/4, 1/2), [1/2, 1), drained; [1/4, 1) merges, then splits at 5/8, which cuts the lease of
    [1/2, 1) in two. Returns the ranges by name."""
    (whole,) = rig.monitored.read_feed_ranges()
    left, right = split(rig.monitored, whole)
    far_left, mid_left = split(rig.monitored, left)
    rig.seed(*(outbox_doc(f"before-{i}", f"tenant-{i}") for i in range(40)))
    drained = engine.drain_all()
    assert sum(s.published for s in drained) == 40 and all(s.error is None for s in drained)
    merged = merge(rig.monitored, mid_left, right)
    assert len(engine.ensure_leases()) == 3, "the parts tile the merge: they keep draining"
    near, far = split(rig.monitored, merged)
    rig.seed(*(outbox_doc(f"after-{i}", f"tenant-{i}") for i in range(40)))
    return {"far_left": far_left, "mid_left": mid_left, "right": right, "near": near, "far": far}


def test_f04_a_merge_split_again_at_another_boundary_cuts_the_straddling_lease_and_re_reads_nothing() -> None:
    rig = Rig()
    engine = rig.engine(max_batch_size=7)
    ranges = _merged_then_split_at_another_boundary(rig, engine)
    right = engine.store.get(engine.store.lease_id(ranges["right"]))

    summaries = engine.drain_all()

    assert all(s.error is None for s in summaries)
    cut = engine.store.get(right.id)
    assert cut.state == "split" and len(cut.children) == 2 and ranges["far"].token in cut.children
    (piece,) = [FeedRange(t) for t in cut.children if t != ranges["far"].token]
    assert rig.monitored.feed_range_overlap(piece, ranges["near"]) == piece, "the piece lies in the near range"
    assert engine.store.find(engine.store.lease_id(ranges["near"])) is None, "its pieces tile it: no re-read lease"
    ids = _published(rig)
    assert len(ids) == len(set(ids)) == 80, "nothing published twice"
    assert set(ids) >= {f"after-{i}" for i in range(40)}, "nothing lost"
    assert sum(s.documents for s in summaries) == 80, "each new change read once, then its stamp: no re-read"


def test_f04_a_drain_of_a_lease_cut_by_a_re_split_carries_on_in_both_pieces() -> None:
    rig = Rig()
    engine = rig.engine(max_batch_size=7)
    ranges = _merged_then_split_at_another_boundary(rig, engine)
    right_id = engine.store.lease_id(ranges["right"])

    summary = engine.drain_lease(right_id)  # no listing first: the read finds the range gone

    assert summary.error is None and len(summary.split_into) == 2
    pieces = [engine.store.get(lease_id) for lease_id in summary.split_into]
    expected = {
        str(doc["MessageId"])
        for piece in pieces
        for doc in rig.monitored.read_change_feed(piece.feed_range, max_item_count=1_000).documents
        if str(doc["MessageId"]).startswith("after-")
    }
    for lease_id in summary.split_into:
        assert engine.drain_lease(lease_id).error is None
    assert expected and set(_published(rig)) - {f"before-{i}" for i in range(40)} == expected
    engine.drain_all()
    ids = _published(rig)
    assert len(ids) == len(set(ids)) == 80 and set(ids) >= {f"after-{i}" for i in range(40)}


def _split_drained_then_merged_back(rig: Rig, engine: DrainEngine) -> tuple[str, list[str]]:
    """10 documents drained on the whole range, 10 more on its halves after a split; then the halves merge back into
    the very range the first lease had (same bounds, same token, same lease id). Returns (whole's id, the halves')."""
    (whole,) = rig.monitored.read_feed_ranges()
    rig.seed(*(outbox_doc(f"a-{i}", f"tenant-{i}") for i in range(10)))
    assert [s.published for s in engine.drain_all()] == [10]
    halves = split(rig.monitored, whole)
    rig.seed(*(outbox_doc(f"b-{i}", f"tenant-{i}") for i in range(10)))
    assert sum(s.published for s in engine.drain_all()) == 10
    assert merge(rig.monitored, *halves) == whole, "merged back to the same bounds"
    rig.seed(*(outbox_doc(f"c-{i}", f"tenant-{i}") for i in range(10)))
    return engine.store.lease_id(whole), sorted(engine.store.lease_id(h) for h in halves)


def test_f04_a_split_merged_back_keeps_draining_through_the_halves() -> None:
    rig = Rig()
    engine = rig.engine(max_batch_size=7)
    whole_id, half_ids = _split_drained_then_merged_back(rig, engine)

    summaries = engine.drain_all()

    assert sorted(s.lease for s in summaries) == half_ids and all(s.error is None for s in summaries)
    assert engine.store.get(whole_id).state == "split", "the old lease stays retired: its halves tile the range"
    ids = _published(rig)
    assert len(ids) == len(set(ids)) == 30, "nothing published twice, nothing left behind"
    assert sum(s.documents for s in summaries) == 20, "the new changes and their stamps, nothing read again"


def test_f04_a_split_merged_back_without_its_halves_revives_the_old_lease_from_its_position() -> None:
    rig = Rig()
    engine = rig.engine(max_batch_size=7)
    whole_id, half_ids = _split_drained_then_merged_back(rig, engine)
    rig.leases.delete(half_ids[0], half_ids[0])  # the halves no longer tile the range

    summaries = engine.drain_all()

    assert [s.lease for s in summaries] == [whole_id] and summaries[0].error is None
    revived = engine.store.get(whole_id)
    assert revived.state == "active" and revived.children == ()
    assert engine.store.get(half_ids[1]).state == "merged"
    ids = _published(rig)
    assert len(ids) == len(set(ids)) == 30, "read again since the split, but delivered documents are skipped"


def test_f04_a_merge_split_back_revives_the_retired_leases_of_its_parts_from_the_merge_position() -> None:
    rig = Rig()
    engine = rig.engine(max_batch_size=7)
    part_ids, merged_id = _two_ranges_drained_then_merged(rig, engine)
    rig.leases.delete(part_ids[1], part_ids[1])  # the parts do not tile the merge: it gets a lease, they retire
    engine.drain_all()
    assert engine.store.get(part_ids[0]).state == "merged"
    merged = engine.store.get(merged_id)
    split(rig.monitored, merged.feed_range)  # back to the parts' bounds: the ranges of the retired leases
    rig.seed(*(outbox_doc(f"after-{i}", f"tenant-{i}") for i in range(40)))

    summaries = engine.drain_all()

    assert all(s.error is None for s in summaries)
    assert engine.store.get(merged_id).state == "split"
    for part_id in part_ids:
        assert engine.store.get(part_id).state == "active", "the lease of the part's range carries on"
    ids = _published(rig)
    assert len(ids) == len(set(ids)) == 80 and set(ids) >= {f"after-{i}" for i in range(40)}


def test_cnt_monitored_container_is_verified_once_at_start_with_every_violation() -> None:
    rig = Rig()
    rig.monitored = memory_container(rig.clock, paths=("/TenantId",), default_ttl=86400)
    with pytest.raises(ContainerContractError) as caught:
        rig.engine()
    text = str(caught.value)
    assert "86400" in text and "/TenantId" in text and "/tenantId" in text, "both violations in one error"
    good = Rig()
    good.engine()
    assert good.monitored.calls["properties"] == 1, "one metadata read"


def test_cnt_lease_container_must_be_partitioned_on_id_and_keep_its_leases() -> None:
    rig = Rig()
    rig.leases = memory_container(rig.clock, paths=("/pk",), default_ttl=3600, container_id="leases")
    with pytest.raises(ContainerContractError) as caught:
        rig.engine()
    assert "/id" in str(caught.value) and "3600" in str(caught.value)


def test_src_04_two_sources_on_one_processor_name_fail_fast_naming_both() -> None:
    rig = Rig()
    registry = SourceRegistry()

    def build(name: str, pending_filter) -> DrainEngine:  # type: ignore[no-untyped-def]
        return DrainEngine.open(
            rig.source(name=name, additional_pending_filter=pending_filter),
            rig.monitored,
            rig.leases,
            rig.publisher,
            clock=rig.clock,
            telemetry=rig.telemetry,
            registry=registry,
        )

    build("eu-orders", lambda d: True)
    with pytest.raises(DuplicateSourceError) as caught:
        build("us-orders", lambda d: False)
    assert "eu-orders" in str(caught.value) and "us-orders" in str(caught.value)


def test_src_02_declared_identity_names_the_leases() -> None:
    rig = Rig()
    declared = rig.engine(monitored_source_identity="orders-v1", lease_source_identity="leases-v1")
    ground = rig.engine()
    assert declared.source_identity != ground.source_identity
    (lease,) = declared.ensure_leases()
    assert lease.id.startswith(declared.source_identity)


def test_f09_summary_is_json_able_and_logs_one_line() -> None:
    rig = Rig()
    rig.seed(outbox_doc("msg-1"))
    summary = rig.drain()
    data = json.loads(json.dumps(summary.to_dict()))
    for key in (
        "lease",
        "published",
        "delivered",
        "undeliverable",
        "skipped",
        "dropped",
        "refused_batches",
        "confirmation_failures",
        "max_lag_seconds",
        "continuation_age_seconds",
        "pages",
        "error_type",
        "error_message",
        "suspended",
    ):
        assert key in data, key
    assert data["published"] == 1 and data["error_type"] is None and data["continuation_age_seconds"] == 0.0
    assert "published=1" in summary.log_line()


def test_f04_draining_a_feed_range_creates_its_lease_on_first_use() -> None:
    rig = Rig()
    rig.seed(outbox_doc("msg-1"))
    engine = rig.engine()
    (feed_range,) = rig.monitored.read_feed_ranges()
    summary = engine.drain_lease(feed_range)
    assert summary.error is None and summary.published == 1
    assert rig.lease(engine).token == feed_range.token


def test_f04_a_malformed_lease_fails_its_drain_naming_the_lease() -> None:
    rig = Rig()
    engine = rig.engine()
    (lease,) = engine.ensure_leases()
    doc = rig.leases.read(lease.id, lease.id)
    doc["expires_at"] = "tomorrow-ish"
    rig.leases.replace(lease.id, lease.id, doc)
    summary = engine.drain_lease(lease.id)
    assert summary.error_type == "InvalidLeaseDocumentError"
    assert lease.id in (summary.error_message or "") and "expires_at" in (summary.error_message or "")


def test_f09_continuation_age_grows_while_a_lease_makes_no_progress() -> None:
    from airflow_chatter.drain.suspension import SuspensionState

    rig = Rig()
    engine = rig.engine()
    assert rig.drain(engine).continuation_age_seconds == 0.0, "a drain that checkpointed is fresh"
    engine.store.save_suspension(rig.lease(engine), SuspensionState(5, True, rig.clock.now, False))
    rig.clock.advance(30)
    refused = rig.drain(engine)
    assert refused.error_type == "DrainSuspendedError" and refused.continuation_age_seconds == 30.0


def test_rly_08_a_point_in_time_lease_publishes_only_documents_written_at_or_after_its_start() -> None:
    rig = Rig()
    rig.seed(*(outbox_doc(f"before-{i}", f"tenant-{i}") for i in range(3)))
    rig.clock.advance(60)
    start = rig.clock.now
    rig.seed(outbox_doc("at-start", "tenant-0"))
    rig.clock.advance(1)
    rig.seed(outbox_doc("after", "tenant-1"))
    looked_at: list[str] = []  # every pending document the drain reads passes the additional filter once (PND-03)
    engine = _point_in_time_engine(rig, start, additional_pending_filter=lambda d: looked_at.append(d["id"]) or True)
    summary = rig.drain(engine)
    assert summary.error is None
    assert sorted(_published(rig)) == ["after", "at-start"], "documents written at or after the start go out"
    assert len(looked_at) == 2, "a read position, not a filter: the pending documents before the start are not read"
    assert {rig.current(outbox_doc(f"before-{i}", f"tenant-{i}"))["status"] for i in range(3)} == {"pending"}


def test_rly_08_once_checkpointed_the_continuation_wins_over_start_from() -> None:
    rig = Rig()
    start = rig.clock.now
    rig.seed(outbox_doc("first", "tenant-0"), outbox_doc("second", "tenant-1"))
    engine = _point_in_time_engine(rig, start)
    assert rig.drain(engine).published == 2
    lease = rig.lease(engine)
    assert lease.continuation is not None and lease.start_from == start, "start_from is kept, but no longer read"
    rig.clock.advance(5)
    rig.seed(outbox_doc("third", "tenant-2"))
    again = rig.drain(engine)
    assert again.published == 1
    # "third" and its own delivered stamp; read from start_from it would also re-read "first" and "second".
    assert again.documents == 2 and again.skipped == 1, "resumed after the checkpoint, not from start_from"
    assert _published(rig) == ["first", "second", "third"]


def test_f04_a_split_child_of_a_never_checkpointed_point_in_time_lease_keeps_the_start() -> None:
    rig = Rig()
    rig.seed(*(outbox_doc(f"before-{i}", f"tenant-{i}") for i in range(20)))
    rig.clock.advance(60)
    start = rig.clock.now
    rig.seed(*(outbox_doc(f"after-{i}", f"tenant-{i}") for i in range(20)))
    engine = _point_in_time_engine(rig, start)
    (parent,) = engine.ensure_leases()
    split(rig.monitored, parent.feed_range)  # before the lease was ever checkpointed
    first = engine.drain_lease(parent.id)
    assert len(first.split_into) == 2 and first.published == 0
    children = [engine.drain_lease(child) for child in first.split_into]
    assert all(c.error is None and c.published > 0 for c in children), "both halves hold documents after the start"
    assert sorted(_published(rig)) == sorted(f"after-{i}" for i in range(20)), "no child reads from the beginning"


def test_f04_a_malformed_start_from_fails_its_drain_naming_the_lease() -> None:
    rig = Rig()
    rig.seed(outbox_doc("msg-1"))
    engine = _point_in_time_engine(rig, rig.clock.now)
    (lease,) = engine.ensure_leases()
    doc = rig.leases.read(lease.id, lease.id)
    doc["start_from"] = "half past six"
    rig.leases.replace(lease.id, lease.id, doc)
    summary = engine.drain_lease(lease.id)
    assert summary.error_type == "InvalidLeaseDocumentError" and summary.published == 0
    assert lease.id in (summary.error_message or "") and "start_from" in (summary.error_message or "")

"""Feed ranges and the change feed per feed range: pages, continuations, splits and sub-ranges (F-04)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from airflow_chatter.ports import (
    BadRequest,
    ChangeFeedStart,
    DocumentContainer,
    FeedRange,
    FeedRangeGone,
    PatchOperation,
)
from airflow_chatter.testing.contracts.container.base import MAX_PAGES, ContainerContractBase, feed_ids

#: Partition keys for the split and sub-range contracts: one document each, spread over both halves of a range.
SPREAD_KEYS = tuple(f"k{i}" for i in range(40))


class ChangeFeedContracts(ContainerContractBase):
    # ----------------------------------------------------------------------------------------------------------
    # Feed ranges and the change feed.
    # ----------------------------------------------------------------------------------------------------------

    def test_feed_ranges_are_listed_and_each_is_a_subset_of_itself(self) -> None:
        container = self.make_container()
        ranges = container.read_feed_ranges()
        assert ranges and all(isinstance(r, FeedRange) and r.token for r in ranges)
        assert len({r.token for r in ranges}) == len(ranges), "ranges are distinct"
        for feed_range in ranges:
            assert container.is_feed_range_subset(feed_range, feed_range)
        for left in ranges:
            for right in ranges:
                if left != right:
                    assert not container.is_feed_range_subset(left, right), "siblings do not overlap"
        assert [r.token for r in container.read_feed_ranges(force_refresh=True)] == [r.token for r in ranges]

    def test_f04_a_feed_range_overlaps_itself_as_itself_and_no_sibling(self) -> None:
        container = self.make_container()
        ranges = container.read_feed_ranges()
        for feed_range in ranges:
            assert container.feed_range_overlap(feed_range, feed_range) == feed_range
        for left in ranges:
            for right in ranges:
                if left != right:
                    assert container.feed_range_overlap(left, right) is None, "siblings share no key"

    def test_f04_the_overlap_of_nested_ranges_is_the_inner_one_token_for_token_and_halves_share_nothing(self) -> None:
        self._require("supports_sub_ranges")
        container = self.make_container()
        whole = container.read_feed_ranges()[0]
        left, right = self.halve_feed_range(container, whole)
        assert container.feed_range_overlap(whole, left) == left and container.feed_range_overlap(right, whole) == right
        assert container.feed_range_overlap(left, right) is None
        inner_left, inner_right = self.halve_feed_range(container, right)
        assert container.feed_range_overlap(left, inner_left) is None
        assert container.feed_range_overlap(inner_right, whole) == inner_right

    def test_change_feed_from_beginning_returns_every_document_once_with_system_properties(self) -> None:
        container = self.make_container()
        for i in range(3):
            container.create(self._doc(f"p{i}", f"d{i}"), f"p{i}")
        drain = self._drain(container)
        assert sorted(drain.ids) == ["d0", "d1", "d2"]
        for document in drain.documents:
            assert isinstance(document["_etag"], str) and isinstance(document["_ts"], int)
            assert "_lsn" in document, "change-feed documents carry _lsn"

    def test_change_feed_pages_are_bounded_by_max_item_count(self) -> None:
        container = self.make_container()
        for i in range(5):
            container.create(self._doc("p", f"d{i}"), "p")
        drain = self._drain(container, max_item_count=2)
        assert drain.page_sizes == [2, 2, 1], "five changes in pages of two; none lost after the first page"
        assert drain.ids == [f"d{i}" for i in range(5)], "one partition key's changes come in write order"

    def test_change_feed_lsn_increases_in_modification_order(self) -> None:
        container = self.make_container()
        for i in range(3):
            container.create(self._doc("p", f"d{i}"), "p")
        container.patch("d0", "p", [PatchOperation("set", "/touched", True)])
        drain = self._drain(container)
        assert drain.ids == ["d1", "d2", "d0"], "the update moved d0 behind the later creates"
        lsns = [document["_lsn"] for document in drain.documents]
        assert lsns == sorted(lsns) and len(set(lsns)) == len(lsns)

    def test_change_feed_resumes_from_a_continuation_with_only_newer_changes(self) -> None:
        container = self.make_container()
        container.create(self._doc("p", "old"), "p")
        first = self._drain(container)
        container.create(self._doc("p", "new"), "p")
        resumed = self._drain(container, continuations=first.continuations)
        assert resumed.ids == ["new"], "a continuation is a bookmark after everything already read"

    def test_change_feed_with_no_changes_returns_an_empty_page_whose_continuation_still_works(self) -> None:
        container = self.make_container()
        container.create(self._doc("p", "old"), "p")
        first = self._drain(container)
        idle = self._drain(container, continuations=first.continuations)
        assert idle.ids == [], "nothing changed"
        assert set(idle.continuations) == set(first.continuations), "an empty page still hands back a position"
        container.create(self._doc("p", "later"), "p")
        assert self._drain(container, continuations=idle.continuations).ids == ["later"]

    def test_change_feed_reading_the_same_continuation_twice_returns_the_same_changes(self) -> None:
        container = self.make_container()
        first = self._drain(container)
        for i in range(3):
            container.create(self._doc("p", f"d{i}"), "p")
        once = self._drain(container, continuations=first.continuations)
        twice = self._drain(container, continuations=first.continuations)
        assert once.ids == twice.ids == ["d0", "d1", "d2"], "a retried page must see the same changes"

    def test_change_feed_from_now_skips_existing_documents(self) -> None:
        container = self.make_container()
        container.create(self._doc("p", "before"), "p")
        now = self._drain(container, start=ChangeFeedStart.NOW)
        assert now.ids == [], "'now' starts after every existing change"
        container.create(self._doc("p", "after"), "p")
        assert self._drain(container, continuations=now.continuations).ids == ["after"]

    def test_change_feed_from_a_point_in_time_returns_changes_since_then(self) -> None:
        container = self.make_container()
        before = container.create(self._doc("p", "before"), "p")
        self.let_time_pass(2)
        container.create(self._doc("p", "after"), "p")
        since = datetime.fromtimestamp(before["_ts"] + 1, tz=UTC)
        assert self._drain(container, start=since).ids == ["after"]

    def test_change_feed_returns_an_updated_document_once_in_its_latest_version(self) -> None:
        container = self.make_container()
        container.create(self._doc("p", "a", n=0), "p")
        for n in (1, 2, 3):
            container.patch("a", "p", [PatchOperation("set", "/n", n)])
        drain = self._drain(container)
        assert drain.ids == ["a"] and drain.documents[0]["n"] == 3, "latest-version mode: one entry, newest body"

    def test_change_feed_omits_deleted_documents(self) -> None:
        container = self.make_container()
        container.create(self._doc("p", "kept"), "p")
        container.create(self._doc("p", "deleted"), "p")
        container.delete("deleted", "p")
        assert self._drain(container).ids == ["kept"], "deletes do not appear in latest-version mode"

    def test_change_feed_continuations_of_two_containers_are_independent(self) -> None:
        left, right = self.make_container(), self.make_container()
        left.create(self._doc("p", "left-1"), "p")
        right.create(self._doc("p", "right-1"), "p")
        left_first = self._drain(left)
        right.create(self._doc("p", "right-2"), "p")  # a write on the other container between the two reads
        right_first = self._drain(right)
        left.create(self._doc("p", "left-2"), "p")
        assert left_first.ids == ["left-1"] and right_first.ids == ["right-1", "right-2"]
        assert self._drain(left, continuations=left_first.continuations).ids == ["left-2"]
        assert self._drain(right, continuations=right_first.continuations).ids == []

    def _round_robin(
        self, container: DocumentContainer, ranges: Sequence[FeedRange], continuations: dict[str, str]
    ) -> dict[str, list[str]]:
        """Read every range a page at a time, in turn, until each answers empty; update ``continuations``."""
        seen: dict[str, list[str]] = {feed_range.token: [] for feed_range in ranges}
        active = list(ranges)
        for _ in range(MAX_PAGES):
            if not active:
                return seen
            for feed_range in list(active):
                page = container.read_change_feed(
                    feed_range, continuation=continuations.get(feed_range.token), max_item_count=2
                )
                continuations[feed_range.token] = page.continuation
                if page.documents:
                    seen[feed_range.token].extend(feed_ids(page.documents))
                else:
                    active.remove(feed_range)
        pytest.fail("the change feed never answered an empty page")

    def test_change_feed_continuations_of_interleaved_feed_range_readers_are_independent(self) -> None:
        container = self.make_container()
        ranges = container.read_feed_ranges()
        if len(ranges) == 1 and self.supports_splits:
            self.split_feed_range(container, ranges[0])
            ranges = container.read_feed_ranges()
        continuations: dict[str, str] = {}
        for batch in ("one", "two"):
            ids = [f"{batch}-{i}" for i in range(12)]
            for i, item_id in enumerate(ids):
                container.create(self._doc(f"key-{i}", item_id), f"key-{i}")
            seen = self._round_robin(container, ranges, continuations)
            everything = [item_id for per_range in seen.values() for item_id in per_range]
            assert sorted(everything) == sorted(ids), "each reader resumes from its own range's continuation"
            for token, per_range in seen.items():
                assert len(set(per_range)) == len(per_range), f"{token} delivered a change twice"

    def test_concurrent_readers_of_two_containers_each_get_their_own_continuation(self) -> None:
        """Two threads write and read their own container's feed at once (Azure SDK issue #35328)."""
        containers = [self.make_container(), self.make_container()]
        rounds = 8
        seen: dict[int, list[str]] = {}
        errors: list[BaseException] = []
        barrier = threading.Barrier(len(containers))

        def write_and_read(index: int) -> None:
            try:
                container = containers[index]
                continuations = self._drain(container).continuations
                ids: list[str] = []
                barrier.wait(timeout=60)
                for round_number in range(rounds):
                    container.create(self._doc("p", f"c{index}-{round_number}"), "p")
                    drain = self._drain(container, continuations=continuations)
                    continuations = drain.continuations
                    ids.extend(drain.ids)
                seen[index] = ids
            except BaseException as error:  # noqa: BLE001 - re-raised in the test thread below
                errors.append(error)

        threads = [threading.Thread(target=write_and_read, args=(i,)) for i in range(len(containers))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
        if errors:
            raise errors[0]
        for index in range(len(containers)):
            expected = [f"c{index}-{r}" for r in range(rounds)]
            assert seen[index] == expected, "a reader saw another reader's position or lost its own"

    # ----------------------------------------------------------------------------------------------------------
    # Optional: feed-range splits.
    # ----------------------------------------------------------------------------------------------------------

    def test_a_split_parent_raises_gone_and_its_children_are_its_subsets(self) -> None:
        self._require("supports_splits")
        container = self.make_container()
        parent = container.read_feed_ranges()[0]
        left, right = self.split_feed_range(container, parent)
        current = container.read_feed_ranges(force_refresh=True)
        assert parent not in current and left in current and right in current
        assert container.is_feed_range_subset(parent, left) and container.is_feed_range_subset(parent, right)
        assert not container.is_feed_range_subset(left, parent), "a child does not contain its parent"
        with pytest.raises(FeedRangeGone) as caught:
            container.read_change_feed(parent)
        assert caught.value.status_code == 410

    # ----------------------------------------------------------------------------------------------------------
    # Optional: sub-ranges of a feed range, resumed from its continuation.
    # ----------------------------------------------------------------------------------------------------------

    def _write_per_key(self, container: DocumentContainer, label: str) -> None:
        """One document per partition key of ``SPREAD_KEYS`` (enough keys to fall in both halves of a range), each
        with the id ``<label>-<key>``."""
        for key in SPREAD_KEYS:
            container.create(self._doc(key, f"{label}-{key}"), key)

    def test_f04_halves_resumed_from_the_whole_range_continuation_see_only_their_own_changes_once(self) -> None:
        """What a split's children do with their parent's continuation: each reads its own half from there on.

        A backend that reads the continuation's whole range instead (azure-cosmos does, unless the adapter narrows
        the token) hands every later change to both halves.
        """
        self._require("supports_sub_ranges")
        container = self.make_container()
        self._write_per_key(container, "before")
        whole = container.read_feed_ranges()[0]
        _, continuation = self._read_to_end(container, whole, None, 100)
        self._write_per_key(container, "after")
        halves = self.halve_feed_range(container, whole)
        read = [self._read_to_end(container, half, continuation, 7)[0] for half in halves]

        # Which keys each range holds, read a second way: from the beginning.
        def keys_in(feed_range: FeedRange) -> set[str]:
            ids = feed_ids(container.read_change_feed(feed_range, max_item_count=1_000).documents)
            return {i.removeprefix("before-") for i in ids if i.startswith("before-")}

        own = [keys_in(half) for half in halves]
        assert own[0] and own[1] and not own[0] & own[1], f"the halves split the keys: {own}"
        assert own[0] | own[1] == keys_in(whole), "the halves together are the whole range"
        for ids, keys_of_half in zip(read, own, strict=True):
            assert sorted(ids) == sorted(f"after-{key}" for key in keys_of_half), "a half reads its own changes only"
        assert len(read[0] + read[1]) == len(set(read[0] + read[1])), "no change reaches both halves"

    def test_f04_a_continuation_does_not_resume_on_a_range_outside_its_own(self) -> None:
        self._require("supports_sub_ranges")
        container = self.make_container()
        container.create(self._doc("k0", "one"), "k0")
        left, right = self.halve_feed_range(container, container.read_feed_ranges()[0])
        page = container.read_change_feed(left, max_item_count=10)
        with pytest.raises(BadRequest):
            container.read_change_feed(right, continuation=page.continuation)

    def test_split_children_resumed_from_the_parent_continuation_see_every_change_exactly_once(self) -> None:
        self._require("supports_splits")
        container = self.make_container()
        self._write_per_key(container, "before")
        parent = container.read_feed_ranges()[0]
        page = container.read_change_feed(parent, max_item_count=5)
        seen = feed_ids(page.documents)
        children = self.split_feed_range(container, parent)
        self._write_per_key(container, "after")
        for child in children:
            seen.extend(self._read_to_end(container, child, page.continuation, 7)[0])
        # What the parent's key space holds now, read a second way: each child from the beginning.
        expected: list[str] = []
        for child in children:
            expected.extend(feed_ids(container.read_change_feed(child, max_item_count=1_000).documents))
        assert len(seen) == len(set(seen)), "no change is delivered twice across the split"
        assert sorted(seen) == sorted(expected), "the children together resume exactly where the parent stopped"
        assert any(i.startswith("after-") for i in seen), "the test wrote into the split range"

"""Partition keys, the effective-partition-key (EPK) space, feed ranges and change-feed continuations.

A partition key hashes to a point of ``[0, EPK_SPACE)``; a feed range is a half-open interval of it, carried in
a ``FeedRange`` token in the one format ``airflow_chatter.ports.FeedRange`` defines (hex bounds here). A
continuation names its container, its range and the last ``_lsn`` read, so a token is never silently applied to
the wrong feed; a child range accepts its parent's, which is how readers carry on after a split.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from airflow_chatter.ports import BadRequest, FeedRange, FeedRangeGone

#: The EPK space: partition keys hash to ``[0, EPK_SPACE)``; feed ranges are half-open intervals of it.
EPK_SPACE = 1 << 60


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def canonical_component(value: Any) -> Any:
    """Return a partition-key component as Cosmos compares it: JSON numbers are doubles, so 1 == 1.0."""
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, (int, float)):
        return int(value) if float(value).is_integer() else float(value)
    raise BadRequest(f"a partition-key component must be a JSON scalar, not {type(value).__name__}")


@dataclass(frozen=True)
class PartitionKeyValue:
    """A partition-key value (full or prefix) of canonical components, compared through their JSON text:
    ``True == 1`` in Python, not in Cosmos."""

    components: tuple[Any, ...]

    @property
    def json(self) -> str:
        return _compact(list(self.components))

    @property
    def epk(self) -> int:
        """Hash the full key into the EPK space, the way the service routes a key to a physical partition."""
        return int.from_bytes(hashlib.sha256(self.json.encode("utf-8")).digest()[:8], "big") >> 4

    def starts_with(self, prefix: PartitionKeyValue) -> bool:
        return _compact(list(self.components[: len(prefix.components)])) == prefix.json


@dataclass(frozen=True, order=True)
class EpkRange:
    """A half-open interval ``[low, high)`` of the EPK space."""

    low: int
    high: int

    @property
    def feed_range(self) -> FeedRange:
        # The token format is FeedRange's (ports); the bounds are fixed-width hex, so they order as strings too.
        return FeedRange.from_epk_bounds(f"{self.low:016X}", f"{self.high:016X}")

    @classmethod
    def parse(cls, feed_range: FeedRange) -> EpkRange:
        token = feed_range.token
        bounds = feed_range.epk_bounds()
        try:
            if bounds is None:
                raise ValueError("not a [min, max) feed-range token")
            low, high = int(bounds[0], 16), int(bounds[1], 16)
        except ValueError as error:
            raise BadRequest(f"not a feed range of this container: {token!r}") from error
        if not 0 <= low < high <= EPK_SPACE:
            raise BadRequest(f"feed range {token!r} lies outside the EPK space")
        return cls(low, high)

    def contains(self, epk: int) -> bool:
        return self.low <= epk < self.high

    def covers(self, other: EpkRange) -> bool:
        return self.low <= other.low and other.high <= self.high

    def halves(self) -> tuple[EpkRange, EpkRange]:
        """The two halves at the EPK midpoint, as a partition split cuts a range."""
        if self.high - self.low < 2:
            raise BadRequest("the feed range is too narrow to split")
        middle = (self.low + self.high) // 2
        return EpkRange(self.low, middle), EpkRange(middle, self.high)


def overlap(a: FeedRange, b: FeedRange) -> FeedRange | None:
    """The feed range ``a`` and ``b`` share (``a`` or ``b`` itself when one holds the other); ``None`` if disjoint."""
    first, second = EpkRange.parse(a), EpkRange.parse(b)
    shared = EpkRange(max(first.low, second.low), min(first.high, second.high))
    if shared.low >= shared.high:
        return None
    return a if shared == first else b if shared == second else shared.feed_range


def even_ranges(count: int) -> list[EpkRange]:
    """Cut the EPK space into ``count`` ranges of equal width."""
    if count < 1:
        raise ValueError("a container has at least one feed range")
    bounds = [EPK_SPACE * i // count for i in range(count + 1)]
    return [EpkRange(bounds[i], bounds[i + 1]) for i in range(count)]


@dataclass(frozen=True)
class Continuation:
    """Where a reader of one feed range stands: after every change with ``_lsn`` <= ``lsn``."""

    container_rid: str
    feed_range: EpkRange
    lsn: int

    def encode(self) -> str:
        low, high = f"{self.feed_range.low:016X}", f"{self.feed_range.high:016X}"
        return _compact({"v": 1, "container": self.container_rid, "min": low, "max": high, "lsn": self.lsn})

    @classmethod
    def decode(cls, token: str) -> Continuation:
        try:
            body = json.loads(token)
            if body.get("v") != 1:
                raise ValueError("unknown version")
            feed_range = EpkRange(int(body["min"], 16), int(body["max"], 16))
            return cls(str(body["container"]), feed_range, int(body["lsn"]))
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise BadRequest(f"not a change-feed continuation of the in-memory container: {token!r}") from error


def split_range(ranges: list[EpkRange], feed_range: FeedRange) -> tuple[FeedRange, FeedRange]:
    """Replace a current range of ``ranges`` by its two halves, as a partition split does."""
    parent = EpkRange.parse(feed_range)
    if parent not in ranges:
        raise FeedRangeGone(f"{feed_range.token} is not a current feed range")
    left, right = parent.halves()
    position = ranges.index(parent)
    ranges[position : position + 1] = [left, right]
    return left.feed_range, right.feed_range


def merge_ranges(ranges: list[EpkRange], left: FeedRange, right: FeedRange) -> FeedRange:
    """Replace two adjacent current ranges of ``ranges`` by their union, as a partition merge does."""
    first, second = sorted((EpkRange.parse(left), EpkRange.parse(right)))
    if first not in ranges or second not in ranges:
        raise FeedRangeGone("only two current feed ranges can merge")
    position = ranges.index(first)
    if position + 1 >= len(ranges) or ranges[position + 1] != second:
        raise BadRequest("only adjacent feed ranges can merge")
    merged = EpkRange(first.low, second.high)
    ranges[position : position + 2] = [merged]
    return merged.feed_range

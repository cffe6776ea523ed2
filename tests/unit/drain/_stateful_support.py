"""What the stateful hypothesis tests (and the lease tests) share: reading EPK bounds, the tiling check, range
changes, and hooks that let something happen while a drain has a page in flight or is between its stamps."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import HealthCheck, settings

from airflow_chatter.adapters.memory.container import MemoryDocumentContainer
from airflow_chatter.adapters.memory.ranges import EPK_SPACE
from airflow_chatter.ports import FeedRange, OutgoingMessage, PublishOutcome
from airflow_chatter.testing.fakes import FakePublisher


def stateful_settings(examples_variable: str, steps: int) -> settings:
    """A machine's settings: ``examples_variable`` (default 60) asks for a longer search; no deadline, since a step
    drains whole pages."""
    return settings(
        max_examples=int(os.environ.get(examples_variable, "60")),
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )


def assert_published_once(sent: Sequence[str]) -> None:
    """No message id in ``sent`` twice; the failure names the repeated ones."""
    assert len(sent) == len(set(sent)), sorted({i for i in sent if sent.count(i) > 1})


def epk_span(feed_range: FeedRange | str) -> tuple[int, int]:
    """``[low, high)`` of an in-memory feed range (or its token)."""
    token = feed_range.token if isinstance(feed_range, FeedRange) else feed_range
    span = json.loads(token)["Range"]
    return int(span["min"], 16), int(span["max"], 16)


def assert_tiles_key_space(ranges: Sequence[FeedRange]) -> None:
    """``ranges`` cover the whole EPK space, each key exactly once: no gap (a change nobody drains), no overlap (a
    change two drains publish)."""
    spans = sorted(epk_span(r) for r in ranges)
    edge = 0
    for low, high in spans:
        assert low == edge, f"{'gap' if low > edge else 'overlap'} at {edge:#x}: {spans}"
        edge = high
    assert edge == EPK_SPACE, spans


def split_one(container: MemoryDocumentContainer, pick: int, *, max_ranges: int) -> None:
    """Split the ``pick``-th current range (as a partition split does), while there are fewer than ``max_ranges``."""
    ranges = container.read_feed_ranges()
    chosen = ranges[pick % len(ranges)]
    low, high = epk_span(chosen)
    if high - low >= 2 and len(ranges) < max_ranges:
        container.split_feed_range(chosen)


def merge_two(container: MemoryDocumentContainer, pick: int) -> None:
    """Merge the ``pick``-th pair of adjacent current ranges (as a partition merge does), if there are two."""
    ranges = sorted(container.read_feed_ranges(), key=epk_span)
    if len(ranges) > 1:
        first = pick % (len(ranges) - 1)
        container.merge_feed_ranges(ranges[first], ranges[first + 1])


def published_ids(*publishers: FakePublisher) -> list[str]:
    """The ``message-id`` of every confirmed message, over all ``publishers``."""
    return [dict(m.headers)["message-id"].decode() for p in publishers for m in p.sent]


class MeanwhilePublisher(FakePublisher):
    """Runs the queued actions inside ``send_batch``, after the messages are handed over and before they confirm.

    The queue is taken before the actions run, so an action that reaches this publisher again (a drain running
    inside another drain's publish) does not run them a second time, nested.
    """

    def __init__(self) -> None:
        super().__init__()
        self.queued: list[Callable[[], object]] = []

    def send_batch(self, messages: Sequence[OutgoingMessage]) -> list[PublishOutcome]:
        outcomes = super().send_batch(messages)
        actions, self.queued = self.queued, []
        for action in actions:
            action()
        return outcomes


class StampPoint(MemoryDocumentContainer):
    """A ``MemoryDocumentContainer`` that runs the queued actions inside the next stamp request, before it applies:
    a ``patch`` (one by one), or a transactional batch of patches (``execute_batch``, the batched stamps of F-10).
    The queue is taken first, so the actions' own stamps do not run them again, nested. The actions run outside the
    container's lock: in batched mode the drain they start may write its own stamps from its writer threads."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.queued: list[Callable[[], object]] = []
        self._queue_lock = threading.Lock()

    def _stamping(self) -> None:
        with self._queue_lock:
            actions, self.queued = self.queued, []
        for action in actions:
            action()

    def patch(self, *args: Any, **kwargs: Any) -> Any:
        self._stamping()
        return super().patch(*args, **kwargs)

    def execute_batch(self, *args: Any, **kwargs: Any) -> Any:
        self._stamping()
        return super().execute_batch(*args, **kwargs)

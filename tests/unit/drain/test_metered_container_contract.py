"""The drain's view of a container (the one 429 policy, ``ThrottleRetrying``, over ``MeteredContainer``) is a
``DocumentContainer`` like any other: the container contract over the in-memory container it wraps, with every
request metered (and, with no retries allowed, a 429 surfacing as the port says)."""

from __future__ import annotations

from collections.abc import Sequence

from airflow_chatter.adapters.memory import MemoryDocumentContainer
from airflow_chatter.adapters.memory.faults import fail
from airflow_chatter.drain.request_units import MeteredContainer, RequestUnits
from airflow_chatter.ports import ContainerError, DocumentContainer, FeedRange
from airflow_chatter.ports.throttle import ThrottleLimits, ThrottleRetrying
from airflow_chatter.testing.clock import ManualClock
from airflow_chatter.testing.contracts.container import DocumentContainerContract
from airflow_chatter.testing.handlers import first_of


def _inner(container: DocumentContainer) -> MemoryDocumentContainer:
    assert isinstance(container, ThrottleRetrying) and isinstance(container.inner, MeteredContainer)
    assert isinstance(container.inner.inner, MemoryDocumentContainer)
    return container.inner.inner


class TestMeteredMemoryContainer(DocumentContainerContract):
    supports_clock_control = True
    supports_splits = True
    supports_sub_ranges = True
    supports_fault_injection = True

    def setup_method(self) -> None:
        self.clock = ManualClock()
        self.units = RequestUnits(ThrottleLimits(max_retries=0))

    def make_container(
        self, partition_key_paths: Sequence[str] = ("/pk",), default_ttl: int | None = -1
    ) -> DocumentContainer:
        inner = MemoryDocumentContainer(
            partition_key_paths=partition_key_paths, default_ttl=default_ttl, clock=self.clock, feed_range_count=2
        )
        return self.units.retrying(inner)

    def advance_clock(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def split_feed_range(self, container: DocumentContainer, feed_range: FeedRange) -> tuple[FeedRange, FeedRange]:
        return _inner(container).split_feed_range(feed_range)

    def halve_feed_range(self, container: DocumentContainer, feed_range: FeedRange) -> tuple[FeedRange, FeedRange]:
        return _inner(container).halve_feed_range(feed_range)

    def inject_fault(self, container: DocumentContainer, operation: str, error: ContainerError) -> None:
        inner = _inner(container)
        inner.handler = first_of(inner.handler, fail(operation, times=1, error=error))

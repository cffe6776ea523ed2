"""Which Cosmos DB priority the requests made on this thread carry (priority-based execution, F-11).

Once a container's provisioned throughput is reached, Cosmos DB throttles low-priority requests before
high-priority ones (when the account has the feature on; where it is off the header is ignored). The relay's
requests (feed reads, stamps, lease writes, pending checks) are low priority by default, so the services that
write to the same container, whose requests carry no priority (high), keep their throughput while a drain works
off a backlog. Whoever makes a request on the relay's behalf sets the priority around the call
(:func:`prioritized`: the drain's metering container, the pending checks); the Cosmos adapter reads
:func:`current_priority` while it builds each request. Thread-local, as the request charges are
(``ports/request_charges.py``): the stamp lanes and the read-ahead each set their own.

Nothing here imports an SDK or Airflow.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

#: A request's priority, as a source's ``request_priority`` names it.
RequestPriority = Literal["low", "high"]
#: The relay's default.
LOW: RequestPriority = "low"

_local = threading.local()


def current_priority() -> RequestPriority | None:
    """The priority requests made on this thread carry, or ``None`` (the client's default: high)."""
    priority: RequestPriority | None = getattr(_local, "priority", None)
    return priority


@contextmanager
def prioritized(priority: RequestPriority | None) -> Iterator[None]:
    """Requests made on this thread inside the block carry ``priority`` (nesting restores the outer one)."""
    outer = getattr(_local, "priority", None)
    _local.priority = priority
    try:
        yield
    finally:
        _local.priority = outer


__all__ = ["LOW", "RequestPriority", "current_priority", "prioritized"]

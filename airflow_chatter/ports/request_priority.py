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

from contextlib import AbstractContextManager
from typing import Literal

from airflow_chatter.ports.thread_value import ThreadValue

#: A request's priority, as a source's ``request_priority`` names it.
RequestPriority = Literal["low", "high"]
#: The relay's default.
LOW: RequestPriority = "low"

_priority: ThreadValue[RequestPriority] = ThreadValue()


def current_priority() -> RequestPriority | None:
    """The priority requests made on this thread carry, or ``None`` (the client's default: high)."""
    return _priority.get()


def prioritized(priority: RequestPriority | None) -> AbstractContextManager[None]:
    """Requests made on this thread inside the block carry ``priority`` (nesting restores the outer one)."""
    return _priority.bound(priority)


__all__ = ["LOW", "RequestPriority", "current_priority", "prioritized"]

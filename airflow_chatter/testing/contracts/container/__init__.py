"""The abstract conformance suite every ``DocumentContainer`` must pass.

It ships inside the package (like eventsourcing's ``tests/persistence.py``) so a user can prove their own
backend against exactly the behaviour the drain relies on. Subclass it in a module whose class name starts with
``Test`` and implement :meth:`DocumentContainerContract.make_container`::

    class TestMyContainer(DocumentContainerContract):
        def make_container(self, partition_key_paths=("/pk",), default_ttl=-1):
            return MyContainer(...)

The base class has no ``Test`` prefix, so pytest never collects it on its own.

Optional capabilities are opt-in through class attributes; a test that needs a capability the backend lacks is
skipped with the reason:

* ``supports_clock_control`` with :meth:`advance_clock`: TTL and point-in-time tests move the backend's clock
  instead of waiting. Without it they wait for real time and *poll* with a bounded deadline, because real Cosmos DB
  expires documents asynchronously.
* ``supports_splits`` with :meth:`split_feed_range`: feed-range split tests.
* ``supports_sub_ranges`` with :meth:`halve_feed_range`: reading a feed range's halves with its continuation, which
  is what a split's children and a merge's parts do (F-04).
* ``supports_fault_injection`` with :meth:`inject_fault`: transient-error tests.
* ``supports_hierarchical_prefix_queries``: queries scoped to a prefix of a hierarchical key (the Node emulator
  cannot route them).

Every test asks for a fresh, empty container through :meth:`make_container` (change-feed tests read "from the
beginning" and count what they see). A subclass that must clean up (a real account) records what it made and
deletes it in its own ``teardown_method``.

This module imports pytest; import it only from tests.
"""

from airflow_chatter.testing.contracts.container.base import (
    MAX_BATCH_OPERATIONS,
    MAX_PATCH_OPERATIONS,
    ContainerContractBase,
    FeedDrain,
    feed_ids,
    unique,
)
from airflow_chatter.testing.contracts.container.batches import BatchContracts
from airflow_chatter.testing.contracts.container.documents import DocumentContracts
from airflow_chatter.testing.contracts.container.faults import FaultContracts
from airflow_chatter.testing.contracts.container.feeds import ChangeFeedContracts
from airflow_chatter.testing.contracts.container.queries import QueryContracts


class DocumentContainerContract(DocumentContracts, BatchContracts, ChangeFeedContracts, QueryContracts, FaultContracts):
    """Every behaviour of the ``DocumentContainer`` port, as a test. Subclass it; see the module docstring."""


__all__ = [
    "MAX_BATCH_OPERATIONS",
    "MAX_PATCH_OPERATIONS",
    "BatchContracts",
    "ChangeFeedContracts",
    "ContainerContractBase",
    "DocumentContainerContract",
    "DocumentContracts",
    "FaultContracts",
    "FeedDrain",
    "QueryContracts",
    "feed_ids",
    "unique",
]

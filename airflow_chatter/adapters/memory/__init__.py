"""The in-memory document container: a real, in-process implementation of the ``DocumentContainer`` port.

It is not a mock. It keeps documents under one lock with the semantics of Azure Cosmos DB's NoSQL API (the "Real
Cosmos DB" column of the emulator notes' feature matrix), because the drain's correctness leans on exactly them:

* identity is (full partition key, id); hierarchical keys are lists and identity is the whole list;
* every write gets a new opaque ``_etag``, a ``_ts`` in whole seconds from an injectable clock, and a
  per-container monotonic ``_lsn``; ``if_match`` and patch ``filter_predicate`` give 412;
* patch (``patch``) supports set/replace/add/remove/incr on JSON pointers (≤10 operations, all-or-nothing);
* a transactional batch (≤100 operations) commits all or nothing; the culprit keeps its status, the others 424;
* TTL follows the container's ``default_ttl`` (``None`` off, ``-1`` on without a default, ``n`` seconds) and the
  item's ``ttl``; an expired document vanishes at once from reads, queries and the change feed;
* the change feed is latest-version only, per feed range, in ``_lsn`` order; one transactional batch shares an
  ``_lsn`` and is never split across pages (as on the service, a page may then exceed ``max_item_count``);
* partition keys hash into an effective-partition-key (EPK) space cut into feed ranges (``ranges``);
  ``split_feed_range`` simulates a partition split, after which the parent range is gone (410) and its
  continuations resume on the children;
* queries run a small, documented SQL subset (``query``) with Cosmos's undefined-value semantics;
* tests fail calls on purpose through ``container.handler`` (``faults``) and count them in ``container.calls``.

Beside it, ``MemoryMessageSource`` (``source``) is the message-source port in memory (the receive loop without a
broker), and ``MemoryIdempotencyStore`` (``idempotency``) the idempotency store of one process.
"""

from airflow_chatter.adapters.memory.container import MemoryDocumentContainer
from airflow_chatter.adapters.memory.faults import OPERATIONS, OperationCall, OperationHandler, fail
from airflow_chatter.adapters.memory.idempotency import MemoryIdempotencyStore
from airflow_chatter.adapters.memory.query import SUPPORTED_SQL, parse_query
from airflow_chatter.adapters.memory.ranges import EPK_SPACE
from airflow_chatter.adapters.memory.source import MemoryMessageSource

__all__ = [
    "EPK_SPACE",
    "OPERATIONS",
    "SUPPORTED_SQL",
    "MemoryDocumentContainer",
    "MemoryIdempotencyStore",
    "MemoryMessageSource",
    "OperationCall",
    "OperationHandler",
    "fail",
    "parse_query",
]

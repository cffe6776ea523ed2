"""The in-memory document container: a real, small implementation of the container port for tests.

``container`` holds the stored state and the port methods; ``faults`` the fault injection tests arm through
``container.faults``; ``ranges`` the EPK space, feed ranges and continuations; ``query`` the SQL subset;
``patch`` partial document updates.
"""

from airflow_chatter.adapters.memory.container import MAX_BATCH_OPERATIONS, MemoryDocumentContainer
from airflow_chatter.adapters.memory.faults import OPERATIONS, FaultPlan, FaultRule, OperationCall
from airflow_chatter.adapters.memory.patch import MAX_PATCH_OPERATIONS
from airflow_chatter.adapters.memory.query import (
    SUPPORTED_SQL,
    ParsedQuery,
    parse_filter_predicate,
    parse_query,
    run_query,
)
from airflow_chatter.adapters.memory.ranges import EPK_SPACE

__all__ = [
    "EPK_SPACE",
    "MAX_BATCH_OPERATIONS",
    "MAX_PATCH_OPERATIONS",
    "OPERATIONS",
    "SUPPORTED_SQL",
    "FaultPlan",
    "FaultRule",
    "MemoryDocumentContainer",
    "OperationCall",
    "ParsedQuery",
    "parse_filter_predicate",
    "parse_query",
    "run_query",
]

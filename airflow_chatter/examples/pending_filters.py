"""Example pending filters for two sources that share one container: each admits the customers of its own prefix,
so every Outbox Document has exactly one source that may publish it (``pending_filter`` in the sources file, a
dotted path the drain tasks import; the live shared-stream test names them)."""

from __future__ import annotations

from typing import Any

#: The customer-id prefix of each live source's documents.
ORDERS_PREFIX = "cust-o"
AUDIT_PREFIX = "cust-a"


def orders_customers(document: dict[str, Any]) -> bool:
    return str(document.get("customerId", "")).startswith(ORDERS_PREFIX)


def audit_customers(document: dict[str, Any]) -> bool:
    return str(document.get("customerId", "")).startswith(AUDIT_PREFIX)


__all__ = ["AUDIT_PREFIX", "ORDERS_PREFIX", "audit_customers", "orders_customers"]

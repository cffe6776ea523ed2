"""The example downstream handler of the demo's ``OrderPlaced`` events (``dags/example_chatter_consume_orders.py``).

It records one receipt per order in the order's own partition (the Kafka key is the ``customerId`` the demo's
orders are partitioned on), through the delivery's Unit of Work: the receipt and the Inbox Marker commit together,
so a redelivered event writes nothing twice. Nothing here imports Airflow.
"""

from __future__ import annotations

import json
import logging

from airflow_chatter.inbox.receiver import Delivery

log = logging.getLogger(__name__)

RECEIPT_TYPE = "order-receipt"


def record_order_receipt(delivery: Delivery) -> None:
    """Stage ``receipt-<orderId>`` for an order event; other events only log a line.

    The receipt is upserted, keyed by the order: the inbox already makes one *delivery* apply once, and a second,
    different event for the same order (a producer that re-sent it under a new message id, or a demo run again on
    the same topic) updates the receipt instead of failing every retry with a 409 the consumer could never pass.
    """
    message = delivery.message
    event = message.header("event-type") or "unknown"
    body = json.loads(message.value) if message.value else {}
    log.info("order event %s identity=%s at %s: %s", event, delivery.identity, message.where, body)
    if event != "OrderPlaced" or delivery.unit_of_work is None:
        return
    unit = delivery.unit_of_work
    unit.upsert(
        {
            "id": f"receipt-{body['orderId']}",
            "customerId": unit.partition_key,
            "type": RECEIPT_TYPE,
            "orderId": body["orderId"],
            "total": body.get("total"),
            "messageId": delivery.identity,
            "receiver": delivery.receiver,
        }
    )


__all__ = ["RECEIPT_TYPE", "record_order_receipt"]

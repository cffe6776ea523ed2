"""The examples docs/inbox.md includes (between the markers), run as tests so the docs never rot."""

from __future__ import annotations

import asyncio


def test_the_unit_of_work_example_commits_an_order_and_its_message_in_one_batch() -> None:
    # --8<-- [start:unit_of_work]
    from airflow_chatter import OutboxMessage, UnitOfWork
    from airflow_chatter.adapters.memory import MemoryDocumentContainer

    orders = MemoryDocumentContainer(partition_key_paths=("/tenantId",))  # CosmosDocumentContainer in production

    with UnitOfWork(orders, "/tenantId", "acme") as unit:  # one container, one partition
        unit.create({"id": "order-1", "tenantId": "acme", "total": 42})
        unit.add_message(OutboxMessage("order-1-placed", "orders", '{"order": 1}', "application/json"))
    # A clean exit committed both as one transactional batch; an exception would have written nothing.
    # --8<-- [end:unit_of_work]

    assert orders.read("outbox:b3JkZXItMS1wbGFjZWQ", "acme")["status"] == "pending"
    assert orders.read("order-1", "acme")["total"] == 42


def test_the_standalone_inbox_example_runs_the_work_once() -> None:
    calls: list[str] = []

    def send_invoice(order_id: str) -> None:
        calls.append(order_id)

    # --8<-- [start:standalone]
    from airflow_chatter import Inbox, InboxOptions
    from airflow_chatter.adapters.memory import MemoryDocumentContainer

    markers = MemoryDocumentContainer(partition_key_paths=("/idempotencyKey",))
    inbox = Inbox(markers, InboxOptions(receiver="invoicing"))

    for _ in range(2):  # a redelivery
        with inbox.claim("order-1-placed") as claim:  # claim: a pending marker, or the decision on the one there
            if claim.should_run:
                send_invoice("order-1")
        # leaving the block cleanly completed the marker; an exception would have left it pending

    async def handle() -> None:  # the same in async code
        async with inbox.claim_async("order-2-placed") as claim:
            if claim.should_run:
                send_invoice("order-2")

    asyncio.run(handle())
    # --8<-- [end:standalone]

    assert calls == ["order-1", "order-2"]


def test_the_receiver_example_writes_once_per_delivery_and_receiver() -> None:
    # --8<-- [start:receiver]
    from airflow_chatter import Delivery, IdempotentReceiver, OutboxMessage, ReceivedMessage
    from airflow_chatter.adapters.memory import MemoryDocumentContainer

    ledger = MemoryDocumentContainer(partition_key_paths=("/customerId",))

    def record_payment(delivery: Delivery) -> None:
        """The handler: stage writes and messages in the delivery's Unit of Work; the receiver commits them."""
        unit = delivery.unit_of_work
        assert unit is not None
        unit.create({"id": f"payment-{delivery.identity}", "customerId": unit.partition_key})
        delivery.dispatch(notify, "paid")  # in-process: same unit of work, not gated separately

    def notify(delivery: Delivery, what: str) -> None:
        delivery.send(OutboxMessage(f"{delivery.identity}-{what}", "notifications", '{"what": "paid"}'))

    receiver = IdempotentReceiver(record_payment, name="payments", container=ledger, partition_key_paths="/customerId")
    message = ReceivedMessage(
        topic="orders", partition=0, offset=7, key=b"cust-1", value=b"{}", headers=(("message-id", b"evt-1"),)
    )
    print(receiver.handle_delivery(message).value, receiver.handle_delivery(message).value)  # processed duplicate
    # --8<-- [end:receiver]

    assert len(list(ledger.query("SELECT * FROM c"))) == 3, "marker, payment, outbox document"

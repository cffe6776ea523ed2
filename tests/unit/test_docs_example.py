"""The example docs/api.md includes (between the ``example`` markers), run as a test so the docs never rot."""

from __future__ import annotations


def test_the_api_example_drains_one_order_message_and_stamps_it_delivered() -> None:
    # --8<-- [start:example]
    from airflow_chatter import DrainEngine, OutboxMessage, SourceOptions
    from airflow_chatter.adapters.memory import MemoryDocumentContainer
    from airflow_chatter.testing.fakes import FakePublisher

    orders = MemoryDocumentContainer(partition_key_paths=("/tenantId",), container_id="orders")
    leases = MemoryDocumentContainer(partition_key_paths=("/id",), container_id="leases")

    # The write side: the business document and its Outbox Document, in one transactional batch in production.
    message = OutboxMessage(
        message_id="order-1-created", destination="orders", body='{"order": 1}', content_type="application/json"
    )
    outbox_document = message.to_document("/tenantId", "acme")
    orders.create(outbox_document, "acme")

    # The read side: drain every lease once, publishing to a fake publisher (KafkaPublisher in production).
    publisher = FakePublisher()
    source = SourceOptions(name="orders", partition_key_paths=("/tenantId",))
    engine = DrainEngine.open(source, orders, leases, publisher)
    (summary,) = engine.drain_all()
    print(summary.log_line())
    # --8<-- [end:example]

    assert [dict(m.headers)["message-id"] for m in publisher.sent] == [b"order-1-created"]
    assert summary.published == 1 and summary.delivered == 1
    assert orders.read(outbox_document["id"], "acme")["status"] == "delivered"

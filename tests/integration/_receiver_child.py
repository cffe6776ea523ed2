"""A receiver in a child process, for the tests that SIGKILL it (tests/integration/test_receiver_kafka.py).

Run as ``python -m tests.integration._receiver_child`` with ``CHILD_CONFIG`` (JSON): bootstrap, topic, group,
endpoint, key, verify, database, container (the application container, ``/tenantId``), inbox_container (standalone
tier, ``/idempotencyKey``), tier, and ``kill_at``: ``"commit"`` kills the process after the handler and before the
unit of work commits; ``"handler"`` kills it inside the handler, after its side effect (standalone tier).
"""

from __future__ import annotations

import json
import os
import signal
from datetime import timedelta
from typing import Any

from airflow_chatter.adapters.cosmos.container import CosmosDocumentContainer, make_cosmos_client
from airflow_chatter.adapters.kafka.consumer import consumer_config
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.adapters.kafka.source import KafkaMessageSource
from airflow_chatter.inbox.gate import Inbox, InboxOptions
from airflow_chatter.inbox.receive import receive
from airflow_chatter.inbox.receiver import Delivery, IdempotentReceiver
from airflow_chatter.outbox.document import OutboxMessage
from airflow_chatter.outbox.unit_of_work import UnitOfWork
from airflow_chatter.ports import DocumentContainer, PatchOperation

KILL_AT = ""
APP: DocumentContainer | None = None


def write_order(delivery: Delivery) -> None:
    """The document-tier handler: one order and one outbox message, in the delivery's unit of work."""
    assert delivery.unit_of_work is not None
    tenant = delivery.unit_of_work.partition_key
    delivery.unit_of_work.create({"id": f"order-{delivery.receiver}-{delivery.identity}", "tenantId": tenant})
    delivery.send(
        OutboxMessage(f"shipped-{delivery.receiver}-{delivery.identity}", "shipments", "{}", "application/json")
    )


def count_effect(delivery: Delivery) -> None:
    """The standalone-tier handler: a side effect of its own (a counter), then (maybe) death before completion."""
    assert APP is not None
    APP.patch("effects", "t", [PatchOperation("incr", f"/runs/{delivery.identity}", 1)])
    if KILL_AT == "handler":
        os.kill(os.getpid(), signal.SIGKILL)


class KilledBeforeCommit(IdempotentReceiver):
    def commit(self, unit: UnitOfWork) -> None:
        if KILL_AT == "commit":
            os.kill(os.getpid(), signal.SIGKILL)
        super().commit(unit)


def main() -> None:
    global KILL_AT, APP
    config: dict[str, Any] = json.loads(os.environ["CHILD_CONFIG"])
    KILL_AT = config.get("kill_at", "")
    client = make_cosmos_client(config["endpoint"], config["key"], verify=config["verify"])
    database = client.get_database_client(config["database"])
    APP = CosmosDocumentContainer(database.get_container_client(config["container"]))
    if config["tier"] == "document":
        receiver: IdempotentReceiver = KilledBeforeCommit(
            write_order, name=config["group"], container=APP, partition_key_paths="/tenantId"
        )
    else:
        inbox = Inbox(
            CosmosDocumentContainer(database.get_container_client(config["inbox_container"])),
            InboxOptions(claim_lease=timedelta(seconds=30)),
        )
        receiver = IdempotentReceiver(count_effect, name=config["group"], inbox=inbox, tier="standalone")
    from kafka import KafkaConsumer

    settings = KafkaSettings(bootstrap_servers=config["bootstrap"])
    source = KafkaMessageSource(KafkaConsumer(config["topic"], **consumer_config(settings, group_id=config["group"])))
    try:
        summary = receive(source, receiver, max_messages=10, max_seconds=60, topics=[config["topic"]])
    finally:
        source.close()
    print(json.dumps(summary.to_dict()))


if __name__ == "__main__":
    main()

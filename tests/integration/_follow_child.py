"""A following drain in a child process, for the tests that SIGTERM and SIGKILL it (test_drain_follow_signals.py).

Run as ``python -m tests.integration._follow_child`` with ``CHILD_CONFIG`` (JSON): bootstrap, endpoint, key, verify,
database, monitored, leases, source. SIGTERM is wired the way the Airflow operator wires it (``on_kill`` sets a
``StopRequest``): the drain stops at its next page boundary. Prints ``following`` once caught up, then its summary.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

from airflow_chatter.adapters.cosmos.client import make_cosmos_client
from airflow_chatter.adapters.cosmos.container import CosmosDocumentContainer
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.drain.engine import DrainEngine
from airflow_chatter.drain.follow import Follow, StopRequest
from airflow_chatter.drain.options import SourceOptions

PAGE = 5


def main() -> None:
    config: dict[str, Any] = json.loads(os.environ["CHILD_CONFIG"])
    stop = StopRequest()
    signal.signal(signal.SIGTERM, stop.request)
    client = make_cosmos_client(config["endpoint"], config["key"], verify=config["verify"])
    database = client.get_database_client(config["database"])
    monitored = CosmosDocumentContainer(database.get_container_client(config["monitored"]))
    leases = CosmosDocumentContainer(database.get_container_client(config["leases"]))
    publisher = KafkaPublisher(KafkaSettings(bootstrap_servers=config["bootstrap"], client_id="chatter-follow-child"))
    source = SourceOptions(
        config["source"],
        ("/tenantId",),
        max_batch_size=PAGE,
        follow=True,
        follow_poll_seconds=0.1,
        lease_duration_seconds=10,
    )
    with DrainEngine.open(source, monitored, leases, publisher, owner="follow-child") as engine:
        (lease,) = engine.ensure_leases()
        print("following", flush=True)
        summary = engine.drain_lease(lease.id, max_seconds=120, follow=Follow(0.1, should_stop=stop))
    publisher.close()
    print(json.dumps(summary.to_dict()), flush=True)
    sys.exit(1 if summary.failed else 0)


if __name__ == "__main__":
    main()

"""The demo (README command 1): orders with their outbox documents, drained to Kafka by the Airflow DAG.

``python scripts/demo.py`` (from the checkout, with the project venv):

1. starts Kafka and the Cosmos emulator on 127.0.0.1 (``scripts/services.sh start``), unless
   ``KAFKA_BOOTSTRAP_SERVERS`` / ``COSMOS_ENDPOINT`` + ``COSMOS_KEY`` point at running ones;
2. re-creates the ``chatter-demo`` database's ``orders`` and ``leases`` containers;
3. writes a few hundred orders, each with its outbox document in the same transactional batch; a few
   outbox documents are malformed on purpose;
4. runs the scheduled drain DAG ``chatter_drain_orders`` (from ``dags/``, configured by
   ``dags/chatter_sources.yaml``) end to end with ``dag.test()`` against a throw-away Airflow home;
5. prints the messages that reached the topic, the delivered count, the undeliverable documents with
   their violations and the lease checkpoints; then runs the DAG again and shows it publishes nothing.

Options: ``--orders N`` (default 300), ``--customers N`` (default 12), ``--malformed N`` (default 8),
``--no-services`` (use the services named by the environment, start nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# devkit/ is the checkout's, not the distribution's: run as a script, the checkout is not on sys.path by itself.
sys.path.insert(0, str(REPO))

from airflow_chatter.airflow.sources import SOURCES_FILE_ENV  # noqa: E402
from devkit.local_env import apply_local_airflow_env, local_airflow_env  # noqa: E402

DAGS = REPO / "dags"
SOURCES_FILE = DAGS / "chatter_sources.yaml"
STATE = Path(os.environ.get("CHATTER_STATE_DIR") or REPO / ".cache" / "services")
DEMO_HOME = REPO / ".cache" / "demo-airflow"
DAG_ID = "chatter_drain_orders"
TOPIC = "chatter-demo.orders"
#: The connection ids dags/chatter_sources.yaml names.
COSMOS_CONN_ID = "chatter_cosmos_default"
KAFKA_CONN_ID = "chatter_kafka_default"


def say(text: str = "") -> None:
    print(text, flush=True)


def heading(text: str) -> None:
    say()
    say(f"== {text} " + "=" * max(0, 90 - len(text)))


# ------------------------------------------------------------------------------------------------
# 1. Services and the Airflow environment (before anything imports airflow).
# ------------------------------------------------------------------------------------------------


def start_services() -> dict[str, str]:
    """Run ``scripts/services.sh start`` and return the environment it prints."""
    script = REPO / "scripts" / "services.sh"
    result = subprocess.run(
        [str(script), "start"],
        cwd=REPO,
        text=True,
        capture_output=True,
        timeout=900,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    if result.returncode != 0:
        raise SystemExit(f"scripts/services.sh start failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    env_file = STATE / "services.env"
    env = env_file.read_text() if env_file.exists() else ""
    found: dict[str, str] = {}
    # Accept both `export NAME=value` (services.env) and `NAME=value` (what the start scripts print).
    for raw in (env + "\n" + result.stdout).splitlines():
        line = raw.strip().removeprefix("export ").strip()
        name, sep, value = line.partition("=")
        if sep and name.isidentifier() and name.isupper():
            found[name] = os.path.expandvars(" ".join(shlex.split(value)))
    # scripts/kafka.sh prints the bare address; the project broker's port is fixed by KAFKA_PORT.
    found.setdefault("KAFKA_BOOTSTRAP_SERVERS", f"127.0.0.1:{os.environ.get('KAFKA_PORT', '19092')}")
    return found


def service_settings(start: bool) -> dict[str, str]:
    settings = {
        k: os.environ[k]
        for k in ("KAFKA_BOOTSTRAP_SERVERS", "COSMOS_ENDPOINT", "COSMOS_KEY", "COSMOS_VERIFY")
        if os.environ.get(k)
    }
    if start:
        settings = {**start_services(), **settings}
    missing = [k for k in ("KAFKA_BOOTSTRAP_SERVERS", "COSMOS_ENDPOINT", "COSMOS_KEY") if not settings.get(k)]
    if missing:
        raise SystemExit(f"no {', '.join(missing)}: run scripts/services.sh start or set them")
    return settings


def configure_airflow(settings: dict[str, str]) -> None:
    shutil.rmtree(DEMO_HOME, ignore_errors=True)
    env = local_airflow_env(DEMO_HOME, dags_folder=DAGS)
    env["AIRFLOW__LOGGING__LOGGING_LEVEL"] = os.environ.get("CHATTER_DEMO_LOG_LEVEL", "WARNING")
    env[SOURCES_FILE_ENV] = str(SOURCES_FILE)
    verify = settings.get("COSMOS_VERIFY", "true")
    cosmos_extra: dict[str, Any] = {"database_name": "chatter-demo"}
    if verify.lower() in ("false", "0", "no"):
        cosmos_extra["connection_verify"] = False
    elif verify.lower() not in ("true", "1", "yes", ""):
        cosmos_extra["ca_cert_path"] = verify
    env[f"AIRFLOW_CONN_{COSMOS_CONN_ID.upper()}"] = json.dumps(
        {
            "conn_type": "chattercosmos",
            "host": settings["COSMOS_ENDPOINT"],
            "password": settings["COSMOS_KEY"],
            "extra": cosmos_extra,
        }
    )
    env[f"AIRFLOW_CONN_{KAFKA_CONN_ID.upper()}"] = json.dumps(
        {"conn_type": "chatterkafka", "host": settings["KAFKA_BOOTSTRAP_SERVERS"]}
    )
    apply_local_airflow_env(env)


# ------------------------------------------------------------------------------------------------
# 2-3. Containers and orders.
# ------------------------------------------------------------------------------------------------


def make_containers(source: Any) -> tuple[Any, Any]:
    from airflow_chatter.adapters.cosmos.container import CosmosDocumentContainer, create_container, ensure_database
    from airflow_chatter.airflow.hooks.cosmos import ChatterCosmosHook

    hook = ChatterCosmosHook(COSMOS_CONN_ID, database_name=source.database)
    database = ensure_database(hook.get_conn(), source.database)
    for name in (source.monitored_container, source.lease_container):
        try:
            database.delete_container(name)
        except Exception:  # noqa: BLE001, S110 - absent on a first run
            pass
    # defaultTtl -1: TTL on with no default, so only the delivered stamp's ttl purges a document.
    paths = [source.partition_key_paths] if isinstance(source.partition_key_paths, str) else source.partition_key_paths
    monitored = create_container(database, source.monitored_container, paths, default_ttl=-1)
    leases = create_container(database, source.lease_container, ["/id"])
    return CosmosDocumentContainer(monitored), CosmosDocumentContainer(leases)


MALFORMATIONS = (
    ("MessageBody", 42),  # not a string
    ("Destination", ""),  # no topic
    ("MessageContext", "{not json"),  # unparseable context
    ("MessageContentType", None),  # with no context content type either: nothing resolvable
)


def write_orders(container: Any, orders: int, customers: int, malformed: int) -> list[dict[str, Any]]:
    """Each order and its outbox document go into one Unit of Work: one transactional batch, one partition."""
    from airflow_chatter.outbox.document import OutboxMessage
    from airflow_chatter.outbox.unit_of_work import UnitOfWork

    rng = random.Random(7)
    bad = set(rng.sample(range(orders), k=min(malformed, orders)))
    outbox: list[dict[str, Any]] = []
    for n in range(orders):
        customer = f"customer-{n % customers:02d}"
        order = {
            "id": f"order-{n:04d}",
            "customerId": customer,
            "type": "order",
            "total": round(rng.uniform(5, 500), 2),
            "status": "placed",
        }
        message = OutboxMessage(
            message_id=str(uuid.uuid4()),
            destination=TOPIC,
            body=json.dumps(
                {"event": "OrderPlaced", "orderId": order["id"], "customerId": customer, "total": order["total"]}
            ),
            content_type="application/json",
            context={"event-type": "OrderPlaced", "source": "demo"},
        )
        with UnitOfWork(container, "/customerId", customer) as unit:
            unit.create(order)
            document = unit.add_message(message)  # the staged document itself: the batch writes this dict
            if n in bad:
                # The demo corrupts a few on purpose, to show the drain stamping them undeliverable.
                field, value = MALFORMATIONS[len([b for b in bad if b < n]) % len(MALFORMATIONS)]
                if value is None:
                    document.pop(field, None)
                else:
                    document[field] = value
        outbox.append(document)
    return outbox


# ------------------------------------------------------------------------------------------------
# 4-5. Run the DAG and report.
# ------------------------------------------------------------------------------------------------


def kafka_settings(bootstrap: str) -> Any:
    from airflow_chatter.adapters.kafka.settings import KafkaSettings

    return KafkaSettings(bootstrap_servers=bootstrap, api_version=(2, 8))


def end_offsets(bootstrap: str) -> dict[int, int]:
    from kafka import KafkaConsumer, TopicPartition  # type: ignore[import-untyped]

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id="chatter-demo-offsets", api_version=(2, 8))
    try:
        partitions = [TopicPartition(TOPIC, p) for p in sorted(consumer.partitions_for_topic(TOPIC) or ())]
        return {tp.partition: offset for tp, offset in consumer.end_offsets(partitions).items()}
    finally:
        consumer.close()


def read_new_messages(bootstrap: str, since: dict[int, int], until: dict[int, int]) -> list[Any]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, client_id="chatter-demo-reader", api_version=(2, 8), enable_auto_commit=False
    )
    records: list[Any] = []
    try:
        partitions = [TopicPartition(TOPIC, p) for p in until]
        consumer.assign(partitions)
        for tp in partitions:
            consumer.seek(tp, since.get(tp.partition, 0))
        wanted = sum(until[p] - since.get(p, 0) for p in until)
        for _ in range(120):
            if len(records) >= wanted:
                break
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(r for r in batch if r.offset < until[r.partition])
    finally:
        consumer.close()
    return records


def run_dag() -> tuple[str, list[dict[str, Any]]]:
    from airflow.dag_processing.dagbag import DagBag
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    bag = DagBag(dag_folder=str(DAGS))
    if bag.import_errors:
        raise SystemExit(f"DAG import errors: {bag.import_errors}")
    run = bag.dags[DAG_ID].test()
    with create_session() as session:
        rows = session.scalars(
            select(XComModel).where(
                XComModel.dag_id == DAG_ID,
                XComModel.run_id == run.run_id,
                XComModel.task_id == "drain",
                XComModel.key == "return_value",
            )
        ).all()
        summaries = [XComModel.deserialize_value(row) for row in rows]
    return str(run.state), summaries


def short(lease_id: str) -> str:
    return lease_id if len(lease_id) < 60 else f"{lease_id[:40]}…{lease_id[-12:]}"


def report(monitored: Any, leases: Any, messages: list[Any]) -> None:
    from airflow_chatter.drain.leases import Lease
    from airflow_chatter.outbox.contract import Undeliverable, verify

    heading(f"Messages on topic {TOPIC!r}: {len(messages)}")
    for record in messages[:5]:
        headers = {k: v.decode() for k, v in record.headers}
        say(
            f"  p{record.partition}@{record.offset} key={record.key.decode() if record.key else None} "
            f"message-id={headers.get('message-id')} event-type={headers.get('event-type')} "
            f"value={record.value.decode()[:70]}"
        )
    if len(messages) > 5:
        say(f"  … and {len(messages) - 5} more")

    documents = list(monitored.query("SELECT * FROM c WHERE c._chatterType = 'outbox'"))
    by_status: dict[str, int] = {}
    for document in documents:
        by_status[document.get("status")] = by_status.get(document.get("status"), 0) + 1
    delivered = [d for d in documents if d.get("status") == "delivered"]
    heading(f"Outbox documents: {by_status}")
    ttls = sorted({d.get("ttl") for d in delivered})
    say(f"  delivered: {len(delivered)} (each stamped with ttl {ttls} s, so it purges itself)")
    undeliverable = [d for d in documents if d.get("status") == "undeliverable"]
    say(f"  undeliverable: {len(undeliverable)} (kept, never retried; fix the writer, then requeue them)")
    for document in undeliverable:
        verdict = verify(document)
        if isinstance(verdict, Undeliverable):
            say(
                f"    MessageId {document.get('MessageId')} (customer {document.get('customerId')}): "
                f"{', '.join(verdict.violations)}"
            )

    heading("Lease checkpoints")
    for raw in leases.query("SELECT * FROM c"):
        lease = Lease.from_document(raw)
        say(f"  {short(lease.id)} feed range {lease.token}")
        say(
            f"    state={lease.state} owner={lease.owner} checkpointed_at={lease.checkpointed_at} "
            f"continuation={'set' if lease.continuation else None}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", type=int, default=300)
    parser.add_argument("--customers", type=int, default=12)
    parser.add_argument("--malformed", type=int, default=8)
    parser.add_argument("--no-services", action="store_true", help="start nothing; use the environment's services")
    args = parser.parse_args(argv)

    heading("Local services")
    settings = service_settings(start=not args.no_services)
    say(f"  Kafka {settings['KAFKA_BOOTSTRAP_SERVERS']}, Cosmos DB {settings['COSMOS_ENDPOINT']}")
    configure_airflow(settings)

    import logging

    from airflow.utils import db

    logging.getLogger("kafka").setLevel(logging.ERROR)  # client chatter (reconnect notes) would drown the report

    from airflow_chatter.adapters.kafka.admin import ensure_topics
    from airflow_chatter.airflow.sources import load_sources

    source = load_sources(SOURCES_FILE).get("orders")
    heading(
        f"Containers {source.database}/{source.monitored_container} (pk {source.partition_key_paths}) "
        f"and {source.lease_container}"
    )
    monitored, leases = make_containers(source)
    ensure_topics(kafka_settings(settings["KAFKA_BOOTSTRAP_SERVERS"]), [TOPIC], partitions=3)
    outbox = write_orders(monitored, args.orders, args.customers, args.malformed)
    say(
        f"  wrote {len(outbox)} orders over {args.customers} customers, each with its outbox document in the "
        f"same transactional batch ({args.malformed} outbox documents malformed on purpose)"
    )

    heading(f"Airflow {DAG_ID} with dag.test() (AIRFLOW_HOME {DEMO_HOME})")
    db.initdb()
    before = end_offsets(settings["KAFKA_BOOTSTRAP_SERVERS"])
    state, summaries = run_dag()
    say(f"  first run: {state}; {len(summaries)} lease(s) drained")
    for summary in summaries:
        say(
            f"    published={summary['published']} delivered={summary['delivered']} "
            f"undeliverable={summary['undeliverable']} skipped={summary['skipped']} pages={summary['pages']}"
        )
    after = end_offsets(settings["KAFKA_BOOTSTRAP_SERVERS"])
    messages = read_new_messages(settings["KAFKA_BOOTSTRAP_SERVERS"], before, after)
    report(monitored, leases, messages)

    heading("Second run of the same DAG")
    state, summaries = run_dag()
    again = end_offsets(settings["KAFKA_BOOTSTRAP_SERVERS"])
    published = sum(s["published"] for s in summaries)
    new = sum(again.values()) - sum(after.values())
    say(
        f"  second run: {state}; published {published}; {new} new message(s) on the topic "
        "(everything before the checkpoints was delivered)"
    )
    ok = state == "success" and published == 0 and new == 0 and len(messages) == args.orders - args.malformed
    say()
    say("demo: OK" if ok else "demo: UNEXPECTED RESULT (see above)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""The ``airflow-chatter`` console script. One command so far:

    airflow-chatter provision --source orders [--sources-file chatter_sources.yaml]

It reads the source from the sources file (``--sources-file``, else ``$CHATTER_SOURCES_FILE``) and its Cosmos DB
connection from Airflow (``AIRFLOW_CONN_<ID>``, a secrets backend or the metadata DB: run it where Airflow is
configured), creates the lease container with the shape the drain requires if it is missing (and the source's
``ui_idempotency_container``, when it names one; and, for an ``exactly_once`` source, its compacted
``checkpoint_topic`` on Kafka), runs the drain's
start-time contract check on both containers, and prints what it did. Run it once per source; it is idempotent
(a second run reports that there is nothing to do). Exit status 0 when the source is ready to drain, 1 when it is
not (the message names every problem), 2 on a usage error.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from airflow_chatter.airflow.hooks.cosmos import ChatterCosmosHook
from airflow_chatter.airflow.hooks.kafka import ChatterKafkaHook
from airflow_chatter.airflow.sources import SOURCES_FILE_ENV, SourceConfig, load_sources
from airflow_chatter.errors import ChatterError
from airflow_chatter.ports import ContainerError


def cli_connection(conn_id: str) -> Any:
    """An Airflow connection outside a task: the SDK's lookup (env vars, secrets backends), then the metadata DB,
    which the SDK consults only inside tasks."""
    from airflow.sdk import BaseHook

    # The azure SDK logs every HTTP request and response at INFO; the report below is what this command says.
    logging.getLogger("azure").setLevel(logging.WARNING)
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        return BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        from airflow.models.connection import Connection

        return Connection.get_connection_from_secrets(conn_id)


class _CliCosmosHook(ChatterCosmosHook):
    @classmethod
    def get_connection(cls, conn_id: str) -> Any:
        return cli_connection(conn_id)


class _CliKafkaHook(ChatterKafkaHook):
    @classmethod
    def get_connection(cls, conn_id: str) -> Any:
        return cli_connection(conn_id)


def checkpoint_topic(topic: str, settings: Any) -> tuple[str, bool]:
    """Create an exactly-once source's checkpoint topic, compacted, unless it exists; then check it is compacted as
    a drain does at start. Returns the report line and whether it was created."""
    from airflow_chatter.adapters.kafka.admin import CHECKPOINT_TOPIC_CONFIGS, ensure_topics, verify_checkpoint_topic

    try:
        verify_checkpoint_topic(settings, topic)
        return f"checkpoint topic {topic!r} exists compacted: nothing to do", False
    except ChatterError as missing:
        if "does not exist" not in str(missing):
            raise  # it exists and is not compacted: an operator's decision, not ours to change
    ensure_topics(settings, [topic], partitions=3, configs=CHECKPOINT_TOPIC_CONFIGS)
    verify_checkpoint_topic(settings, topic)
    return f"created checkpoint topic {topic!r} (cleanup.policy=compact, 3 partitions)", True


def _shape(properties: Any) -> str:
    ttl = "off" if properties.default_ttl is None else properties.default_ttl
    return f"partition key {', '.join(properties.partition_key_paths)}, defaultTtl {ttl}"


def provision(config: SourceConfig, hook: ChatterCosmosHook) -> list[str]:
    """Create the lease container if missing and check both containers; return the report, one line per fact.

    Raises ``ChatterError`` (``ContainerContractError``, ``ConfigurationError``) naming what is wrong.
    """
    from airflow_chatter.adapters.cosmos.provision import LEASE_PARTITION_KEY_PATH, ensure_lease_container
    from airflow_chatter.drain.monitored_container import verify_monitored_container
    from airflow_chatter.drain.source import SourceLeases

    options = config.to_options(resolve=False)  # user callables are imported by the workers, not here
    # A command run by hand: its reads retry 429s within the connection's limits, as the receiver's do.
    monitored = hook.retrying(hook.get_container(config.monitored_container))
    # The monitored container first: if it cannot be drained, nothing is created.
    verify_monitored_container(monitored, options.partition_key_paths)
    database = hook.get_conn().get_database_client(config.database)
    lease = ensure_lease_container(database, config.lease_container)
    lines = [f"source {config.name!r}: database {config.database!r} (connection {config.cosmos_conn_id!r})"]
    if lease.created:
        lines.append(
            f"created lease container {lease.container_id!r} (partition key {LEASE_PARTITION_KEY_PATH}, no default TTL)"
        )
    # The drain's own start-time check of both containers (CNT rules, the lease container's /id and TTL), exactly
    # as a drain task runs it when it opens the source's leases.
    source = SourceLeases.open(options, monitored, hook.retrying(hook.get_container(config.lease_container)))
    if not lease.created:
        lines.append(f"lease container {lease.container_id!r} exists with the right shape: nothing to do")
    lines.append(
        f"monitored container {config.monitored_container!r} passes the start-time check ({_shape(source.properties)})"
    )
    lines.append(f"source identity {source.identity.processor_name!r}")
    created = lease.created
    if config.ui_idempotency_container is not None:
        line, made = _ui_idempotency(database, config.ui_idempotency_container)
        lines.append(line)
        created = created or made
    if options.guarantee == "exactly_once":
        line, made = checkpoint_topic(options.checkpoint_topic, _CliKafkaHook(config.kafka_conn_id).settings())
        lines.append(line)
        created = created or made
    lines.append("ready to drain" if created else "nothing to do")
    return lines


def _ui_idempotency(database: Any, container_id: str) -> tuple[str, bool]:
    """Create (or verify) the UI actions' idempotency container: ``/scope``-partitioned, ``defaultTtl -1``."""
    from airflow_chatter.adapters.cosmos.container import CosmosDocumentContainer
    from airflow_chatter.adapters.cosmos.provision import provision_idempotency_container
    from airflow_chatter.ports import NotFound

    try:
        CosmosDocumentContainer(database.get_container_client(container_id)).properties()
        existed = True
    except NotFound:
        existed = False
    provision_idempotency_container(database, container_id)  # verifies an existing one, naming every difference
    if existed:
        return f"UI idempotency container {container_id!r} exists with the right shape: nothing to do", False
    return f"created UI idempotency container {container_id!r} (partition key /scope, defaultTtl -1)", True


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="airflow-chatter", description="airflow-chatter administration commands")
    commands = parser.add_subparsers(dest="command", required=True)
    prov = commands.add_parser(
        "provision",
        help="create a source's lease container and check its containers (idempotent)",
        description="Create the lease container of a source (partitioned on /id, no default TTL) unless it exists, "
        "and run the drain's start-time check on its monitored and lease containers.",
    )
    prov.add_argument("--source", required=True, help="the source's name in the sources file")
    prov.add_argument(
        "--sources-file",
        default=os.environ.get(SOURCES_FILE_ENV),
        help=f"the sources file (default ${SOURCES_FILE_ENV})",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: ``run`` with the azure SDK's per-request HTTP logging (INFO) quieted for the whole
    process, as its background threads log after the command is done too; the report is what this command says."""
    logging.getLogger("azure").setLevel(logging.WARNING)
    return run(argv)


def run(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the command; returns the exit status (0 ready, 1 not ready, 2 usage error)."""
    args = _parser().parse_args(argv)
    if not args.sources_file:
        print(f"airflow-chatter: give --sources-file or set {SOURCES_FILE_ENV}", file=sys.stderr)
        return 2
    return _provision(args.source, args.sources_file)


def _provision(source: str, sources_file: str) -> int:
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        config = load_sources(sources_file).get(source)
        hook = _CliCosmosHook(config.cosmos_conn_id, database_name=config.database)
        lines = provision(config, hook)
    except (ChatterError, ContainerError, AirflowNotFoundException, RuntimeError) as error:
        # RuntimeError: the hook's connection failure, already cleaned of secrets.
        print(f"airflow-chatter provision: {error}", file=sys.stderr)
        return 1
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":  # pragma: no cover - python -m airflow_chatter.airflow.cli.commands
    sys.exit(main())

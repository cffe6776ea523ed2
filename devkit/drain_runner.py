"""One drain run in its own OS process, the way Airflow runs a drain task, for the fault suite.

``python -m devkit.drain_runner '<json>'`` builds a ``DrainEngine`` over the real adapters
(``CosmosDocumentContainer`` for the monitored and the lease container, ``KafkaPublisher``), drains once, and prints
one JSON line: ``{"summaries": [...], "held": [...], "error": null}``. It exits 0 whenever it could report, failing
runs included (their summaries say why): the suite reads outcomes from the report, and a process that was killed or
hung is told apart by its missing report.

The JSON object: ``endpoint``, ``key``, ``verify`` (a CA path or a boolean), ``database``, ``container``, ``leases``
(container ids), ``bootstrap``, ``source`` (the source name), ``partition_key_paths``; optional ``mode``
(``scheduled``: every lease of the set, the default; ``backfill``: every lease of ``lease_prefix`` while holding the
scheduled leases of its range, as ``ChatterBackfillOperator(exclusive_with_scheduled=True)`` does), ``lease_prefix``,
``owner``, ``max_seconds``, ``max_batch_size``, ``lease_duration_seconds``, ``stamp_mode``, ``clock_offset_seconds``
(the drain's clock runs that far ahead of the wall clock: a later run in a later Drain Suspension window without
waiting a minute for it), ``kafka`` (``KafkaSettings`` fields: the timeouts that bound a run), ``guarantee``,
``checkpoint_topic``, ``max_throttle_retries`` and ``max_throttle_wait_seconds`` (the source's fields), and
``kill_after_commit`` (a probability) with ``seed``: the kill ledger's fault hook, a SIGKILL of this process right
after a page's transaction committed, before its stamps.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from airflow_chatter.adapters.cosmos.container import CosmosDocumentContainer, make_cosmos_client
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.clock import Clock, utc_now
from airflow_chatter.drain.engine import DrainEngine
from airflow_chatter.drain.leases import LeaseHeldError
from airflow_chatter.drain.options import DEFAULT_CHECKPOINT_TOPIC, SourceOptions
from airflow_chatter.drain.summary import DrainSummary
from airflow_chatter.operations.backfill import BACKFILL_HOLD_MARGIN_SECONDS, exclusive_with
from airflow_chatter.ports import CheckpointRecord, PublishOutcome


def offset_clock(seconds: float) -> Clock:
    """UTC wall time shifted by ``seconds`` (0: the wall clock itself)."""
    if not seconds:
        return utc_now
    shift = timedelta(seconds=seconds)

    def now() -> datetime:
        return utc_now() + shift

    return now


def build(spec: Mapping[str, Any]) -> tuple[DrainEngine, KafkaPublisher]:
    client = make_cosmos_client(spec["endpoint"], spec["key"], verify=spec.get("verify", True))
    database = client.get_database_client(spec["database"])
    monitored = CosmosDocumentContainer(database.get_container_client(spec["container"]))
    leases = CosmosDocumentContainer(database.get_container_client(spec["leases"]))
    publisher = KafkaPublisher(
        KafkaSettings(bootstrap_servers=spec["bootstrap"], client_id="chatter-faults", **spec.get("kafka", {}))
    )
    options = SourceOptions(
        name=spec["source"],
        partition_key_paths=tuple(spec["partition_key_paths"]),
        max_batch_size=int(spec.get("max_batch_size", 100)),
        lease_prefix=str(spec.get("lease_prefix", "")),
        lease_duration_seconds=float(spec.get("lease_duration_seconds", 60.0)),
        stamp_mode=str(spec.get("stamp_mode", "batched")),
        guarantee=str(spec.get("guarantee", "at_least_once")),
        checkpoint_topic=str(spec.get("checkpoint_topic", DEFAULT_CHECKPOINT_TOPIC)),
        max_throttle_retries=spec.get("max_throttle_retries"),
        max_throttle_wait_seconds=spec.get("max_throttle_wait_seconds"),
    )
    if spec.get("kill_after_commit"):
        _die_after_commit(float(spec["kill_after_commit"]), random.Random(spec.get("seed")))
    engine = DrainEngine.open(
        options,
        monitored,
        leases,
        publisher,
        owner=spec.get("owner"),
        clock=offset_clock(float(spec.get("clock_offset_seconds", 0.0))),
    )
    return engine, publisher


def _die_after_commit(probability: float, rng: random.Random) -> None:
    """The kill ledger's fault hook, in this test runner only: after a page's transaction committed, SIGKILL this
    process with ``probability``, before any of the page's stamps (the moment exactly once must recover from)."""
    from airflow_chatter.adapters.kafka.transactions import KafkaLeaseTransactions

    commit = KafkaLeaseTransactions.commit

    def commit_then_maybe_die(self: KafkaLeaseTransactions, record: CheckpointRecord) -> list[PublishOutcome]:
        outcomes = commit(self, record)
        if rng.random() < probability:
            os.kill(os.getpid(), signal.SIGKILL)
        return outcomes

    KafkaLeaseTransactions.commit = commit_then_maybe_die  # type: ignore[method-assign]


def run(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Drain once as ``spec`` says; the report the process prints."""
    max_seconds = float(spec.get("max_seconds", 60.0))
    engine, publisher = build(spec)
    summaries: list[DrainSummary] = []
    held: list[dict[str, Any]] = []
    try:
        if spec.get("mode", "scheduled") == "backfill":
            for lease in engine.ensure_leases():
                try:
                    with exclusive_with(
                        engine, lease.id, other_prefix="", hold_seconds=max_seconds + BACKFILL_HOLD_MARGIN_SECONDS
                    ):
                        summaries.append(engine.drain_lease(lease.id, max_seconds=max_seconds))
                except LeaseHeldError as error:
                    held.append({"lease": lease.id, "owner": error.owner})
        else:
            summaries = engine.drain_all(max_seconds=max_seconds)
    finally:
        engine.close()
        publisher.close()
    return {"summaries": [s.to_dict() for s in summaries], "held": held, "error": None}


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        raise SystemExit("usage: python -m devkit.drain_runner '<json spec>'")
    spec = json.loads(args[0])
    try:
        report = run(spec)
    except Exception as error:  # noqa: BLE001 - reported to the suite, which judges it
        report = {"summaries": [], "held": [], "error": f"{type(error).__name__}: {error}"}
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()

"""The DAG files in dags/: they import cleanly, and a bad sources file fails at parse naming the field."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

DAGS = Path(__file__).resolve().parents[2] / "dags"


def dagbag() -> Any:
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS))


def valid(**changes: Any) -> dict[str, Any]:
    entry = {
        "name": "orders",
        "database": "shop",
        "monitored_container": "orders",
        "lease_container": "leases",
        "partition_key_paths": "/customerId",
        "pool": "chatter_cosmos",
    }
    entry.update(changes)
    return entry


def test_example_config_imports_without_errors() -> None:
    bag = dagbag()
    assert bag.import_errors == {}, bag.import_errors
    assert {"chatter_drain_orders", "chatter_backfill"} <= set(bag.dag_ids)


def test_drain_dag_shape(sources_file: Any) -> None:
    sources_file({"sources": [valid(), valid(name="payments", monitored_container="payments")]})
    bag = dagbag()
    assert bag.import_errors == {}, bag.import_errors
    dag = bag.dags["chatter_drain_payments"]
    assert dag.max_active_runs == 1, "two runs would race for the same leases"
    assert dag.catchup is False, "a drain reads the change feed; past intervals mean nothing to it"
    drain = dag.get_task("drain")
    assert drain.pool == "chatter_cosmos", "the pool caps how many drains spend Cosmos RU at once"
    assert [t.task_id for t in drain.upstream_list] == ["list_leases"]
    assert drain.expand_input.value["lease_id"].operator.task_id == "list_leases", "one drain per lease"


def test_backfill_dag_offers_a_typed_form(sources_file: Any) -> None:
    sources_file({"sources": [valid(), valid(name="payments", monitored_container="payments")]})
    dag = dagbag().dags["chatter_backfill"]
    params = dag.params
    assert params.get_param("source").schema["enum"] == ["orders", "payments"]
    assert params.get_param("start").schema["enum"] == ["beginning", "point_in_time", "resume"]
    assert params.get_param("point_in_time").schema["format"] == "date-time"
    assert params.get_param("document_budget").schema["type"] == "integer"
    assert params.get_param("dry_run").schema["type"] == "boolean"
    assert dag.schedule is None if hasattr(dag, "schedule") else True


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"max_batch_size": 5000}, "sources[0] (orders).max_batch_size"),
        ({"key_strategy": "random"}, "sources[0] (orders).key_strategy"),
        ({"body_resolver": "not a path"}, "sources[0] (orders).body_resolver"),
        ({"monitored_container": ""}, "sources[0] (orders).monitored_container"),
        ({"schedule": "sometimes"}, "sources[0] (orders).schedule"),
        ({"backfill_lease_prefix": ""}, "backfill_lease_prefix must differ from lease_prefix"),
        ({"partition_key_paths": "/status"}, "partition_key_paths"),
        ({"colour": "blue"}, "sources[0] (orders).colour"),
    ],
)
def test_bad_config_fails_at_parse_naming_the_field(sources_file: Any, change: dict[str, Any], named: str) -> None:
    sources_file({"sources": [valid(**change)]})
    errors = dagbag().import_errors
    assert errors, "an invalid sources file must be an import error, never a half-configured DAG"
    message = "\n".join(str(e) for e in errors.values())
    assert named in message, message
    assert "chatter_sources.yaml" in message, "the message names the file"


def test_missing_config_file_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from airflow_chatter.airflow.local_env import SOURCES_FILE_ENV

    monkeypatch.setenv(SOURCES_FILE_ENV, str(tmp_path / "nope.yaml"))
    message = "\n".join(str(e) for e in dagbag().import_errors.values())
    assert "nope.yaml" in message and "cannot be read" in message


@pytest.mark.parametrize(
    "conf",
    [
        {"document_budget": 0},
        {"document_budget": "lots"},
        {"source": "nope"},
        {"start": "yesterday"},
        {"dry_run": "maybe"},
        {"feed_ranges": "all"},
    ],
)
def test_backfill_params_refuse_bad_input(sources_file: Any, conf: dict[str, Any]) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    sources_file({"sources": [valid()]})
    params = copy.deepcopy(dagbag().dags["chatter_backfill"].params)
    with pytest.raises(ParamValidationError):  # what the server answers a bad trigger form with (400)
        params.update(conf)
        params.validate()

"""The DAG files in dags/: they import cleanly, and a bad sources file fails at parse naming the field."""

from __future__ import annotations

import copy
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.utils.types import DagRunType

from airflow_chatter.adapters.memory.faults import fail
from airflow_chatter.testing.handlers import first_of

DAGS = Path(__file__).resolve().parents[3] / "dags"


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
    assert {"chatter_drain_orders", "chatter_backfill", "chatter_requeue"} <= set(bag.dag_ids)


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
    assert drain.outlets == [], "a mapped drain emits no asset events: two at once race Airflow's asset creation"
    events = dag.get_task("topic_events")
    assert [t.task_id for t in events.upstream_list] == ["drain"], "asset events once, after every drain"
    assert [o.name for o in events.outlets] == ["chatter-topics-payments"], "the alias its asset events go through"
    assert events.is_teardown, "it runs after failed drains too, and a failed drain still fails the run"
    assert {t.task_id for t in dag.leaves} == {"topic_events"}


def test_backfill_dag_offers_a_typed_form(sources_file: Any) -> None:
    sources_file({"sources": [valid(), valid(name="payments", monitored_container="payments")]})
    dag = dagbag().dags["chatter_backfill"]
    params = dag.params
    assert params.get_param("source").schema["enum"] == ["orders", "payments"]
    assert params.get_param("start").schema["examples"] == ["beginning", "resume"]
    assert params.get_param("document_budget").schema["type"] == "integer"
    assert params.get_param("dry_run").schema["type"] == "boolean"
    assert "null" in params.get_param("feed_ranges").schema["type"], "the form must not mark feed_ranges required"
    assert params.get_param("source").has_value is False, "no default: an empty conf is refused naming source"
    params.update({"source": "orders"})
    assert params.validate()["dry_run"] is True, "a run that names only its source is a dry run"
    assert dag.is_paused_upon_creation is False, "a manual DAG that starts paused leaves every trigger queued"


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


def test_a_broken_entry_breaks_only_its_own_dag(sources_file: Any) -> None:
    sources_file({"sources": [valid(), valid(name="payments", monitored_container="payments", max_batch_size=5000)]})
    bag = dagbag()
    [(failed_file, message)] = bag.import_errors.items()
    assert failed_file.endswith("chatter_sources_check.py"), "reported by the DAG-less check file, not the drains"
    assert "chatter_sources.yaml: sources[1] (payments).max_batch_size" in message, message
    assert bag.dags["chatter_drain_orders"].get_task("drain"), "the good source keeps its drain DAG"
    stand_in = bag.dags["chatter_drain_payments"]
    assert stand_in.timetable.can_be_scheduled is False, "the broken source's DAG never runs on a schedule"
    assert [t.task_id for t in stand_in.tasks] == ["invalid_source_config"]
    assert "sources[1] (payments).max_batch_size" in (stand_in.description or "")
    assert bag.dags["chatter_backfill"].params.get_param("source").schema["enum"] == ["orders"]
    assert bag.dags["chatter_requeue"].params.get_param("source").schema["enum"] == ["orders"]


def test_a_second_entry_with_a_used_name_is_the_broken_one(sources_file: Any) -> None:
    sources_file({"sources": [valid(), valid(monitored_container="elsewhere")]})
    bag = dagbag()
    message = "\n".join(bag.import_errors.values())
    assert "sources[1].name 'orders' is used twice" in message, message
    assert bag.dags["chatter_drain_orders"].get_task("drain"), "the first entry keeps the name and its DAG"


def test_the_stand_in_task_fails_at_once_naming_the_problem() -> None:
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_chatter.airflow.operators.invalid import ChatterInvalidSourceOperator

    op = ChatterInvalidSourceOperator(
        task_id="invalid_source_config", path="chatter_sources.yaml", problems=["sources[1] (payments).schedule: x"]
    )
    with pytest.raises(AirflowFailException, match=r"chatter_sources.yaml: sources\[1\] \(payments\).schedule"):
        op.execute(context={})  # type: ignore[arg-type]
    manual: Any = {"dag_run": SimpleNamespace(run_type=DagRunType.MANUAL)}
    with pytest.raises(AirflowFailException, match="fix the entry"):
        op.execute(context=manual)


@pytest.mark.parametrize("run_type", ["scheduled", "asset_triggered", "backfill"])
def test_the_stand_in_task_skips_a_run_in_flight_when_the_entry_broke_instead_of_failing_it(run_type: str) -> None:
    """A scheduled run started by the real drain DAG gets the stand-in's task when the DAG is re-parsed: failing it
    reported a failure nobody triggered. It is skipped, and the skip names the problem."""
    from airflow.sdk.exceptions import AirflowSkipException

    from airflow_chatter.airflow.operators.invalid import ChatterInvalidSourceOperator

    op = ChatterInvalidSourceOperator(
        task_id="invalid_source_config", path="chatter_sources.yaml", problems=["sources[1] (payments).schedule: x"]
    )
    context: Any = {"dag_run": SimpleNamespace(run_type=DagRunType(run_type))}
    with pytest.raises(AirflowSkipException, match=r"not failing this .* run.*sources\[1\] \(payments\)"):
        op.execute(context=context)


@pytest.mark.airflow
def test_a_broken_entry_leaves_the_other_drains_schedulable_in_the_metadata_db(
    airflow_db: Any, sources_file: Any
) -> None:
    """What the DAG processor writes: Airflow marks *every* DAG of a file with an import error stale, so the error
    must come from a file that defines no drain DAG."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import BundleDagBag, sync_bag_to_db
    from airflow.models.dag import DagModel
    from airflow.models.errors import ParseImportError
    from airflow.utils.session import create_session
    from sqlalchemy import select

    from devkit.local_env import BUNDLE_NAME

    DagBundlesManager().sync_bundles_to_db()
    sources_file({"sources": [valid(), valid(name="payments", monitored_container="payments", schedule="sometimes")]})
    bag = BundleDagBag(dag_folder=str(DAGS), bundle_path=DAGS, bundle_name=BUNDLE_NAME)
    sync_bag_to_db(bag, BUNDLE_NAME, None)
    with create_session() as session:
        orders = session.scalars(select(DagModel).where(DagModel.dag_id == "chatter_drain_orders")).one()
        assert (orders.is_stale, orders.has_import_errors) == (False, False), "the good source keeps being scheduled"
        errors = {e.filename: e.stacktrace for e in session.scalars(select(ParseImportError)).all()}
    assert list(errors) == ["chatter_sources_check.py"], errors
    assert "sources[1] (payments).schedule" in errors["chatter_sources_check.py"]


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"sources": [valid()], "colour": "blue"}, "colour: Extra inputs are not permitted"),
        ({"sources": []}, "sources: List should have at least 1 item"),
        ({"sources": "orders"}, "sources: Input should be a valid list"),
    ],
)
def test_a_file_whose_top_level_is_wrong_fails_every_chatter_dag_file(
    sources_file: Any, config: dict[str, Any], named: str
) -> None:
    sources_file(config)
    errors = dagbag().import_errors
    failed = {Path(name).name for name in errors}
    assert {"chatter_drains.py", "chatter_backfill.py", "chatter_requeue.py", "chatter_sources_check.py"} <= failed
    assert all(named in message for message in errors.values()), errors


def test_missing_config_file_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from airflow_chatter.airflow.sources import SOURCES_FILE_ENV

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
        {"start": "point_in_time"},
        {"start": "2026-13-01T00:00:00Z"},
        {"start": "2026-11-29T00:00:00"},
        {"dry_run": "maybe"},
        {"feed_ranges": "all"},
    ],
)
def test_backfill_params_refuse_bad_input_naming_the_field(sources_file: Any, conf: dict[str, Any]) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    sources_file({"sources": [valid()]})
    params = copy.deepcopy(dagbag().dags["chatter_backfill"].params)
    [field] = conf
    with pytest.raises(ParamValidationError, match=f"Invalid input for param {field}"):  # the server's 400
        params.update({"source": "orders", **conf})
        params.validate()


@pytest.mark.parametrize("start", ["beginning", "resume", "2026-11-29T00:00:00Z", "2026-11-29T00:00:00.5+01:00"])
def test_backfill_start_takes_beginning_resume_or_a_utc_timestamp(sources_file: Any, start: str) -> None:
    sources_file({"sources": [valid()]})
    params = copy.deepcopy(dagbag().dags["chatter_backfill"].params)
    params.update({"source": "orders", "start": start})
    assert params.validate()["start"] == start


# -- dag.test(): what the server does when a run is created, and what the first task refuses --------------------


def _backfill_world(sources_file: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    from tests.airflow._support import PK_PATH, install_world

    sources_file({"sources": [valid(partition_key_paths=PK_PATH, pool=None)]})
    world = install_world(monkeypatch)
    world.write(tenants=2, per_tenant=3)
    return world, dagbag().dags["chatter_backfill"]


def _task_states(run: Any) -> dict[str, list[tuple[str | None, int]]]:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.scalars(
            select(TaskInstance).where(TaskInstance.dag_id == run.dag_id, TaskInstance.run_id == run.run_id)
        ).all()
        states: dict[str, list[tuple[str | None, int]]] = {}
        for ti in rows:
            states.setdefault(ti.task_id, []).append((ti.state, ti.try_number))
        return states


@pytest.mark.airflow
@pytest.mark.parametrize(
    ("conf", "field"),
    [
        ({"start": "yesterday"}, "start"),
        ({"start": "point_in_time"}, "start"),
        ({"document_budget": 0}, "document_budget"),
        ({"source": "nope"}, "source"),
    ],
)
def test_a_bad_backfill_conf_is_refused_when_the_run_is_created(
    airflow_db: Any, sources_file: Any, monkeypatch: pytest.MonkeyPatch, conf: dict[str, Any], field: str
) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    world, dag = _backfill_world(sources_file, monkeypatch)
    with pytest.raises(ParamValidationError, match=f"Invalid input for param {field}"):
        dag.test(run_conf={"source": "orders", **conf})
    assert world.statuses() == {"pending": 6} and world.publisher.sent == [], "no task ran"


@pytest.mark.airflow
def test_a_backfill_triggered_without_conf_is_refused_naming_the_source(
    airflow_db: Any, sources_file: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty conf used to dry-run the first source and succeed: a request that named nothing did something."""
    from airflow.sdk.exceptions import ParamValidationError

    world, dag = _backfill_world(sources_file, monkeypatch)
    with pytest.raises(ParamValidationError, match="Invalid input for param source"):
        dag.test()
    assert world.statuses() == {"pending": 6} and list(world.leases.query("SELECT * FROM c")) == [], "no task ran"


@pytest.mark.airflow
def test_a_backfill_naming_its_source_is_a_dry_run_by_default(
    airflow_db: Any, sources_file: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.airflow._support import xcoms

    world, dag = _backfill_world(sources_file, monkeypatch)
    run = dag.test(run_conf={"source": valid()["name"]})
    assert run.state == "success"
    [plan] = xcoms(run, "list_backfill_leases", key="plan")
    assert plan["pending"] == 6 and plan["reset"] is True
    assert world.publisher.sent == [] and world.statuses() == {"pending": 6}, "a dry run drains nothing"
    assert list(world.leases.query("SELECT * FROM c")) == [], "and creates no lease"


@pytest.mark.airflow
@pytest.mark.parametrize("conf", [{"colour": "red"}, {"dryrun": False}])
def test_an_unknown_conf_key_fails_the_first_task_at_once_and_nothing_is_drained(
    airflow_db: Any, sources_file: Any, monkeypatch: pytest.MonkeyPatch, conf: dict[str, Any]
) -> None:
    world, dag = _backfill_world(sources_file, monkeypatch)
    run = dag.test(run_conf={"source": "orders", **conf, "dry_run": False})
    assert run.state == "failed"
    states = _task_states(run)
    assert states["list_backfill_leases"] == [("failed", 1)], "failed at once: one try, no retry"
    assert all(state != "success" for state, _ in states.get("backfill_drain", []))
    assert world.publisher.sent == [] and world.statuses() == {"pending": 6}


# -- the requeue DAG ------------------------------------------------------------------------------------------


def _requeue_world(sources_file: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    from tests.airflow._support import PK_PATH, install_world

    sources_file({"sources": [valid(partition_key_paths=PK_PATH, pool=None)]})
    world = install_world(monkeypatch)
    stuck = world.write(tenants=1, per_tenant=3, status="undeliverable")
    world.write(tenants=1, per_tenant=1)
    return world, stuck, dagbag().dags["chatter_requeue"]


@pytest.mark.parametrize(
    ("conf", "field"),
    [
        ({"message_ids": "msg-1"}, "message_ids"),
        ({"message_ids": []}, "message_ids"),
        ({"message_ids": [""]}, "message_ids"),
        ({"limit": 0}, "limit"),
        ({"all_undeliverable": "yes please"}, "all_undeliverable"),
        ({"source": "nope"}, "source"),
    ],
)
def test_requeue_params_refuse_bad_input_naming_the_field(sources_file: Any, conf: dict[str, Any], field: str) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    sources_file({"sources": [valid()]})
    dag = dagbag().dags["chatter_requeue"]
    assert dag.is_paused_upon_creation is False
    params = copy.deepcopy(dag.params)
    assert params.validate()["dry_run"] is True, "a requeue nobody filled in changes nothing"
    with pytest.raises(ParamValidationError, match=f"Invalid input for param {field}"):
        params.update(conf)
        params.validate()


@pytest.mark.airflow
def test_requeue_dag_sets_the_named_messages_back_to_pending_and_dry_runs_by_default(
    airflow_db: Any, sources_file: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.airflow._support import xcoms

    world, stuck, dag = _requeue_world(sources_file, monkeypatch)
    wanted = [stuck[0]["MessageId"], stuck[1]["MessageId"]]
    dry = dag.test(run_conf={"message_ids": wanted})
    assert dry.state == "success"
    [plan] = xcoms(dry, "requeue")
    assert plan["dry_run"] is True and sorted(plan["would_requeue"]) == sorted(d["id"] for d in stuck[:2])
    assert world.statuses() == {"undeliverable": 3, "pending": 1}, "the default is a dry run"
    real = dag.test(run_conf={"message_ids": wanted, "dry_run": False})
    assert real.state == "success"
    [result] = xcoms(real, "requeue")
    assert sorted(result["requeued"]) == sorted(d["id"] for d in stuck[:2])
    assert world.statuses() == {"undeliverable": 1, "pending": 3}


@pytest.mark.airflow
def test_requeue_dag_all_undeliverable_requeues_every_one(
    airflow_db: Any, sources_file: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    world, _, dag = _requeue_world(sources_file, monkeypatch)
    run = dag.test(run_conf={"all_undeliverable": True, "dry_run": False, "message_ids": None})
    assert run.state == "success"
    assert world.statuses() == {"pending": 4}


@pytest.mark.airflow
def test_requeue_dag_without_a_selection_fails_at_once(
    airflow_db: Any, sources_file: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    world, _, dag = _requeue_world(sources_file, monkeypatch)
    run = dag.test(run_conf={"dry_run": False, "all_undeliverable": False, "message_ids": None})
    assert run.state == "failed"
    assert _task_states(run)["requeue"] == [("failed", 1)], "a refusal no retry can cure is not retried"
    assert world.statuses() == {"undeliverable": 3, "pending": 1}


# -- mapped drains: labelled by lease, one asset event per topic -----------------------------------------------


def _asset_events(run: Any) -> list[tuple[str, dict[str, Any]]]:
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(
            select(AssetModel.uri, AssetEvent.extra)
            .join(AssetModel, AssetEvent.asset_id == AssetModel.id)
            .where(AssetEvent.source_run_id == run.run_id)
            .order_by(AssetModel.uri)
        ).all()
    return [(uri, dict(extra)) for uri, extra in rows]


@pytest.mark.airflow
def test_mapped_drains_are_labelled_by_lease_and_the_run_emits_one_asset_event_per_topic(
    airflow_db: Any, sources_file: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    from tests.airflow._support import KAFKA_SERVER, PK_PATH, install_world, xcoms

    sources_file({"sources": [valid(partition_key_paths=PK_PATH, pool=None, topics={"pay.events": "payments.v1"})]})
    world = install_world(monkeypatch, feed_ranges=2)
    world.write(tenants=3, per_tenant=2)  # destination orders.events (unmapped: the topic itself)
    world.write(tenants=1, per_tenant=3, destination="pay.events")
    dag = dagbag().dags["chatter_drain_orders"]
    run = dag.test()
    assert run.state == "success"
    lease_ids = xcoms(run, "list_leases")[0]
    with create_session() as session:
        labels = session.scalars(
            select(TaskInstance.rendered_map_index).where(
                TaskInstance.run_id == run.run_id, TaskInstance.task_id == "drain"
            )
        ).all()
    assert sorted(labels) == sorted(lease_ids), "each mapped drain is shown by its lease id, not [0], [1]"
    summaries = xcoms(run, "drain")
    assert sum(s["topics"].get("orders.events", 0) for s in summaries) == 6, "each drain's XCom counts per topic"
    events = _asset_events(run)
    assert [uri for uri, _ in events] == [
        "chatter://orders/orders.events",
        "chatter://orders/payments.v1",
        f"kafka://{KAFKA_SERVER}/orders.events",
        f"kafka://{KAFKA_SERVER}/payments.v1",
    ], "one event per topic for the whole run, not one per mapped drain: the Kafka provider's asset and the old one"
    assert [extra["published"] for _, extra in events] == [6, 3, 6, 3], events
    delivering = {uri: set(extra["leases"]) for uri, extra in events}
    assert delivering[f"kafka://{KAFKA_SERVER}/orders.events"] <= set(lease_ids)
    assert delivering[f"kafka://{KAFKA_SERVER}/orders.events"] == {
        s["lease"] for s in summaries if s["topics"].get("orders.events")
    }, "each event names the leases whose drains delivered to its topic"
    assert delivering["chatter://orders/orders.events"] == delivering[f"kafka://{KAFKA_SERVER}/orders.events"]


@pytest.mark.airflow
def test_a_failed_drain_fails_the_run_and_the_messages_it_delivered_still_get_their_asset_event(
    airflow_db: Any, sources_file: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The asset events come from one task after the drains (a teardown): it runs although a drain failed, counts
    what that drain delivered before failing (in Kafka all the same), and the run is failed all the same."""
    from airflow_chatter.airflow.dags import factory
    from tests.airflow._support import KAFKA_SERVER, PK_PATH, install_world, xcoms

    monkeypatch.setitem(factory.DEFAULT_ARGS, "retries", 0)
    sources_file({"sources": [valid(partition_key_paths=PK_PATH, pool=None, max_batch_size=2)]})
    world = install_world(monkeypatch, feed_ranges=2)
    world.write(tenants=6, per_tenant=2)
    broken_range = world.monitored.read_feed_ranges()[0]
    world.monitored.handler = first_of(
        world.monitored.handler,
        fail(
            "read_change_feed",
            error=RuntimeError("the feed of this range broke"),
            when=lambda call: (
                call.arguments["feed_range"] == broken_range and call.arguments["continuation"] is not None
            ),
        ),
    )
    run = dagbag().dags["chatter_drain_orders"].test()
    assert run.state == "failed", "a failed drain fails the run, although the task after it succeeded"
    states = _task_states(run)
    assert sorted(state for state, _ in states["drain"]) == ["failed", "success"]
    assert states["topic_events"] == [("success", 1)]
    [failed] = xcoms(run, "drain", key="summary")
    assert failed["error_type"] == "RuntimeError" and failed["topics"]["orders.events"] > 0, failed
    [succeeded] = xcoms(run, "drain")
    delivered = failed["topics"]["orders.events"] + succeeded["topics"]["orders.events"]
    assert delivered == len(world.publisher.sent) < 12, "the broken range stopped part way"
    [(old_uri, old_extra), (uri, extra)] = _asset_events(run)
    assert (old_uri, uri) == ("chatter://orders/orders.events", f"kafka://{KAFKA_SERVER}/orders.events")
    assert extra["published"] == delivered, "what the failed drain delivered counts too"
    assert sorted(extra["leases"]) == sorted([failed["lease"], succeeded["lease"]])
    assert old_extra == extra, "the deprecated asset gets the same event"

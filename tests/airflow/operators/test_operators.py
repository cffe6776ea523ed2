"""Execute-level tests of the operators (no metadata DB): memory containers and a fake publisher."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_chatter.airflow.operators.drain import ChatterDrainOperator
from airflow_chatter.airflow.operators.list_leases import ChatterListLeasesOperator
from airflow_chatter.airflow.operators.requeue import ChatterRequeueUndeliverableOperator
from airflow_chatter.drain.engine import DrainEngine
from airflow_chatter.drain.leases import LeaseHeldError
from airflow_chatter.errors import ConfigurationError, ContainerContractError
from airflow_chatter.operations.engines import build_engine, open_source_leases
from airflow_chatter.testing.clock import ManualClock
from airflow_chatter.testing.fakes import unreachable
from tests.airflow._support import install_world, source


def _engine(config: Any, world: Any, **opening: Any) -> DrainEngine:
    """The engine a drain task builds for ``config`` on the world's containers, its leases opened with ``opening``."""
    return build_engine(config, open_source_leases(config, world.monitored, world.leases, **opening), world.publisher)


def list_leases(**kwargs):  # type: ignore[no-untyped-def]
    return ChatterListLeasesOperator(task_id="list_leases", source=kwargs.pop("source", source()), **kwargs)


def drain(lease_id: str, **kwargs):  # type: ignore[no-untyped-def]
    return ChatterDrainOperator(task_id="drain", source=kwargs.pop("source", source()), lease_id=lease_id, **kwargs)


def test_list_leases_creates_one_lease_per_feed_range(monkeypatch: pytest.MonkeyPatch) -> None:
    world = install_world(monkeypatch, feed_ranges=3)
    lease_ids = list_leases().execute(context={})
    assert len(lease_ids) == 3, "one lease per feed range, so each can be drained by its own mapped task"
    assert list_leases().execute(context={}) == lease_ids, "listing again creates nothing new"
    assert len(list(world.leases.query("SELECT * FROM c"))) == 3


def test_drain_publishes_stamps_and_checkpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    world = install_world(monkeypatch)
    world.write(tenants=4, per_tenant=5)
    [lease_id] = list_leases().execute(context={})
    summary = drain(lease_id).execute(context={})
    assert summary["published"] == 20 and summary["delivered"] == 20
    assert world.statuses() == {"delivered": 20}
    assert len(world.publisher.sent) == 20
    assert summary["continuation"] is not None, "the lease is checkpointed after the confirmed pages"
    again = drain(lease_id).execute(context={})
    assert again["published"] == 0, "a second drain after the checkpoint publishes nothing"


def test_a_drain_task_leaves_no_stamp_lane_or_read_ahead_thread_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    world = install_world(monkeypatch)
    world.write(tenants=8, per_tenant=3)  # several keys: the batched stamps run in lanes
    before = set(threading.enumerate())
    [lease_id] = list_leases().execute(context={})
    summary = drain(lease_id, source=source(max_batch_size=6)).execute(context={})
    assert summary["delivered"] == 24
    left = [t.name for t in threading.enumerate() if t not in before and t.name.startswith("chatter-")]
    assert left == [], "the task closed its engine: no thread it started outlives the drain"


def test_drain_respects_the_document_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    world = install_world(monkeypatch)
    world.write(tenants=1, per_tenant=30)
    [lease_id] = list_leases().execute(context={})
    summary = drain(lease_id, max_documents="10").execute(context={})
    assert summary["documents"] == 10, "a rendered template is a string; the budget still bounds the drain"
    assert summary["published"] == 10


def test_templated_budget_that_is_not_a_number_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    install_world(monkeypatch)
    with pytest.raises(AirflowFailException, match="max_documents='lots' must be an integer") as failed:
        drain("x", max_documents="lots").execute(context={})
    assert isinstance(failed.value.__cause__, ConfigurationError), "a bad option fails at once, without retries"


def test_topic_mapping_renames_destinations(monkeypatch: pytest.MonkeyPatch) -> None:
    world = install_world(monkeypatch)
    world.write(tenants=1, per_tenant=2)
    config = source(topics={"orders.events": "shop.orders.v1"})
    [lease_id] = list_leases(source=config).execute(context={})
    drain(lease_id, source=config).execute(context={})
    assert {m.topic for m in world.publisher.sent} == {"shop.orders.v1"}


def test_malformed_documents_become_undeliverable(monkeypatch: pytest.MonkeyPatch) -> None:
    world = install_world(monkeypatch)
    world.write(tenants=1, per_tenant=3)
    world.write(tenants=1, per_tenant=2, MessageBody=None)
    [lease_id] = list_leases().execute(context={})
    summary = drain(lease_id).execute(context={})
    assert summary["undeliverable"] == 2 and summary["delivered"] == 3
    assert world.statuses() == {"delivered": 3, "undeliverable": 2}


def test_failed_drain_raises_the_original_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_chatter.ports import PublishError

    world = install_world(monkeypatch)
    world.write(tenants=1, per_tenant=2)
    world.publisher.handler = unreachable(PublishError("broker down"))  # type: ignore[attr-defined]
    [lease_id] = list_leases().execute(context={})
    with pytest.raises(PublishError, match="broker down"):
        drain(lease_id).execute(context={})
    assert world.statuses() == {"pending": 2}, "nothing is stamped when nothing was confirmed"


def test_misconfigured_container_fails_listing_at_once_without_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    install_world(monkeypatch)
    with pytest.raises(AirflowFailException, match="ContainerContractError: .*partition-key path") as failed:
        list_leases(source=source(partition_key_paths="/customer")).execute(context={})
    assert isinstance(failed.value.__cause__, ContainerContractError), "the refusal is kept as the cause"


def test_a_drain_of_a_misconfigured_container_fails_at_once_without_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    world = install_world(monkeypatch)
    world.write(tenants=1, per_tenant=2)
    [lease_id] = list_leases().execute(context={})
    with pytest.raises(AirflowFailException, match="ContainerContractError: .*partition-key path"):
        drain(lease_id, source=source(partition_key_paths="/customer")).execute(context={})
    assert world.statuses() == {"pending": 2}
    assert world.publisher.sent == []


def test_a_transient_metadata_read_failure_is_retried_not_failed_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_chatter.ports import Throttled

    world = install_world(monkeypatch)
    [lease_id] = list_leases().execute(context={})

    def throttled() -> Any:
        raise Throttled("429 request rate is large", retry_after_ms=100)

    monkeypatch.setattr(world.monitored, "properties", throttled)
    with pytest.raises(ContainerContractError, match="metadata could not be read") as raised:
        drain(lease_id).execute(context={})
    assert not isinstance(raised.value, AirflowFailException), "Airflow retries it: the next try may pass"


def _sdk_logs_every_read(world: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake what azure-cosmos does on every request: an INFO line of headers on its HTTP logging policy's loggers."""
    read = world.monitored.read_change_feed

    def logging_read(*args: Any, **kwargs: Any) -> Any:
        logging.getLogger("azure.core.pipeline.policies.http_logging_policy").info("Request headers: 'x-ms-date'")
        logging.getLogger("azure.cosmos._cosmos_http_logging_policy").info("Response headers: 'x-ms-etag'")
        return read(*args, **kwargs)

    monkeypatch.setattr(world.monitored, "read_change_feed", logging_read)


def _task_log(caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The task log's lines since the last call: stdlib records (the engine's, the SDK's) and the operator's own
    lines (Airflow's task logger, written to stdout here)."""
    lines = [record.getMessage() for record in caplog.records]
    lines += [line for line in capsys.readouterr().out.splitlines() if "[airflow.task." in line]
    caplog.clear()
    return lines


def test_the_sdk_http_header_lines_stay_out_of_the_task_log_and_the_summary_is_logged_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    world = install_world(monkeypatch)
    world.write(tenants=2, per_tenant=3)
    [lease_id] = list_leases().execute(context={})
    _sdk_logs_every_read(world, monkeypatch)
    caplog.set_level(logging.INFO)
    _task_log(caplog, capsys)
    drain(lease_id).execute(context={})
    lines = _task_log(caplog, capsys)
    assert not [line for line in lines if "headers" in line], "the SDK's per-request header dumps are quiet by default"
    summaries = [line for line in lines if "drain lease=" in line]
    assert len(summaries) == 1 and "published=6" in summaries[0], lines
    assert logging.getLogger("azure.cosmos").level == logging.NOTSET, "the levels are restored after the task"


def test_cosmos_http_logging_true_brings_the_sdk_lines_back(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    world = install_world(monkeypatch)
    world.write(tenants=1, per_tenant=1)
    [lease_id] = list_leases().execute(context={})
    _sdk_logs_every_read(world, monkeypatch)
    caplog.set_level(logging.INFO)
    _task_log(caplog, capsys)
    drain(lease_id, source=source(cosmos_http_logging=True)).execute(context={})
    assert [line for line in _task_log(caplog, capsys) if "Request headers" in line]


def test_a_lease_held_elsewhere_logs_its_summary_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    world = install_world(monkeypatch)
    [lease_id] = list_leases().execute(context={})
    other = _engine(source(), world, owner="someone-else")
    other.store.acquire(lease_id)
    caplog.set_level(logging.INFO)
    _task_log(caplog, capsys)
    summary = drain(lease_id).execute(context={})
    assert summary["lease_held_by"] == "someone-else"
    assert len([line for line in _task_log(caplog, capsys) if "drain lease=" in line]) == 1


def test_backfill_and_scheduled_drain_never_own_a_range_together(monkeypatch: pytest.MonkeyPatch) -> None:
    world = install_world(monkeypatch)
    world.write(tenants=1, per_tenant=3)
    config = source()
    [scheduled] = list_leases(source=config).execute(context={})
    [backfill] = list_leases(source=config, lease_set="backfill").execute(context={})
    assert scheduled != backfill, "the backfill has its own leases, so scheduled checkpoints are untouched"

    from airflow_chatter.operations.backfill import exclusive_with

    engine = _engine(config, world, lease_prefix="backfill-", owner="bf")
    with exclusive_with(engine, backfill, other_prefix="", hold_seconds=120):
        summary = drain(scheduled, source=config).execute(context={})
        assert summary["lease_held_by"] == "bf", "the scheduled drain leaves a range the backfill holds alone"
        assert summary["published"] == 0

    other = _engine(config, world, lease_prefix="", owner="sched")
    other.store.acquire(scheduled)  # the scheduled drain is running now
    with pytest.raises(LeaseHeldError):
        drain(backfill, source=config, lease_set="backfill", exclusive_with_scheduled=True).execute(context={})
    assert world.statuses() == {"pending": 3}


def test_f04_backfill_after_a_merge_holds_every_scheduled_lease_inside_its_range(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # F-04 + merges: the scheduled set drains a merged range through the leases of its two parts; the backfill,
    # which had no leases yet, gets one lease for the merged range. Holding it off must hold both parts.
    world = install_world(monkeypatch, feed_ranges=2)
    world.write(tenants=4, per_tenant=2)
    config = source()
    parts = list_leases(source=config).execute(context={})
    assert len(parts) == 2
    left, right = world.monitored.read_feed_ranges()
    world.monitored.merge_feed_ranges(left, right)
    assert sorted(list_leases(source=config).execute(context={})) == sorted(parts), "the parts carry on"
    [backfill] = list_leases(source=config, lease_set="backfill").execute(context={})

    from airflow_chatter.operations.backfill import exclusive_with

    engine = _engine(config, world, lease_prefix="backfill-", owner="bf")
    with exclusive_with(engine, backfill, other_prefix="", hold_seconds=120) as held:
        assert sorted(lease.id for lease in held) == sorted(parts)
        for part in parts:
            summary = drain(part, source=config).execute(context={})
            assert (summary["lease_held_by"], summary["published"]) == ("bf", 0)
    assert world.statuses() == {"pending": 8}

    other = _engine(config, world, lease_prefix="", owner="sched")
    other.store.acquire(parts[1])  # the scheduled drain of one part is running now
    with pytest.raises(LeaseHeldError):
        drain(backfill, source=config, lease_set="backfill", exclusive_with_scheduled=True).execute(context={})
    first = other.store.get(parts[0])
    assert first.owner is None, "the part taken before the refusal was released again"
    assert world.statuses() == {"pending": 8}


def test_f04_backfill_after_a_split_holds_the_scheduled_children_not_the_retired_parent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = install_world(monkeypatch)
    world.write(tenants=4, per_tenant=2)
    config = source()
    [scheduled] = list_leases(source=config).execute(context={})
    [backfill] = list_leases(source=config, lease_set="backfill").execute(context={})
    (whole,) = world.monitored.read_feed_ranges()
    world.monitored.split_feed_range(whole)  # after both listings: neither set has seen the split yet

    from airflow_chatter.operations.backfill import exclusive_with

    engine = _engine(config, world, lease_prefix="backfill-", owner="bf")
    with exclusive_with(engine, backfill, other_prefix="", hold_seconds=120) as held:
        children = list_leases(source=config).execute(context={})
        assert len(children) == 2 and scheduled not in children
        assert sorted(lease.id for lease in held) == sorted(children), "the children the scheduled set drains"
        for child in children:
            assert drain(child, source=config).execute(context={})["lease_held_by"] == "bf"
    assert world.statuses() == {"pending": 8}


def test_f04_backfill_holds_a_scheduled_lease_that_reaches_across_the_edge_of_its_range(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The backfill set listed [0, 1/2) and [1/2, 1). Then [1/4, 1/2) and [1/2, 1) merged and split again at 5/8, and
    # only then did the scheduled set list: its [1/4, 5/8) shares [1/2, 5/8) with the backfill's [1/2, 1) without
    # either containing the other. Both drains would publish that part: holding it off must hold that lease too.
    world = install_world(monkeypatch, feed_ranges=2)
    world.write(tenants=8, per_tenant=1)
    config = source()
    backfill_leases = list_leases(source=config, lease_set="backfill").execute(context={})
    left, right = world.monitored.read_feed_ranges()
    _, mid_left = world.monitored.split_feed_range(left)
    near, far = world.monitored.split_feed_range(world.monitored.merge_feed_ranges(mid_left, right))
    scheduled = list_leases(source=config).execute(context={})
    assert len(scheduled) == 3

    from airflow_chatter.operations.backfill import exclusive_with

    engine = _engine(config, world, lease_prefix="backfill-", owner="bf")
    [backfill_right] = [i for i in backfill_leases if engine.store.get(i).feed_range == right]
    other = _engine(config, world, lease_prefix="", owner="sched")
    expected = sorted(other.store.lease_id(r) for r in (near, far))
    with exclusive_with(engine, backfill_right, other_prefix="", hold_seconds=120) as held:
        assert sorted(lease.id for lease in held) == expected, "the lease across the edge is held too"


def test_backfill_reset_is_refused_for_the_scheduled_lease_set(monkeypatch: pytest.MonkeyPatch) -> None:
    install_world(monkeypatch)
    with pytest.raises(AirflowFailException, match="reset"):
        list_leases(reset=True).execute(context={})


def test_backfill_from_the_beginning_redrains_only_pending(monkeypatch: pytest.MonkeyPatch) -> None:
    world = install_world(monkeypatch)
    world.write(tenants=2, per_tenant=3)
    [scheduled] = list_leases().execute(context={})
    drain(scheduled).execute(context={})
    world.write(tenants=1, per_tenant=2)  # pending again, after the scheduled checkpoint
    [backfill] = list_leases(lease_set="backfill", reset=True).execute(context={})
    summary = drain(backfill, lease_set="backfill", exclusive_with_scheduled=True).execute(context={})
    assert summary["published"] == 2, "delivered documents are skipped; only the pending ones go out again"
    assert summary["skipped"] >= 6


def test_dry_run_lists_and_creates_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    world = install_world(monkeypatch)
    world.write(tenants=2, per_tenant=2)
    assert list_leases(lease_set="backfill", plan_only="True").execute(context={}) == []
    assert list(world.leases.query("SELECT * FROM c")) == [], "a dry run writes no lease"


def test_requeue_by_id_logs_who_and_what(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    world = install_world(monkeypatch)
    bad = world.write(tenants=1, per_tenant=2, MessageBody=None)
    [lease_id] = list_leases().execute(context={})
    drain(lease_id).execute(context={})
    assert world.statuses() == {"undeliverable": 2}
    operator = ChatterRequeueUndeliverableOperator(
        task_id="requeue", source=source(), document_ids=bad[0]["id"], requested_by="alice"
    )
    capsys.readouterr()
    result = operator.execute(context={})
    assert result["requeued"] == [bad[0]["id"]]
    assert world.statuses() == {"undeliverable": 1, "pending": 1}
    task_log = capsys.readouterr().out  # the operator logs through Airflow's structlog task logger
    assert "alice requeued 1 undeliverable" in task_log and bad[0]["id"] in task_log, "who and what are logged"


def test_requeue_needs_a_selection(monkeypatch: pytest.MonkeyPatch) -> None:
    install_world(monkeypatch)
    with pytest.raises(AirflowFailException, match="select documents by message id"):
        ChatterRequeueUndeliverableOperator(task_id="requeue", source=source()).execute(context={})


def test_list_leases_hands_out_split_children_that_resume_from_the_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    world = install_world(monkeypatch)
    world.write(tenants=8, per_tenant=2)
    [parent] = list_leases().execute(context={})
    first = drain(parent).execute(context={})
    assert first["published"] == 16
    [feed_range] = world.monitored.read_feed_ranges()
    world.monitored.split_feed_range(feed_range)  # a partition split: the parent range is gone (410)
    world.write(tenants=8, per_tenant=1)
    children = list_leases().execute(context={})
    assert len(children) == 2 and parent not in children, "the next run maps one drain per child range"
    published = sum(drain(child).execute(context={})["published"] for child in children)
    assert published == 8, "children resume from the parent's checkpoint: nothing skipped, nothing republished"
    assert world.statuses() == {"delivered": 24}


class RecordingTI:
    """Just enough of a TaskInstance for ``xcom_push`` (the dry-run plan)."""

    def __init__(self) -> None:
        self.xcom: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[key] = value


def _pending_before_and_after(monkeypatch: pytest.MonkeyPatch) -> tuple[Any, str]:
    """3 pending documents an hour before the point in time, 4 at or after it; returns (world, point in time)."""
    clock = ManualClock(datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC))
    world = install_world(monkeypatch, clock=clock)
    world.write(tenants=1, per_tenant=3)
    clock.now += timedelta(hours=1)
    point_in_time = clock.now.isoformat().replace("+00:00", "Z")  # as the trigger form sends it
    world.write(tenants=2, per_tenant=2)
    clock.now += timedelta(minutes=1)
    return world, point_in_time


def test_backfill_from_a_point_in_time_publishes_only_documents_written_since(monkeypatch: pytest.MonkeyPatch) -> None:
    world, point_in_time = _pending_before_and_after(monkeypatch)
    ti = RecordingTI()
    dry = list_leases(lease_set="backfill", reset=True, plan_only=True, since=point_in_time)
    assert dry.execute(context={"ti": ti}) == []
    assert ti.xcom["plan"]["pending"] == 4, "the dry run counts what the backfill will publish"
    [backfill] = list_leases(lease_set="backfill", reset=True, since=point_in_time).execute(context={})
    lease = world.leases.read(backfill, backfill)
    assert lease["start_from"] == "2026-11-29T13:00:00+00:00" and lease["continuation"] is None
    summary = drain(backfill, lease_set="backfill", exclusive_with_scheduled=True).execute(context={})
    assert summary["published"] == 4 and world.statuses() == {"pending": 3, "delivered": 4}
    assert summary["skipped"] == 4, "only the delivered stamps are re-read: nothing before the point in time is read"


def test_resuming_a_point_in_time_backfill_keeps_its_start(monkeypatch: pytest.MonkeyPatch) -> None:
    world, point_in_time = _pending_before_and_after(monkeypatch)
    list_leases(lease_set="backfill", reset=True, since=point_in_time).execute(context={})
    [backfill] = list_leases(lease_set="backfill").execute(context={})  # start: resume (no point in time, no reset)
    summary = drain(backfill, lease_set="backfill", exclusive_with_scheduled=True).execute(context={})
    assert summary["published"] == 4, "the start is on the lease, so a resumed backfill still starts there"
    assert world.statuses() == {"pending": 3, "delivered": 4}


def test_backfill_from_the_beginning_after_a_point_in_time_reads_everything_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world, point_in_time = _pending_before_and_after(monkeypatch)
    [backfill] = list_leases(lease_set="backfill", reset=True, since=point_in_time).execute(context={})
    drain(backfill, lease_set="backfill", exclusive_with_scheduled=True).execute(context={})
    [again] = list_leases(lease_set="backfill", reset=True, since="beginning").execute(context={})
    assert world.leases.read(again, again)["start_from"] is None, "the reset dropped the point in time"
    summary = drain(again, lease_set="backfill", exclusive_with_scheduled=True).execute(context={})
    assert summary["published"] == 3 and world.statuses() == {"delivered": 7}


def test_a_start_time_is_refused_for_the_scheduled_lease_set(monkeypatch: pytest.MonkeyPatch) -> None:
    world = install_world(monkeypatch)
    with pytest.raises(AirflowFailException, match="since"):
        list_leases(since="2026-11-29T00:00:00Z").execute(context={})
    assert list(world.leases.query("SELECT * FROM c")) == [], "no scheduled lease may start late (RLY-08)"


def test_backfill_point_in_time_that_is_not_a_timestamp_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    install_world(monkeypatch)
    with pytest.raises(AirflowFailException, match="since"):
        list_leases(lease_set="backfill", reset=True, since="missing: point_in_time is required").execute(context={})


def test_a_run_conf_key_that_is_no_parameter_is_named_and_fails_before_any_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from types import SimpleNamespace

    world = install_world(monkeypatch)
    op = list_leases(allowed_conf=["dry_run", "source"])
    context: Any = {"dag_run": SimpleNamespace(conf={"dryrun": True, "source": "orders"})}
    with pytest.raises(AirflowFailException, match=r"conf=\['dryrun'\] names no parameter of this DAG"):
        op.execute(context=context)
    assert list(world.leases.query("SELECT * FROM c")) == [], "refused before the containers were touched"
    assert list_leases(allowed_conf=["dry_run", "source"]).execute(
        context={"dag_run": SimpleNamespace(conf={"dry_run": True})}  # type: ignore[typeddict-item]
    )


def test_a_following_drain_stops_at_the_page_boundary_on_kill_and_releases_its_lease(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = install_world(monkeypatch)
    world.write(tenants=1, per_tenant=5)
    [lease_id] = list_leases().execute(context={})
    task = drain(lease_id, source=source(follow=True, follow_poll_seconds=0.05))
    send = world.publisher.send_batch

    def send_then_sigterm(messages: Any) -> Any:
        task.on_kill()  # what Airflow's SIGTERM handler calls, mid-page
        return send(messages)

    monkeypatch.setattr(world.publisher, "send_batch", send_then_sigterm)
    summary = task.execute(context={})
    assert summary["published"] == 5 and summary["delivered"] == 5, "the page in hand is finished"
    assert summary["empty_polls"] == 0, "stopped at that page boundary instead of following"
    [lease] = list(world.leases.query("SELECT * FROM c"))
    assert lease["owner"] is None, "released, so the next run takes over at once"
    assert world.statuses() == {"delivered": 5}


def test_a_following_drain_polls_until_its_seconds_run_out(monkeypatch: pytest.MonkeyPatch) -> None:
    world = install_world(monkeypatch)
    world.write(tenants=1, per_tenant=2)
    [lease_id] = list_leases().execute(context={})
    summary = drain(lease_id, source=source(follow=True, follow_poll_seconds=0.05), max_seconds="0.5").execute(
        context={}
    )
    assert summary["delivered"] == 2
    assert summary["empty_polls"] >= 1 and summary["last_poll_at"] is not None


class _TryTI(RecordingTI):
    """A task instance of one mapped drain task, at try ``try_number``."""

    dag_id, run_id, task_id, map_index = "chatter_drain_orders", "scheduled__1", "drain", 0

    def __init__(self, try_number: int) -> None:
        super().__init__()
        self.try_number = try_number


def test_every_try_counts_the_last_trys_xcom_carries_the_earlier_tries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Airflow clears a task's XCom when a new try starts: the try that failed after publishing is kept on the
    lease, and the next try's summary (the one the page reads) reports it."""
    from airflow_chatter.adapters.memory.faults import fail
    from airflow_chatter.ports import ServiceUnavailable

    world = install_world(monkeypatch)
    world.write(tenants=1, per_tenant=2)
    [lease_id] = list_leases().execute(context={})
    world.monitored.handler = fail("*", error=ServiceUnavailable("stamp down"), when=_is_stamp)
    first = _TryTI(1)
    with pytest.raises(ServiceUnavailable):
        drain(lease_id).execute(context={"ti": first})
    world.monitored.handler = None  # the stamps work again for the retry
    assert first.xcom["summary"]["published"] == 2 and first.xcom["summary"]["earlier_tries"] == []
    second = drain(lease_id).execute(context={"ti": _TryTI(2)})
    assert len(world.publisher.sent) == 4, "the second try published both documents again"
    (earlier,) = second["earlier_tries"]
    assert (earlier["try"], earlier["published"], earlier["confirmation_failures"]) == (1, 2, 1), earlier
    assert earlier["error_type"] == "ServiceUnavailable"
    assert second["published"] + earlier["published"] == len(world.publisher.sent)


def _is_stamp(call: Any) -> bool:
    return call.operation in ("patch", "execute_batch")

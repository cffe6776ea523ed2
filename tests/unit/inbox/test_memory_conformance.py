"""The downstream conformance suite against ``MemoryDocumentContainer``, plus what only the in-memory double shows
(request counts and injected faults)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import pytest

from airflow_chatter.adapters.memory.container import MemoryDocumentContainer
from airflow_chatter.adapters.memory.faults import fail
from airflow_chatter.inbox.errors import ClaimInFlightError, MarkerNotFoundError
from airflow_chatter.inbox.gate import Inbox, InboxOptions
from airflow_chatter.inbox.markers import marker_id
from airflow_chatter.outbox.unit_of_work import UnitOfWork
from airflow_chatter.ports import (
    Conflict,
    ContainerError,
    DocumentContainer,
    NotFound,
    PreconditionFailed,
    ServiceUnavailable,
    Throttled,
)
from airflow_chatter.testing.clock import ManualClock
from airflow_chatter.testing.contracts.inbox import InboxContract
from airflow_chatter.testing.handlers import first_of


class TestMemoryInbox(InboxContract):
    def make_container(self, partition_key_paths: Sequence[str], default_ttl: int | None = None) -> DocumentContainer:
        return MemoryDocumentContainer(partition_key_paths=tuple(partition_key_paths), default_ttl=default_ttl)


def test_dtw_03_nothing_staged_makes_no_request() -> None:
    container = MemoryDocumentContainer(partition_key_paths=("/tenantId",))
    UnitOfWork(container, "/tenantId", "t1").commit()
    assert container.calls["execute_batch"] == 0, "no execute call when nothing was staged"


def test_inb_02_a_fresh_claim_makes_one_create_and_one_patch_and_no_read() -> None:
    container = MemoryDocumentContainer(partition_key_paths=("/idempotencyKey",))
    Inbox(container).handle("msg-1", lambda: None)
    assert (container.calls["create"], container.calls["patch"], container.calls["read"]) == (1, 1, 0)


def test_inb_03_a_failed_completion_raises_and_leaves_the_marker_pending() -> None:
    container = MemoryDocumentContainer(partition_key_paths=("/idempotencyKey",))
    container.handler = first_of(container.handler, fail("patch", error=ServiceUnavailable("down")))
    runs: list[int] = []
    with pytest.raises(ServiceUnavailable):
        Inbox(container).handle("msg-1", lambda: runs.append(1))
    assert runs == [1]
    assert container.read(marker_id("msg-1"), "msg-1")["Completed"] is False


def test_inb_05_a_409_then_only_404s_reads_the_budget_waits_between_and_raises() -> None:
    container = MemoryDocumentContainer(partition_key_paths=("/idempotencyKey",))
    container.handler = first_of(container.handler, fail("create", error=Conflict("exists")))
    container.handler = first_of(container.handler, fail("read", error=NotFound("gone")))
    waits: list[float] = []
    inbox = Inbox(container, InboxOptions(read_back_max_attempts=3), sleep=waits.append)
    with pytest.raises(MarkerNotFoundError, match="not found in 3 read"):
        inbox.begin("msg-1")
    assert (container.calls["read"], waits) == (3, [0.05, 0.05]), "3 reads, 2 waits, none after the last"


@pytest.mark.parametrize(
    "error",
    [Throttled("429 request rate is large", retry_after_ms=10), ServiceUnavailable("503"), ContainerError("500")],
    ids=["429", "503", "500"],
)
def test_inb_06_a_marker_create_failing_with_429_503_or_500_raises_and_the_handler_does_not_run(
    error: ContainerError,
) -> None:
    container = MemoryDocumentContainer(partition_key_paths=("/idempotencyKey",))
    container.handler = first_of(container.handler, fail("create", error=error))
    runs: list[int] = []
    with pytest.raises(type(error)):
        Inbox(container).handle("msg-1", lambda: runs.append(1))
    assert runs == [], "the handler does not run when the claim could not be written"
    assert container.calls["read"] == 0, "not taken for a duplicate (no read-back as after a 409)"
    with pytest.raises(NotFound):
        container.read(marker_id("msg-1"), "msg-1")


def test_inb_04c_a_failing_confirm_read_raises_and_the_work_does_not_run() -> None:
    container = MemoryDocumentContainer(partition_key_paths=("/idempotencyKey",))
    container.handler = first_of(container.handler, fail("create", error=Conflict("exists")))
    container.handler = first_of(container.handler, fail("read", error=ServiceUnavailable("503")))
    runs: list[int] = []
    with pytest.raises(ServiceUnavailable):
        Inbox(container).handle("msg-1", lambda: runs.append(1))
    assert runs == []


def test_inb_13_options_are_validated_naming_the_field() -> None:
    with pytest.raises(ValueError, match="partition_key_path='/a/b' must be exactly one"):
        InboxOptions(partition_key_path="/a/b")
    with pytest.raises(ValueError, match="read_back_max_attempts=0 must be at least 1"):
        InboxOptions(read_back_max_attempts=0)
    with pytest.raises(ValueError, match="read_back_interval=.* must not be negative"):
        InboxOptions(read_back_interval=timedelta(seconds=-1))
    with pytest.raises(ValueError, match="cannot be /ttl"):
        InboxOptions(partition_key_path="/ttl", marker_ttl=timedelta(days=1))


def test_two_late_comers_take_over_an_expired_claim_only_once() -> None:
    container = MemoryDocumentContainer(partition_key_paths=("/idempotencyKey",))
    clock = ManualClock()
    inbox = Inbox(container, InboxOptions(claim_lease=timedelta(seconds=5)), clock=clock)
    inbox.begin("msg-1")
    clock.advance(6)
    first = inbox.begin("msg-1")
    assert first.decision.value == "taken_over"
    with pytest.raises(ClaimInFlightError, match="claimed by another attempt"):
        inbox.begin("msg-1")  # the take-over renewed the lease


def test_inb_12_of_two_late_comers_racing_for_one_expired_claim_exactly_one_takes_it_over() -> None:
    """Both read the expired claim; the competitor's take-over lands between the other's read and its ETag-conditional
    replace, so that replace fails with 412 and the loser decides again on what is there now: a live claim."""
    container = MemoryDocumentContainer(partition_key_paths=("/idempotencyKey",))
    clock = ManualClock()
    options = InboxOptions(claim_lease=timedelta(seconds=5))
    Inbox(container, options, clock=clock).begin("msg-1")
    clock.advance(6)
    winners: list[str] = []

    def competitor_takes_over_first(call: object) -> BaseException:
        winners.append(Inbox(container, options, clock=clock).begin("msg-1").decision.value)
        return PreconditionFailed("the competitor's take-over changed the ETag")

    container.handler = first_of(container.handler, fail("replace", on_call=1, error=competitor_takes_over_first))
    with pytest.raises(ClaimInFlightError, match="claimed by another attempt"):
        Inbox(container, options, clock=clock).begin("msg-1")
    assert winners == ["taken_over"], "exactly one late comer took the claim over"


def test_the_inbox_marker_vector_matches_the_contract() -> None:
    assert marker_id("msg-1") == "inbox:bXNnLTE"
    assert marker_id("msg-1", "g") == "inbox:Zw.bXNnLTE"


def test_dtw_06_a_send_after_the_unit_of_work_committed_is_refused_never_an_orphan_outbox_write() -> None:
    """Section F (DTW): there is no broker route beside the outbox, so a late send raises instead of being
    written on its own outside the committed batch."""
    from airflow_chatter.outbox.document import OutboxMessage
    from airflow_chatter.outbox.unit_of_work import UnitOfWorkClosedError

    container = MemoryDocumentContainer(partition_key_paths=("/tenantId",))
    unit = UnitOfWork(container, "/tenantId", "t1")
    unit.add_message(OutboxMessage("m-1", "orders", "{}", "application/json", {}))
    unit.commit()
    with pytest.raises(UnitOfWorkClosedError, match="already committed"):
        unit.add_message(OutboxMessage("m-2", "orders", "{}", "application/json", {}))
    ids = [row["id"] for row in container.query("SELECT * FROM c")]
    assert len(ids) == 1, f"only the committed message is written: {ids}"
    assert container.calls["execute_batch"] == 1 and container.calls["create"] == 0

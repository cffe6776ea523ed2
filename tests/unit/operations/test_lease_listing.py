"""Listing a source's leases (``operations.plans.list_leases``): what it refuses, naming the field, before anything
is read or written, what a dry run plans, and what a real listing creates and chooses."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from airflow_chatter.adapters.memory.container import MemoryDocumentContainer
from airflow_chatter.drain.options import SourceOptions
from airflow_chatter.drain.source import SourceLeases
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.operations.plans import LeaseRequest, list_leases
from airflow_chatter.testing.clock import ManualClock
from tests.unit.drain._drain_support import T0, memory_container, outbox_doc

BACKFILL = LeaseRequest(source="orders", lease_prefix="backfill-", scheduled=False)
SCHEDULED = LeaseRequest(source="orders", lease_prefix="", scheduled=True)


class Rig:
    """A monitored container with two feed ranges and three pending documents, an empty lease container, and a
    count of how often the listing opened the lease set."""

    def __init__(self) -> None:
        self.clock = ManualClock(T0)
        self.monitored = memory_container(self.clock)
        self.monitored.split_feed_range(self.monitored.read_feed_ranges()[0])
        for tenant in ("a", "b", "c"):
            document = outbox_doc(tenant=tenant)
            self.monitored.create(document, [tenant])
        self.leases: MemoryDocumentContainer = memory_container(self.clock, paths=("/id",), container_id="leases")
        self.opened = 0

    def open_source(self, prefix: str = "backfill-") -> SourceLeases:
        self.opened += 1
        options = SourceOptions("orders", partition_key_paths=("/tenantId",), lease_prefix=prefix)
        return SourceLeases.open(options, self.monitored, self.leases, clock=self.clock, owner="test")

    def run(self, request: LeaseRequest):  # type: ignore[no-untyped-def]
        return list_leases(
            request,
            monitored=self.monitored,
            open_source=lambda: self.open_source(request.lease_prefix),
            now=self.clock.now,
        )

    def lease_ids(self) -> list[str]:
        return sorted(d["id"] for d in self.leases.query("SELECT * FROM c"))

    def requests(self) -> int:
        return sum(self.monitored.calls.values()) + sum(self.leases.calls.values())


@pytest.mark.parametrize("plan_only", [False, True])
@pytest.mark.parametrize(
    ("field", "change"),
    [("since", {"since": T0 - timedelta(hours=1)}), ("reset", {"reset": True})],
)
def test_rly08_the_scheduled_lease_set_is_never_started_late_nor_reset_in_a_dry_run_either(
    plan_only: bool, field: str, change: dict[str, object]
) -> None:
    """RLY-08: the scheduled lease set's leases start at the beginning, and its checkpoints are the drain's
    progress: a start time or a reset is refused naming the field, in a dry run as in a real one, before any read."""
    rig = Rig()
    before = rig.requests()
    with pytest.raises(ConfigurationError, match=rf"^{field}=.* is refused for the scheduled lease set") as refused:
        rig.run(replace(SCHEDULED, plan_only=plan_only, **change))  # type: ignore[arg-type]
    assert refused.value.option == field
    assert rig.requests() == before and rig.opened == 0, "refused before any container was read or written"


@pytest.mark.parametrize("plan_only", [False, True])
def test_a_start_in_the_future_is_refused_naming_since_before_any_read(plan_only: bool) -> None:
    rig = Rig()
    before = rig.requests()
    with pytest.raises(ConfigurationError, match=r"^since=.*is in the future"):
        rig.run(replace(BACKFILL, since=T0 + timedelta(minutes=1), plan_only=plan_only))
    assert rig.requests() == before and rig.opened == 0, "a start that reads nothing costs no request"


def test_a_dry_run_plans_from_the_monitored_container_and_writes_no_lease() -> None:
    rig = Rig()
    [first, _] = [r.token for r in rig.monitored.read_feed_ranges()]
    listing = rig.run(replace(BACKFILL, plan_only=True, reset=True, feed_ranges=frozenset({first})))
    assert listing.leases == () and listing.plan == {
        "source": "orders",
        "lease_prefix": "backfill-",
        "feed_ranges": [first],
        "pending": 3,
        "since": None,
        "reset": True,
    }, "the plan names the chosen range and counts what the backfill would publish"
    assert rig.lease_ids() == [] and rig.opened == 0, "a dry run naming known ranges opens and writes nothing"


def test_an_unknown_feed_range_is_refused_before_the_reset_deletes_anything() -> None:
    rig = Rig()
    created = rig.run(BACKFILL)
    assert len(created.leases) == 2
    with pytest.raises(ConfigurationError, match=r"^feed_ranges=\['typo'\] match no feed range"):
        rig.run(replace(BACKFILL, reset=True, feed_ranges=frozenset({created.leases[0].token, "typo"})))
    assert rig.lease_ids() == sorted(lease.id for lease in created.leases), "the reset did not run"


def test_a_listing_chooses_leases_by_token_or_by_id_and_reports_what_a_reset_deleted() -> None:
    rig = Rig()
    first, second = rig.run(BACKFILL).leases
    by_id = rig.run(replace(BACKFILL, feed_ranges=frozenset({first.id}), reset=True))
    assert [lease.id for lease in by_id.leases] == [first.id]
    assert sorted(by_id.reset) == sorted([first.id, second.id]), "the reset deleted both idle leases first"
    by_token = rig.run(replace(BACKFILL, feed_ranges=frozenset({second.token})))
    assert [lease.id for lease in by_token.leases] == [second.id]

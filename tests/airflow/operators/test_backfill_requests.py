"""A backfill request that would match nothing is refused, naming the field, before anything is written: a start in
the future, feed ranges the source does not have, in a dry run as in a real one."""

from __future__ import annotations

import json

import pytest
from airflow.exceptions import AirflowFailException

from tests.airflow._support import install_world
from tests.airflow.operators.test_operators import list_leases

FUTURE = "2999-01-01T00:00:00Z"


@pytest.mark.parametrize("dry_run", [True, False])
def test_a_start_in_the_future_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch, dry_run: bool) -> None:
    world = install_world(monkeypatch)
    op = list_leases(lease_set="backfill", reset=True, since=FUTURE, plan_only=dry_run)
    with pytest.raises(AirflowFailException, match=r"since=.*in the future"):
        op.execute(context={})
    assert list(world.leases.query("SELECT * FROM c")) == [], "refused before any lease was created"


@pytest.mark.parametrize("dry_run", [True, False])
def test_an_unknown_feed_range_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch, dry_run: bool) -> None:
    install_world(monkeypatch, feed_ranges=2)
    op = list_leases(lease_set="backfill", feed_ranges=json.dumps(["no-such-range"]), plan_only=dry_run)
    with pytest.raises(AirflowFailException, match=r"feed_ranges=\['no-such-range'\] match no feed range"):
        op.execute(context={})


def test_one_unknown_feed_range_among_known_ones_is_refused_and_the_reset_does_not_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = install_world(monkeypatch, feed_ranges=2)
    leases = list_leases(lease_set="backfill").execute(context={})
    known = world.monitored.read_feed_ranges()[0].token
    before = sorted(d["id"] for d in world.leases.query("SELECT * FROM c"))
    op = list_leases(lease_set="backfill", reset=True, feed_ranges=json.dumps([known, "typo"]))
    with pytest.raises(AirflowFailException, match=r"feed_ranges=\['typo'\]"):
        op.execute(context={})
    assert sorted(d["id"] for d in world.leases.query("SELECT * FROM c")) == before, "no lease was reset"
    assert len(leases) == 2


def test_a_lease_id_still_selects_its_range(monkeypatch: pytest.MonkeyPatch) -> None:
    install_world(monkeypatch, feed_ranges=2)
    first, _ = list_leases(lease_set="backfill").execute(context={})
    assert list_leases(lease_set="backfill", feed_ranges=json.dumps([first])).execute(context={}) == [first]

"""The UI plugin on the live stack (api-server, scheduler, dag-processor, triggerer; SQLite; SimpleAuthManager) with
the Cosmos emulator and the real broker: the ``/chatter`` API's auth, what it and the page show after a drain with
one suspended lease and two undeliverable documents, and a requeue (double-submitted with one key) that the next
drain publishes. A headless Chromium signs in through Airflow's login form, opens the page in light and dark mode
and saves screenshots, and opens the Outbox tab of the drain run.

The tests run in file order and share the state the first one builds (source ``ui`` of the live sources file).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo

import httpx
import pytest
import yaml

from airflow_chatter.operations.overview import SEVERITY
from airflow_chatter.outbox.document import OutboxMessage
from tests.fixtures.kafka import consume_records
from tests.fixtures.live_airflow import DESTINATION, PK_PATH, LiveAirflow, LiveSource, wait_until
from tests.live._browser import Browser

pytestmark = [pytest.mark.live, pytest.mark.kafka, pytest.mark.cosmos, pytest.mark.timeout(900)]

SOURCE = "ui"
#: The page's text colour as [r, g, b]: Chakra writes oklch(), which a canvas turns into RGB.
TEXT_RGB = """(() => {
  const color = getComputedStyle(document.querySelector('[data-testid=chatter-page]')).color;
  const ctx = document.createElement('canvas').getContext('2d');
  ctx.fillStyle = color; ctx.fillRect(0, 0, 1, 1);
  return [...ctx.getImageData(0, 0, 1, 1).data.slice(0, 3)];
})()"""
API = "/chatter/api"
#: The fault the scenario's suspension state records, as the gate stores a Confirmation Failure's.
LAST_FAULT = "503 Service Unavailable: the delivered stamp's patch was refused"
#: The scenario lease's owner: a worker gone, its lease expired.
GONE_OWNER = "worker-gone"
#: A sources entry that does not validate (a batch size over the maximum), added beside the valid ones.
BROKEN = "broken_ui"
#: What the page shows of a lease, a document or a backfill an editor may act on (none of it for a viewer).
ACTION_CONTROLS = """(() => {
  const page = document.querySelector('[data-testid=chatter-page]');
  const buttons = [...page.querySelectorAll('button')].map(b => b.innerText.trim());
  return {
    requeue: buttons.filter(t => t.startsWith('Requeue')).length,
    release: buttons.filter(t => t === 'Release').length,
    backfill: buttons.filter(t => t === 'Trigger backfill').length,
    checkboxes: page.querySelectorAll('input[type=checkbox]').length,
    readOnly: page.querySelectorAll('[data-testid=read-only]').length,
    panels: page.querySelectorAll('[data-testid^=source-]:not([data-testid$=-folded])').length,
  };
})()"""


@pytest.fixture(scope="module")
def admin(live_airflow: LiveAirflow) -> httpx.Client:
    return live_airflow.client("admin")


@pytest.fixture(scope="module")
def viewer(live_airflow: LiveAirflow) -> httpx.Client:
    return live_airflow.client("viewer")


def _documents(source: LiveSource, tag: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Three good outbox documents and two without a Destination (undeliverable: CTR)."""
    good, bad = [], []
    for n in range(5):
        customer = f"cust-{tag}-{n % 2}"
        message = OutboxMessage(
            f"ui-{tag}-{n}-{uuid.uuid4().hex[:6]}", DESTINATION, json.dumps({"n": n}), "application/json"
        )
        document = message.to_document(PK_PATH, customer)
        if n >= 3:
            document.pop("Destination")
        (bad if n >= 3 else good).append(source.monitored.create_item(document))
    return good, bad


def _drain(live: LiveAirflow, api: httpx.Client, dag_id: str) -> dict[str, Any]:
    # An earlier test may have broken and restored the sources file; its DAGs are active again once re-parsed.
    wait_until(
        lambda: api.get(f"/api/v2/dags/{dag_id}").json().get("is_stale") is False,
        timeout_s=240,
        what=f"DAG {dag_id} to be parsed and active",
    )
    live.unpause(api, dag_id)
    triggered = api.post(f"/api/v2/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": {}})
    assert triggered.status_code == 200, triggered.text
    return live.wait_for_run(api, dag_id, triggered.json()["dag_run_id"], timeout_s=240)


@pytest.fixture(scope="module")
def scenario(live_airflow: LiveAirflow, admin: httpx.Client) -> dict[str, Any]:
    """A drain that stamps two documents undeliverable, then one suspended lease (its state written onto the lease
    document as five Confirmation Failures would leave it, the last one's fault included: fault injection), with its
    window already half over."""
    source = live_airflow.sources[SOURCE]
    good, bad = _documents(source, "scenario")
    _drain(live_airflow, admin, source.drain_dag_id)
    # Paused again: no scheduled run may consume the suspended lease's probe before the test's own drain.
    assert admin.patch(f"/api/v2/dags/{source.drain_dag_id}", json={"is_paused": True}).status_code == 200
    (lease,) = list(source.leases.query_items("SELECT * FROM c", enable_cross_partition_query=True))
    armed = (datetime.now(UTC) - timedelta(seconds=30)).replace(microsecond=0)
    source.leases.patch_item(
        lease["id"],
        lease["id"],
        [
            # The owner of a worker that died holding it: expired, so the next drain takes it over; the page offers
            # an editor a Release.
            {"op": "set", "path": "/owner", "value": GONE_OWNER},
            {"op": "set", "path": "/expires_at", "value": (armed - timedelta(minutes=10)).isoformat()},
            {
                "op": "set",
                "path": "/suspension",
                "value": {
                    "consecutive_failures": 5,
                    "suspended": True,
                    "armed_at": armed.isoformat(),
                    "probe_consumed": False,
                    "last_fault": {
                        "error_type": "ServiceUnavailable",
                        "message": LAST_FAULT,
                        "at": armed.isoformat(),
                    },
                },
            },
        ],
    )
    return {"source": source, "good": good, "bad": bad, "lease_id": lease["id"], "armed_at": armed}


@pytest.fixture(scope="module")
def broken_entry(live_airflow: LiveAirflow) -> Iterator[str]:
    """A broken entry beside the valid sources in the live sources file, for as long as the module's page tests
    need it (the plugin reads the file again when it changes; the valid sources' DAGs are not touched)."""
    original = live_airflow.sources_file.read_text()
    config = yaml.safe_load(original)
    valid = live_airflow.sources[SOURCE].entry(live_airflow.database)
    config["sources"].append({**valid, "name": BROKEN, "monitored_container": "broken-ui", "max_batch_size": 5000})
    live_airflow.sources_file.write_text(yaml.safe_dump(config, sort_keys=False))
    try:
        yield BROKEN
    finally:
        live_airflow.sources_file.write_text(original)


@pytest.fixture(scope="module")
def admin_page(live_airflow: LiveAirflow, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    """One Chromium signed in as admin on the page (900 px high, so the page scrolls), for the tests that only read
    and click: one sign-in for all of them."""
    browser = Browser(tmp_path_factory.mktemp("admin") / "chromium-profile", height=900)
    try:
        _log_in(browser, live_airflow, "admin", "/plugin/chatter")
        yield browser
    finally:
        browser.close()


@pytest.fixture(scope="module")
def viewer_page(live_airflow: LiveAirflow, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    """One Chromium signed in as viewer, shared by the viewer's tests."""
    browser = Browser(tmp_path_factory.mktemp("viewer") / "chromium-profile")
    try:
        _log_in(browser, live_airflow, "viewer", "/plugin/chatter")
        yield browser
    finally:
        browser.close()


def test_ui_api_requests_without_a_token_or_cookie_are_401(live_airflow: LiveAirflow) -> None:
    for method, path in (
        ("GET", "/sources"),
        ("GET", f"/sources/{SOURCE}"),
        ("POST", f"/sources/{SOURCE}/undeliverable/requeue"),
    ):
        response = httpx.request(
            method, f"{live_airflow.url}{API}{path}", json={"documents": [{"id": "x"}]}, timeout=30
        )
        assert response.status_code == 401, f"{method} {path}: {response.status_code} {response.text}"


def test_sus_ctr_after_a_drain_the_api_shows_exactly_the_suspended_lease_and_the_two_undeliverable_documents(
    scenario: dict[str, Any], viewer: httpx.Client
) -> None:
    view = viewer.get(f"{API}/sources/{SOURCE}")
    assert view.status_code == 200, view.text
    body = view.json()
    assert [s["lease_id"] for s in body["suspensions"]] == [scenario["lease_id"]]
    (suspension,) = body["suspensions"]
    assert suspension["consecutive_failures"] == 5
    assert suspension["window_end"] == (scenario["armed_at"] + timedelta(seconds=60)).isoformat()
    assert suspension["last_fault"] == {
        "error_type": "ServiceUnavailable",
        "error_message": LAST_FAULT,
        "run_id": None,
        "at": scenario["armed_at"].isoformat(),
        "recorded_in": "lease",
    }
    assert body["undeliverable_count"] == 2 and body["attention"] is True
    # Unpausing may start a scheduled run before the manual one: whichever drained, the runs' totals show it.
    assert (body["totals"]["published"], body["totals"]["undeliverable"]) == (3, 2), body["runs"]

    page = viewer.get(f"{API}/sources/{SOURCE}/undeliverable").json()
    assert {i["message_id"]: i["violations"] for i in page["items"]} == {
        d["MessageId"]: ["Destination"] for d in scenario["bad"]
    }


def test_ui_a_viewer_cannot_requeue(scenario: dict[str, Any], viewer: httpx.Client) -> None:
    body = {"documents": [{"id": d["id"], "etag": d["_etag"]} for d in scenario["bad"]]}
    response = viewer.post(
        f"{API}/sources/{SOURCE}/undeliverable/requeue", json=body, headers={"Idempotency-Key": '"viewer-1"'}
    )
    assert response.status_code == 403, response.text
    assert viewer.get(f"{API}/sources/{SOURCE}").json()["undeliverable_count"] == 2


def _log_in(browser: Browser, live: LiveAirflow, user: str, next_path: str) -> None:
    """Open ``next_path`` signed out and sign in through Airflow's login form (simple auth manager), as a person does:
    the UI sends the browser to the form, the form stores the ``_token`` cookie and returns to ``next_path``."""
    browser.open(f"{live.url}{next_path}")
    browser.wait_for(
        "location.pathname.startsWith('/auth/login') && !!document.querySelector('input[name=password]')",
        what="Airflow's login form",
    )
    assert "_token" not in browser.cookies(), "signed out: the test sets no cookie itself"
    browser.type_into("input[name=username]", user)
    browser.type_into("input[name=password]", live.passwords[user])
    sign_in = "[...document.querySelectorAll('button[type=submit]')].find(b => b.innerText.trim() === 'Sign in')"
    browser.wait_for(f"{sign_in} && !{sign_in}.disabled", what="the Sign in button to be enabled")
    browser.click(sign_in, what="the Sign in button")
    browser.wait_for(
        f"location.pathname === {json.dumps(next_path)} && !!document.querySelector('[data-testid=chatter-page]')",
        what=f"{next_path} after signing in",
    )
    assert browser.cookies().get("_token"), "the login form stored the UI's token cookie"


def test_ui_the_page_shows_the_suspension_and_the_undeliverable_documents_in_light_and_dark(
    scenario: dict[str, Any], broken_entry: str, live_airflow: LiveAirflow, tmp_path: Path
) -> None:
    browser = Browser(tmp_path / "chromium-profile")
    try:
        _log_in(browser, live_airflow, "admin", "/plugin/chatter")
        panel = f"document.querySelector('[data-testid=source-{SOURCE}]')"
        browser.wait_for(
            f"{panel} && {panel}.querySelectorAll('[data-testid=undeliverable-row]').length "
            "&& !!document.querySelector('[data-testid=chatter-overview]')",
            what="the ui source's rows and the overview",
        )
        shown = browser.evaluate(
            f"""(() => {{ const p = {panel}; return {{
                suspended: p.querySelector('[data-testid=suspended-count]').innerText,
                undeliverable: p.querySelector('[data-testid=undeliverable-count]').innerText,
                suspensionRows: p.querySelectorAll('[data-testid=suspension-row]').length,
                lastFault: p.querySelector('[data-testid=suspension-last-fault]').innerText,
                totalsFrom: p.querySelector('[data-testid=totals-source]').innerText.split(' of the ')[0],
                messageIds: [...p.querySelectorAll('[data-testid=undeliverable-message-id]')].map(e => e.innerText),
                violations: [...p.querySelectorAll('[data-testid=undeliverable-violations]')].map(e => e.innerText),
            }}; }})()"""
        )
        assert shown == {
            "suspended": "1 suspended",
            "undeliverable": "2 undeliverable",
            "suspensionRows": 1,
            "lastFault": f"ServiceUnavailable: {LAST_FAULT}",
            "totalsFrom": "Summed from the drain summaries (XCom)",
            "messageIds": sorted(d["MessageId"] for d in scenario["bad"]),
            "violations": ["Destination", "Destination"],
        }
        chart = browser.evaluate(
            f"""(() => {{ const p = {panel}; return {{
                points: p.querySelectorAll('[data-testid=chart-point]').length,
                runRows: p.querySelectorAll('[data-testid=run-row]').length,
                ticks: [...p.querySelectorAll('[data-testid=chart-x-tick]')].map(e => e.textContent),
                title: p.querySelector('[data-testid=chart-x-title]').textContent,
                zone: Intl.DateTimeFormat().resolvedOptions().timeZone,
            }}; }})()"""
        )
        # A run that moved nothing is neither listed nor plotted; the x axis says what and in which zone (none
        # chosen: the browser's), its ticks differ.
        assert chart["points"] == chart["runRows"] >= 1, chart
        assert len(set(chart["ticks"])) == len(chart["ticks"]) >= 2, chart
        assert chart["title"].startswith("run start (") and chart["title"].endswith(f"{chart['zone']})"), chart
        # An editor is offered every action (a viewer none: test_ui_a_viewer_is_offered_no_action...).
        assert browser.evaluate(ACTION_CONTROLS) == {
            "requeue": 1,
            "release": 1,
            "backfill": 1,
            "checkboxes": 3,  # the two documents' and the backfill's "dry run"
            "readOnly": 0,
            "panels": 1,
        }
        overview = browser.evaluate(
            "[...document.querySelectorAll('[data-testid=chatter-overview] tbody tr')]"
            ".map(r => [r.dataset.testid.replace('overview-', ''), r.dataset.state])"
        )
        order = SEVERITY
        assert overview[:2] == [[SOURCE, "suspended"], [BROKEN, "broken config"]], overview
        assert [order.index(state) for _, state in overview] == sorted(order.index(state) for _, state in overview)
        assert {name for name, _ in overview} == {*live_airflow.sources, BROKEN}, "the valid sources still show"
        light_rgb = browser.evaluate(TEXT_RGB)
        light = browser.screenshot(tmp_path / "chatter-ui-light.png")

        browser.evaluate("localStorage.setItem('theme', 'dark')")  # the key Airflow's theme switch writes
        browser.open(f"{live_airflow.url}/plugin/chatter")
        browser.wait_for(
            f"document.documentElement.classList.contains('dark') && {panel} "
            f"&& {panel}.querySelectorAll('[data-testid=undeliverable-row]').length === 2",
            what="the page in dark mode",
        )
        text_rgb = browser.evaluate(TEXT_RGB)
        dark = browser.screenshot(tmp_path / "chatter-ui-dark.png")
        opacity = browser.evaluate(
            f"""(() => {{ const b = [...{panel}.querySelectorAll('button')];
                const of = (t) => Number(getComputedStyle(b.find(e => e.innerText.trim() === t)).opacity);
                return {{previous: of('Previous'), previousDisabled: b.find(e => e.innerText.trim() === 'Previous')
                    .disabled, refresh: of('Refresh')}}; }})()"""
        )
    finally:
        browser.close()
    assert light.stat().st_size > 10_000 and dark.stat().st_size > 10_000
    assert light_rgb != text_rgb and min(text_rgb) > 150 > max(light_rgb), (
        f"text {light_rgb} in light, {text_rgb} in dark"
    )
    assert opacity["previousDisabled"] is True and opacity["previous"] < 1 == opacity["refresh"], (
        f"in dark mode a disabled button must look disabled: {opacity}"
    )


def test_ui_a_broken_sources_entry_is_a_broken_config_row_naming_its_field_and_opens_nothing(
    scenario: dict[str, Any], broken_entry: str, admin_page: Browser
) -> None:
    row = f"document.querySelector('[data-testid=overview-{broken_entry}]')"
    admin_page.wait_for(
        f"!!({row}) && !!document.querySelector('[data-testid=source-{SOURCE}] [data-testid=leases]')",
        what="the broken entry's overview row and the ui source's panel",
    )
    shown = admin_page.evaluate(
        f"""(() => {{ const r = {row}; return {{
            state: r.querySelector('[data-testid=overview-state]').innerText,
            fields: [...r.querySelectorAll('[data-testid=broken-field]')].map(e => e.innerText),
            problem: r.querySelector('[data-testid=broken-problem]').innerText,
            clickable: getComputedStyle(r).cursor === 'pointer' || !!r.querySelector('a'),
            panel: !!document.getElementById('chatter-{broken_entry}'),
            others: [...document.querySelectorAll('[data-testid^=source-]')].map(e => e.dataset.testid),
        }}; }})()"""
    )
    assert shown["state"] == "broken config" and not shown["clickable"] and not shown["panel"], shown
    assert len(shown["fields"]) == 1 and shown["fields"][0].endswith("max_batch_size"), shown
    assert "5000" in shown["problem"] or "max_batch_size" in shown["problem"], shown
    assert f"source-{SOURCE}" in shown["others"], "the valid sources' panels still show"


def test_ui_an_overview_row_unfolds_a_folded_source_and_scrolls_to_it(
    scenario: dict[str, Any], admin_page: Browser
) -> None:
    folded = admin_page.evaluate(
        "[...document.querySelectorAll('[data-testid$=-folded]')].map(e => e.dataset.testid"
        ".replace('source-', '').replace(/-folded$/, ''))"
    )
    assert folded, "a source that needs no attention starts folded"
    name = folded[-1]
    below = admin_page.evaluate(f"document.getElementById('chatter-{name}').getBoundingClientRect().top > innerHeight")
    assert below, f"{name} starts out of view (below the overview), so the scroll is what brings it in"
    admin_page.click(f"document.querySelector('[data-testid=overview-{name}] td')", what=f"the {name} row")
    admin_page.wait_for(
        f"!!document.querySelector('[data-testid=source-{name}] [data-testid=leases], "
        f"[data-testid=source-{name}] [data-testid=leases-empty]')"
        f" && !document.querySelector('[data-testid=source-{name}-folded]')",
        what=f"{name}'s panel to unfold",
    )
    admin_page.wait_for(
        f"(() => {{ const r = document.getElementById('chatter-{name}').getBoundingClientRect();"
        " return r.top >= 0 && r.top < innerHeight / 2; })()",
        what=f"{name}'s panel scrolled into view",
    )


def test_ui_panels_follow_the_overviews_severity_order_and_only_healthy_sources_are_folded(
    scenario: dict[str, Any], broken_entry: str, admin_page: Browser
) -> None:
    """The panels below the overview come in its order (suspended before undeliverable-only, a failing or a
    never-drained source not folded like a healthy one)."""
    admin_page.wait_for(
        f"!!document.querySelector('[data-testid=overview-{SOURCE}]') && "
        "document.querySelectorAll('[data-testid=panel-slot]').length > 1",
        what="the overview and the panels",
    )
    shown = admin_page.evaluate(
        """(() => ({
            rows: [...document.querySelectorAll('[data-testid=chatter-overview] tbody tr')]
                .map(r => [r.dataset.testid.replace('overview-', ''), r.dataset.state]),
            panels: [...document.querySelectorAll('[data-testid=panel-slot]')].map(p => [p.id.replace('chatter-', ''),
                !!p.querySelector('[data-testid$=-folded]')]),
        }))()"""
    )
    states = {name: state for name, state in shown["rows"]}
    assert [name for name, _ in shown["panels"]] == [name for name, _ in shown["rows"] if name != broken_entry], shown
    assert all(states[name] in ("healthy", "never drained") for name, folded in shown["panels"] if folded), shown
    assert shown["panels"][0] == [SOURCE, False], "the suspended source comes first, unfolded"


def test_ui_the_jump_to_a_suspension_keeps_the_sources_name_in_view(
    scenario: dict[str, Any], admin_page: Browser
) -> None:
    badge = (
        f"[...document.querySelectorAll('[data-testid=overview-{SOURCE}] a')]"
        ".find(a => a.innerText.trim() === '1 suspended')"
    )
    admin_page.wait_for(f"!!({badge})", what="the overview's '1 suspended' badge")
    admin_page.click(badge, what="the '1 suspended' badge")
    section = f"document.getElementById('chatter-{SOURCE}-suspensions').getBoundingClientRect()"
    admin_page.wait_for(
        f"(() => {{ const r = {section}; return r.top >= 0 && r.top < innerHeight / 3; }})()",
        what="the suspensions section scrolled to the top",
    )
    name = admin_page.evaluate(
        f"(() => {{ const r = document.querySelector('[data-testid=source-{SOURCE}] [data-testid=panel-name]')"
        ".getBoundingClientRect(); return [r.top, r.bottom, innerHeight]; })()"
    )
    top, bottom, height = name
    assert 0 <= top and bottom <= height, f"the source's name is in view: {name}"
    assert bottom <= admin_page.evaluate(f"{section}.top") + 1, "and does not cover the section"


def _counts(browser: Browser) -> dict[str, str]:
    return dict(
        browser.evaluate(
            f"""(() => ({{
                overview: document.querySelector('[data-testid=overview-{SOURCE}] [data-testid=overview-undeliverable]')
                    .innerText.trim(),
                panel: document.querySelector('[data-testid=source-{SOURCE}] [data-testid=undeliverable-count]')
                    .innerText.split(' ')[0],
                glance: document.querySelector('[data-testid=glance-undeliverable]').innerText.split(' ')[0],
                rows: String(document.querySelectorAll(
                    '[data-testid=source-{SOURCE}] [data-testid=undeliverable-row]').length),
            }}))()"""
        )
    )


def test_ui_the_page_polls_holds_while_a_form_is_filled_and_every_number_agrees_after_a_requeue(
    scenario: dict[str, Any], admin_page: Browser
) -> None:
    """A document stamped undeliverable meanwhile shows up without a reload, in the overview, the glance and the
    panel alike; while a document is selected nothing is refetched (the poll is held, and says so); after the
    requeue every count agrees again."""
    source: LiveSource = scenario["source"]
    message = OutboxMessage(f"ui-late-{uuid.uuid4().hex[:6]}", DESTINATION, "{}", "application/json")
    late = source.monitored.create_item({**message.to_document(PK_PATH, "cust-late"), "status": "undeliverable"})
    admin_page.wait_for(
        "document.querySelector('[data-testid=poll-state]').innerText.startsWith('Updates every')",
        what="the page polling",
    )
    admin_page.wait_for(
        f"(() => {{ try {{ const p = document.querySelector('[data-testid=source-{SOURCE}]');"
        " return p.querySelectorAll('[data-testid=undeliverable-row]').length === 3"
        f" && document.querySelector('[data-testid=overview-{SOURCE}] [data-testid=overview-undeliverable]')"
        ".innerText.trim() === '3'; } catch (e) { return false; } })()",
        timeout_s=90,
        what="the late undeliverable document, without a reload",
    )
    assert _counts(admin_page) == {"overview": "3", "panel": "3", "glance": "3", "rows": "3"}

    checkbox = f"document.querySelector('[aria-label=\"select {late['MessageId']}\"]')"
    admin_page.click(checkbox, what="the late document's checkbox")
    polls = admin_page.evaluate("Number(document.querySelector('[data-testid=chatter-page]').dataset.polls)")
    skipped = admin_page.evaluate("Number(document.querySelector('[data-testid=chatter-page]').dataset.skippedPolls)")
    admin_page.wait_for(
        f"Number(document.querySelector('[data-testid=chatter-page]').dataset.skippedPolls) > {skipped}",
        timeout_s=90,
        what="a poll to come due while the document is selected",
    )
    held = admin_page.evaluate(
        "[Number(document.querySelector('[data-testid=chatter-page]').dataset.polls),"
        " document.querySelector('[data-testid=poll-state]').innerText]"
    )
    assert held == [polls, "Updates held while you edit."], "nothing was refetched while the form was filled"

    panel = f"document.querySelector('[data-testid=source-{SOURCE}]')"
    requeue = f"[...{panel}.querySelectorAll('button')].find(b => b.innerText.trim() === 'Requeue selected (1)')"
    admin_page.click(requeue, what="Requeue selected (1)")
    admin_page.wait_for(f"!!{panel}.querySelector('[data-testid=requeue-result]')", what="the requeue's result")
    admin_page.wait_for(
        f"(() => {{ const t = {panel}.querySelector('[data-testid=undeliverable-count]').innerText;"
        " return t === '2 undeliverable'; })()",
        what="the panel's count after the requeue",
    )
    admin_page.wait_for(
        f"document.querySelector('[data-testid=overview-{SOURCE}] [data-testid=overview-undeliverable]')"
        ".innerText.trim() === '2'",
        what="the overview's count after the requeue",
    )
    assert _counts(admin_page) == {"overview": "2", "panel": "2", "glance": "2", "rows": "2"}

    toggle = "document.querySelector('[data-testid=poll-toggle]')"
    admin_page.click(toggle, what="Pause updates")
    paused = admin_page.evaluate(f"[{toggle}.innerText, document.querySelector('[data-testid=poll-state]').innerText]")
    admin_page.click(toggle, what="Resume updates")
    assert paused == ["Resume updates", "Updates paused."], paused


PENDING_AGE_DAG = "chatter_pending_age"


def _pending_age_runs(api: httpx.Client) -> list[dict[str, Any]]:
    response = api.get(f"/api/v2/dags/{PENDING_AGE_DAG}/dagRuns", params={"order_by": "-run_after"})
    assert response.status_code == 200, response.text
    return list(response.json()["dag_runs"])


def _oldest_pending_at(source: LiveSource) -> datetime:
    """When the source's oldest pending document was last written (its ``_ts``, what the check's age counts from)."""
    query = "SELECT c._ts FROM c WHERE c.status = 'pending'"
    stamps = [item["_ts"] for item in source.monitored.query_items(query, enable_cross_partition_query=True)]
    assert stamps, "a pending document waits"
    return datetime.fromtimestamp(min(stamps), UTC)


def _checks_until(api: httpx.Client, since: datetime, state: str) -> tuple[int, dict[str, Any]] | None:
    """Which check run, counting from ``since``, was the first that ended ``state`` after ``since``, and that run
    (None: none yet). Counted are the runs that started after ``since`` up to it, at least 1 (a run that started
    just before ``since`` measures after it)."""
    runs = [
        (datetime.fromisoformat(r["start_date"]), r)
        for r in _pending_age_runs(api)
        if r["start_date"] and r["end_date"] and r["state"] in ("success", "failed")
    ]
    runs.sort(key=lambda pair: pair[0])
    ended = [(at, r) for at, r in runs if r["state"] == state and datetime.fromisoformat(r["end_date"]) >= since]
    if not ended:
        return None
    first_at, first = ended[0]
    return max(1, sum(1 for at, _ in runs if since <= at <= first_at)), first


def _check_log(live: LiveAirflow, run_id: str) -> str:
    folder = live.home / "logs" / f"dag_id={PENDING_AGE_DAG}" / f"run_id={run_id}" / "task_id=pending_age_ui"
    return "\n".join(path.read_text() for path in sorted(folder.glob("attempt=*.log")))


def test_ui_a_stalled_source_past_its_max_pending_age_fails_its_check_and_the_page_says_over(
    scenario: dict[str, Any], live_airflow: LiveAirflow, admin: httpx.Client, admin_page: Browser
) -> None:
    """``ui``'s drain is paused and its lease suspended, so the document the page requeued waits. Past ``ui``'s
    ``max_pending_age_seconds`` (30 s) the pending-age check fails, without retries, within two of its runs (its
    poll interval is one minute): the runs that started after the oldest pending document passed the limit are
    counted up to the first failing one, and printed. Its notifier logs the alert; the overview says the age is over
    the limit."""
    source: LiveSource = scenario["source"]
    over_since = _oldest_pending_at(source) + timedelta(seconds=30)
    live_airflow.unpause(admin, PENDING_AGE_DAG)
    checks, failed = wait_until(
        lambda: _checks_until(admin, over_since, "failed"),
        timeout_s=240,
        what=f"a failed {PENDING_AGE_DAG} run",
    )
    print(f"pending-age alert: the {checks}. check run after the oldest pending document passed 30 s failed")
    assert checks <= 2, f"the alert fired in check run {checks} after the limit passed"
    log = wait_until(
        lambda: (text := _check_log(live_airflow, failed["dag_run_id"])) and "Pending-age alert" in text and text,
        timeout_s=60,
        what="the check's log with the notifier's alert",
    )
    assert "source ui: the oldest Pending Outbox Document has waited" in log, log[-3000:]
    assert "over max_pending_age_seconds 30" in log and "Pending-age alert (pending_age_ui)" in log, log[-3000:]
    (row,) = [r for r in admin.get(f"{API}/overview").json()["rows"] if r["source"] == SOURCE]
    assert row["pending_age_verdict"] == "over" and row["lag_seconds"] > 30, row
    assert any("over max_pending_age_seconds 30" in reason for reason in row["reasons"]), row
    admin_page.wait_for(
        f"!!document.querySelector('[data-testid=overview-{SOURCE}] [data-testid=overview-overdue]')",
        what="the overview's 'over' badge",
    )


def test_ui_the_home_page_tile_lists_the_sources_by_severity_with_the_suspended_leases_and_links_the_page(
    scenario: dict[str, Any], broken_entry: str, live_airflow: LiveAirflow, admin_page: Browser, tmp_path: Path
) -> None:
    admin_page.open(f"{live_airflow.url}/")
    admin_page.wait_for(
        "document.querySelectorAll('[data-testid=chatter-tile] [data-testid=tile-row]').length > 1",
        what="the Outbox tile on Airflow's home page",
    )
    tile = admin_page.evaluate(
        """(() => { const t = document.querySelector('[data-testid=chatter-tile]'); return {
            rows: [...t.querySelectorAll('[data-testid=tile-row]')].map(r => r.dataset.state),
            names: [...t.querySelectorAll('[data-testid=tile-row]')].map(r => r.innerText),
            overdue: [...t.querySelectorAll('[data-testid=tile-overdue]')]
                .map(b => b.closest('[data-testid=tile-row]').innerText),
            suspended: t.querySelector('[data-testid=tile-suspended]').innerText,
            oldest: t.querySelector('[data-testid=tile-oldest]').innerText,
            link: t.querySelector('[data-testid=tile-link]').getAttribute('href'),
        }; })()"""
    )
    admin_page.evaluate("document.querySelector('[data-testid=chatter-tile]').scrollIntoView({block: 'start'})")
    admin_page.screenshot(tmp_path / "chatter-ui-tile.png")
    assert tile["rows"][:2] == ["suspended", "broken config"], tile
    assert [SEVERITY.index(state) for state in tile["rows"]] == sorted(SEVERITY.index(s) for s in tile["rows"]), tile
    assert tile["names"][0].split()[1] == SOURCE and tile["suspended"] == "1 suspended lease(s)", tile
    assert tile["oldest"].startswith("oldest pending "), tile
    assert [row.split()[1] for row in tile["overdue"]] == [SOURCE], "ui's pending document is past its limit"
    assert tile["link"].endswith("/plugin/chatter"), tile
    admin_page.click("document.querySelector('[data-testid=tile-link]')", what="the tile's link")
    admin_page.wait_for(
        "location.pathname.endsWith('/plugin/chatter')"
        f" && !!document.querySelector('[data-testid=source-{SOURCE}] [data-testid=leases]')",
        what="the Outbox page from the tile",
    )


def test_ui_a_panel_whose_update_fails_keeps_its_last_view_and_what_was_typed(
    scenario: dict[str, Any], live_airflow: LiveAirflow, admin_page: Browser
) -> None:
    """A refresh of a source's panel that fails (injected: the page's fetch of the source's view answers 503) says
    so above the panel's last view, which stays drawn with the backfill form as the user left it; the next refresh
    that succeeds clears the message."""
    panel = f"document.querySelector('[data-testid=source-{SOURCE}]')"
    refresh = f"[...{panel}.querySelectorAll('button')].find(b => b.innerText.trim() === 'Refresh')"
    point = f"{panel}.querySelector('input[placeholder^=\"point in time\"]')"
    admin_page.wait_for(f"!!{point}", what="the backfill form")
    admin_page.evaluate(f"{point}.setAttribute('data-chatter-typed', 'yes')")
    admin_page.type_into(f"[data-testid=source-{SOURCE}] [data-chatter-typed=yes]", "2026-01-01T00:00:00Z")
    view = f"{API}/sources/{SOURCE}"
    admin_page.evaluate(
        "(() => { window.__chatterFetch = window.fetch; window.fetch = (url, options) => String(url).endsWith("
        f'{json.dumps(view)}) ? Promise.resolve(new Response(\'{{"detail": "injected"}}\', {{status: 503}}))'
        " : window.__chatterFetch(url, options); })()"
    )
    try:
        admin_page.click(refresh, what="the panel's Refresh (its fetch failing)")
        failed = admin_page.wait_for(
            f"({panel} && ({panel}.querySelector('[data-testid=panel-error]') || {{}}).innerText)",
            what="the panel's failed update",
        )
        kept = admin_page.evaluate(
            f"[!!{panel}.querySelector('[data-testid=suspended-count]'), {point}.value,"
            f" {panel}.querySelectorAll('[data-testid=undeliverable-row]').length > 0]"
        )
    finally:
        admin_page.evaluate("window.fetch = window.__chatterFetch || window.fetch")
    assert "injected" in failed and failed.startswith("Last update failed"), failed
    assert kept == [True, "2026-01-01T00:00:00Z", True], "the last view and the form stay as they were"
    admin_page.click(refresh, what="the panel's Refresh")
    admin_page.wait_for(f"!{panel}.querySelector('[data-testid=panel-error]')", what="the message gone")
    # The next test triggers the form's defaults: a fresh page.
    admin_page.open(f"{live_airflow.url}/plugin/chatter")
    admin_page.wait_for(f"!!{panel}", what="the page again")


def test_ui_a_backfill_triggered_from_the_page_is_listed_with_its_source_s_runs(
    scenario: dict[str, Any], live_airflow: LiveAirflow, admin: httpx.Client, admin_page: Browser
) -> None:
    panel = f"document.querySelector('[data-testid=source-{SOURCE}]')"
    button = f"[...{panel}.querySelectorAll('button')].find(b => b.innerText.trim() === 'Trigger backfill')"
    answer = (
        f"({panel}.querySelector('[data-testid=backfill-result]') || "
        f"{panel}.querySelector('[data-testid=backfill-error]') || {{}}).innerText"
    )
    # The page polls every 15 s and may lay itself out again between finding the button and the click; a click
    # while the request is in flight lands on a button that is loading (disabled), so it triggers nothing twice.
    _click_until(admin_page, button, f"!!{answer}", what="Trigger backfill (a dry run, the form's default)")
    result = admin_page.wait_for(answer, what="the triggered backfill run's id")
    assert result.startswith("Triggered "), f"the form answered {result!r}"
    run_id = result.removeprefix("Triggered ").removesuffix(".")
    try:
        refresh = f"[...{panel}.querySelectorAll('button')].find(b => b.innerText.trim() === 'Refresh')"
        admin_page.click(refresh, what="the panel's Refresh")
        row = (
            f"[...{panel}.querySelectorAll('[data-testid=backfill-run-row]')]"
            f".find(r => r.innerText.includes({json.dumps(run_id)}))"
        )
        admin_page.wait_for(f"!!({row})", what=f"the backfill run {run_id} in the ui source's runs")
        cells = admin_page.evaluate(
            f"(() => {{ const r = {row}; return {{ href: r.querySelector('a').getAttribute('href'),"
            " cells: [...r.querySelectorAll('td')].map(c => c.innerText) }; })()"
        )
    finally:  # no run left for the other tests of the session
        path = f"/api/v2/dags/chatter_backfill/dagRuns/{quote(run_id, safe='')}"
        # Deleted only once it ended: Airflow 3.3.2's scheduler dies (ObjectDeletedError in its loop) when a run it
        # is scheduling is deleted under it, and every later test of the session then waits for runs in vain.
        wait_until(
            lambda: admin.get(path).json().get("state") in ("success", "failed"),
            timeout_s=240,
            what=f"the backfill run {run_id} to end before it is deleted",
        )
        admin.delete(path)
    assert cells["href"].endswith(f"/dags/chatter_backfill/runs/{quote(run_id, safe='')}"), cells
    assert cells["cells"][0] == run_id and cells["cells"][-1] == "–", "a dry run drains no lease"


def _click_until(browser: Browser, element: str, reached: str, *, what: str, tries: int = 5) -> None:
    """Click ``element`` until ``reached`` holds: a click measured while the run page is still laying itself out can
    land beside the tab (the page keeps loading its panels), and then nothing navigates."""
    for _ in range(tries):
        browser.click(element, what=what)
        try:
            browser.wait_for(reached, timeout_s=10, what=f"{what} to open")
            return
        except AssertionError:
            continue
    browser.wait_for(reached, timeout_s=1, what=f"{what} to open after {tries} clicks")


def test_ui_the_outbox_tab_of_a_drain_run_shows_that_runs_totals_and_only_its_source(
    scenario: dict[str, Any], live_airflow: LiveAirflow, viewer: httpx.Client, viewer_page: Browser, tmp_path: Path
) -> None:
    source: LiveSource = scenario["source"]
    runs = viewer.get(f"{API}/sources/{SOURCE}").json()["runs"]
    # Unpausing may have let a scheduled run drain before the manual one: the tab is opened on the run that drained.
    (run,) = [r for r in runs if r["published"] == 3]
    others = [name for name in live_airflow.sources if name != SOURCE]
    browser = viewer_page
    browser.open(f"{live_airflow.url}/dags/{source.drain_dag_id}/runs/{run['run_id']}")
    # The navigation's page and the run's tab are both labelled "Outbox": the tab is the link to chatter-run.
    tab = (
        "[...document.querySelectorAll('a')].find(e => e.innerText.trim() === 'Outbox'"
        " && (e.getAttribute('href') || '').endsWith('/plugin/chatter-run'))"
    )
    browser.wait_for(f"!!({tab})", what="the Outbox tab on the run page")
    _click_until(browser, tab, "location.pathname.endsWith('/plugin/chatter-run')", what="the Outbox tab")
    browser.wait_for(
        "location.pathname.endsWith('/plugin/chatter-run') && !!document.querySelector('[data-testid=this-run]') "
        "&& document.querySelectorAll('[data-testid=undeliverable-row]').length === 2",
        what="the Outbox tab's panel",
    )
    shown = browser.evaluate(
        f"""(() => ({{
            thisRun: document.querySelector('[data-testid=this-run]').innerText,
            panels: [...document.querySelectorAll('[data-testid^=source-]')].map(e => e.dataset.testid),
            glance: !!document.querySelector('[data-testid=chatter-glance]'),
            suspended: document.querySelector('[data-testid=source-{SOURCE}] [data-testid=suspended-count]')
                .innerText,
        }}))()"""
    )
    browser.screenshot(tmp_path / "chatter-ui-run-tab.png")
    assert shown == {
        "thisRun": "This run: published 3, delivered 3, undeliverable 2, refused batches 0.",
        "panels": [f"source-{SOURCE}"],
        "glance": False,
        "suspended": "1 suspended",
    }, f"other sources {others} must not appear on this DAG's tab"


def _open_page(browser: Browser, live: LiveAirflow) -> str:
    """Open the page and wait for the ui source's panel with its two undeliverable rows; the panel's selector."""
    browser.open(f"{live.url}/plugin/chatter")
    panel = f"document.querySelector('[data-testid=source-{SOURCE}]')"
    browser.wait_for(
        f"{panel} && {panel}.querySelectorAll('[data-testid=undeliverable-row]').length === 2"
        f" && !!{panel}.querySelector('[data-testid=run-chart]')",
        what="the ui source's panel",
    )
    return str(panel)


def test_ui_a_viewer_is_offered_no_action_and_reads_the_read_only_note(
    scenario: dict[str, Any], live_airflow: LiveAirflow, viewer_page: Browser, tmp_path: Path
) -> None:
    _open_page(viewer_page, live_airflow)
    shown = viewer_page.evaluate(ACTION_CONTROLS)
    viewer_page.screenshot(tmp_path / "chatter-ui-viewer.png")
    assert shown == {
        "requeue": 0,
        "release": 0,
        "backfill": 0,
        "checkboxes": 0,
        "readOnly": shown["panels"],
        "panels": shown["panels"],
    }, shown
    assert shown["panels"] >= 1, "the ui source's panel is open (it needs attention)"


def test_f11_the_page_shows_the_sources_guarantee_transactions_and_throttling_as_its_drains_reported(
    scenario: dict[str, Any], live_airflow: LiveAirflow, viewer: httpx.Client, viewer_page: Browser
) -> None:
    """F-11: the panel's Delivery and throttling section draws the figures the source's answer sums from its drain
    summaries: the scenario's drains kept at-least-once (the default), committed no Kafka transaction, and their 429s,
    time waited and paced rate are the summaries' own."""
    delivery = viewer.get(f"{API}/sources/{SOURCE}").json()["delivery"]
    assert delivery["guarantee"] == "at_least_once" and delivery["drains"] >= 1, delivery
    assert (delivery["transactions_committed"], delivery["fenced_drains"], delivery["recovered_pages"]) == (0, 0, 0)
    panel = _open_page(viewer_page, live_airflow)
    section = f"{panel}.querySelector('[data-testid=delivery-throttling]')"
    viewer_page.wait_for(f"!!{section}", what="the Delivery and throttling section")
    shown = viewer_page.evaluate(
        f"""(() => Object.fromEntries(['guarantee', 'transactions', 'throttling', 'covers'].map(k =>
            [k, {panel}.querySelector(`[data-testid=delivery-${{k}}]`).innerText])))()"""
    )
    paced = (
        "not paced (no cap, no 429)"
        if delivery["paced_request_units_per_second"] is None
        else f"paced to {delivery['paced_request_units_per_second']} RU/s ({delivery['paced_drains']} of "
        f"{delivery['run_drains']} lease drains of run {delivery['paced_run']})"
    )
    limit, waited = delivery["throttle_limit_reached"], _js_number(delivery["throttle_waited_seconds"])
    assert shown == {
        "guarantee": "Guarantee: at_least_once",
        "transactions": "Kafka transactions: 0 committed · 0 aborted · fenced drains 0 · recovered pages 0",
        "throttling": f"Throttling: {delivery['throttled']} 429s · waited {waited}"
        f" s{f' · {limit} drain(s) reached the limit' if limit else ''} · {paced}",
        "covers": f"Summed over {delivery['covers']}.",
    }, shown


def _js_number(value: float) -> str:
    """A number as the page's JavaScript prints it (``0`` for ``0.0``)."""
    return str(int(value)) if float(value).is_integer() else str(value)


def test_ui_dates_follow_the_timezone_chosen_in_airflow_else_the_browsers(
    scenario: dict[str, Any], live_airflow: LiveAirflow, viewer_page: Browser
) -> None:
    window_end: datetime = scenario["armed_at"] + timedelta(seconds=60)

    def shown() -> dict[str, str]:
        panel = _open_page(viewer_page, live_airflow)
        return dict(
            viewer_page.evaluate(
                f"""(() => ({{
                    windowEnd: {panel}.querySelector('[data-testid=suspension-window-end]').innerText,
                    note: document.querySelector('[data-testid=timezone]').innerText,
                    axis: {panel}.querySelector('[data-testid=chart-x-title]').textContent,
                }}))()"""
            )
        )

    def expected(zone: str) -> str:
        return window_end.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M:%S")

    # Chosen in Airflow's UI: its timezone menu stores the choice in localStorage "timezone" (as JSON).
    viewer_page.evaluate("localStorage.setItem('timezone', JSON.stringify('Asia/Kolkata'))")
    chosen = shown()
    # None chosen: the browser's timezone, as Airflow's UI does.
    viewer_page.evaluate("localStorage.removeItem('timezone')")
    viewer_page.send("Emulation.setTimezoneOverride", timezoneId="America/Sao_Paulo")
    browsers = shown()

    for zone, seen in (("Asia/Kolkata", chosen), ("America/Sao_Paulo", browsers)):
        assert seen["windowEnd"].split(" (")[0] == expected(zone), (zone, seen, window_end)
        assert f"Times in {zone}" in seen["note"] and seen["axis"].endswith(f"{zone})"), (zone, seen)


def test_idm_rly_a_double_submitted_requeue_acts_once_and_the_next_drain_publishes_them(
    scenario: dict[str, Any], live_airflow: LiveAirflow, admin: httpx.Client
) -> None:
    source: LiveSource = scenario["source"]
    for document in scenario["bad"]:  # the writer's fix, applied to the stored documents
        source.monitored.patch_item(
            document["id"], document["customerId"], [{"op": "set", "path": "/Destination", "value": DESTINATION}]
        )
    items = admin.get(f"{API}/sources/{SOURCE}/undeliverable").json()["items"]
    assert [i["violations"] for i in items] == [[], []], "repaired: they pass the contract now"
    body = {"documents": [{"id": i["id"], "etag": i["etag"]} for i in items]}
    headers = {"Idempotency-Key": f'"requeue-{uuid.uuid4().hex}"'}

    first = admin.post(f"{API}/sources/{SOURCE}/undeliverable/requeue", json=body, headers=headers)
    second = admin.post(f"{API}/sources/{SOURCE}/undeliverable/requeue", json=body, headers=headers)

    assert first.status_code == second.status_code == 200, (first.text, second.text)
    assert sorted(first.json()["requeued"]) == sorted(d["id"] for d in scenario["bad"])
    assert second.headers.get("idempotent-replayed") == "true" and second.json() == first.json()
    assert first.json()["idempotency"] == "cosmos", "the key is in the source's Cosmos idempotency container"
    log = (live_airflow.home / "process-logs" / "api-server.log").read_text()
    requeues = [
        line
        for line in log.splitlines()
        if f"UI requeue by admin on source {SOURCE}" in line and scenario["bad"][0]["id"] in line
    ]
    assert len(requeues) == 1, "the requeue ran once, logged with the user"
    statuses = {d["id"]: source.monitored.read_item(d["id"], d["customerId"])["status"] for d in scenario["bad"]}
    assert set(statuses.values()) == {"pending"}

    window_end = datetime.fromisoformat(admin.get(f"{API}/sources/{SOURCE}").json()["suspensions"][0]["window_end"])
    wait_until(lambda: datetime.now(UTC) > window_end, timeout_s=90, what="the suspension window to end (probe due)")
    _drain(live_airflow, admin, source.drain_dag_id)

    delivered = {d["id"]: source.monitored.read_item(d["id"], d["customerId"])["status"] for d in scenario["bad"]}
    assert set(delivered.values()) == {"delivered"}, delivered
    records = consume_records(live_airflow.kafka_bootstrap, source.topic, 5, timeout_s=60)
    published = {dict(r.headers)["message-id"].decode() for r in records}
    assert {d["MessageId"] for d in scenario["bad"]} <= published
    after = admin.get(f"{API}/sources/{SOURCE}").json()
    assert after["suspensions"] == [] and after["undeliverable_count"] == 0, "the probe's receipt lifted it"


def test_ui_once_the_source_drained_its_pending_age_check_passes_again(
    scenario: dict[str, Any], live_airflow: LiveAirflow, admin: httpx.Client
) -> None:
    """After the requeue test's drain nothing waits: a check succeeds (the alert clears) within two runs after the
    drain, counted and printed as the alert's are."""
    drained_at = datetime.now(UTC)
    try:
        checks, _ = wait_until(
            lambda: _checks_until(admin, drained_at, "success"),
            timeout_s=240,
            what=f"a successful {PENDING_AGE_DAG} run after the drain",
        )
    finally:
        admin.patch(f"/api/v2/dags/{PENDING_AGE_DAG}", json={"is_paused": True})
    print(f"pending-age alert cleared: the {checks}. check run after the drain succeeded")
    assert checks <= 2, f"the alert cleared in check run {checks} after the drain"
    (row,) = [r for r in admin.get(f"{API}/overview").json()["rows"] if r["source"] == SOURCE]
    assert row["pending_age_verdict"] == "within" and row["caught_up"], row

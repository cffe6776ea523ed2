// The airflow-chatter monitoring page: a hand-written ES module (no build step) that Airflow's UI imports and
// renders inside its own layout. It uses the host's React and Chakra UI (globalThis.React / globalThis.ChakraUI),
// so it follows Airflow's light and dark theme. Data comes from the plugin's JSON API under /chatter/api; the
// browser sends the UI's _token cookie, and every action carries an Idempotency-Key (a double click acts once).
const React = globalThis.React;
const C = globalThis.ChakraUI;
const h = React.createElement;
const { useCallback, useEffect, useRef, useState } = React;
const API = new URL("../api", import.meta.url).pathname;

async function call(path, options = {}) {
  const response = await fetch(API + path, {
    credentials: "same-origin",
    ...options,
    headers: { Accept: "application/json", ...(options.headers || {}) },
  });
  const text = await response.text();
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch (_) {
    body = { detail: text };
  }
  if (!response.ok) {
    const field = body && body.field ? ` (${body.field})` : "";
    const detail = body && body.detail ? (typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail)) : "";
    throw new Error(`${response.status}: ${detail}${field}`);
  }
  return body;
}

// One idempotency key per intent: kept until the action succeeds, so a second click resends the same key.
function useAction(run) {
  const key = useRef(null);
  const [state, setState] = useState({ busy: false, result: null, error: null });
  const act = useCallback(
    async (...args) => {
      if (key.current === null) key.current = crypto.randomUUID();
      setState({ busy: true, result: null, error: null });
      try {
        const result = await run(key.current, ...args);
        key.current = null;
        setState({ busy: false, result, error: null });
        return result;
      } catch (error) {
        setState({ busy: false, result: null, error: String(error.message || error) });
        return null;
      }
    },
    [run],
  );
  return [act, state];
}

function post(path, key, body) {
  return call(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", "Idempotency-Key": `"${key}"` },
    body: JSON.stringify(body),
  });
}

// The page polls every POLL_SECONDS (a visible control pauses it). Nothing is refetched while a form is being
// filled: a component with unsaved input (selected documents, an edited backfill form) registers here, and a field
// of the page that has the focus counts too.
const POLL_SECONDS = 15;
// The dashboard tile's react_apps name (plugins/chatter.py TILE_NAME): Airflow renders globalThis[name].
const TILE_NAME = "Outbox drains at a glance";
const editing = new Set();
function useEditing(name, active) {
  useEffect(() => {
    if (active) editing.add(name);
    else editing.delete(name);
    return () => editing.delete(name);
  }, [name, active]);
}
function isEditing() {
  const page = document.querySelector("[data-testid=chatter-page]");
  const focused = document.activeElement;
  const typing = !!(page && focused && page.contains(focused) && ["INPUT", "SELECT", "TEXTAREA"].includes(focused.tagName) && focused.type !== "checkbox");
  return typing || editing.size > 0;
}

const short = (text, n = 14) => (text && text.length > n ? `${text.slice(0, 6)}…${text.slice(-6)}` : text || "–");
// Airflow's UI keeps the user's timezone choice in localStorage ("timezone", JSON or plain) and, when none was
// chosen, uses the browser's; it shows dates as YYYY-MM-DD HH:mm:ss in that zone: the page does the same.
const browserTimezone = () => Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
function uiTimezone() {
  let zone = browserTimezone();
  try {
    const raw = globalThis.localStorage && globalThis.localStorage.getItem("timezone");
    if (raw) zone = raw.startsWith('"') ? JSON.parse(raw) : raw;
    new Intl.DateTimeFormat("en", { timeZone: zone });
  } catch (_) {
    zone = browserTimezone();
  }
  return zone;
}
// A moment's date and time fields in the UI's timezone.
function fields(ms, zone) {
  return Object.fromEntries(
    new Intl.DateTimeFormat("en-CA", { timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" })
      .formatToParts(new Date(ms))
      .map((p) => [p.type, p.value]),
  );
}
function when(iso) {
  if (!iso) return "–";
  const zone = uiTimezone();
  const f = fields(new Date(iso).getTime(), zone);
  return `${f.year}-${f.month}-${f.day} ${f.hour}:${f.minute}:${f.second}${zone === "UTC" ? " UTC" : ""}`;
}
// A feed range token is JSON with the range's EPK bounds: show them as [min, max).
function range(token) {
  try {
    const parsed = JSON.parse(token);
    const r = parsed.Range || parsed.range || parsed;
    if (r && typeof r.min === "string" && typeof r.max === "string") return `[${r.min || "00"}, ${r.max || "FF"})`;
  } catch (_) {}
  return short(token, 24);
}
const seconds = (s) => (s === null || s === undefined ? "–" : s < 120 ? `${Math.round(s)} s` : `${Math.round(s / 60)} min`);

function Cell({ children, ...rest }) {
  return h(C.Table.Cell, { px: 2, py: 1, fontSize: "sm", ...rest }, children);
}

function DataTable({ columns, rows, testid, empty }) {
  if (!rows.length) return h(C.Text, { fontSize: "sm", color: "fg.muted", "data-testid": `${testid}-empty` }, empty);
  return h(
    C.Table.Root,
    { size: "sm", variant: "outline", "data-testid": testid },
    h(C.Table.Header, null, h(C.Table.Row, null, columns.map((c) => h(C.Table.ColumnHeader, { key: c, px: 2 }, c)))),
    h(C.Table.Body, null, rows),
  );
}

function Section({ title, children }) {
  return h(C.Box, { mt: 4 }, h(C.Heading, { size: "sm", mb: 2 }, title), children);
}

// A run that moved nothing and failed nothing: counted, neither drawn in the chart nor listed row by row.
const emptyRun = (r) => !r.published && !r.delivered && !r.undeliverable && !r.refused_batches && !r.failed_leases;

// The x-axis tick labels over [t0, t1] (ms) in the UI's timezone: only the fields that tell the ticks apart
// (seconds within a few minutes, the day once the runs span more than one), the shared date in the axis title.
function timeTicks(t0, t1, zone) {
  const span = t1 - t0;
  const at = [t0, t0 + span / 2, t1];
  const f = at.map((ms) => fields(ms, zone));
  const oneDay = f.every((x) => x.year === f[0].year && x.month === f[0].month && x.day === f[0].day);
  const label = (x) => (oneDay ? "" : `${x.month}-${x.day} `) + `${x.hour}:${x.minute}` + (span < 10 * 60 * 1000 ? `:${x.second}` : "");
  const day = `${f[0].year}-${f[0].month}-${f[0].day}`;
  const ticks = at.map((ms, i) => ({ ms, label: label(f[i]) })).filter((tick, i, all) => i === 0 || tick.label !== all[i - 1].label);
  return { ticks, title: `run start (${oneDay ? `${day}, ` : ""}${zone})` };
}

// A time series: x is when each run started (in the UI's timezone), left axis documents per run (published blue,
// delivered green), right axis the lag (max continuation age, orange), with ticks and units. A run that moved
// nothing is not plotted (the table does not list it either).
function RunChart({ runs }) {
  const points = [...runs].filter((p) => p.at && !emptyRun(p)).reverse();
  if (!points.length) return null;
  const W = 560, H = 176, L = 44, R = 48, T = 8, B = 46;
  const t = points.map((p) => new Date(p.at).getTime());
  // One run alone sits in the middle of a minute; the axes' tops are even, so the middle tick is a whole number.
  const first = Math.min(...t), last = Math.max(...t);
  const t0 = last > first ? first : first - 30000, t1 = last > first ? last : last + 30000;
  const x = (ms) => L + ((ms - t0) / (t1 - t0)) * (W - L - R);
  const even = (v) => Math.max(2, 2 * Math.ceil(v / 2));
  const most = even(Math.max(...points.map((p) => Math.max(p.published, p.delivered))));
  const oldest = even(Math.max(...points.map((p) => p.max_continuation_age_seconds || 0)));
  const y = (v, top) => H - B - (v / top) * (H - B - T);
  const poly = (f, top) => points.map((p, i) => `${x(t[i])},${y(f(p) || 0, top)}`).join(" ");
  const ticks = [0, 0.5, 1];
  const xAxis = timeTicks(t0, t1, uiTimezone());
  const text = (props, label) => h("text", { fontSize: 10, fill: "currentColor", ...props }, label);
  return h(
    C.Box,
    { "data-testid": "run-chart", color: "fg.muted" },
    h(
      "svg",
      { width: W, height: H, role: "img", "aria-label": "documents published and delivered per run, and continuation age, over time" },
      h("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "currentColor" }),
      h("line", { x1: L, y1: T, x2: L, y2: H - B, stroke: "currentColor" }),
      h("line", { x1: W - R, y1: T, x2: W - R, y2: H - B, stroke: "currentColor" }),
      ticks.map((f) => h("g", { key: `y${f}` }, text({ x: L - 4, y: y(f * most, most) + 3, textAnchor: "end" }, `${Math.round(f * most)}`), text({ x: W - R + 4, y: y(f * oldest, oldest) + 3 }, seconds(f * oldest)))),
      xAxis.ticks.map(({ ms, label }, i) => text({ key: `x${i}`, x: x(ms), y: H - B + 14, textAnchor: i === 0 ? "start" : i === xAxis.ticks.length - 1 ? "end" : "middle", "data-testid": "chart-x-tick" }, label)),
      text({ x: L + (W - L - R) / 2, y: H - 4, textAnchor: "middle", "data-testid": "chart-x-title" }, xAxis.title),
      text({ x: 2, y: T + 2, transform: `rotate(90 2 ${T + 2})` }, "documents / run"),
      text({ x: W - 2, y: T + 2, textAnchor: "end", transform: `rotate(-90 ${W - 2} ${T + 2})` }, "continuation age"),
      h("polyline", { points: poly((p) => p.published, most), fill: "none", stroke: "#4299e1", strokeWidth: 2 }),
      h("polyline", { points: poly((p) => p.delivered, most), fill: "none", stroke: "#48bb78", strokeWidth: 2, strokeDasharray: "4 2" }),
      h("polyline", { points: poly((p) => p.max_continuation_age_seconds, oldest), fill: "none", stroke: "#ed8936", strokeWidth: 2 }),
      points.map((p, i) => h("circle", { key: p.run_id, "data-testid": "chart-point", cx: x(t[i]), cy: y(p.published, most), r: 3, fill: "#4299e1" }, h("title", null, `${p.run_id} (${when(p.at)}): published ${p.published}, delivered ${p.delivered}, continuation age ${seconds(p.max_continuation_age_seconds)}`))),
    ),
    h(C.Text, { fontSize: "xs" }, "blue: published per run · green (dashed): delivered per run · orange: the run's max continuation age (time since a lease's checkpoint, right axis)"),
  );
}

// Follow mode: what a following drain last wrote on its lease (renewed at least every half lease duration).
function followText(f) {
  return `last poll ${when(f.last_poll_at)} · ${f.published_last_minute ?? "–"} published in the last minute · lag ${seconds(f.lag_seconds)}`;
}
function FollowCell({ follow }) {
  if (!follow) return h(Cell, { "data-testid": "lease-follow" }, "–");
  return h(
    Cell,
    { "data-testid": "lease-follow", "data-live": follow.live ? "true" : "false" },
    follow.live ? h(C.Badge, { colorPalette: "blue", mr: 1 }, "live") : h(C.Badge, { colorPalette: "gray", mr: 1 }, "stopped"),
    h(C.Text, { as: "span", fontSize: "xs" }, followText(follow)),
  );
}

// A lease is running only while a drain holds it (its owner, unexpired); free when no one does; expired when its
// owner's time ran out (a worker gone: an editor may release it).
function leaseState(lease) {
  if (lease.suspension.suspended) return h(C.Badge, { colorPalette: "red" }, "suspended");
  if (!lease.owner) return h(C.Badge, { colorPalette: "gray" }, "free");
  return lease.live ? h(C.Badge, { colorPalette: "green" }, "running") : h(C.Badge, { colorPalette: "orange" }, "expired");
}
// The oldest pending document's age: "caught up" when none is pending, "unknown" when it cannot be seen.
const lag = (age, caughtUp) => (caughtUp || age === 0 ? "caught up" : age === null || age === undefined ? "unknown" : seconds(age));

function Leases({ source, view, reload }) {
  const [release, state] = useAction(
    useCallback((key, lease) => post(`/sources/${source}/leases/${encodeURIComponent(lease.id)}/release`, key, { etag: lease.etag }), [source]),
  );
  const rows = view.leases.map((lease) => {
    const last = lease.last_drain;
    const age = lease.pending_age_seconds;
    const pending = lease.pending ? `${lease.pending.count}${lease.pending.bounded ? "+" : ""} (${age === 0 ? "caught up" : `oldest ${lag(age, false)}`})` : "–";
    return h(
      C.Table.Row,
      { key: lease.id, "data-testid": "lease-row" },
      h(Cell, { title: lease.id }, short(lease.id.split(":").pop())),
      h(Cell, { title: lease.feed_range }, range(lease.feed_range)),
      h(Cell, { "data-testid": "lease-state" }, leaseState(lease)),
      h(Cell, { title: lease.owner || "" }, lease.owner ? `${short(lease.owner, 20)} until ${when(lease.expires_at)}` : "free"),
      h(Cell, null, seconds(lease.continuation_age_seconds)),
      h(Cell, null, last ? `${lease.last_drain_run}: published ${last.published}, delivered ${last.delivered}, undeliverable ${last.undeliverable}${last.error_type ? `, ${last.error_type}` : ""}` : "–"),
      h(Cell, { "data-testid": "lease-pending" }, pending),
      h(FollowCell, { follow: lease.follow }),
      h(Cell, null, lease.owner && view.permissions && view.permissions.edit ? h(C.Button, { size: "xs", variant: "outline", loading: state.busy, onClick: async () => (await release(lease)) && reload() }, "Release") : null),
    );
  });
  return h(
    Section,
    { title: "Leases" },
    h(DataTable, { columns: ["Lease", "Feed range", "State", "Owner / expiry", "Continuation age", "Last drain", "Pending", "Follow", ""], rows, testid: "leases", empty: "No leases yet: the first drain creates them." }),
    state.error ? h(C.Text, { color: "fg.error", fontSize: "sm" }, state.error) : null,
  );
}

function Suspensions({ view }) {
  const rows = view.suspensions.map((s) =>
    h(
      C.Table.Row,
      { key: s.lease_id, "data-testid": "suspension-row" },
      h(Cell, { title: s.lease_id }, short(s.lease_id.split(":").pop())),
      h(Cell, null, String(s.consecutive_failures)),
      h(Cell, { "data-testid": "suspension-window-end" }, when(s.window_end), s.window_end && new Date(s.window_end) < new Date() ? " (probe due)" : ""),
      h(Cell, { "data-testid": "suspension-last-fault", title: s.last_fault ? `recorded in the ${s.last_fault.recorded_in}${s.last_fault.at ? " at " + s.last_fault.at : ""}` : "" }, s.last_fault ? `${s.last_fault.error_type}: ${s.last_fault.error_message}` : "none recorded"),
    ),
  );
  return h(Section, { title: "Drain Suspensions" }, h(DataTable, { columns: ["Lease", "Consecutive failures", "Window end", "Last fault"], rows, testid: "suspensions", empty: "No lease is suspended." }));
}

function Undeliverable({ source, reload, canEdit, tick }) {
  const [search, setSearch] = useState("");
  const [pages, setPages] = useState([null]);
  const [page, setPage] = useState(null);
  const [selected, setSelected] = useState({});
  const [error, setError] = useState(null);
  const continuation = pages[pages.length - 1];
  const load = useCallback(async () => {
    const query = new URLSearchParams({ page_size: "25" });
    if (continuation) query.set("continuation", continuation);
    if (search) query.set("message_id", search);
    try {
      setPage(await call(`/sources/${source}/undeliverable?${query}`));
      setError(null);
    } catch (e) {
      setError(String(e.message || e));
    }
  }, [source, continuation, search]);
  useEffect(() => {
    load();
  }, [load, tick]);
  const [requeue, state] = useAction(
    useCallback((key, documents) => post(`/sources/${source}/undeliverable/requeue`, key, { documents }), [source]),
  );
  const items = page ? page.items : [];
  const chosen = items.filter((d) => selected[d.id]).map((d) => ({ id: d.id, etag: d.etag }));
  useEditing(`requeue-${source}`, chosen.length > 0);
  const rows = items.map((d) =>
    h(
      C.Table.Row,
      { key: d.id, "data-testid": "undeliverable-row" },
      canEdit ? h(Cell, null, h("input", { type: "checkbox", "aria-label": `select ${d.message_id}`, checked: !!selected[d.id], onChange: (e) => setSelected({ ...selected, [d.id]: e.target.checked }) })) : null,
      h(Cell, { "data-testid": "undeliverable-message-id" }, d.message_id || "–"),
      h(Cell, null, d.destination || "–"),
      h(Cell, { "data-testid": "undeliverable-violations" }, d.violations.length ? d.violations.join(", ") : "none (repaired)"),
      h(Cell, null, when(d.modified_at)),
    ),
  );
  return h(
    Section,
    { title: "Undeliverable documents" },
    h(
      C.HStack,
      { mb: 2, gap: 2 },
      h(C.Input, { size: "sm", maxW: "xs", placeholder: "Search by message id", value: search, onChange: (e) => { setSearch(e.target.value); setPages([null]); } }),
      canEdit ? h(C.Button, { size: "sm", colorPalette: "blue", disabled: !chosen.length, _disabled: { opacity: 0.4, cursor: "not-allowed" }, loading: state.busy, onClick: async () => { if (await requeue(chosen)) { setSelected({}); reload(); } } }, `Requeue selected (${chosen.length})`) : null,
      h(C.Button, { size: "sm", variant: "outline", disabled: pages.length < 2, _disabled: { opacity: 0.4, cursor: "not-allowed" }, onClick: () => setPages(pages.slice(0, -1)) }, "Previous"),
      h(C.Button, { size: "sm", variant: "outline", disabled: !(page && page.continuation), _disabled: { opacity: 0.4, cursor: "not-allowed" }, onClick: () => setPages([...pages, page.continuation]) }, "Next"),
    ),
    error ? h(C.Text, { color: "fg.error", fontSize: "sm" }, error) : null,
    state.error ? h(C.Text, { color: "fg.error", fontSize: "sm" }, state.error) : null,
    state.result ? h(C.Text, { fontSize: "sm", "data-testid": "requeue-result" }, `Requeued ${state.result.requeued.length}; changed meanwhile ${state.result.changed_meanwhile.length}; already pending ${(state.result.already_pending || []).length}; already delivered ${(state.result.already_delivered || []).length}; not found ${state.result.not_found.length}.`) : null,
    h(DataTable, { columns: [...(canEdit ? [""] : []), "Message id", "Destination", "Violations", "Modified"], rows, testid: "undeliverable", empty: "No undeliverable documents." }),
    canEdit ? h(C.Text, { fontSize: "xs", color: "fg.muted", mt: 1 }, "Fix the document (or its writer) first: a requeued document is verified again by the next drain.") : null,
  );
}

// A link into Airflow's own UI (it may be served under a base path: its <base href> says where).
const airflowLink = (path) => new URL(path, document.baseURI).pathname;

// The source's backfill runs (chatter_backfill runs whose conf names it), newest first, with what their lease
// drains moved: the runs' drain summaries added up (a dry run drains nothing, so it has none).
function BackfillRuns({ view, backfillDag }) {
  const runs = view.backfill_runs || [];
  if (!runs.length) return null;
  const total = (r, k) => r.summaries.reduce((n, s) => n + (Number(s[k]) || 0), 0);
  const rows = runs.map((r) =>
    h(
      C.Table.Row,
      { key: r.run_id, "data-testid": "backfill-run-row" },
      h(Cell, null, h(C.Link, { href: airflowLink(`dags/${encodeURIComponent(backfillDag)}/runs/${encodeURIComponent(r.run_id)}`), color: "fg.info" }, r.run_id)),
      h(Cell, null, when(r.started_at)),
      h(Cell, null, r.state || "–"),
      h(Cell, null, String(r.summaries.length)),
      h(Cell, null, r.summaries.length ? `${total(r, "published")} / ${total(r, "delivered")} / ${total(r, "undeliverable")}` : "–"),
    ),
  );
  return h(
    C.Box,
    { mt: 3 },
    h(C.Text, { fontSize: "sm", fontWeight: "semibold", mb: 1 }, `Backfill runs (${backfillDag})`),
    h(DataTable, { columns: ["Run", "Started", "State", "Lease drains", "Published / delivered / undeliverable"], rows, testid: "backfill-runs", empty: "" }),
  );
}

function Runs({ view, backfillDag }) {
  const shown = view.runs.filter((r) => !emptyRun(r));
  const hidden = view.runs.length - shown.length;
  const rows = shown.map((r) =>
    h(
      C.Table.Row,
      { key: r.run_id, "data-testid": "run-row" },
      h(Cell, null, r.run_id),
      h(Cell, null, when(r.at)),
      h(Cell, null, r.state || "–"),
      h(Cell, null, `${r.published} / ${r.delivered} / ${r.undeliverable}`),
      h(Cell, null, String(r.refused_batches)),
      h(Cell, null, seconds(r.max_continuation_age_seconds)),
      h(Cell, null, r.request_units === null ? "–" : `${r.request_units} (${r.request_units_per_delivered ?? "–"} per delivered)`),
    ),
  );
  return h(Section, { title: "Recent drains" }, h(RunChart, { runs: view.runs }), h(DataTable, { columns: ["Run", "Started", "State", "Published / delivered / undeliverable", "Refused batches", "Continuation age", "Request units"], rows, testid: "runs", empty: view.runs.length ? "No run moved a document." : "No drain has run yet." }), hidden ? h(C.Text, { fontSize: "xs", color: "fg.muted", "data-testid": "empty-runs" }, `${hidden} run(s) that moved no document are not listed.`) : null, h(BackfillRuns, { view, backfillDag }));
}

function Totals({ view }) {
  const t = view.totals;
  const tele = view.telemetry || {};
  return h(
    Section,
    { title: "Totals over these runs (from their drain summaries)" },
    h(C.Text, { fontSize: "sm", "data-testid": "totals" }, Object.entries(t).map(([k, v]) => `${k.replace(/_/g, " ")} ${v}`).join(" · ")),
    t && view.failure_counts && view.failure_counts.why_they_differ
      ? h(C.Text, { fontSize: "xs", color: "fg.warning", "data-testid": "failure-counts" }, `Confirmation failures: ${view.failure_counts.in_runs} in these runs, ${view.failure_counts.on_leases} on the leases; ${view.failure_counts.why_they_differ}.`)
      : null,
    h(C.Text, { fontSize: "xs", color: "fg.muted", "data-testid": "totals-source" }, `Summed from the drain summaries (XCom) of the ${view.runs.length} runs above, not from the OpenTelemetry instruments: those are recorded in the worker processes that run the drains${tele.sdk_configured ? "" : " (this api-server has no OpenTelemetry SDK)"}. Export them to Prometheus for totals over any period (docs/ui.md).`),
  );
}

// The guarantee, Kafka transactions and throttling the drains of these runs reported (their summaries, as the totals).
function Delivery({ view }) {
  const d = view.delivery;
  if (!d) return null;
  const guarantee = d.guarantee === null ? "no drain reported yet" : `${d.guarantee}${d.guarantees.length > 1 ? ` (earlier runs: ${d.guarantees.slice(1).join(", ")})` : ""}`;
  const paced = d.paced_request_units_per_second === null ? "not paced (no cap, no 429)" : `paced to ${d.paced_request_units_per_second} RU/s (${d.paced_drains} of ${d.run_drains} lease drains of run ${d.paced_run})`;
  return h(
    Section,
    { title: "Delivery and throttling over these runs" },
    h(C.Text, { fontSize: "sm", "data-testid": "delivery-guarantee" }, `Guarantee: ${guarantee}`),
    h(C.Text, { fontSize: "sm", "data-testid": "delivery-transactions" }, `Kafka transactions: ${d.transactions_committed} committed · ${d.transactions_aborted} aborted · fenced drains ${d.fenced_drains} · recovered pages ${d.recovered_pages}`),
    h(C.Text, { fontSize: "sm", "data-testid": "delivery-throttling" }, `Throttling: ${d.throttled} 429s · waited ${d.throttle_waited_seconds} s${d.throttle_limit_reached ? ` · ${d.throttle_limit_reached} drain(s) reached the limit` : ""} · ${paced}`),
    h(C.Text, { fontSize: "xs", color: "fg.muted", "data-testid": "delivery-covers" }, `Summed over ${d.covers}.`),
  );
}

// The backfill DAG's `start`: beginning, resume, or a UTC timestamp (the "point in time" choice sends the timestamp).
const STARTS = ["beginning", "resume", "point in time"];

function Backfill({ source, backfillDag }) {
  const [form, setForm] = useState({ start: "beginning", point_in_time: "", document_budget: 10000, dry_run: true });
  const [trigger, state] = useAction(
    useCallback((key, body) => post(`/sources/${source}/backfill`, key, body), [source]),
  );
  const set = (name) => (e) => setForm({ ...form, [name]: e.target.type === "checkbox" ? e.target.checked : e.target.value });
  useEditing(`backfill-${source}`, form.start !== "beginning" || form.point_in_time !== "" || Number(form.document_budget) !== 10000 || !form.dry_run);
  const body = {
    start: form.start === "point in time" ? form.point_in_time : form.start,
    document_budget: Number(form.document_budget),
    dry_run: form.dry_run,
  };
  return h(
    Section,
    { title: `Backfill (runs ${backfillDag})` },
    h(
      C.HStack,
      { gap: 2, flexWrap: "wrap" },
      C.NativeSelect
        ? h(C.NativeSelect.Root, { size: "sm", maxW: "40" }, h(C.NativeSelect.Field, { value: form.start, onChange: set("start"), "aria-label": "start" }, STARTS.map((s) => h("option", { key: s, value: s }, s))), h(C.NativeSelect.Indicator, null))
        : h("select", { value: form.start, onChange: set("start"), "aria-label": "start" }, STARTS.map((s) => h("option", { key: s, value: s }, s))),
      h(C.Input, { size: "sm", maxW: "xs", placeholder: "point in time (UTC, ISO 8601)", value: form.point_in_time, onChange: set("point_in_time") }),
      h(C.Input, { size: "sm", maxW: "32", type: "number", value: form.document_budget, onChange: set("document_budget"), "aria-label": "document budget" }),
      h("label", null, h("input", { type: "checkbox", checked: form.dry_run, onChange: set("dry_run") }), " dry run"),
      h(C.Button, { size: "sm", variant: "outline", loading: state.busy, onClick: () => trigger(body) }, "Trigger backfill"),
    ),
    state.error ? h(C.Text, { color: "fg.error", fontSize: "sm", "data-testid": "backfill-error" }, state.error) : null,
    state.result ? h(C.Text, { fontSize: "sm", "data-testid": "backfill-result" }, `Triggered ${state.result.run_id}.`) : null,
  );
}

const STATE_COLOR = { suspended: "red", "broken config": "red", failing: "orange", overdue: "red", undeliverable: "orange", "never drained": "gray", lagging: "yellow", healthy: "green" };
// Where a row's state badge leads: the section of the source's panel that shows what the state counts.
const STATE_SECTION = { suspended: "suspensions", failing: "leases", overdue: "leases", undeliverable: "undeliverable", "never drained": "", lagging: "leases", healthy: "" };

// A broken sources entry's problems, each with the field it names (GET /sources lists them; the row's error says
// the same in one line).
function BrokenProblems({ row, broken }) {
  const entry = (broken || []).find((b) => (b.name || `sources[${b.index}]`) === row.source);
  if (!entry) return h(C.Text, { fontSize: "xs", color: "fg.error", "data-testid": "broken-problem" }, row.error);
  return entry.problems.map((p, i) =>
    h(C.Text, { key: i, fontSize: "xs", color: "fg.error", "data-testid": "broken-problem" }, p.field ? h(C.Code, { size: "sm", mr: 1, "data-testid": "broken-field" }, p.field) : null, p.message),
  );
}

// The top of the page: one row per source, the worst first (the API sorts; the state is the core's rule).
function Overview({ data, broken, onOpen }) {
  const columns = ["Source", "State", "Leases", "Pending", "Lag", "Undeliverable", "Last drain", "Published (1 h)", "RU / delivered"];
  return h(
    C.Table.Root,
    { size: "sm", variant: "outline", mb: 4, "data-testid": "chatter-overview" },
    h(C.Table.Header, null, h(C.Table.Row, null, columns.map((c) => h(C.Table.ColumnHeader, { key: c, px: 2 }, c)))),
    h(
      C.Table.Body,
      null,
      data.rows.map((r) => {
        // A broken entry has no panel: its row names the field and says what is wrong, and opens nothing.
        const openable = r.state !== "broken config";
        const go = (section) => (e) => {
          e.preventDefault();
          e.stopPropagation();
          onOpen(r.source, section);
        };
        const jump = (section, props, label) => h(C.Badge, { as: "a", href: `#chatter-${r.source}${section ? `-${section}` : ""}`, onClick: go(section), cursor: "pointer", ...props }, label);
        return h(
          C.Table.Row,
          { key: r.source, "data-testid": `overview-${r.source}`, "data-state": r.state, cursor: openable ? "pointer" : "default", onClick: openable ? go("") : undefined, title: openable ? `Open ${r.source}` : undefined },
          h(
            Cell,
            { fontWeight: "semibold" },
            r.source,
            r.live ? h(C.Badge, { ml: 2, colorPalette: "blue", "data-testid": "overview-live" }, "live") : null,
            r.live ? h(C.Text, { fontSize: "xs", fontWeight: "normal", color: "fg.muted", "data-testid": "overview-follow" }, followText({ last_poll_at: r.last_poll_at, published_last_minute: r.published_last_minute, lag_seconds: r.follow_lag_seconds })) : null,
          ),
          h(Cell, { title: r.error || r.reasons.join("; ") }, openable ? jump(STATE_SECTION[r.state] || "", { colorPalette: STATE_COLOR[r.state] || "gray", "data-testid": "overview-state" }, r.state) : h(C.Badge, { colorPalette: STATE_COLOR[r.state] || "gray", "data-testid": "overview-state" }, r.state), r.error ? h(BrokenProblems, { row: r, broken }) : null),
          h(Cell, null, openable ? jump("leases", { variant: "outline", "data-testid": "overview-leases" }, `${r.leases}`) : "–", r.suspended_leases ? jump("suspensions", { ml: 1, colorPalette: "red" }, `${r.suspended_leases} suspended`) : null),
          h(Cell, null, r.pending === null ? "–" : `${r.pending}${r.pending_bounded ? "+" : ""}`),
          h(Cell, { "data-testid": "overview-lag", title: r.max_pending_age_seconds ? `alert over ${seconds(r.max_pending_age_seconds)} (max_pending_age_seconds)` : "time the oldest pending document has waited" }, lag(r.lag_seconds, r.caught_up), r.pending_age_verdict === "over" ? h(C.Badge, { ml: 1, colorPalette: "red", "data-testid": "overview-overdue" }, `over ${seconds(r.max_pending_age_seconds)}`) : null),
          h(Cell, { "data-testid": "overview-undeliverable" }, r.undeliverable ? jump("undeliverable", { colorPalette: "orange" }, `${r.undeliverable}`) : r.undeliverable === null ? "–" : "0"),
          h(Cell, null, r.last_drain_at ? `${when(r.last_drain_at)} (${r.last_drain_state || "?"})` : "–"),
          h(Cell, { "data-testid": "overview-published" }, `${r.published_last_hour}`),
          h(Cell, null, r.request_units_per_delivered === null ? "–" : `${r.request_units_per_delivered}`),
        );
      }),
    ),
  );
}

// A healthy source starts folded to its header line with its state, and so does one that never drained (its panel
// would be empty), so the ones that need attention stand out (a failing or lagging one is not folded); its overview
// row or its Details button unfolds it.
const FOLDED = ["healthy", "never drained"];
function SourcePanel({ source, state, backfillDag, runId, quiet, open, onOpen, tick, refresh }) {
  if (quiet && !open)
    return h(
      C.HStack,
      { borderWidth: "1px", borderRadius: "md", px: 4, py: 2, mb: 2, gap: 3, "data-testid": `source-${source}-folded` },
      h(C.Heading, { size: "sm" }, source),
      h(C.Badge, { colorPalette: STATE_COLOR[state] || "gray", "data-testid": "folded-state" }, state || "healthy"),
      h(C.Button, { size: "xs", variant: "ghost", onClick: () => onOpen(source, "") }, "Details"),
    );
  return h(OpenPanel, { source, backfillDag, runId, tick, refresh });
}

// The panel's header stays in view while its sections scroll under it, so a jump to a section keeps the source's
// name on screen; the sections leave room for it when scrolled to (scroll-margin-top).
const HEADER_PX = 56;

function OpenPanel({ source, backfillDag, runId, tick, refresh }) {
  const [view, setView] = useState(null);
  const [error, setError] = useState(null);
  const load = useCallback(async () => {
    try {
      setView(await call(`/sources/${source}`));
      setError(null);
    } catch (e) {
      setError(String(e.message || e));
    }
  }, [source]);
  useEffect(() => {
    load();
  }, [load, tick]);
  // This run by its id (however old, a backfill run too), not only among the overview's latest runs.
  const [run, setRun] = useState(null);
  useEffect(() => {
    if (runId) call(`/sources/${source}/runs/${encodeURIComponent(runId)}`).then((r) => setRun(r.point), () => setRun(null));
  }, [source, runId]);
  // A refresh that fails keeps the panel drawn with its last view (and what the user typed in its forms), saying
  // the update failed; only a panel that never loaded shows the error alone.
  if (!view) return error ? h(C.Text, { color: "fg.error" }, error) : h(C.Spinner, { size: "sm" });
  const can = view.permissions || { edit: false, backfill: false };
  const section = (name, child) => h(C.Box, { id: `chatter-${source}-${name}`, style: { scrollMarginTop: `${HEADER_PX + 8}px` } }, child);
  const age = view.pending_age || {};
  return h(
    C.Box,
    { borderWidth: "1px", borderRadius: "md", px: 4, pb: 4, mb: 4, "data-testid": `source-${source}` },
    h(
      C.HStack,
      { gap: 3, position: "sticky", top: 0, zIndex: 1, bg: "bg", py: 3, minH: `${HEADER_PX}px`, "data-testid": "panel-header" },
      h(C.Heading, { size: "md", "data-testid": "panel-name" }, source),
      h(C.Text, { fontSize: "sm", color: "fg.muted" }, view.dag_id),
      h(C.Badge, { colorPalette: view.suspensions.length ? "red" : "green", "data-testid": "suspended-count" }, `${view.suspensions.length} suspended`),
      h(C.Badge, { colorPalette: view.undeliverable_count ? "orange" : "green", "data-testid": "undeliverable-count" }, `${view.undeliverable_count} undeliverable`),
      h(C.Badge, { colorPalette: age.verdict === "over" ? "red" : "gray", "data-testid": "pending-age" }, `oldest pending ${age.seconds === 0 ? "none (caught up)" : age.seconds === null || age.seconds === undefined ? "unknown" : seconds(age.seconds)}${age.limit_seconds ? ` / limit ${seconds(age.limit_seconds)}` : ""}`),
      h(C.Button, { size: "xs", variant: "ghost", onClick: refresh }, "Refresh"),
    ),
    error ? h(C.Text, { mt: 1, fontSize: "sm", color: "fg.error", "data-testid": "panel-error" }, `Last update failed: ${error}`) : null,
    can.edit && view.idempotency && view.idempotency.warning ? h(C.Text, { mt: 1, fontSize: "xs", color: "fg.warning", "data-testid": "idempotency-warning" }, `Actions: ${view.idempotency.warning}.`) : null,
    run ? h(C.Text, { mt: 2, fontSize: "sm", "data-testid": "this-run" }, `This run: published ${run.published}, delivered ${run.delivered}, undeliverable ${run.undeliverable}, refused batches ${run.refused_batches}.`) : null,
    section("suspensions", h(Suspensions, { view })),
    section("leases", h(Leases, { source, view, reload: refresh })),
    section("undeliverable", h(Undeliverable, { source, reload: refresh, canEdit: can.edit, tick })),
    h(Runs, { view, backfillDag }),
    h(Totals, { view }),
    h(Delivery, { view }),
    can.backfill ? h(Backfill, { source, backfillDag }) : h(C.Text, { fontSize: "xs", color: "fg.muted", "data-testid": "read-only" }, "Read-only: you may not edit this DAG or trigger a backfill."),
  );
}

// The poll's control and its last time: visible, so a frozen page is never mistaken for a live one.
function PollControl({ paused, setPaused, lastPoll, held }) {
  return h(
    C.HStack,
    { gap: 2, mb: 2, fontSize: "xs", color: "fg.muted", "data-testid": "poll" },
    h(C.Text, { "data-testid": "poll-state" }, paused ? "Updates paused." : held ? "Updates held while you edit." : `Updates every ${POLL_SECONDS} s.`),
    h(C.Text, { "data-testid": "last-poll" }, lastPoll ? `Last updated ${when(lastPoll)}.` : ""),
    h(C.Button, { size: "xs", variant: "outline", "data-testid": "poll-toggle", onClick: () => setPaused(!paused) }, paused ? "Resume updates" : "Pause updates"),
  );
}

function ChatterOutbox(props) {
  const dagId = props && props.dagId;
  const runId = props && props.runId;
  const [sources, setSources] = useState(null);
  const [overview, setOverview] = useState(null);
  const [error, setError] = useState(null);
  // One refresh for the whole page: the overview, the glance and every open panel read at the same tick, so their
  // numbers agree after an action, a panel's Refresh, or a poll.
  const [tick, setTick] = useState(0);
  const [lastPoll, setLastPoll] = useState(null);
  const [paused, setPaused] = useState(false);
  const [held, setHeld] = useState(false);
  const [skipped, setSkipped] = useState(0);
  const polls = useRef({ done: 0 });
  const refresh = useCallback(() => setTick((t) => t + 1), []);
  useEffect(() => {
    let live = true;
    const reads = [call("/sources").then((s) => live && setSources(s))];
    if (!dagId) reads.push(call("/overview").then((o) => live && setOverview(o)));
    Promise.all(reads).then(
      () => {
        if (!live) return;
        polls.current.done += 1;
        setLastPoll(new Date().toISOString());
        setError(null);
      },
      (e) => live && setError(String(e.message || e)),
    );
    return () => {
      live = false;
    };
  }, [tick, dagId]);
  useEffect(() => {
    const timer = setInterval(() => {
      if (paused) return;
      const editingNow = isEditing();
      setHeld(editingNow);
      if (editingNow) setSkipped((n) => n + 1);
      else refresh();
    }, POLL_SECONDS * 1000);
    return () => clearInterval(timer);
  }, [paused, refresh]);
  // A run's tab: the source the run drained (a backfill run's from its conf).
  const [ranFor, setRanFor] = useState(null);
  useEffect(() => {
    if (dagId && runId) call(`/dags/${encodeURIComponent(dagId)}/runs/${encodeURIComponent(runId)}`).then((r) => setRanFor(r.source), () => setRanFor(null));
  }, [dagId, runId]);
  // Opening a source from the overview: unfold its panel, then scroll to the section asked for once it is drawn
  // (a panel loads its view first).
  const [unfolded, setUnfolded] = useState({});
  const [target, setTarget] = useState(null);
  const open = (name, section) => {
    setUnfolded((u) => ({ ...u, [name]: true }));
    setTarget({ id: `chatter-${name}${section ? `-${section}` : ""}`, panel: `source-${name}` });
  };
  useEffect(() => {
    if (!target) return undefined;
    let tries = 0;
    const timer = setInterval(() => {
      // Scroll once the open panel is drawn (not its folded line or its spinner): the page is as long as it gets.
      const found = document.getElementById(target.id);
      const el = found && found.querySelector(`[data-testid="${target.panel}"] [data-testid=panel-header]`) ? found : found && found.closest(`[data-testid="${target.panel}"]`) ? found : null;
      if (el || ++tries > 100) {
        clearInterval(timer);
        if (el) el.scrollIntoView({ behavior: "smooth", block: "start" });
      }
    }, 100);
    return () => clearInterval(timer);
  }, [target]);
  if (error && !sources) return h(C.Box, { p: 4 }, h(C.Text, { color: "fg.error" }, error));
  if (!sources) return h(C.Box, { p: 4 }, h(C.Spinner, null));
  // The panels follow the overview's order (most severe first, the core's rule); only a healthy source is folded.
  const rows = overview ? overview.rows : [];
  const rank = Object.fromEntries(rows.map((r, i) => [r.source, i]));
  const stateOf = Object.fromEntries(rows.map((r) => [r.source, r.state]));
  const needs = (s) => (s.name in stateOf ? !FOLDED.includes(stateOf[s.name]) : s.suspended_leases.length > 0 || s.undeliverable > 0);
  const all = [...sources.sources].sort((a, b) => (rank[a.name] ?? rows.length) - (rank[b.name] ?? rows.length));
  const shown = dagId ? all.filter((s) => s.dag_id === dagId || s.name === ranFor) : all;
  const suspended = sources.sources.reduce((n, s) => n + s.suspended_leases.length, 0);
  const undeliverable = sources.sources.reduce((n, s) => n + s.undeliverable, 0);
  return h(
    C.Box,
    { p: 4, "data-testid": "chatter-page", "data-polls": polls.current.done, "data-skipped-polls": skipped },
    h(C.Heading, { size: "lg", mb: 2 }, "Outbox drains"),
    h(PollControl, { paused, setPaused, lastPoll, held }),
    error ? h(C.Text, { color: "fg.error", fontSize: "sm", "data-testid": "poll-error" }, `Last update failed: ${error}`) : null,
    dagId ? null : h(C.Text, { fontSize: "xs", color: "fg.muted", mb: 2, "data-testid": "timezone" }, `Times in ${uiTimezone()} (the timezone Airflow's UI uses: chosen in its timezone menu, else the browser's), as YYYY-MM-DD HH:mm:ss.`),
    overview ? h(Overview, { data: overview, broken: sources.broken, onOpen: open }) : null,
    dagId
      ? null
      : h(
          C.HStack,
          { gap: 2, mb: 4, "data-testid": "chatter-glance" },
          h(C.Badge, { size: "lg", colorPalette: suspended ? "red" : "green", "data-testid": "glance-suspended" }, suspended ? `${suspended} suspended lease(s)` : "No lease suspended"),
          h(C.Badge, { size: "lg", colorPalette: undeliverable ? "orange" : "green", "data-testid": "glance-undeliverable" }, undeliverable ? `${undeliverable} undeliverable document(s)` : "No undeliverable document"),
        ),
    shown.length
      ? shown.map((s) => h(C.Box, { key: s.name, id: `chatter-${s.name}`, "data-testid": "panel-slot" }, h(SourcePanel, { source: s.name, state: stateOf[s.name], backfillDag: sources.backfill_dag_id, runId, quiet: !needs(s) && !dagId, open: !!unfolded[s.name], onOpen: open, tick, refresh })))
      : h(C.Text, null, dagId ? "This DAG is not an outbox drain DAG." : "No source is configured (or you may read none)."),
  );
}

// The tile on Airflow's home page (react_apps destination "dashboard"): the sources by severity with their oldest
// pending age, the suspended leases, and a link to the Outbox page. Same API, same rules, polled like the page.
function ChatterTile() {
  const [data, setData] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    let live = true;
    const read = () => call("/overview").then((o) => live && (setData(o), setError(null)), (e) => live && setError(String(e.message || e)));
    read();
    const timer = setInterval(read, POLL_SECONDS * 1000);
    return () => {
      live = false;
      clearInterval(timer);
    };
  }, []);
  const rows = data ? data.rows : [];
  const suspended = rows.reduce((n, r) => n + (r.suspended_leases || 0), 0);
  const ages = rows.filter((r) => r.lag_seconds !== null && r.lag_seconds !== undefined).map((r) => r.lag_seconds);
  const unknown = rows.some((r) => r.state !== "broken config" && (r.lag_seconds === null || r.lag_seconds === undefined));
  const oldest = ages.length ? Math.max(...ages) : null;
  return h(
    C.Box,
    { borderWidth: "1px", borderRadius: "md", p: 4, mb: 2, "data-testid": "chatter-tile" },
    h(
      C.HStack,
      { justifyContent: "space-between", mb: 2 },
      h(C.Heading, { size: "md" }, "Outbox drains"),
      h(C.Link, { href: airflowLink("plugin/chatter"), color: "fg.info", fontSize: "sm", "data-testid": "tile-link" }, "Open the Outbox page →"),
    ),
    error ? h(C.Text, { color: "fg.error", fontSize: "sm" }, error) : null,
    !data && !error ? h(C.Spinner, { size: "sm" }) : null,
    data
      ? h(
          C.HStack,
          { gap: 2, mb: 2, flexWrap: "wrap" },
          h(C.Badge, { colorPalette: suspended ? "red" : "green", "data-testid": "tile-suspended" }, `${suspended} suspended lease(s)`),
          h(C.Badge, { colorPalette: "gray", "data-testid": "tile-oldest" }, `oldest pending ${oldest === null ? "unknown" : oldest === 0 ? "none (caught up)" : seconds(oldest)}${unknown && oldest !== null ? " (some unknown)" : ""}`),
        )
      : null,
    data && !rows.length ? h(C.Text, { fontSize: "sm", color: "fg.muted" }, "No source you may read.") : null,
    rows.map((r) =>
      h(
        C.HStack,
        { key: r.source, gap: 2, fontSize: "sm", "data-testid": "tile-row", "data-state": r.state },
        h(C.Badge, { colorPalette: STATE_COLOR[r.state] || "gray", minW: "24" }, r.state),
        h(C.Text, { fontWeight: "semibold" }, r.source),
        h(C.Text, { color: "fg.muted" }, r.state === "broken config" ? "" : `lag ${lag(r.lag_seconds, r.caught_up)}${r.suspended_leases ? ` · ${r.suspended_leases} suspended` : ""}`),
        r.pending_age_verdict === "over" ? h(C.Badge, { colorPalette: "red", "data-testid": "tile-overdue" }, `oldest pending over ${seconds(r.max_pending_age_seconds)}`) : null,
      ),
    ),
  );
}

globalThis[TILE_NAME] = ChatterTile;
globalThis.ChatterOutbox = ChatterOutbox;
globalThis["Outbox drains"] = ChatterOutbox;
globalThis.Outbox = ChatterOutbox;
globalThis.AirflowPlugin = ChatterOutbox;
export default ChatterOutbox;

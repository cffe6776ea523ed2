/*
 * Switches that make the emulator behave like a Cosmos DB account under load. All are OFF by default.
 *
 *   latency_ms                  added to every request (not the admin calls): a real account's round trip.
 *   request_charges             a modelled `x-ms-request-charge` on every response (see REQUEST CHARGE MODEL below)
 *                               instead of 1.0.1's constant "1".
 *   provisioned_ru_per_second   RU/s per container (null: unlimited). Document requests that would spend more in
 *                               the current 1 s window are answered 429, substatus 3200, `x-ms-retry-after-ms` =
 *                               the time left in the window, like an account.
 *   containers                  {"dbs/<db>/colls/<coll>" or "<coll>": {"provisioned_ru_per_second": n | null}}:
 *                               a per-container budget overriding the global one.
 *   priority_based_execution    honour `x-ms-cosmos-priority-level: Low` (default false, as on an account where the
 *                               feature is off: the header is ignored). On: low-priority requests are throttled
 *                               first. What high-priority requests asked for in the last window (served, plus each
 *                               429 at the charge of their last served request) is kept for them; low-priority
 *                               requests get what is left. High-priority requests (and requests without the header) are throttled
 *                               only once high-priority requests alone spent the budget: low ones yield to them.
 *   partition_ranges            how many partition key ranges a container gets when it is created (default 1;
 *                               partition-ranges.js). Not an account-load switch, but set the same ways.
 *
 * Set at start from the environment (COSMOS_EMULATOR_LATENCY_MS, COSMOS_EMULATOR_REQUEST_CHARGES=1,
 * COSMOS_EMULATOR_PROVISIONED_RU, COSMOS_EMULATOR_PARTITION_RANGES) and at run time by `POST /_chatter/config` (merge semantics; a container entry set
 * to null is removed); `GET /_chatter/config` returns the current config; `GET /_chatter/stats` the cumulative
 * {requests, throttled, request_charge, throttled_low, throttled_high} per container ("dbs/<db>/colls/<coll>",
 * document requests). Admin calls are neither delayed, charged
 * nor throttled. docs/emulator.md is the user-facing description.
 *
 * REQUEST CHARGE MODEL (RU; KB = max(1, document bytes / 1024); modelled on published Cosmos DB figures for a
 * container with the default indexing policy: a 1 KB point read costs 1 RU, a 1 KB write about 5 RU, and both grow
 * roughly linearly with size: a 100 KB read about 10 RU, a 100 KB write about 50 RU):
 *   point read (200)                    1 + 0.1 * (KB - 1)
 *   create / upsert / replace / patch   5 + 0.45 * (KB - 1)   (KB of the document written; patch ~ a write)
 *   delete                              5 + 0.45 * (KB - 1)   (KB of the document deleted)
 *   change feed page                    2 per call + the point-read charge of each item returned (~1 RU per 1 KB item)
 *   query / read-feed page              2.5 per page + 0.25 per KB returned (at least 1 KB per item)
 *   transactional batch                 the sum of its operations' charges (each op also carries its own charge)
 *   errors (4xx), 304, metadata calls   1
 *   429                                 0 (a throttled request is not charged)
 * Charges are rounded to two decimals. The throttle spends the charge each response reports: with request_charges
 * off that is 1.0.1's "1" per request, so a budget is a request-rate limit; with it on, the modelled RU.
 */
"use strict";

const { answerError } = require("./layer-helpers.js");

const ADMIN_PREFIX = "/_chatter/";
// CHATTER_EMULATOR_TRACE=1 logs each request's routing headers to the server log (a debugging aid).
const TRACE = process.env.CHATTER_EMULATOR_TRACE === "1";
const TRACED_HEADERS = new Set(["a-im", "if-none-match", "if-modified-since", "x-ms-documentdb-partitionkeyrangeid",
  "x-ms-start-epk", "x-ms-end-epk", "x-ms-read-key-type", "x-ms-documentdb-partitionkey", "x-ms-max-item-count",
  "x-ms-documentdb-query-enablecrosspartition", "x-ms-cosmos-is-query-plan-request", "x-ms-continuation",
  "x-ms-documentdb-isquery"]);
const WINDOW_MS = 1000;
const MAX_ADMIN_BODY_BYTES = 1 << 20;

const config = {
  latency_ms: 0,
  request_charges: false,
  provisioned_ru_per_second: null,
  containers: {},
  partition_ranges: 1,
  priority_based_execution: false,
};
const MAX_PARTITION_RANGES = 256;

/** Per container key ("dbs/<db>/colls/<coll>"): RU spent in the current fixed 1 s window. */
const windows = new Map();

/** Requests waiting out their added latency right now (GET /_chatter/stats `in_latency`): several at once shows
 * the latency is a timer that concurrent requests wait out side by side, not a block of the event loop. */
let inLatency = 0;

/** Per container key: cumulative {requests, throttled, request_charge, change_feed_reads} of document requests
 * (GET /_chatter/stats); `change_feed_reads` counts the incremental (A-IM) reads among them. */
const stats = new Map();

function statsOf(key) {
  let s = stats.get(key);
  if (!s) {
    s = { requests: 0, throttled: 0, request_charge: 0, change_feed_reads: 0, throttled_low: 0, throttled_high: 0 };
    stats.set(key, s);
  }
  return s;
}

// ---------------------------------------------------------------------------------------------------------------
// The request charge model
// ---------------------------------------------------------------------------------------------------------------

const kilobytes = (bytes) => Math.max(1, bytes / 1024);
const round2 = (n) => Math.round(n * 100) / 100;
const sizeOf = (doc) => (doc === undefined || doc === null ? 0 : Buffer.byteLength(JSON.stringify(doc)));

const charges = {
  pointRead: (bytes) => round2(1 + 0.1 * (kilobytes(bytes) - 1)),
  write: (bytes) => round2(5 + 0.45 * (kilobytes(bytes) - 1)),
  changeFeedPage: (docs) => round2(2 + docs.reduce((sum, d) => sum + 1 + 0.1 * (kilobytes(sizeOf(d)) - 1), 0)),
  queryPage: (docs) => round2(2.5 + 0.25 * docs.reduce((sum, d) => sum + kilobytes(sizeOf(d)), 0)),
  error: () => 1,
  sizeOf,
};

// ---------------------------------------------------------------------------------------------------------------
// Config: validation and merge
// ---------------------------------------------------------------------------------------------------------------

class ConfigError extends Error {}

function checkBudget(value, field) {
  if (value === null) return null;
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) {
    throw new ConfigError(`${field} must be a positive number or null, got ${JSON.stringify(value)}`);
  }
  return value;
}

/** Validate a (partial) config and merge it into the current one; nothing is changed when any field is bad. */
function mergeConfig(patch) {
  if (patch === null || typeof patch !== "object" || Array.isArray(patch)) {
    throw new ConfigError("config must be a JSON object");
  }
  const known = new Set(Object.keys(config));
  for (const name of Object.keys(patch)) {
    if (!known.has(name)) throw new ConfigError(`unknown config field '${name}' (known: ${[...known].join(", ")})`);
  }
  const next = { ...config, containers: { ...config.containers } };
  if ("latency_ms" in patch) {
    const v = patch.latency_ms;
    if (!Number.isInteger(v) || v < 0) throw new ConfigError(`latency_ms must be a non-negative integer, got ${v}`);
    next.latency_ms = v;
  }
  if ("request_charges" in patch) {
    if (typeof patch.request_charges !== "boolean") {
      throw new ConfigError(`request_charges must be true or false, got ${JSON.stringify(patch.request_charges)}`);
    }
    next.request_charges = patch.request_charges;
  }
  if ("priority_based_execution" in patch) {
    if (typeof patch.priority_based_execution !== "boolean") {
      throw new ConfigError(
        `priority_based_execution must be true or false, got ${JSON.stringify(patch.priority_based_execution)}`);
    }
    next.priority_based_execution = patch.priority_based_execution;
  }
  if ("partition_ranges" in patch) {
    const v = patch.partition_ranges;
    if (!Number.isInteger(v) || v < 1 || v > MAX_PARTITION_RANGES) {
      throw new ConfigError(`partition_ranges must be an integer from 1 to ${MAX_PARTITION_RANGES}, got ${v}`);
    }
    next.partition_ranges = v;
  }
  if ("provisioned_ru_per_second" in patch) {
    next.provisioned_ru_per_second = checkBudget(patch.provisioned_ru_per_second, "provisioned_ru_per_second");
  }
  if ("containers" in patch) {
    const containers = patch.containers;
    if (containers === null || typeof containers !== "object" || Array.isArray(containers)) {
      throw new ConfigError("containers must be an object keyed by 'dbs/<db>/colls/<coll>' or container id");
    }
    for (const [key, value] of Object.entries(containers)) {
      if (value === null) {
        delete next.containers[key];
        continue;
      }
      if (typeof value !== "object" || Array.isArray(value)) {
        throw new ConfigError(`containers.${key} must be an object or null`);
      }
      for (const name of Object.keys(value)) {
        if (name !== "provisioned_ru_per_second") {
          throw new ConfigError(`unknown field containers.${key}.${name} (known: provisioned_ru_per_second)`);
        }
      }
      const budget = checkBudget(value.provisioned_ru_per_second ?? null, `containers.${key}.provisioned_ru_per_second`);
      next.containers[key] = { provisioned_ru_per_second: budget };
    }
  }
  Object.assign(config, next);
  windows.clear();
  return snapshot();
}

function snapshot() {
  return JSON.parse(JSON.stringify(config));
}

/** The start-time config from the environment; a bad value stops the server with the variable's name. */
function configureFromEnv(env) {
  const patch = {};
  const latency = env.COSMOS_EMULATOR_LATENCY_MS;
  if (latency !== undefined && latency !== "") {
    if (!/^\d+$/.test(latency)) throw new ConfigError(`COSMOS_EMULATOR_LATENCY_MS must be an integer >= 0: ${latency}`);
    patch.latency_ms = Number(latency);
  }
  const chargesOn = env.COSMOS_EMULATOR_REQUEST_CHARGES;
  if (chargesOn !== undefined && chargesOn !== "") {
    if (!["0", "1", "true", "false"].includes(chargesOn.toLowerCase())) {
      throw new ConfigError(`COSMOS_EMULATOR_REQUEST_CHARGES must be 1 or 0: ${chargesOn}`);
    }
    patch.request_charges = ["1", "true"].includes(chargesOn.toLowerCase());
  }
  const ru = env.COSMOS_EMULATOR_PROVISIONED_RU;
  if (ru !== undefined && ru !== "") {
    const n = Number(ru);
    if (!Number.isFinite(n) || n <= 0) throw new ConfigError(`COSMOS_EMULATOR_PROVISIONED_RU must be > 0: ${ru}`);
    patch.provisioned_ru_per_second = n;
  }
  const priority = env.COSMOS_EMULATOR_PRIORITY_BASED_EXECUTION;
  if (priority !== undefined && priority !== "") {
    if (!["0", "1", "true", "false"].includes(priority.toLowerCase())) {
      throw new ConfigError(`COSMOS_EMULATOR_PRIORITY_BASED_EXECUTION must be 1 or 0: ${priority}`);
    }
    patch.priority_based_execution = ["1", "true"].includes(priority.toLowerCase());
  }
  const ranges = env.COSMOS_EMULATOR_PARTITION_RANGES;
  if (ranges !== undefined && ranges !== "") {
    if (!/^\d+$/.test(ranges) || Number(ranges) < 1 || Number(ranges) > MAX_PARTITION_RANGES) {
      throw new ConfigError(`COSMOS_EMULATOR_PARTITION_RANGES must be an integer from 1 to ${MAX_PARTITION_RANGES}: `
        + `${ranges}`);
    }
    patch.partition_ranges = Number(ranges);
  }
  return mergeConfig(patch);
}

// ---------------------------------------------------------------------------------------------------------------
// Throttling
// ---------------------------------------------------------------------------------------------------------------

/** "dbs/<db>/colls/<coll>" for a document request (`.../docs` or `.../docs/<id>`), else null (metadata). */
function documentContainerOf(url) {
  const pathname = decodeURIComponent((url || "").split("?")[0]).replace(/^\/+/, "").replace(/\/+$/, "");
  const m = /^dbs\/([^/]+)\/colls\/([^/]+)\/docs(\/[^/]+)?$/.exec(pathname);
  return m ? { key: `dbs/${m[1]}/colls/${m[2]}`, id: m[2] } : null;
}

function budgetOf(container) {
  const own = config.containers[container.key] || config.containers[container.id];
  if (own && own.provisioned_ru_per_second !== null) return own.provisioned_ru_per_second;
  return config.provisioned_ru_per_second;
}

/** The container's current window. RU spent beyond the budget in the window just ended is carried into this one
 * (an account's budget is a rate: a request that overshoots delays the next ones), so the long-run rate stays at
 * the budget even when one request costs more than a window allows. */
function windowOf(key, now, budget) {
  const start = now - (now % WINDOW_MS);
  let w = windows.get(key);
  if (!w || w.start !== start) {
    const previous = w && w.start === start - WINDOW_MS ? w : null;
    const debt = previous && budget !== null ? Math.max(0, previous.spent - budget) : 0;
    const highDebt = previous && budget !== null ? Math.max(0, previous.highSpent - budget) : 0;
    // highReserve: what high-priority requests asked for in the window just ended (priority_based_execution).
    w = { start, spent: debt, highSpent: highDebt, highAsked: 0, highReserve: previous ? previous.highAsked : 0,
      highCharge: w ? w.highCharge : 0 };
    windows.set(key, w);
  }
  return w;
}

/** "low" for a request that carries `x-ms-cosmos-priority-level: Low` while priority_based_execution is on. */
function priorityOf(req) {
  if (!config.priority_based_execution) return "high";
  return String(req.headers["x-ms-cosmos-priority-level"] || "").toLowerCase() === "low" ? "low" : "high";
}

/** Milliseconds to wait, if this container's budget for the current window is spent for a request of `priority`
 * (a low-priority one leaves what high-priority requests asked for lately); else 0. */
function throttleDelay(container, now, priority) {
  const budget = budgetOf(container);
  if (budget === null) return 0;
  const w = windowOf(container.key, now, budget);
  // High priority: throttled only once high-priority requests alone spent the budget (low ones yield to them).
  // Low priority: throttled once the window's spend, plus the room kept for what high-priority requests asked for
  // in the last window and have not spent yet in this one, reaches the budget. Without the feature every request is
  // high, and this is the plain budget.
  const throttled = priority === "high"
    ? w.highSpent >= budget
    : w.spent + Math.max(0, w.highReserve - w.highAsked) >= budget;
  if (throttled && priority === "high") w.highAsked += w.highCharge;
  return throttled ? Math.max(1, w.start + WINDOW_MS - now) : 0;
}

function spend(container, ru, priority, changeFeed = false) {
  const s = statsOf(container.key);
  s.requests += 1;
  if (changeFeed) s.change_feed_reads += 1;
  s.request_charge = Math.round((s.request_charge + ru) * 100) / 100;
  const budget = budgetOf(container);
  if (budget === null) return;
  const w = windowOf(container.key, Date.now(), budget);
  w.spent += ru;
  if (priority === "high") {
    w.highSpent += ru;
    w.highAsked += ru;
    w.highCharge = ru;
  }
}

function answerThrottled(req, res, retryAfterMs) {
  answerError(req, res, {
    status: 429, substatus: 3200, code: "TooManyRequests", charge: 0,
    message: "Message: {\"Errors\":[\"Request rate is large. More Request Units may be needed, so no changes were "
      + "made. Please retry this request later.\"]}",
    extraHeaders: { "x-ms-retry-after-ms": String(retryAfterMs) },
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Admin calls
// ---------------------------------------------------------------------------------------------------------------

const adminRoutes = new Map([
  ["GET config", () => ({ status: 200, body: snapshot() })],
  ["POST config", (body) => ({ status: 200, body: mergeConfig(body) })],
  ["GET stats", () => ({ status: 200, body: { containers: Object.fromEntries(stats), in_latency: inLatency } })],
]);

/** Register `handler(body, query) -> {status, body}` for `<METHOD> /_chatter/<name>` (used by the range layer). */
function addAdminRoute(method, name, handler) {
  adminRoutes.set(`${method} ${name}`, handler);
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on("data", (c) => {
      size += c.length;
      if (size > MAX_ADMIN_BODY_BYTES) reject(new ConfigError("admin request body too large"));
      chunks.push(c);
    });
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

async function answerAdmin(req, res) {
  const [pathname, queryString] = req.url.split("?");
  const name = pathname.slice(ADMIN_PREFIX.length).replace(/\/+$/, "");
  const handler = adminRoutes.get(`${req.method} ${name}`);
  let status;
  let body;
  try {
    if (!handler) throw Object.assign(new ConfigError(`no admin route ${req.method} ${pathname}`), { status: 404 });
    const text = req.method === "GET" ? "" : await readBody(req);
    let parsed = {};
    if (text.trim()) {
      try {
        parsed = JSON.parse(text);
      } catch (err) {
        throw new ConfigError(`admin request body is not JSON: ${err.message}`);
      }
    }
    ({ status, body } = await handler(parsed, new URLSearchParams(queryString || "")));
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    status = err.status || 400;
    body = { code: status === 404 ? "NotFound" : "BadRequest", message: err.message };
  }
  res.statusCode = status;
  res.setHeader("content-type", "application/json");
  res.end(JSON.stringify(body));
}

// ---------------------------------------------------------------------------------------------------------------
// The request listener around 1.0.1's
// ---------------------------------------------------------------------------------------------------------------

/**
 * Replace the server's request listener with one that answers admin calls itself and, for every other request,
 * adds the configured latency, throttles document requests over their container's budget, and stamps the modelled
 * charge (handlers of the compat layer leave it in `req.chatterCharge`) when the response is written.
 */
function installOnServer(server) {
  const listeners = server.listeners("request");
  if (listeners.length !== 1) throw new Error(`expected one request listener, found ${listeners.length}`);
  const original = listeners[0];
  server.removeAllListeners("request");
  server.on("request", (req, res) => {
    if ((req.url || "").startsWith(ADMIN_PREFIX)) {
      answerAdmin(req, res).catch((err) => {
        console.error(err); // eslint-disable-line no-console
        if (!res.writableEnded) {
          res.statusCode = 500;
          res.end(JSON.stringify({ message: err.message }));
        }
      });
      return;
    }
    if (TRACE) {
      const h = req.headers;
      console.log(`trace ${req.method} ${req.url} ${JSON.stringify(Object.fromEntries(Object.entries(h) // eslint-disable-line no-console
        .filter(([k]) => TRACED_HEADERS.has(k))))}`);
    }
    const latency = config.latency_ms;
    const serve = () => {
      if (latency > 0) res.setHeader("x-chatter-added-latency-ms", String(latency));
      const container = documentContainerOf(req.url);
      const priority = priorityOf(req);
      if (container) {
        const wait = throttleDelay(container, Date.now(), priority);
        if (wait > 0) {
          statsOf(container.key).throttled += 1;
          statsOf(container.key)[`throttled_${priority}`] += 1;
          answerThrottled(req, res, wait);
          return;
        }
      }
      // Read before the handlers run: the change-feed fix takes the A-IM header away from 1.0.1's wrapper.
      const changeFeed = Boolean(req.headers["a-im"]);
      const end = res.end;
      res.end = function endWithCharge(...args) {
        const modelled = typeof req.chatterCharge === "number" ? req.chatterCharge : 1;
        const reported = config.request_charges ? modelled : 1;
        if (config.request_charges && !res.headersSent) res.setHeader("x-ms-request-charge", String(reported));
        if (container) spend(container, reported, priority, changeFeed);
        return end.apply(this, args);
      };
      original(req, res);
    };
    // A gate (holds.js) may park the request and serve it later; the latency is non-blocking (a timer of the
    // event loop), so concurrent requests wait out their round trips side by side, as against an account.
    const admit = () => {
      if (!requestGates.some((gate) => gate(req, res, serve))) serve();
    };
    if (latency > 0) {
      inLatency += 1;
      setTimeout(() => {
        inLatency -= 1;
        admit();
      }, latency);
    } else {
      admit();
    }
  });
}

/** Gates a request passes after its latency, before throttling: `gate(req, res, serve)` returns true when it took
 * the request over (and will call `serve` itself, or never). */
const requestGates = [];

function addRequestGate(gate) {
  requestGates.push(gate);
}

/** The current value of one config field. */
const setting = (name) => config[name];

module.exports = {
  setting, charges, configureFromEnv, mergeConfig, snapshot, installOnServer, addAdminRoute, addRequestGate, ConfigError,
};

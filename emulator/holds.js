/*
 * Holds: a test's way to stop a drain at a known point (e.g. a worker SIGKILLed mid-drain). Not an account
 * behaviour: an account never parks a request; a hold models "the client is in the middle of this request" for
 * exactly as long as a test needs, instead of hoping a sleep lands in the middle of a drain.
 *
 *   POST   /_chatter/holds {"container", "operations": [...], "range_id"?}   park every matching document request
 *                                                                           (not answered) until released
 *   POST   /_chatter/holds {..., "fail": {"status", "substatus"?,           a failing hold: answer every matching
 *                                         "message"?}}                      request at once with that error (e.g. a
 *                                                                           403 on the stamps: a read-only key),
 *                                                                           until released
 *   GET    /_chatter/holds                                                  each hold: how many wait now, matched,
 *                                                                           dropped
 *   DELETE /_chatter/holds?id=<id>                                          release one: each parked request whose
 *                                                                           client is still there is served as if
 *                                                                           it had just arrived; one whose client
 *                                                                           went away (a killed process) is dropped
 *
 * Operations: read, readfeed, changefeed, query, create, upsert, replace, patch, delete, batch. `range_id` narrows
 * a hold to one partition key range (the range a change feed read names, or the range holding a point operation's
 * or batch's partition key). Holds apply after the added latency, before throttling; admin calls are never held.
 */
"use strict";

const { answerError } = require("./layer-helpers.js");

const OPERATIONS = new Set(["read", "readfeed", "changefeed", "query", "create", "upsert", "replace", "patch",
  "delete", "batch"]);

const holds = new Map();
let nextId = 1;
let rangeIdOf = () => null;
let ConfigError = Error;

const header = (req, name) => {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
};

/** {dbId, collId, operation} of a document request, or null for anything else (metadata, admin). */
function classify(req) {
  const pathname = decodeURIComponent((req.url || "").split("?")[0]).replace(/^\/+/, "").replace(/\/+$/, "");
  const m = /^dbs\/([^/]+)\/colls\/([^/]+)\/docs(\/[^/]+)?$/.exec(pathname);
  if (!m) return null;
  const item = Boolean(m[3]);
  const method = (req.method || "GET").toUpperCase();
  let operation = null;
  if (method === "GET") operation = item ? "read" : (header(req, "a-im") ? "changefeed" : "readfeed");
  else if (method === "POST" && !item) {
    if (String(header(req, "x-ms-cosmos-is-batch-request") || "").toLowerCase() === "true") operation = "batch";
    else if (String(header(req, "x-ms-documentdb-isquery") || "").toLowerCase() === "true"
      || String(header(req, "content-type") || "").startsWith("application/query+json")) operation = "query";
    else if (String(header(req, "x-ms-documentdb-is-upsert") || "").toLowerCase() === "true") operation = "upsert";
    else operation = "create";
  } else if (method === "PATCH" && item) operation = "patch";
  else if (method === "PUT" && item) operation = "replace";
  else if (method === "DELETE" && item) operation = "delete";
  return operation ? { dbId: m[1], collId: m[2], operation } : null;
}

function parseHold(body) {
  if (body === null || typeof body !== "object" || Array.isArray(body)) throw new ConfigError("a hold must be a JSON object");
  const known = new Set(["container", "operations", "range_id", "fail"]);
  for (const name of Object.keys(body)) {
    if (!known.has(name)) throw new ConfigError(`unknown hold field '${name}' (known: ${[...known].join(", ")})`);
  }
  const m = /^\/?dbs\/([^/]+)\/colls\/([^/]+)\/?$/.exec(String(body.container || ""));
  if (!m) throw new ConfigError("container must be dbs/<db>/colls/<coll>");
  const operations = body.operations;
  if (!Array.isArray(operations) || operations.length === 0 || !operations.every((o) => OPERATIONS.has(o))) {
    throw new ConfigError(`operations must be a non-empty list of ${[...OPERATIONS].join(", ")}; got `
      + `${JSON.stringify(operations)}`);
  }
  if (body.range_id !== undefined && body.range_id !== null && typeof body.range_id !== "string") {
    throw new ConfigError("range_id must be a string (a partition key range id) or null");
  }
  return { dbId: m[1], collId: m[2], operations: new Set(operations), rangeId: body.range_id ?? null,
    fail: parseFail(body.fail ?? null) };
}

/** A failing hold's error: `{status: 400..599 except 429 (the throttle's), substatus?: int, message?: string}`. */
function parseFail(fail) {
  if (fail === null) return null;
  if (typeof fail !== "object" || Array.isArray(fail)) throw new ConfigError("fail must be an object or null");
  for (const name of Object.keys(fail)) {
    if (!["status", "substatus", "message"].includes(name)) {
      throw new ConfigError(`unknown field fail.${name} (known: status, substatus, message)`);
    }
  }
  const { status, substatus = 0, message = "Request refused by a failing hold of the emulator" } = fail;
  if (!Number.isInteger(status) || status < 400 || status > 599 || status === 429) {
    throw new ConfigError(`fail.status must be an HTTP error status 400-599 other than 429; got ${JSON.stringify(status)}`);
  }
  if (!Number.isInteger(substatus) || substatus < 0) throw new ConfigError("fail.substatus must be an integer >= 0");
  if (typeof message !== "string" || message === "") throw new ConfigError("fail.message must be a non-empty string");
  return { status, substatus, message };
}

const ERROR_CODES = { 400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 408: "RequestTimeout",
  409: "Conflict", 412: "PreconditionFailed", 413: "RequestEntityTooLarge", 500: "InternalServerError",
  503: "ServiceUnavailable" };

/** Answer a request of a failing hold with its error, shaped as an account's error response. */
function answerFailed(req, res, fail) {
  answerError(req, res, {
    status: fail.status, substatus: fail.substatus, code: ERROR_CODES[fail.status] || String(fail.status),
    message: fail.message, charge: 1,
  });
}

function describe(hold) {
  return {
    id: hold.id,
    container: `dbs/${hold.dbId}/colls/${hold.collId}`,
    operations: [...hold.operations],
    range_id: hold.rangeId,
    fail: hold.fail,
    waiting: hold.parked.filter((p) => !p.gone).length,
    matched: hold.matched,
    dropped: hold.dropped,
  };
}

/** The hold this request falls under, or null. */
function holdFor(req) {
  if (holds.size === 0) return null;
  const request = classify(req);
  if (!request) return null;
  for (const hold of holds.values()) {
    if (hold.dbId !== request.dbId || hold.collId !== request.collId) continue;
    if (!hold.operations.has(request.operation)) continue;
    if (hold.rangeId !== null && rangeIdOf(req, request.dbId, request.collId) !== hold.rangeId) continue;
    return hold;
  }
  return null;
}

/**
 * A request gate for account-model.js: park the request when a hold matches it (true), else let it be served
 * (false). A parked request whose connection closes is marked gone, so that a release drops it.
 */
function gate(req, res, serve) {
  const hold = holdFor(req);
  if (!hold) return false;
  if (hold.fail) {
    hold.matched += 1;
    answerFailed(req, res, hold.fail);
    return true;
  }
  const parked = { serve, gone: false };
  hold.matched += 1;
  hold.parked.push(parked);
  res.on("close", () => {
    if (!res.writableEnded) parked.gone = true;
  });
  return true;
}

function release(hold) {
  holds.delete(hold.id);
  let served = 0;
  for (const parked of hold.parked) {
    if (parked.gone) {
      hold.dropped += 1;
    } else {
      served += 1;
      parked.serve();
    }
  }
  hold.parked = [];
  return { ...describe(hold), served };
}

/** Register the admin calls and the gate. `model` is account-model.js; `rangeOf(req, dbId, collId)` the range. */
function install(model, rangeOf) {
  ConfigError = model.ConfigError;
  rangeIdOf = rangeOf;
  model.addRequestGate(gate);
  model.addAdminRoute("POST", "holds", (body) => {
    const spec = parseHold(body);
    const hold = { id: `h${nextId++}`, ...spec, parked: [], matched: 0, dropped: 0 };
    holds.set(hold.id, hold);
    return { status: 200, body: describe(hold) };
  });
  model.addAdminRoute("GET", "holds", () => ({ status: 200, body: { holds: [...holds.values()].map(describe) } }));
  model.addAdminRoute("DELETE", "holds", (_body, query) => {
    const hold = holds.get(query.get("id") || "");
    if (!hold) throw Object.assign(new ConfigError(`no hold ${query.get("id")}`), { status: 404 });
    return { status: 200, body: release(hold) };
  });
}

module.exports = { install, classify };

#!/usr/bin/env node
/*
 * @vercel/cosmosdb-server 1.0.1 with the compatibility layer airflow-chatter owns.
 *
 * Usage: node server.js --port 8081 --cert cert.pem --key key.pem
 *        (CHATTER_EMULATOR_COMPAT=0 starts the vanilla 1.0.1 server, to prove each compat test needs its fix)
 *
 * The layer patches the package in-process (no fork). It depends on the package's private internals, which is why
 * package.json pins the exact version. The package's route table captures handler references when `routes.js`
 * loads, so every override below is installed before `lib/index.js` (which requires the routes) is loaded.
 *
 * Each `fix...` function fixes one 1.0.1 defect listed in docs/emulator.md; its comment
 * names the defect. Protocol facts (headers azure-cosmos 4.17.1 sends) are in docs/emulator.md too.
 *
 * Beyond the fixes, the layer behaves like an account (docs/emulator.md): account-model.js (latency, request
 * charges, provisioned RU/s with 429s, the /_chatter admin calls), partition-ranges.js + range-routing.js (several
 * partition key ranges, splits), epk.js (effective partition keys as azure-cosmos computes them).
 */
"use strict";

const path = require("path");

const PKG = path.dirname(require.resolve("@vercel/cosmosdb-server/package.json"));
const lib = (p) => require(path.join(PKG, "lib", p));
const accountModel = require("./account-model.js");
const rangeRouting = require("./range-routing.js");
const holds = require("./holds.js");
const {
  headerOf, canonicalFromDocument, canonicalFromHeader, notFound, badRequest, collectionOf,
  documentsOf, queryOver, lsnFrom, documentsInScope, documentScopes, effectivePartitionKey, scopeDocuments,
} = require("./layer-helpers.js");

const { charges } = accountModel;

const EXPECTED_VERSION = "1.0.1";
const SWEEP_INTERVAL_MS = 250;
const MAX_BATCH_OPERATIONS = 100;

// Milliseconds-precise write time of each stored document object (`_ts` has one-second resolution only).
const writtenAtMs = new WeakMap();

// ---------------------------------------------------------------------------------------------------------------
// The fixes
// ---------------------------------------------------------------------------------------------------------------

/**
 * Fix: 1.0.1 uses only the FIRST level of a hierarchical (MultiHash) partition key as an item's identity, so the same
 * id under ["t1","u1"] and ["t1","u2"] conflicts (409) and reads with the full key 404. Identity becomes the full
 * key array (the canonical JSON above) on both sides: the stored document and the request header.
 */
function fixHierarchicalPartitionKeyIdentity(Documents, partitionHeader) {
  Documents.prototype._getPartition = function _getPartition(data) {
    return canonicalFromDocument(this._parent.read(), data);
  };
  // Handlers resolve `parsePartitionKey` on the module object at call time, so replacing the export reaches them.
  partitionHeader.parsePartitionKey = function parsePartitionKey(headerValue) {
    const canonical = canonicalFromHeader(headerValue);
    if (canonical === undefined) {
      throw Object.assign(new Error("missing x-ms-documentdb-partitionkey header"), { badRequest: true });
    }
    return canonical;
  };
}

/**
 * Fix: 1.0.1 items carry no `_lsn`, so the change feed has no position to resume from. Every write (create, replace,
 * upsert, patch; all go through Items._set) takes the next value of a per-container monotonic counter.
 */
function fixLsnOnEveryWrite(Documents, Items) {
  Documents.prototype._set = function _set(data) {
    this._lsnCounter = (this._lsnCounter || 0) + 1;
    data._lsn = this._lsnCounter;
    writtenAtMs.set(data, Date.now());
    // The change feed's log (every written version, in `_lsn` order) and the earliest expiry: see below.
    (this._lsnLog || (this._lsnLog = [])).push(data);
    noteExpiry(this, data);
    return Items.prototype._set.call(this, data);
  };
}

/*
 * Not a 1.0.1 defect, but what keeps the layer's cost per request the size of the request, as an account's is (an
 * account serves a feed page from its log and expires items in the background), instead of a scan of the whole
 * container per request. At 10,000 documents the scans made a feed page cost 2-3 times as much as at 2,000, and
 * every batch copy the container's maps, which a benchmark then counted as the store's own speed:
 *   - the change feed reads `_lsnLog`, every version written in `_lsn` order, from a binary search of its
 *     continuation, keeping the versions that are still the stored ones (compacted when mostly stale);
 *   - the TTL purge rescans a container only once its earliest known expiry has passed (or its default TTL changed);
 *   - a transactional batch keeps an undo log of the entries it changes, instead of a copy of the container.
 */

/** Lower the container's earliest expiry for a document just written (a longer TTL can only rescan early). */
function noteExpiry(documents, doc) {
  if (!documents._expiryScanned) return; // the first purge scans anyway
  const at = expiresAtMs({ defaultTtl: documents._ttlSeen }, doc);
  if (at !== null) documents._nextExpiryMs = Math.min(documents._nextExpiryMs, at);
}

/** Whether `doc` (a version from the log) is the version stored now. */
function isCurrent(documents, doc) {
  const item = documents._data.get(doc._rid);
  return item !== undefined && item.read() === doc;
}

/** The container's log of written versions in `_lsn` order, rebuilt from the stored ones when mostly stale. */
function lsnLog(documents) {
  const log = documents._lsnLog;
  if (log && log.length <= 2 * documents._data.size + 1024) return log;
  const rebuilt = [...documents._data.values()].map((item) => item.read()).sort((a, b) => a._lsn - b._lsn);
  documents._lsnLog = rebuilt;
  return rebuilt;
}

const FEED_SCAN_CHUNK = 256;

/**
 * The stored versions with `_lsn` > `after` (and `_ts` >= `sinceSeconds`), in scope, in `_lsn` order, at most `limit`.
 */
function changedAfter(req, collection, after, sinceSeconds, limit) {
  const documents = collection.documents;
  const log = lsnLog(documents);
  let lo = 0;
  let hi = log.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (log[mid]._lsn > after) hi = mid;
    else lo = mid + 1;
  }
  const changed = [];
  for (let i = lo; i < log.length && changed.length < limit; i += FEED_SCAN_CHUNK) {
    const live = log.slice(i, i + FEED_SCAN_CHUNK)
      .filter((doc) => doc._lsn > after && isCurrent(documents, doc))
      .filter((doc) => sinceSeconds === null || doc._ts >= sinceSeconds);
    for (const doc of scopeDocuments(req, collection, live)) {
      if (changed.length >= limit) break;
      changed.push(doc);
    }
  }
  return changed;
}

/** Seconds of time-to-live for a stored document, or null when it never expires. */
function effectiveTtlSeconds(collectionData, doc) {
  const defaultTtl = collectionData.defaultTtl;
  if (defaultTtl === undefined || defaultTtl === null) return null; // TTL off: item `ttl` is ignored
  const itemTtl = doc.ttl;
  if (typeof itemTtl === "number" && itemTtl !== 0) return itemTtl === -1 ? null : itemTtl;
  return defaultTtl === -1 ? null : defaultTtl;
}

/** When a stored document expires (ms since the epoch: write time + effective ttl), or null when it never does. */
function expiresAtMs(collectionData, doc) {
  const ttl = effectiveTtlSeconds(collectionData, doc);
  if (ttl === null) return null;
  const written = writtenAtMs.has(doc) ? writtenAtMs.get(doc) : doc._ts * 1000;
  return written + ttl * 1000;
}

/** Remove the expired documents of one collection (a TTL expiry does not appear in the latest-version feed). */
function purgeExpired(collection) {
  const data = collection.read();
  if (!data || data.defaultTtl === undefined || data.defaultTtl === null) return;
  const documents = collection.documents;
  const now = Date.now();
  if (documents._expiryScanned && documents._ttlSeen === data.defaultTtl && now < documents._nextExpiryMs) return;
  let next = Infinity;
  for (const doc of documentsOf(collection)) {
    const at = expiresAtMs(data, doc);
    if (at === null) continue;
    if (now >= at) documents.delete(doc.id, documents._getPartition(doc));
    else next = Math.min(next, at);
  }
  documents._expiryScanned = true;
  documents._ttlSeen = data.defaultTtl;
  documents._nextExpiryMs = next;
}

/**
 * Fix: 1.0.1 ignores TTL entirely (container `defaultTtl`, item `ttl`, patched `ttl`): items never expire and stay
 * in reads, queries and the feed. Expiry is `write time + effective ttl`; every document request purges the
 * collection's expired items first (so they vanish at once), and a sweeper frees memory in the background.
 */
function fixTtlExpiry(handlerModules) {
  let account = null;
  for (const mod of handlerModules) {
    const original = mod.default;
    mod.default = (acc, req, res, params) => {
      account = acc;
      const collection = collectionOf(acc, params.dbId, params.collId);
      if (collection) purgeExpired(collection);
      return original(acc, req, res, params);
    };
  }
  const sweep = () => {
    if (!account) return;
    for (const dbItem of account.databases._data.values()) {
      const database = account.database(dbItem.read().id);
      for (const collItem of database.collections._data.values()) {
        purgeExpired(database.collection(collItem.read().id));
      }
    }
  };
  setInterval(sweep, SWEEP_INTERVAL_MS).unref();
}

/**
 * Fix: 1.0.1 answers a point read of a missing id, a deleted id or a wrong partition key with HTTP 500 ("Cannot
 * read properties of undefined (reading 'pk')"), and ignores If-None-Match. Answer 404 NotFound, and 304 when
 * If-None-Match equals the current ETag.
 */
function fixPointRead(readDocument) {
  readDocument.default = (account, req, res, { dbId, collId, docId }) => {
    const collection = collectionOf(account, dbId, collId);
    if (!collection) return notFound(res);
    let partition;
    try {
      partition = canonicalFromHeader(headerOf(req, "x-ms-documentdb-partitionkey"));
    } catch (err) {
      return badRequest(res, err.message);
    }
    if (partition === undefined) return badRequest(res, "missing x-ms-documentdb-partitionkey header");
    const data = collection.document(docId, partition).read();
    if (!data || data.id !== docId) return notFound(res);
    const ifNoneMatch = headerOf(req, "if-none-match");
    if (ifNoneMatch && ifNoneMatch === data._etag) {
      res.statusCode = 304;
      res.setHeader("etag", data._etag);
      return {};
    }
    return data;
  };
}

/**
 * Fix: 1.0.1 rejects a query with a partition-key header unless the key is spelled out in the SQL (400 "missing
 * partition keys"), and with cross-partition enabled it ignores the key and returns every partition. Scope the query
 * to the documents of the header's key (a shorter array is a hierarchical-key prefix).
 */
function fixPartitionScopedQuery(queryDocuments, readItems, json) {
  queryDocuments.default = (account, req, res, { dbId, collId }) =>
    readItems.default(req, res, "Documents", async ({ continuation, maxItemCount }) => {
      const body = await json.default(req);
      if (!body.query) return badRequest(res, "missing query");
      const collection = collectionOf(account, dbId, collId);
      if (!collection) return null; // _read-items answers 404
      const header = headerOf(req, "x-ms-documentdb-partitionkey");
      let docs = documentsInScope(req, collection);
      if (header !== undefined && header !== "[{}]") {
        const wanted = JSON.parse(canonicalFromHeader(header));
        const coll = collection.read();
        docs = docs.filter((doc) => {
          const have = JSON.parse(canonicalFromDocument(coll, doc));
          return wanted.every((v, i) => JSON.stringify(v) === JSON.stringify(have[i]));
        });
      }
      try {
        return queryOver(collection, docs, body, { continuation, maxItemCount });
      } catch (err) {
        if (err.badRequest) return badRequest(res, err.message);
        throw err;
      }
    });
}


/**
 * Fix: 1.0.1 has no incremental change feed. It answers every A-IM read carrying If-None-Match with 304 and always
 * sends `ETag: "1"`, so a continuation or "Now" never sees a new change (0 of 50), a page size drops the rest, and a
 * start time is ignored. Serve the latest-version feed from `_lsn`:
 *   no If-None-Match -> from the beginning (or from If-Modified-Since); `*` -> 304 with the current highest `_lsn`;
 *   `<lsn>` -> items with `_lsn` > lsn, in `_lsn` order, at most x-ms-max-item-count, ETag = last `_lsn` returned;
 *   nothing new -> 304 with the unchanged ETag. Deleted and expired items are absent (they are no longer stored).
 */
function fixIncrementalChangeFeed(readDocuments) {
  const original = readDocuments.default;
  readDocuments.default = (account, req, res, params) => {
    if (!headerOf(req, "a-im")) return original(account, req, res, params);
    // The 1.0.1 request wrapper rewrites any A-IM 200 into 304 / ETag "1"; take the header away from it.
    delete req.headers["a-im"];
    const collection = collectionOf(account, params.dbId, params.collId);
    if (!collection) return notFound(res);
    const documents = collection.documents;
    const highest = documents._lsnCounter || 0;
    const ifNoneMatch = headerOf(req, "if-none-match");
    const ifModifiedSince = headerOf(req, "if-modified-since");
    if (ifNoneMatch === "*") {
      res.statusCode = 304;
      res.setHeader("etag", String(highest));
      return {};
    }
    const after = ifNoneMatch ? lsnFrom(ifNoneMatch) : 0;
    const sinceSeconds = !ifNoneMatch && ifModifiedSince ? Date.parse(ifModifiedSince) / 1000 : null;
    const maxItemCount = parseInt(headerOf(req, "x-ms-max-item-count") || "-1", 10);
    const changed = changedAfter(req, collection, after, sinceSeconds, maxItemCount > 0 ? maxItemCount : Infinity);
    if (changed.length === 0) {
      res.statusCode = 304;
      // Nothing new: keep the position. From a start time with nothing after it, every stored item is older.
      res.setHeader("etag", String(ifNoneMatch ? after : highest));
      return {};
    }
    res.statusCode = 200;
    res.setHeader("etag", String(changed[changed.length - 1]._lsn));
    res.setHeader("x-ms-item-count", String(changed.length));
    return { _rid: collection.read()._rid, Documents: changed, _count: changed.length };
  };
}

/**
 * Fix: 1.0.1 transactional batches are neither complete nor atomic: Upsert/Read/Replace/Delete fail with 500 (the
 * header partition key is never applied to an op), Patch is rejected (400), ops before the failing one stay written,
 * and ops after it are 424 but ops before it keep their success status. Apply the header key to every op, support
 * Patch (with `condition`), reject a body whose key differs from the header (400), and on the first failing op roll
 * the whole batch back, answering 207 with that op's status and 424 for every other op.
 */
function fixAtomicTransactionalBatch(batchDocuments, documentOperations, patchOperations, json) {
  batchDocuments.default = async (account, req, res, { dbId, collId }) => {
    const ops = await json.default(req);
    const collection = collectionOf(account, dbId, collId);
    if (!collection) return notFound(res);
    if (!Array.isArray(ops)) return badRequest(res, "Invalid request body");
    if (ops.length > MAX_BATCH_OPERATIONS) {
      return badRequest(res, `Batch request has more operations than what is supported (${MAX_BATCH_OPERATIONS}).`);
    }
    const partitionKey = headerOf(req, "x-ms-documentdb-partitionkey");
    let partition;
    try {
      partition = canonicalFromHeader(partitionKey);
    } catch (err) {
      return badRequest(res, err.message);
    }
    if (partition === undefined) return badRequest(res, "missing x-ms-documentdb-partitionkey header");

    const documents = collection.documents;
    const snapshot = {
      undo: undoLog(documents._data, documents._index),
      ridCount: documents._ridCount,
      lsn: documents._lsnCounter,
      logLength: lsnLog(documents).length,
    };
    const results = [];
    let failedAt = -1;
    try {
      for (let i = 0; i < ops.length && failedAt < 0; i += 1) {
        const op = ops[i] || {};
        const deleting = op.operationType === "Delete" && op.id;
        const before = deleting ? collection.document(op.id, partition).read() : undefined;
        const result = runBatchOperation(collection, op, partitionKey, partition, documentOperations,
          patchOperations);
        result.requestCharge = batchOperationCharge(op, result, before);
        results.push(result);
        if (result.statusCode >= 400) failedAt = i;
      }
      // The batch's own charge is the sum of its operations' (the request listener reports it).
      req.chatterCharge = Math.round(results.reduce((sum, r) => sum + r.requestCharge, 0) * 100) / 100;
    } finally {
      snapshot.undo.stop();
    }
    if (failedAt < 0) {
      res.statusCode = 200;
      return results.map((r) => ({
        statusCode: r.statusCode,
        requestCharge: r.requestCharge,
        eTag: r.body ? r.body._etag : undefined,
        resourceBody: r.body,
      }));
    }
    snapshot.undo.rollBack();
    documents._ridCount = snapshot.ridCount;
    documents._lsnCounter = snapshot.lsn;
    documents._lsnLog.length = snapshot.logLength; // the batch's versions were never written; LSNs are reused
    res.statusCode = 207;
    return ops.map((_, i) => (i === failedAt
      ? { statusCode: results[i].statusCode, requestCharge: results[i].requestCharge, resourceBody: results[i].body }
      : { statusCode: 424, requestCharge: 0 }));
  };
}

/**
 * Record every `set` / `delete` on `maps` until `stop()`; `rollBack()` restores each changed entry, newest first.
 * A batch's operations run synchronously, so only the batch writes these maps meanwhile.
 */
function undoLog(...maps) {
  const entries = [];
  for (const map of maps) {
    map.set = function set(key, value) {
      entries.push([map, key, Map.prototype.has.call(map, key), Map.prototype.get.call(map, key)]);
      return Map.prototype.set.call(map, key, value);
    };
    map.delete = function del(key) {
      entries.push([map, key, Map.prototype.has.call(map, key), Map.prototype.get.call(map, key)]);
      return Map.prototype.delete.call(map, key);
    };
  }
  const stop = () => {
    for (const map of maps) {
      delete map.set;
      delete map.delete;
    }
  };
  const rollBack = () => {
    for (let i = entries.length - 1; i >= 0; i -= 1) {
      const [map, key, had, value] = entries[i];
      if (had) map.set(key, value);
      else map.delete(key);
    }
  };
  return { stop, rollBack };
}

/** One batch operation's modelled charge (account-model.js): reads and writes as their single-request kinds. */
function batchOperationCharge(op, result, before) {
  if (result.statusCode >= 400) return charges.error();
  switch (op.operationType) {
    case "Read": return charges.pointRead(charges.sizeOf(result.body));
    case "Delete": return charges.write(charges.sizeOf(before));
    default: return charges.write(charges.sizeOf(result.body));
  }
}

function runBatchOperation(collection, op, partitionKey, partition, documentOperations, patchOperations) {
  const input = { ...op, partitionKey };
  const body = op.resourceBody;
  const hasBody = ["Create", "Upsert", "Replace"].includes(op.operationType);
  if (hasBody && body && canonicalFromDocument(collection.read(), body) !== partition) {
    return {
      statusCode: 400,
      body: { code: "BadRequest", message: "PartitionKey extracted from document doesn't match the one specified "
        + "in the header." },
    };
  }
  try {
    switch (op.operationType) {
      case "Create": return documentOperations.createOperation(collection, input);
      case "Upsert": return documentOperations.upsertOperation(collection, input);
      case "Read": return documentOperations.readOperation(collection, input);
      case "Delete": return documentOperations.deleteOperation(collection, input);
      case "Replace":
        if (body && op.id && body.id !== op.id) return { statusCode: 400, body: { message: "id mismatch" } };
        return documentOperations.replaceOperation(collection, input);
      case "Patch":
        return patchOperations.patchOperation(collection, {
          id: op.id,
          partitionKey,
          ifMatch: op.ifMatch,
          operations: (body || {}).operations || [],
          condition: (body || {}).condition,
        });
      default:
        return { statusCode: 400, body: { message: `Operation type '${op.operationType}' is not supported.` } };
    }
  } catch (err) {
    if (err.badRequest) return { statusCode: 400, body: { code: "BadRequest", message: err.message } };
    throw err;
  }
}

/**
 * Fix: 1.0.1 evaluates a conditional patch's `filter_predicate` after lower-casing the whole clause (so
 * `c.deliveryStatus = 'Pending'` becomes `c.deliverystatus = 'pending'` and never matches) and against every
 * document with that id in any partition. Evaluate the predicate, case intact, against the target document only.
 */
function fixPatchConditionCase(patchOperations) {
  const original = patchOperations.patchOperation;
  patchOperations.patchOperation = (collection, input) => {
    if (!input.condition) return original(collection, input);
    const unconditional = { ...input, condition: undefined };
    let data;
    try {
      data = collection.document(input.id, partitionHeaderCanonical(input.partitionKey)).read();
    } catch (err) {
      return { statusCode: 400, body: { code: "BadRequest", message: err.message } };
    }
    // Missing document or stale ETag: 1.0.1 answers those (404 / 412) before looking at the condition.
    if (!data || data.id !== input.id || (input.ifMatch && input.ifMatch !== data._etag)) {
      return original(collection, unconditional);
    }
    const m = /^\s*from\s+(\w+)\s+where\s+([\s\S]*)$/i.exec(input.condition);
    if (!m) return { statusCode: 400, body: { code: "BadRequest", message: "Invalid condition in patch request." } };
    let matched;
    try {
      matched = queryOver(collection, [data], { query: `SELECT * FROM ${m[1]} WHERE ${m[2]}` }, {}).result.length > 0;
    } catch (err) {
      return { statusCode: 400, body: { code: "BadRequest", message: "Invalid condition in patch request." } };
    }
    if (!matched) {
      return {
        statusCode: 412,
        body: { code: "PreconditionFailed", message: "Condition specified in the patch request is not satisfied." },
      };
    }
    return original(collection, unconditional);
  };
}

function partitionHeaderCanonical(headerValue) {
  const canonical = canonicalFromHeader(headerValue);
  if (canonical === undefined) throw new Error("missing x-ms-documentdb-partitionkey header");
  return canonical;
}

/**
 * Fix: 1.0.1 ignores `x-ms-start-epk` / `x-ms-end-epk`, the effective-partition-key range azure-cosmos sends for a
 * query scoped to a hierarchical-key prefix (1.0.1: 400) and for a change feed scoped by `partition_key=` (1.0.1:
 * every partition). Keep only the documents whose EPK lies in the range: [start, end), or exactly start when
 * start == end (the point range of one full key).
 */
function fixEffectivePartitionKeyRangeScope() {
  documentScopes.push((req, collection, docs) => {
    const start = headerOf(req, "x-ms-start-epk");
    const end = headerOf(req, "x-ms-end-epk");
    if (start === undefined || end === undefined) return docs;
    const data = collection.read();
    return docs.filter((doc) => {
      const epk = effectivePartitionKey(data, doc);
      if (epk === null) return true;
      return start === end ? epk === start : epk >= start && epk < end;
    });
  });
}

/**
 * Fix: a name-addressed container read (`GET dbs/<db>/colls/<coll>`) answers without `x-ms-alt-content-path`.
 * An account sends the owner's name path there (`dbs/<db>`), and the Java SDK builds the container's alt link from
 * it (parent path + `/colls/` + id): without it the link is null and every change feed request fails before it is
 * sent. The Python and Node SDKs take the link from the request path and never needed it.
 */
function fixAltContentPath(readCollection, readCollections) {
  const original = readCollection.default;
  readCollection.default = async (account, req, res, params) => {
    const body = await original(account, req, res, params);
    if (res.statusCode < 300) res.setHeader("x-ms-alt-content-path", `dbs/${params.dbId}`);
    return body;
  };
  const originalList = readCollections.default;
  readCollections.default = async (account, req, res, params) => {
    const body = await originalList(account, req, res, params);
    if (res.statusCode < 300) res.setHeader("x-ms-alt-content-path", `dbs/${params.dbId}`);
    return body;
  };
}

/**
 * Fix: 1.0.1 ignores `x-ms-documentdb-populatequotainfo` on a container read, so a client cannot learn how many
 * documents a container holds without a query that scans it (on this server a COUNT reads every document, and at
 * 100,000 documents blocked the event loop for a minute). Answer it as an account does: `x-ms-resource-usage` with
 * the container's `documentsCount` (expired items purged first) and `x-ms-resource-quota` with no count limit. The
 * sizes an account also reports are left out: they would need the scan this avoids.
 */
function fixQuotaInfo(readCollection) {
  const original = readCollection.default;
  readCollection.default = async (account, req, res, params) => {
    const body = await original(account, req, res, params);
    if (res.statusCode < 300 && String(headerOf(req, "x-ms-documentdb-populatequotainfo") || "").toLowerCase() === "true") {
      const collection = collectionOf(account, params.dbId, params.collId);
      if (collection) {
        purgeExpired(collection);
        res.setHeader("x-ms-resource-usage", `documentsCount=${collection.documents._data.size}`);
        res.setHeader("x-ms-resource-quota", "documentsCount=-1");
      }
    }
    return body;
  };
}

/**
 * Fix: 1.0.1 answers a query-plan request (`x-ms-cosmos-is-query-plan-request: True`, which the Java SDK sends before
 * every query in gateway mode) as if it were the query, so the SDK finds no `queryRanges` and throws
 * `IllegalArgumentException: sortedRanges`. Answer a plan as the gateway does for a query the engine runs as it
 * stands: no rewrite, no ORDER BY/aggregate/DISTINCT/TOP pipeline, over the whole EPK space (the SDK then fans out
 * to every partition key range, each answered by the range-scoped query). A query needing a client-side pipeline
 * is refused (400) rather than answered wrongly.
 */
const PIPELINE_QUERY = /\b(ORDER\s+BY|DISTINCT|TOP|GROUP\s+BY|OFFSET)\b|\b(COUNT|SUM|AVG|MIN|MAX)\s*\(/i;

function fixQueryPlan(queryDocuments, json) {
  const original = queryDocuments.default;
  queryDocuments.default = async (account, req, res, params) => {
    if (String(headerOf(req, "x-ms-cosmos-is-query-plan-request") || "").toLowerCase() !== "true") {
      return original(account, req, res, params);
    }
    const body = await json.default(req);
    if (!body || !body.query) return badRequest(res, "missing query");
    if (PIPELINE_QUERY.test(body.query)) {
      return badRequest(res, "the emulator plans only queries without ORDER BY, DISTINCT, TOP, GROUP BY, OFFSET or aggregates");
    }
    res.statusCode = 200;
    return {
      partitionedQueryExecutionInfoVersion: 2,
      queryInfo: {
        distinctType: "None", top: null, offset: null, limit: null, orderBy: [], orderByExpressions: [],
        groupByExpressions: [], groupByAliases: [], aggregates: [], groupByAliasToAggregateType: {},
        rewrittenQuery: "", hasSelectValue: false, dCountInfo: null, hasNonStreamingOrderBy: false,
      },
      queryRanges: [{ min: "", max: "FF", isMinInclusive: true, isMaxInclusive: false }],
    };
  };
}

/**
 * Fix: 1.0.1 answers `x-ms-documentdb-populatequerymetrics` with query metrics on every response, change-feed
 * pages included, and never sends the `x-ms-cosmos-index-utilization` header that accompanies them on an account.
 * The Java SDK then logs `ERROR IndexUtilizationInfo - Json not correctly formed` for every page (it decodes the
 * absent header as empty JSON). As on an account: no query metrics on a change-feed read (it is not a query), and
 * query metrics come with an index-utilization header (base64 JSON, no index used or suggested).
 */
const INDEX_UTILIZATION = Buffer.from(JSON.stringify({
  UtilizedSingleIndexes: [], PotentialSingleIndexes: [], UtilizedCompositeIndexes: [], PotentialCompositeIndexes: [],
})).toString("base64");

function fixQueryMetricsHeaders(handlerModules) {
  for (const mod of handlerModules) {
    const original = mod.default;
    mod.default = async (account, req, res, params) => {
      const changeFeed = Boolean(headerOf(req, "a-im"));
      const setHeader = res.setHeader;
      res.setHeader = function setHeaderAsAnAccount(name, value) {
        if (String(name).toLowerCase() === "x-ms-documentdb-query-metrics") {
          if (changeFeed) return this;
          setHeader.call(this, "x-ms-cosmos-index-utilization", INDEX_UTILIZATION);
        }
        return setHeader.call(this, name, value);
      };
      return original(account, req, res, params);
    };
  }
}

/**
 * Not a 1.0.1 defect but the account model's: leave each document request's modelled charge in
 * `req.chatterCharge` for the request listener (account-model.js), which reports it when request charges are on
 * and spends it from the container's provisioned RU/s. Batches set their own (the sum of their operations).
 */
function modelRequestCharges(handlerModules) {
  const kinds = {
    "read-document": (req, res, body) => (res.statusCode === 200 ? charges.pointRead(charges.sizeOf(body)) : 1),
    "read-documents": (req, res, body, ctx) => {
      const docs = (body && body.Documents) || [];
      if (res.statusCode >= 400) return charges.error();
      if (ctx.changeFeed) return res.statusCode === 200 ? charges.changeFeedPage(docs) : charges.changeFeedPage([]);
      return res.statusCode === 200 ? charges.queryPage(docs) : 1;
    },
    "query-documents": (req, res, body) => (res.statusCode === 200 ? charges.queryPage((body && body.Documents) || []) : 1),
    "create-document": writeCharge,
    "upsert-document": writeCharge,
    "replace-document": writeCharge,
    "patch-document": writeCharge,
    "delete-document": (req, res, body, ctx) => (res.statusCode < 300 ? charges.write(charges.sizeOf(ctx.before)) : 1),
  };
  for (const [name, mod] of handlerModules) {
    const kind = kinds[name];
    if (!kind) continue;
    const original = mod.default;
    mod.default = async (account, req, res, params) => {
      const ctx = { changeFeed: Boolean(headerOf(req, "a-im")) };
      if (name === "delete-document") ctx.before = documentFor(account, req, params);
      const body = await original(account, req, res, params);
      req.chatterCharge = kind(req, res, body, ctx);
      return body;
    };
  }
}

function writeCharge(req, res, body) {
  return res.statusCode < 300 ? charges.write(charges.sizeOf(body)) : charges.error();
}

/** The stored document a point request addresses (undefined when absent or the key header is unusable). */
function documentFor(account, req, { dbId, collId, docId }) {
  const collection = collectionOf(account, dbId, collId);
  if (!collection) return undefined;
  try {
    const partition = canonicalFromHeader(headerOf(req, "x-ms-documentdb-partitionkey"));
    if (partition === undefined) return undefined;
    const data = collection.document(docId, partition).read();
    return data && data.id === docId ? data : undefined;
  } catch (err) {
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Installation: every override goes in before routes.js (required by index.js) captures the handlers.
// ---------------------------------------------------------------------------------------------------------------

function installCompatibilityLayer() {
  const version = require(path.join(PKG, "package.json")).version;
  if (version !== EXPECTED_VERSION) {
    throw new Error(`compat layer targets @vercel/cosmosdb-server ${EXPECTED_VERSION}, found ${version}`);
  }
  if (require.cache[require.resolve(path.join(PKG, "lib", "routes.js"))]) {
    throw new Error("compat layer must be installed before the router module loads");
  }
  const Items = lib("account/items.js").default;
  const Documents = lib("account/documents.js").default;
  const json = lib("json.js");
  const readItems = lib("handler/_read-items.js");
  const documentOperations = lib("handler/_document-operations.js");
  const patchOperations = lib("handler/_patch-operations.js");
  const partitionHeader = lib("utils/get-partition-from-header.js");
  const h = (name) => lib(`handler/${name}.js`);

  fixHierarchicalPartitionKeyIdentity(Documents, partitionHeader);
  fixLsnOnEveryWrite(Documents, Items);
  fixPointRead(h("read-document"));
  fixPartitionScopedQuery(h("query-documents"), readItems, json);
  fixAltContentPath(h("read-collection"), h("read-collections"));
  fixQuotaInfo(h("read-collection"));
  fixEffectivePartitionKeyRangeScope();
  fixIncrementalChangeFeed(h("read-documents"));
  rangeRouting.servePartitionKeyRanges(h("create-collection"), h("read-partition-key-ranges"), h("read-documents"),
    h("query-documents"));
  rangeRouting.addRangeAdminRoutes();
  holds.install(accountModel, rangeRouting.rangeIdOfRequest);
  fixPatchConditionCase(patchOperations);
  fixAtomicTransactionalBatch(h("batch-documents"), documentOperations, patchOperations, json);
  // Last: wraps the (already replaced) document handlers so that expiry is applied before each of them runs.
  const chargedHandlers = ["read-document", "read-documents", "query-documents", "create-document",
    "upsert-document", "replace-document", "delete-document", "patch-document"];
  modelRequestCharges(chargedHandlers.map((name) => [name, h(name)]));
  fixTtlExpiry(["read-document", "read-documents", "query-documents", "batch-documents", "create-document",
    "upsert-document", "replace-document", "delete-document", "patch-document"].map(h));
  // Outermost: they answer (a plan) or edit headers around whatever the handlers above became.
  fixQueryPlan(h("query-documents"), json);
  fixQueryMetricsHeaders([h("read-documents"), h("query-documents")]);
}

// ---------------------------------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------------------------------

/**
 * Node 20 pauses a keep-alive connection's HTTP parser when a request arrives while the previous response on that
 * connection has not drained yet (its write returned false: a change-feed page is larger than the socket's 16 KiB
 * high-water mark, and the "drain" callback can come after the client has already read the response and sent the
 * next request). A TLS socket still delivers the record it already read, so a request whose body comes in a later
 * record than its headers reaches the paused parser (HPE_PAUSED) and Node destroys the socket without answering:
 * the SDK sees "Remote end closed connection without response". With the added latency this hit most drains. A
 * write high-water mark above any response this server writes means no write ever reports back-pressure, so the
 * parser is never paused. (`highWaterMark` in the server options does not reach TLS sockets in Node 20.)
 */
const WRITE_HIGH_WATER_MARK = 256 * 1024 * 1024;

function raiseWriteHighWaterMark(server) {
  server.on("secureConnection", (socket) => {
    if (socket._writableState) socket._writableState.highWaterMark = WRITE_HIGH_WATER_MARK;
  });
}

function parseArgs(argv) {
  const args = { port: 8081, host: "127.0.0.1" };
  for (let i = 0; i < argv.length; i += 2) args[argv[i].replace(/^--/, "")] = argv[i + 1];
  return args;
}

function main() {
  const fs = require("fs");
  const args = parseArgs(process.argv.slice(2));
  const compat = process.env.CHATTER_EMULATOR_COMPAT !== "0";
  if (compat) installCompatibilityLayer();
  let settings;
  try {
    settings = accountModel.configureFromEnv(process.env);
  } catch (err) {
    console.error(`cosmos-emulator: ${err.message}`); // eslint-disable-line no-console
    process.exit(2);
  }
  const { createHttpsServer } = lib("index.js");
  const server = createHttpsServer({
    cert: fs.readFileSync(args.cert),
    key: fs.readFileSync(args.key),
    keepAlive: true,
  });
  raiseWriteHighWaterMark(server);
  server.keepAliveTimeout = 60000;
  accountModel.installOnServer(server);
  server.listen(Number(args.port), args.host, () => {
    // eslint-disable-next-line no-console
    console.log(`cosmos-emulator: @vercel/cosmosdb-server ${EXPECTED_VERSION} `
      + `(${compat ? "with" : "WITHOUT"} compat layer) ready at https://${args.host}:${args.port}/ `
      + `config ${JSON.stringify(settings)}`);
  });
  const stop = () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

if (require.main === module) main();

module.exports = { installCompatibilityLayer };

/*
 * Serving several partition key ranges, and splits, on top of 1.0.1's handlers. The range table itself
 * (bounds, split, ids) is partition-ranges.js; this module wires it into /pkranges, the change feed and queries,
 * and adds the admin calls /_chatter/ranges, /_chatter/split and /_chatter/epk.
 */
"use strict";

const accountModel = require("./account-model.js");
const partitionRanges = require("./partition-ranges.js");
const {
  headerOf, partitionKeyPaths, notFound, collectionOf, documentsOf, effectivePartitionKey, lsnFrom, documentScopes,
} = require("./layer-helpers.js");

/**
 * Not a 1.0.1 defect but an account's behaviour: several partition key ranges, and splits (partition-ranges.js). Each container
 * gets the configured number of ranges when it is created. `/pkranges` serves them, with the incremental (A-IM)
 * feed the SDK's routing-map refresh reads; a feed or query naming a range by `x-ms-documentdb-partitionkeyrangeid`
 * sees only the documents whose EPK lies in it, and a split (gone) range answers 410 / substatus 1002.
 */
let accountRef = null;

function rangesOf(collection) {
  const documents = collection.documents;
  if (!documents._chatterRanges) {
    documents._chatterRanges = partitionRanges.newTable(accountModel.setting("partition_ranges"));
  }
  return documents._chatterRanges;
}

class RangeGoneError extends Error {}

function formatRange(collection, range) {
  const data = collection.read();
  return {
    id: range.id,
    _rid: collection.partitionKeyRanges._rid(Number(range.id)),
    _self: `${data._self}/pkranges/${range.id}`,
    _etag: `"${data._rid}-${range.id}-${range.version}"`,
    _ts: data._ts,
    _lsn: range.version,
    minInclusive: range.minInclusive,
    maxExclusive: range.maxExclusive,
    ridPrefix: Number(range.id),
    throughputFraction: 1 / rangesOf(collection).live.length,
    status: "online",
    parents: range.parents,
  };
}

function servePartitionKeyRanges(createCollection, readPartitionKeyRanges, readDocuments, queryDocuments) {
  const create = createCollection.default;
  createCollection.default = async (account, req, res, params) => {
    accountRef = account;
    const body = await create(account, req, res, params);
    if (res.statusCode === 201 && body && body.id) {
      const collection = collectionOf(account, params.dbId, body.id);
      if (collection) rangesOf(collection);
    }
    return body;
  };

  readPartitionKeyRanges.default = (account, req, res, { dbId, collId }) => {
    accountRef = account;
    const incremental = Boolean(headerOf(req, "a-im"));
    delete req.headers["a-im"]; // 1.0.1's request wrapper would rewrite the answer into 304 / ETag "1"
    const collection = collectionOf(account, dbId, collId);
    if (!collection) return notFound(res);
    const table = rangesOf(collection);
    const ifNoneMatch = headerOf(req, "if-none-match");
    let ranges = table.live;
    if (incremental && ifNoneMatch && ifNoneMatch !== "*") {
      const since = lsnFrom(ifNoneMatch);
      ranges = table.live.filter((r) => r.version > since);
      if (ranges.length === 0) {
        res.statusCode = 304;
        res.setHeader("etag", String(table.version));
        return {};
      }
    }
    res.statusCode = 200;
    res.setHeader("etag", String(table.version));
    res.setHeader("x-ms-item-count", String(ranges.length));
    const PartitionKeyRanges = ranges.map((r) => formatRange(collection, r));
    return { _rid: collection.read()._rid, PartitionKeyRanges, _count: PartitionKeyRanges.length };
  };

  documentScopes.unshift((req, collection, docs) => {
    const header = headerOf(req, "x-ms-documentdb-partitionkeyrangeid");
    if (header === undefined) return docs;
    const id = partitionRanges.rangeIdOf(header);
    const table = rangesOf(collection);
    const range = table.live.find((r) => r.id === id);
    if (!range) throw new RangeGoneError(`The partition key range ${id} is gone (it split).`);
    const data = collection.read();
    return docs.filter((doc) => partitionRanges.rangeOfEpk(table, effectivePartitionKey(data, doc)) === range);
  });

  for (const mod of [readDocuments, queryDocuments]) {
    const original = mod.default;
    mod.default = async (account, req, res, params) => {
      try {
        // Before the handler: a gone range answers 410 even where the feed would answer 304 ("Now").
        const header = headerOf(req, "x-ms-documentdb-partitionkeyrangeid");
        const collection = header === undefined ? null : collectionOf(account, params.dbId, params.collId);
        if (collection) {
          const id = partitionRanges.rangeIdOf(header);
          if (!rangesOf(collection).live.some((r) => r.id === id)) {
            throw new RangeGoneError(`The partition key range ${id} is gone (it split).`);
          }
        }
        return await original(account, req, res, params);
      } catch (err) {
        if (!(err instanceof RangeGoneError)) throw err;
        res.statusCode = 410;
        res.setHeader("x-ms-substatus", "1002");
        return { code: "Gone", message: err.message };
      }
    };
  }
}

/** The collection an admin call names: "dbs/<db>/colls/<coll>", or a container id found in exactly one database. */
function adminCollection(name) {
  if (!accountRef) throw new accountModel.ConfigError("no container has been created yet");
  if (typeof name !== "string" || !name) throw new accountModel.ConfigError("container is required");
  const m = /^\/?dbs\/([^/]+)\/colls\/([^/]+)\/?$/.exec(name);
  const found = [];
  if (m) {
    const c = collectionOf(accountRef, m[1], m[2]);
    if (c) found.push(c);
  } else {
    for (const dbItem of accountRef.databases._data.values()) {
      const c = collectionOf(accountRef, dbItem.read().id, name);
      if (c) found.push(c);
    }
  }
  if (found.length !== 1) {
    throw Object.assign(new accountModel.ConfigError(found.length ? `container ${name} is ambiguous: name its `
      + "database (dbs/<db>/colls/<coll>)" : `container ${name} does not exist`), { status: found.length ? 400 : 404 });
  }
  return found[0];
}

function rangesAnswer(collection) {
  const table = rangesOf(collection);
  return { version: table.version, ranges: table.live.map((r) => formatRange(collection, r)),
    gone: Object.fromEntries(table.gone) };
}

function addRangeAdminRoutes() {
  accountModel.addAdminRoute("GET", "ranges", (_body, query) => ({
    status: 200, body: rangesAnswer(adminCollection(query.get("container"))),
  }));
  accountModel.addAdminRoute("POST", "split", (body) => {
    const collection = adminCollection(body.container);
    if (typeof body.range_id !== "string") throw new accountModel.ConfigError("range_id (a string) is required");
    const data = collection.read();
    const epks = documentsOf(collection).map((doc) => effectivePartitionKey(data, doc));
    let result;
    try {
      result = partitionRanges.split(rangesOf(collection), body.range_id, epks, body.at);
    } catch (err) {
      if (err instanceof partitionRanges.RangeError400) throw new accountModel.ConfigError(err.message);
      throw err;
    }
    return { status: 200, body: { parent: result.parent.id,
      children: result.children.map((r) => formatRange(collection, r)) } };
  });
  // The EPK (and range) the server computes for partition key values: GET ?container=&pk=<json>, or POST
  // {"container", "pks": [<json value or array>, ...]} for many at once.
  accountModel.addAdminRoute("GET", "epk", (_body, query) => {
    const collection = adminCollection(query.get("container"));
    let value;
    try {
      value = JSON.parse(query.get("pk"));
    } catch (err) {
      throw new accountModel.ConfigError(`pk must be JSON (the partition key value or array of values): ${err.message}`);
    }
    return { status: 200, body: epkAnswer(collection, value) };
  });
  accountModel.addAdminRoute("POST", "epk", (body) => {
    const collection = adminCollection(body.container);
    if (!Array.isArray(body.pks)) throw new accountModel.ConfigError("pks must be an array of partition key values");
    return { status: 200, body: body.pks.map((value) => epkAnswer(collection, value)) };
  });
}

/** The EPK and live range of a partition key value (a value, or the array of a hierarchical key's values). */
function epkAnswer(collection, value) {
  const data = collection.read();
  const values = Array.isArray(value) ? value : [value];
  const doc = {};
  partitionKeyPaths(data).forEach((segments, i) => {
    if (i >= values.length || (values[i] !== null && typeof values[i] === "object")) return; // absent value
    let cur = doc;
    segments.slice(0, -1).forEach((seg) => {
      cur[seg] = cur[seg] || {};
      cur = cur[seg];
    });
    cur[segments[segments.length - 1]] = values[i];
  });
  const key = effectivePartitionKey(data, doc);
  const range = partitionRanges.rangeOfEpk(rangesOf(collection), key);
  return { epk: key, range_id: range ? range.id : null };
}

/**
 * The live range a document request addresses, for request gates (holds.js): the range its
 * `x-ms-documentdb-partitionkeyrangeid` names (change feed, scoped query), else the range holding the EPK of its
 * `x-ms-documentdb-partitionkey` (point operations, batches); null when it names neither or the container is unknown.
 */
function rangeIdOfRequest(req, dbId, collId) {
  if (!accountRef) return null;
  const rangeHeader = headerOf(req, "x-ms-documentdb-partitionkeyrangeid");
  if (rangeHeader !== undefined) return partitionRanges.rangeIdOf(rangeHeader);
  const keyHeader = headerOf(req, "x-ms-documentdb-partitionkey");
  if (keyHeader === undefined) return null;
  const collection = collectionOf(accountRef, dbId, collId);
  if (!collection) return null;
  let values;
  try {
    values = JSON.parse(keyHeader);
  } catch (err) {
    return null;
  }
  return epkAnswer(collection, values).range_id;
}

module.exports = { servePartitionKeyRanges, addRangeAdminRoutes, rangeIdOfRequest };

/*
 * Helpers shared by the compatibility layer's fixes (server.js) and its partition key ranges (range-routing.js):
 * partition identity, request headers, the engine's collections and documents, effective partition keys.
 */
"use strict";

const epk = require("./epk.js");

const headerOf = (req, name) => {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
};


/** The collection's partition key paths, as arrays of path segments (["/a/b"] -> [["a","b"]]). */
function partitionKeyPaths(collectionData) {
  const paths = ((collectionData || {}).partitionKey || {}).paths || ["/id"];
  return paths.map((p) => p.slice(1).split("/"));
}

function valueAt(segments, obj) {
  let cur = obj;
  for (const s of segments) {
    if (cur === null || typeof cur !== "object") return undefined;
    cur = cur[s];
  }
  return cur;
}

/**
 * Canonical partition identity: the JSON text of the full array of key values, one per path, with `{}` for an
 * absent value, which is exactly how azure-cosmos writes the `x-ms-documentdb-partitionkey` header.
 */
function canonicalFromDocument(collectionData, doc) {
  return JSON.stringify(partitionKeyPaths(collectionData).map((seg) => {
    const v = valueAt(seg, doc);
    return v === undefined ? {} : v;
  }));
}

function canonicalFromHeader(headerValue) {
  if (headerValue === undefined || headerValue === null) return undefined;
  let parsed;
  try {
    parsed = JSON.parse(headerValue);
  } catch (err) {
    throw Object.assign(new Error(`Failed to parse x-ms-documentdb-partitionkey headers: ${headerValue}`), {
      badRequest: true,
    });
  }
  return JSON.stringify(Array.isArray(parsed) ? parsed : [parsed]);
}

function notFound(res) {
  res.statusCode = 404;
  return { code: "NotFound", message: "Entity with the specified id does not exist in the system." };
}

function badRequest(res, message) {
  res.statusCode = 400;
  return { code: "BadRequest", message };
}

/**
 * Write an error response the way an account does, for a request no handler will see: the status, its substatus,
 * the charge, an activity id and a `{code, message}` body. `extraHeaders` adds e.g. `x-ms-retry-after-ms`.
 */
function answerError(req, res, { status, substatus, code, message, charge, extraHeaders = {} }) {
  req.resume();
  res.statusCode = status;
  res.setHeader("content-type", "application/json");
  for (const [name, value] of Object.entries(extraHeaders)) res.setHeader(name, value);
  res.setHeader("x-ms-substatus", String(substatus));
  res.setHeader("x-ms-request-charge", String(charge));
  res.setHeader("x-ms-activity-id", require("crypto").randomUUID());
  res.end(JSON.stringify({ code, message }));
}

/** The live collection for a request, or null if the database or collection does not exist. */
function collectionOf(account, dbId, collId) {
  const database = account.database(dbId);
  if (!database.read()) return null;
  const collection = database.collection(collId);
  return collection.read() ? collection : null;
}

/** Every live document of a collection (the engine's stored objects, not copies). */
function documentsOf(collection) {
  return [...collection.documents._data.values()].map((item) => item.read());
}

/** Run a SQL query over an explicit set of documents, the way Items.query does over all of them. */
function queryOver(collection, docs, body, { continuation, maxItemCount }) {
  const documents = collection.documents;
  const parent = collection.read();
  const compositeIndexes = ((parent.indexingPolicy || {}).compositeIndexes) || [];
  try {
    return documents._getQuery(body.query).exec(docs, {
      parameters: body.parameters,
      udf: documents._userDefinedFunctions(),
      maxItemCount,
      continuation,
      compositeIndexes,
    });
  } catch (err) {
    err.badRequest = true;
    throw err;
  }
}

/**
 * The document's EPK, or null for key kinds this layer does not hash (hash V1). The version is `2` as the Python
 * and Node SDKs send it, or `"V2"` as the Java SDK serialises its PartitionKeyDefinitionVersion enum.
 */
function effectivePartitionKey(collectionData, doc) {
  const key = (collectionData || {}).partitionKey || {};
  const values = JSON.parse(canonicalFromDocument(collectionData, doc));
  if (key.kind === "MultiHash") return values.map((v) => epk.hashHex(epk.componentBytes(v))).join("");
  if ((key.kind || "Hash") === "Hash" && (key.version === 2 || key.version === "V2")) {
    return epk.hashHex(Buffer.concat(values.map(epk.componentBytes)));
  }
  return null;
}

/** Parse an ETag / If-None-Match value written by this layer (`"12"` or `12`) into an LSN. */
function lsnFrom(value) {
  const n = parseInt(String(value).replace(/"/g, ""), 10);
  return Number.isFinite(n) ? n : 0;
}

/** Filters a request applies to the documents it reads (query, change feed): the EPK-range and range-id fixes. */
const documentScopes = [];

/** ``docs`` narrowed by every scope of ``req`` (each scope is a filter, so it can be applied to any subset). */
function scopeDocuments(req, collection, docs) {
  return documentScopes.reduce((kept, scope) => scope(req, collection, kept), docs);
}

function documentsInScope(req, collection) {
  return scopeDocuments(req, collection, documentsOf(collection));
}

module.exports = {
  headerOf,
  partitionKeyPaths,
  valueAt,
  canonicalFromDocument,
  canonicalFromHeader,
  notFound,
  badRequest,
  answerError,
  collectionOf,
  documentsOf,
  queryOver,
  effectivePartitionKey,
  lsnFrom,
  documentScopes,
  documentsInScope,
  scopeDocuments,
};

/*
 * Drives the project emulator through @azure/cosmos (the Node SDK) and prints what it saw as one JSON object on
 * stdout; tests/integration/test_emulator_sdks.py asserts on it. The same two commands as the Java client:
 *
 *   node client.js write ENDPOINT KEY DB CONTAINER LABEL COUNT   CRUD, patch, two batches, COUNT documents, a query
 *   node client.js feed ENDPOINT KEY DB CONTAINER STATE|-        the change feed of every feed range from the
 *                                                                beginning (or each range's continuation in STATE)
 *
 * NODE_PATH names the cached node_modules (scripts/sdk-clients.sh install); NODE_EXTRA_CA_CERTS the emulator's
 * certificate.
 */
"use strict";

const fs = require("fs");
const { CosmosClient, ChangeFeedStartFrom, StatusCodes, BulkOperationType } = require("@azure/cosmos");

const PAGE = 5;

async function status(call) {
  try {
    const r = await call();
    return r.statusCode;
  } catch (err) {
    return err.code;
  }
}

async function write(c, label, count, out) {
  const pk = `${label}-crud`;
  const id = `${label}-item`;
  const crud = (out.crud = {});
  crud.create = (await c.items.create({ id, pk, n: 1 })).statusCode;
  crud.create_again = await status(() => c.items.create({ id, pk, n: 1 }));
  crud.read_n = (await c.item(id, pk).read()).resource.n;
  crud.replace = (await c.item(id, pk).replace({ id, pk, n: 2 })).statusCode;
  crud.upsert = (await c.items.upsert({ id, pk, n: 3 })).statusCode;
  crud.read_after_upsert_n = (await c.item(id, pk).read()).resource.n;
  const patched = (await c.item(id, pk).patch([
    { op: "set", path: "/status", value: "patched" },
    { op: "incr", path: "/n", value: 10 },
  ])).resource;
  out.patch = { status: patched.status, n: patched.n };
  crud.delete = (await c.item(id, pk).delete()).statusCode;
  crud.read_deleted = await status(() => c.item(id, pk).read());

  const bpk = `${label}-batch`;
  const committed = await c.items.batch([
    { operationType: BulkOperationType.Create, resourceBody: { id: `${label}-b1`, pk: bpk } },
    { operationType: BulkOperationType.Upsert, resourceBody: { id: `${label}-b2`, pk: bpk } },
    { operationType: BulkOperationType.Patch, id: `${label}-b1`,
      resourceBody: { operations: [{ op: "add", path: "/tag", value: "in-batch" }] } },
  ], bpk);
  const codes = committed.result.map((r) => r.statusCode);
  out.batch = {
    committed: codes.every((s) => s < 300),
    committed_codes: codes,
    tag: (await c.item(`${label}-b1`, bpk).read()).resource.tag,
  };
  const rolled = await c.items.batch([
    { operationType: BulkOperationType.Create, resourceBody: { id: `${label}-b3`, pk: bpk } },
    { operationType: BulkOperationType.Create, resourceBody: { id: `${label}-b1`, pk: bpk } }, // exists: 409
  ], bpk);
  out.batch.rolled_back_status = rolled.code;
  out.batch.rolled_back_codes = (rolled.result || []).map((r) => r.statusCode);
  out.batch.rolled_back_item_read = await status(() => c.item(`${label}-b3`, bpk).read());

  out.written = [];
  for (let i = 0; i < count; i++) {
    const doc = { id: `${label}-${i}`, pk: `tenant-${i % 16}`, label };
    await c.items.create(doc);
    out.written.push(doc.id);
  }
  const { resources } = await c.items.query({
    query: "SELECT c.id FROM c WHERE c.label = @label",
    parameters: [{ name: "@label", value: label }],
  }).fetchAll();
  out.queried = resources.map((r) => r.id);
}

async function feed(c, statePath, out) {
  const ranges = await c.getFeedRanges();
  out.feed_ranges = ranges.length;
  const starts = statePath
    ? JSON.parse(fs.readFileSync(statePath, "utf8")).ranges.map((r) => r.continuation)
    : ranges.map(() => null);
  out.ranges = [];
  for (let i = 0; i < starts.length; i++) {
    const changeFeedStartFrom = starts[i] === null
      ? ChangeFeedStartFrom.Beginning(ranges[i])
      : ChangeFeedStartFrom.Continuation(starts[i]);
    const iterator = c.items.getChangeFeedIterator({ changeFeedStartFrom, maxItemCount: PAGE });
    const result = { ids: [], continuations: [], pages: 0, continuation: starts[i] };
    while (iterator.hasMoreResults && result.pages <= 1000) {
      const page = await iterator.readNext();
      result.pages += 1;
      if (page.continuationToken) {
        result.continuation = page.continuationToken;
        result.continuations.push(page.continuationToken);
      }
      if (page.statusCode === StatusCodes.NotModified) break; // the end of the feed for now
      for (const doc of page.result) result.ids.push(doc.id);
    }
    out.ranges.push(result);
  }
}

async function main() {
  const [command, endpoint, key, db, coll, ...rest] = process.argv.slice(2);
  if (!coll) throw new Error("usage: write|feed ENDPOINT KEY DB CONTAINER [LABEL COUNT | STATE]");
  const client = new CosmosClient({ endpoint, key, connectionPolicy: { enableEndpointDiscovery: false } });
  try {
    const { database } = await client.databases.createIfNotExists({ id: db });
    const { container } = await database.containers.createIfNotExists({
      id: coll, partitionKey: { paths: ["/pk"], version: 2 },
    });
    const out = { sdk: "node" };
    if (command === "write") await write(container, rest[0], Number(rest[1]), out);
    else if (command === "feed") await feed(container, rest[0] && rest[0] !== "-" ? rest[0] : null, out);
    else throw new Error(`unknown command ${command}`);
    process.stdout.write(JSON.stringify(out) + "\n");
  } finally {
    client.dispose();
  }
}

main().catch((err) => {
  console.error(err); // eslint-disable-line no-console
  process.exit(1);
});

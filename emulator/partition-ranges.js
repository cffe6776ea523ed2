/*
 * Partition key ranges of one container, and their splits.
 *
 * 1.0.1 gives every container one range, "" to "FF". Here a container starts with `count` ranges (the
 * `partition_ranges` switch, COSMOS_EMULATOR_PARTITION_RANGES at start) cutting the hash-V2 EPK space evenly: EPKs
 * are 32 hex digits whose first byte is masked to 0x3F, so the live space is [0, 0x40 << 120) and the last range
 * still ends at "FF", as on an account. A split replaces a live range by two children (ids continue after the
 * highest id, `parents` = the parent's parents + the parent, like an account's /pkranges), and the parent is gone:
 * requests naming it answer 410 / substatus 1002 (PartitionKeyRangeGone).
 *
 * Every change of the table takes the next `version`; the /pkranges incremental feed (A-IM) answers the ranges
 * created after the version in If-None-Match, which is how azure-cosmos refreshes its routing map after a 410.
 */
"use strict";

const EPK_DIGITS = 32;
const LIVE_SPACE = 0x40n << 120n; // first byte of a hashed EPK is masked with 0x3F
const MIN = "";
const MAX = "FF";
const MAX_RANGES = 256;

const hex = (n) => n.toString(16).toUpperCase().padStart(EPK_DIGITS, "0");
const valueOf = (epk, ifMax) => (epk === MAX ? ifMax : BigInt(`0x${(epk || "0").padEnd(EPK_DIGITS, "0").slice(0, EPK_DIGITS)}`));

class RangeError400 extends Error {}

function newTable(count) {
  if (!Number.isInteger(count) || count < 1 || count > MAX_RANGES) {
    throw new RangeError400(`partition_ranges must be an integer from 1 to ${MAX_RANGES}, got ${count}`);
  }
  const bounds = [MIN];
  for (let i = 1n; i < BigInt(count); i += 1n) bounds.push(hex((LIVE_SPACE * i) / BigInt(count)));
  bounds.push(MAX);
  const ranges = bounds.slice(0, -1).map((min, i) => ({
    id: String(i),
    minInclusive: min,
    maxExclusive: bounds[i + 1],
    parents: [],
    version: 1,
  }));
  return { version: 1, nextId: count, live: ranges, gone: new Map() };
}

/** The range id of a `x-ms-documentdb-partitionkeyrangeid` header ("<id>" or "<collection rid>,<id>"). */
function rangeIdOf(header) {
  const text = String(header).trim();
  return text.includes(",") ? text.slice(text.lastIndexOf(",") + 1) : text;
}

const contains = (range, key) => key >= range.minInclusive && (range.maxExclusive === MAX || key < range.maxExclusive);

/** The live range holding this EPK (a null EPK, a key kind not hashed, is put in the first range). */
function rangeOfEpk(table, key) {
  if (key === null) return table.live.find((r) => r.minInclusive === MIN);
  return table.live.find((r) => contains(r, key));
}

/**
 * Split a live range in two. `at` (an EPK strictly inside the range) is where; without it, the median of the
 * distinct EPKs of the documents it holds (so both children hold documents, as a split by size would; for a
 * hierarchical key the cut may fall inside one first-level value, as on an account), or the midpoint of the range
 * when it holds fewer than two distinct keys.
 */
function split(table, rangeId, documentEpks, at) {
  const parent = table.live.find((r) => r.id === rangeId);
  if (!parent) {
    const why = table.gone.has(rangeId) ? "has already split" : "is not a range of this container";
    throw new RangeError400(`range_id ${JSON.stringify(rangeId)} ${why} (live: ${table.live.map((r) => r.id)})`);
  }
  const low = valueOf(parent.minInclusive, 0n);
  const high = valueOf(parent.maxExclusive, LIVE_SPACE);
  let cut;
  if (at !== undefined && at !== null) {
    if (typeof at !== "string" || !/^[0-9A-F]+$/.test(at)) throw new RangeError400("at must be an upper-case hex EPK");
    cut = at;
  } else {
    const keys = [...new Set(documentEpks.filter((e) => e !== null && contains(parent, e)))].sort();
    cut = keys.length >= 2 ? keys[Math.floor(keys.length / 2)] : hex((low + high) / 2n);
  }
  if (!(cut > parent.minInclusive && (parent.maxExclusive === MAX || cut < parent.maxExclusive))) {
    throw new RangeError400(`split point ${cut} is not inside range ${rangeId} [${parent.minInclusive}, `
      + `${parent.maxExclusive})`);
  }
  table.version += 1;
  const parents = [...parent.parents, parent.id];
  const children = [
    { id: String(table.nextId), minInclusive: parent.minInclusive, maxExclusive: cut, parents, version: table.version },
    { id: String(table.nextId + 1), minInclusive: cut, maxExclusive: parent.maxExclusive, parents,
      version: table.version },
  ];
  table.nextId += 2;
  const at_ = table.live.indexOf(parent);
  table.live.splice(at_, 1, ...children);
  table.gone.set(parent.id, children.map((c) => c.id));
  return { parent, children };
}

module.exports = { newTable, rangeIdOf, rangeOfEpk, split, contains, RangeError400, MAX_RANGES };

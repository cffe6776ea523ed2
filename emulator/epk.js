/*
 * Effective partition keys (EPK), computed exactly as azure-cosmos 4.17.1 does (partition_key.py) for hash V2 and
 * MultiHash keys: MurmurHash3 x64 128 of each component's binary form, the 16 bytes reversed, the top 2 bits of the
 * first byte cleared, as 32 upper-case hex digits. Hash V2 hashes all components together; MultiHash hashes each
 * level on its own and concatenates (32 hex digits per level). tests/integration/test_emulator_compat.py checks
 * these against the SDK's own functions on many keys.
 */
"use strict";

const M64 = (1n << 64n) - 1n;
const rotl64 = (v, s) => ((v << BigInt(s)) | (v >> BigInt(64 - s))) & M64;
const fmix64 = (k) => {
  let h = k;
  h ^= h >> 33n; h = (h * 0xff51afd7ed558ccdn) & M64;
  h ^= h >> 33n; h = (h * 0xc4ceb9fe1a85ec53n) & M64;
  return h ^ (h >> 33n);
};

function murmurHash3x64128(buf) {
  const c1 = 0x87c37b91114253d5n;
  const c2 = 0x4cf5ad432745937fn;
  let h1 = 0n;
  let h2 = 0n;
  let p = 0;
  for (; p + 16 <= buf.length; p += 16) {
    let k1 = buf.readBigUInt64LE(p);
    let k2 = buf.readBigUInt64LE(p + 8);
    k1 = (rotl64((k1 * c1) & M64, 31) * c2) & M64;
    h1 ^= k1;
    h1 = (((rotl64(h1, 27) + h2) & M64) * 5n + 0x52dce729n) & M64;
    k2 = (rotl64((k2 * c2) & M64, 33) * c1) & M64;
    h2 ^= k2;
    h2 = (((rotl64(h2, 31) + h1) & M64) * 5n + 0x38495ab5n) & M64;
  }
  const n = buf.length & 15;
  let k1 = 0n;
  let k2 = 0n;
  for (let i = n - 1; i >= 8; i -= 1) k2 ^= BigInt(buf[p + i]) << BigInt((i - 8) * 8);
  h2 ^= (rotl64((k2 * c2) & M64, 33) * c1) & M64;
  for (let i = Math.min(n, 8) - 1; i >= 0; i -= 1) k1 ^= BigInt(buf[p + i]) << BigInt(i * 8);
  h1 ^= (rotl64((k1 * c1) & M64, 31) * c2) & M64;
  h1 ^= BigInt(buf.length);
  h2 ^= BigInt(buf.length);
  h1 = (h1 + h2) & M64;
  h2 = (h2 + h1) & M64;
  h1 = fmix64(h1);
  h2 = fmix64(h2);
  h1 = (h1 + h2) & M64;
  h2 = (h2 + h1) & M64;
  return [h1, h2];
}

function componentBytes(v) {
  if (v === true) return Buffer.from([0x03]);
  if (v === false) return Buffer.from([0x02]);
  if (v === null) return Buffer.from([0x01]);
  if (typeof v === "number") {
    const b = Buffer.alloc(9);
    b[0] = 0x05;
    b.writeDoubleLE(v, 1);
    return b;
  }
  if (typeof v === "string") return Buffer.concat([Buffer.from([0x08]), Buffer.from(v, "utf8"), Buffer.from([0xff])]);
  return Buffer.from([0x00]); // undefined / {}: the absent value
}

function hashHex(buf) {
  const [low, high] = murmurHash3x64128(buf);
  const bytes = Buffer.alloc(16);
  bytes.writeBigUInt64LE(low, 0);
  bytes.writeBigUInt64LE(high, 8);
  bytes.reverse();
  bytes[0] &= 0x3f;
  return bytes.toString("hex").toUpperCase();
}


module.exports = { componentBytes, hashHex, murmurHash3x64128 };

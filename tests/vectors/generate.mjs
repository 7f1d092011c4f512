#!/usr/bin/env node
// Recomputes tests/vectors/xet-vectors.json with the stock Hugging Face JS packages (@huggingface/xetchunk-wasm,
// @huggingface/blake3-jit, gearhash-jit, pinned in tests/oracle/package-lock.json) and either checks the file
// (default) or rewrites it.
//
//   node tests/vectors/generate.mjs [--write] [FILE]
//
// Inputs stay as the file has them (leaf and child hashes, salts, raw bytes); every derived value is computed
// here and compared. tests/oracle/test_vectors.py runs this check and, beside it, the checks only the stock
// Rust client (hf_xet) can make. Where each value comes from: tests/vectors/README.md.
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import {
  Blake3Hasher,
  Chunker,
  DATA_KEY,
  describe,
  fileHash,
  getChunks,
  hashToHex,
  hexToBytes,
  hmac,
  verificationHash,
  xorbHash,
} from "../oracle/xetchunk_oracle.mjs";

const args = process.argv.slice(2);
const write = args.includes("--write");
const file = args.find((a) => !a.startsWith("--")) ?? join(dirname(fileURLToPath(import.meta.url)), "xet-vectors.json");
const old = JSON.parse(readFileSync(file, "utf8"));

const ascii = (s) => new TextEncoder().encode(s);
const rawHex = (hex) => Uint8Array.from(Buffer.from(hex, "hex"));
const keyed = (keyHex, bytes) => Blake3Hasher.newKeyed(rawHex(keyHex)).update(bytes).finalize(32);
const hexOfRaw = (raw) => Buffer.from(raw).toString("hex");
const leaf = (l) => ({ hash: hexToBytes(l.hash), length: l.size });
const problems = [];
const must = (cond, what) => cond || problems.push(what);

// The SplitMix64 stream of xet-protocol §1.4: each output appended as 8 little-endian bytes, truncated to n.
function splitmix64(seed, n) {
  const out = new Uint8Array(Math.ceil(n / 8) * 8);
  const view = new DataView(out.buffer);
  const M = (1n << 64n) - 1n;
  let s = BigInt(seed);
  for (let i = 0; i < out.length; i += 8) {
    s = (s + 0x9e3779b97f4a7c15n) & M;
    let z = s;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & M;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & M;
    view.setBigUint64(i, z ^ (z >> 31n), true);
  }
  return out.subarray(0, n);
}

// Chunks of `data` by the stock gear hash (the oracle's chunker, checked against hf_xet in tests/oracle).
function chunk(data) {
  const c = new Chunker();
  return [...c.push(data), ...c.finish()];
}

const ends = (chunks) => {
  let acc = 0;
  return chunks.map((c) => (acc += c.length));
};

// The keys are not exported by the packages; each is shown to be the one the packages use.
const keys = old.keys;
must(
  hexOfRaw(DATA_KEY) === keys.data_key &&
    hashToHex(keyed(keys.data_key, ascii("hello world"))) === hashToHex(getChunks(ascii("hello world"))[0].hash),
  "keys.data_key: not the key xetchunk-wasm hashes chunks with",
);
{
  const a = { hash: keyed(keys.data_key, ascii("a")), length: 1 };
  const b = { hash: keyed(keys.data_key, ascii("bc")), length: 2 };
  const text = `${hashToHex(a.hash)} : 1\n${hashToHex(b.hash)} : 2\n`;
  must(
    hashToHex(keyed(keys.internal_node_key, ascii(text))) === hashToHex(xorbHash([a, b])),
    "keys.internal_node_key: not the key (or not the text form) of xetchunk-wasm's merkle nodes",
  );
}
must(
  hashToHex(keyed(keys.verification_key, new Uint8Array(0))) === hashToHex(verificationHash([])),
  "keys.verification_key: not the key of xetchunk-wasm's verificationHash",
);

const out = structuredClone(old);

out.hex_rule.xet_hex = hashToHex(rawHex(old.hex_rule.raw_bytes_hex));

{
  const v = out.splitmix64_seed0_1e6;
  const data = splitmix64(0, v.n);
  for (const at of Object.keys(v.sample_bytes)) v.sample_bytes[at] = data[Number(at)];
  const chunks = chunk(data);
  const d = describe(chunks);
  v.chunk_ends = ends(chunks);
  v.chunk_hashes = d.chunks.map((c) => c.hash);
  v.xorb_hash_all = d.xorb_hash;
  v.file_hash_zero_salt = d.file_hash;
  v.range_hash_0_3 = d.verification_hash_first3;
  v.range_hash_all = d.verification_hash;
  v.sha256 = createHash("sha256").update(data).digest("hex");
}

{
  const v = out.constant_59_1e6;
  v.chunk_ends = ends(chunk(new Uint8Array(v.n).fill(v.byte)));
}

out.chunk_hash.empty = hashToHex(keyed(keys.data_key, new Uint8Array(0)));
out.chunk_hash["hello world"] = hashToHex(getChunks(ascii("hello world"))[0].hash);

{
  const v = out.internal_node;
  const text = v.children.map((c) => `${c.hash} : ${c.size}\n`).join("");
  v.hash = hashToHex(keyed(keys.internal_node_key, ascii(text)));
  v.size = v.children.reduce((a, c) => a + c.size, 0);
}

for (const v of out.aggregate) {
  const leaves = v.leaves.map(leaf);
  v.aggregate = hashToHex(xorbHash(leaves));
  v.file_hash_zero_salt = hashToHex(fileHash(leaves));
  if (v.file_hash_salted) v.file_hash_salted.hash = hashToHex(hmac(xorbHash(leaves), hexToBytes(v.file_hash_salted.salt)));
}

// Byte grouping (xet-protocol §3): byte i of the input goes to group i % 4; the groups are concatenated. No
// package exports it; cairn reading hf_xet's bg4-lz4 xorbs (tests/oracle/test_hf_xet_local.py) checks it in use.
{
  const input = Buffer.from(old.bg4.input_hex, "hex");
  const groups = [0, 1, 2, 3].map((g) => [...input].filter((_, i) => i % 4 === g));
  out.bg4.grouped_hex = Buffer.from(groups.flat()).toString("hex");
}

// xorb_footer_example describes bytes hf_xet writes; tests/oracle/test_vectors.py compares it with a xorb hf_xet
// wrote for the same three chunks. Nothing to derive here.

const render = (v) => JSON.stringify(v, null, 1) + "\n";
const before = readFileSync(file, "utf8");
if (write) {
  if (problems.length) {
    for (const p of problems) process.stderr.write(`${p}\n`);
    process.exit(1);
  }
  writeFileSync(file, render(out));
  process.stdout.write(before === render(out) ? `${file}: unchanged\n` : `${file}: rewritten\n`);
} else {
  const walk = (a, b, path) => {
    if (typeof a === "object" && a !== null && typeof b === "object" && b !== null) {
      for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) walk(a[k], b[k], `${path}.${k}`);
    } else if (a !== b) problems.push(`${path}: file has ${JSON.stringify(a)}, the stock packages give ${JSON.stringify(b)}`);
  };
  walk(old, out, "vectors");
  if (problems.length) {
    for (const p of problems) process.stderr.write(`${p}\n`);
    process.exit(1);
  }
  process.stdout.write(`${file}: every derived value agrees with the stock packages\n`);
}

#!/usr/bin/env node
// Hash oracle built from the stock Hugging Face JS packages.
// Usage: node xetchunk_oracle.mjs FILE...   (also a module: tests/vectors/generate.mjs imports it)
// Prints one JSON object per file, one per line, in argument order:
// {"path","size","chunks":[{"hash","size"}],"xorb_hash","file_hash","verification_hash","verification_hash_first3"}
//
// Hashing (chunk hash, xorb/aggregate hash, file hash, verification hash, hex) is
// @huggingface/xetchunk-wasm + @huggingface/blake3-jit as shipped. Chunk BOUNDARIES come from the
// stock gear hash (gearhash-jit) driven by the small loop below, because the package's own
// chunker (createChunker/nextBlock/finalize, 0.2.0) accepts gear matches at chunk lengths
// 8128..8191, i.e. below the 8 KiB minimum, which hf_xet 1.8.0 ignores (see tests/oracle/README.md).
// XETCHUNK_ORACLE_CHUNKER=package selects the package's chunker anyway.
// The test suite checks this oracle against hf_xet's own hashes on every input.
import { openSync, readSync, closeSync, fstatSync } from "node:fs";
import { pathToFileURL } from "node:url";
import {
  createChunker,
  nextBlock,
  finalize,
  xorbHash,
  fileHash,
  verificationHash,
  hashToHex,
} from "@huggingface/xetchunk-wasm";
import { Hasher as GearHasher } from "gearhash-jit";
import { Hasher as Blake3Hasher } from "@huggingface/blake3-jit";

// For tests/vectors/generate.mjs, whose directory has no node_modules of its own.
export { xorbHash, fileHash, hmac, verificationHash, hashToHex, hexToBytes, getChunks } from "@huggingface/xetchunk-wasm";
export { Blake3Hasher };

const TARGET = 64 * 1024;
const MIN_CHUNK = TARGET / 8; // 8192
const MAX_CHUNK = TARGET * 2; // 131072
const WINDOW = 64; // gear hash depends only on the last 64 bytes
const SKIP = MIN_CHUNK - WINDOW - 1; // bytes of a new chunk that need not be hashed at all
const MASK = 0xffff000000000000n;
export const DATA_KEY = new Uint8Array([
  102, 151, 245, 119, 91, 149, 80, 222, 49, 53, 203, 172, 165, 151, 24, 28, 157, 228, 33, 16, 155, 235, 43, 88, 180,
  208, 176, 75, 147, 173, 242, 41,
]);

// Odd block size so chunk boundaries straddle reads (exercises the streaming path).
// XETCHUNK_ORACLE_BLOCK overrides it (the tests use this to check block-size independence).
const BLOCK = Number(process.env.XETCHUNK_ORACLE_BLOCK || 37 * 1024);
if (!Number.isInteger(BLOCK) || BLOCK <= 0) throw new Error("bad XETCHUNK_ORACLE_BLOCK");
const USE_PACKAGE_CHUNKER = process.env.XETCHUNK_ORACLE_CHUNKER === "package";

// Streaming content-defined chunker: boundary after byte i when the chunk length is >= MIN_CHUNK and
// (gear hash & MASK) == 0, or when the length reaches MAX_CHUNK.
export class Chunker {
  constructor() {
    this.gear = new GearHasher(MASK);
    this.blake3 = Blake3Hasher.newKeyed(DATA_KEY);
    this.buf = new Uint8Array(MAX_CHUNK);
    this.len = 0;
  }
  #emit(out) {
    out.push({ hash: this.blake3.reset().update(this.buf.subarray(0, this.len)).finalize(32), length: this.len });
    this.len = 0;
    this.gear.resetHash();
  }
  #take(data, pos, n) {
    this.buf.set(data.subarray(pos, pos + n), this.len);
    this.len += n;
    return pos + n;
  }
  push(data) {
    const out = [];
    let pos = 0;
    while (pos < data.length) {
      if (this.len < SKIP) {
        pos = this.#take(data, pos, Math.min(SKIP - this.len, data.length - pos));
        continue;
      }
      const limit = Math.min(data.length - pos, MAX_CHUNK - this.len);
      const m = this.gear.nextMatch(data.subarray(pos, pos + limit)); // 1-based, state carries over
      if (m === -1) {
        pos = this.#take(data, pos, limit);
        if (this.len === MAX_CHUNK) this.#emit(out);
      } else {
        pos = this.#take(data, pos, m);
        if (this.len >= MIN_CHUNK) this.#emit(out);
        // else: match inside the minimum size, ignored; keep scanning with the same hash state
      }
    }
    return out;
  }
  finish() {
    const out = [];
    if (this.len > 0) this.#emit(out);
    return out;
  }
}

function packageChunker() {
  const c = createChunker();
  return {
    push: (data) => nextBlock(c, data),
    finish: () => {
      const last = finalize(c);
      return last ? [last] : [];
    },
  };
}

function hashFile(path) {
  const fd = openSync(path, "r");
  const chunks = [];
  let size = 0;
  try {
    const chunker = USE_PACKAGE_CHUNKER ? packageChunker() : new Chunker();
    const buf = new Uint8Array(BLOCK);
    for (;;) {
      const n = readSync(fd, buf, 0, BLOCK, null);
      if (n === 0) break;
      size += n;
      // buf is reused for the next read: both chunkers copy carried-over bytes, and hashes are fresh arrays.
      for (const c of chunker.push(buf.subarray(0, n))) chunks.push(c);
    }
    for (const c of chunker.finish()) chunks.push(c);
    if (size !== fstatSync(fd).size) throw new Error(`${path}: size changed while reading`);
  } finally {
    closeSync(fd);
  }
  const total = chunks.reduce((a, c) => a + c.length, 0);
  if (total !== size) throw new Error(`${path}: chunk sizes sum to ${total}, file has ${size}`);
  return { path, size, ...describe(chunks) };
}

// The hashes of one file's chunks ({hash: Uint8Array, length}), as `cairn hash --json` prints them.
export function describe(chunks) {
  const hashes = chunks.map((c) => c.hash);
  return {
    chunks: chunks.map((c) => ({ hash: hashToHex(c.hash), size: c.length })),
    xorb_hash: hashToHex(xorbHash(chunks)),
    file_hash: hashToHex(fileHash(chunks)),
    verification_hash: hashToHex(verificationHash(hashes)),
    verification_hash_first3: chunks.length ? hashToHex(verificationHash(hashes.slice(0, 3))) : null,
  };
}

function main() {
  const files = process.argv.slice(2);
  if (files.length === 0) {
    process.stderr.write("usage: node xetchunk_oracle.mjs FILE...\n");
    process.exit(2);
  }
  for (const f of files) process.stdout.write(JSON.stringify(hashFile(f)) + "\n");
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) main();

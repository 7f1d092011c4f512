// One @huggingface/hub (JS) operation against a cairn CAS, for tests/interop/test_hub_js.py.
//
//   node hub_client.mjs version
//       → {"version": "<installed @huggingface/hub version>"}
//   node hub_client.mjs download --cas URL --token T --hash H --size N --out FILE
//                                [--slice START:END:FILE ...] [--serial]
//       Whole file via XetBlob.arrayBuffer(), and each slice via XetBlob.slice(START, END) (END exclusive).
//       → {"whole": FILE, "slices": [{"start", "end", "bytes", "out"}...], "requests": [{method, url, status}...]}
//   node hub_client.mjs upload --cas URL --token T FILE...
//       uploadFiles() to a bucket repo; the two Hub calls (xet-write-token, batch) are answered in-process by a
//       fetch stub, every other request (the CAS traffic) goes to the cairn server at --cas.
//       → {"files": [{"path", "xetHash", "size"}...], "batch": [NDJSON lines], "requests": [...]}
//
// The JSON result is the last line of stdout; on failure the exit status is 2 and the last line is
// {"error": name, "message": text}.
//
// The package is resolved from tests/oracle/node_modules (the project's one pinned Node install), by path:
// ESM ignores NODE_PATH, and the package's "import" export is dist/index.mjs.

import { readFile } from "node:fs/promises";
import { writeFile } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const HUB_PKG_DIR = resolve(process.env.CAIRN_HUB_PKG_DIR ?? join(HERE, "..", "..", "oracle", "node_modules", "@huggingface", "hub"));
const HUB_URL = "http://hub.invalid";  // never contacted: the fetch stub answers every Hub call
const BUCKET = "cairn/interop";

function parseArgs(argv) {
  const opts = { positional: [], slice: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--serial") opts.serial = true;
    else if (a === "--slice") opts.slice.push(argv[++i]);
    else if (a.startsWith("--")) opts[a.slice(2)] = argv[++i];
    else opts.positional.push(a);
  }
  return opts;
}

function need(opts, ...keys) {
  for (const k of keys) if (opts[k] === undefined) throw new Error(`missing --${k}`);
}

async function loadHub() {
  const pkg = JSON.parse(await readFile(join(HUB_PKG_DIR, "package.json"), "utf8"));
  const mod = await import(pathToFileURL(join(HUB_PKG_DIR, pkg.exports["."].import)).href);
  return { version: pkg.version, hub: mod };
}

// A fetch that records what went where (the test asserts the CAS traffic really hit cairn).
function recordingFetch(requests, inner = fetch) {
  return async (input, init) => {
    const url = String(input instanceof Request ? input.url : input);
    const method = init?.method ?? (input instanceof Request ? input.method : "GET");
    const resp = await inner(input, init);
    requests.push({ method, url, status: resp.status });
    return resp;
  };
}

function readToken(opts) {
  return { accessToken: opts.token, casUrl: opts.cas, exp: Math.floor(Date.now() / 1000) + 3600 };
}

async function download(hub, opts) {
  need(opts, "cas", "token", "hash", "size", "out");
  const requests = [];
  const make = () =>
    new hub.__internal_XetBlob({
      hash: opts.hash,
      size: Number(opts.size),
      refreshUrl: `${HUB_URL}/unused-token-refresh`,  // only fetched if the read token expired: it must not be
      readToken: readToken(opts),
      parallelDownloads: !opts.serial,
      fetch: recordingFetch(requests),
    });
  const whole = new Uint8Array(await make().arrayBuffer());
  await writeFile(opts.out, whole);
  const slices = [];
  for (const spec of opts.slice) {
    const [s, e, out] = spec.split(":");
    const bytes = new Uint8Array(await make().slice(Number(s), Number(e)).arrayBuffer());
    await writeFile(out, bytes);
    slices.push({ start: Number(s), end: Number(e), bytes: bytes.length, out });
  }
  return { whole: opts.out, bytes: whole.length, slices, requests };
}

async function upload(hub, opts) {
  need(opts, "cas", "token");
  const requests = [];
  const batch = [];
  const hubCalls = [];
  const toCas = recordingFetch(requests);
  const hubFetch = async (input, init) => {
    const url = String(input instanceof Request ? input.url : input);
    if (url.startsWith(`${HUB_URL}/api/buckets/${BUCKET}/xet-write-token`)) {
      hubCalls.push(url);
      return Response.json(readToken(opts));  // the cairn write token, handed out as the "CAS access token"
    }
    if (url.startsWith(`${HUB_URL}/api/buckets/${BUCKET}/batch`)) {
      hubCalls.push(url);
      const lines = String(init?.body ?? "").split("\n").filter(Boolean).map((l) => JSON.parse(l));
      batch.push(...lines);
      return Response.json({ success: true, processed: lines.length, succeeded: lines.length, failed: [] });
    }
    if (url.startsWith(HUB_URL)) throw new Error(`unexpected Hub call: ${url}`);
    return toCas(input, init);  // everything else is CAS traffic and goes to cairn
  };
  const files = [];
  for (const p of opts.positional) {
    const bytes = await readFile(p);
    files.push({ path: basename(p), content: new Blob([bytes]), size: bytes.length, local: p });
  }
  await hub.uploadFiles({
    repo: { type: "bucket", name: BUCKET },
    hubUrl: HUB_URL,
    accessToken: "hf_interop_dummy",  // Hub token (must start with hf_); only the fetch stub sees it
    fetch: hubFetch,
    files: files.map((f) => ({ path: f.path, content: f.content })),
  });
  const byPath = new Map(batch.filter((l) => l.type === "addFile").map((l) => [l.path, l.xetHash]));
  const out = files.map((f) => {
    const xetHash = byPath.get(f.path);
    if (!xetHash) throw new Error(`the batch call did not register ${f.path}: ${JSON.stringify(batch)}`);
    return { path: f.local, xetHash, size: f.size };
  });
  return { files: out, batch, hubCalls, requests };
}

async function main() {
  const [op, ...rest] = process.argv.slice(2);
  const opts = parseArgs(rest);
  const { version, hub } = await loadHub();
  if (op === "version") return { version, exports: ["__internal_XetBlob", "uploadFiles"].filter((n) => n in hub) };
  if (op === "download") return download(hub, opts);
  if (op === "upload") return upload(hub, opts);
  throw new Error(`unknown operation ${op}`);
}

main().then(
  (result) => {
    process.stdout.write(JSON.stringify(result) + "\n");
  },
  (err) => {
    process.stderr.write(`${err?.stack ?? err}\n`);
    if (err?.cause) process.stderr.write(`cause: ${err.cause?.stack ?? err.cause}\n`);
    process.stdout.write(JSON.stringify({ error: err?.name ?? "Error", message: String(err?.message ?? err) }) + "\n");
    process.exitCode = 2;
  },
);

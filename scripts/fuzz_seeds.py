#!/usr/bin/env python3
"""Regenerates the fuzz targets' seed corpora (tests/fuzz/corpus/<target>/) from real client traffic.

    .venv/bin/python scripts/fuzz_seeds.py --bin build/release/src/cli/cairn      (or: make fuzz-seeds)

Starts a `cairn serve` (SQLite, local disk) in a temporary directory behind a small recording reverse proxy
(the server's public URL is the proxy's, so the transfer URLs of reconstruction answers go through it too),
then drives the stock clients against the proxy: hf_xet 1.8.0 (uploads of small files that compress with
LZ4, with BG4 and not at all; downloads, ranged streams) and huggingface_hub 2.4.0 (repositories, commits with
inline and Xet files, deletions, branches, tags, settings, moves, paths-info, ranged reads through
HfFileSystem, buckets and their batches). What they sent and got becomes the seeds: xorb and shard bodies,
chunks cut out of the xorbs, tokens, Range headers, transfer URLs, Hub request bodies; plus the TOML file the
server was started with. Every corpus folder is replaced; the regressions (tests/fuzz/regressions/) are not
touched. Files are named <what>-<sha1 prefix>; each is small (xorbs up to ~100 KB).
"""

from __future__ import annotations

import argparse
import hashlib
import http.client as httpclient
import json
import random
import shutil
import struct
import sys
import tempfile
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

from harness import CairnServer, free_port, HfXet, http, Hub, hub_python  # noqa: E402


CORPUS = REPO / "tests" / "fuzz" / "corpus"
HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade", "te", "trailer"}


class Recorder:
    """A reverse proxy to `upstream` that keeps every exchange: (method, path, headers, body, status,
    response headers, response body)."""

    def __init__(self, upstream_port: int):
        self.exchanges: list[dict] = []
        lock = threading.Lock()
        exchanges = self.exchanges

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _forward(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    body = self._read_chunked()
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
                if body or self.command in ("POST", "PUT", "PATCH"):
                    headers["Content-Length"] = str(len(body))
                conn = httpclient.HTTPConnection("127.0.0.1", upstream_port, timeout=120)
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                conn.close()
                with lock:
                    exchanges.append({"method": self.command, "path": self.path, "headers": dict(self.headers),
                                      "body": body, "status": resp.status,
                                      "resp_headers": {k.lower(): v for k, v in resp.getheaders()},
                                      "resp_body": data})
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in HOP and k.lower() != "content-length":
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def _read_chunked(self) -> bytes:
                out = b""
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass
                        return out
                    out += self.rfile.read(size)
                    self.rfile.readline()

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = _forward

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


class Seeds:
    def __init__(self):
        self.files: dict[str, dict[str, bytes]] = {}

    def add(self, target: str, what: str, data: bytes) -> None:
        if len(data) > 100 * 1024:  # small seeds: the fuzzers' time goes to mutations, not to one big input
            return
        name = f"{what}-{hashlib.sha1(data).hexdigest()[:10]}"
        self.files.setdefault(target, {})[name] = data

    def write(self) -> None:
        for target, files in sorted(self.files.items()):
            d = CORPUS / target
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)
            for name, data in files.items():
                (d / name).write_bytes(data)
            print(f"{target}: {len(files)} seeds, {sum(map(len, files.values()))} bytes")


def chunks_of(xorb: bytes):
    """(scheme, uncompressed length, payload) of each chunk of a xorb's chunk region."""
    pos = 0
    while pos + 8 <= len(xorb) and xorb[pos:pos + 7] != b"XETBLOB":
        clen = int.from_bytes(xorb[pos + 1:pos + 4], "little")
        scheme = xorb[pos + 4]
        ulen = int.from_bytes(xorb[pos + 5:pos + 8], "little")
        yield scheme, ulen, xorb[pos + 8:pos + 8 + clen]
        pos += 8 + clen


def test_files(directory: Path) -> list[Path]:
    """Small files: incompressible, text (LZ4), float-like (BG4), and one that repeats another's start."""
    r = random.Random(20261201)
    directory.mkdir(parents=True, exist_ok=True)
    rnd = r.randbytes(48 * 1024)
    words = [bytes(r.choice(b"abcdefghij") for _ in range(r.randint(2, 9))) for _ in range(300)]
    text = b" ".join(r.choice(words) for _ in range(16000))[:72 * 1024]
    floats = b"".join(struct.pack("<f", 1.0 + r.random() / 1000) for _ in range(16 * 1024))
    files = {"random.bin": rnd, "text.txt": text, "floats.bin": floats, "small.bin": r.randbytes(3000),
             "repeat.bin": rnd[:32 * 1024] + r.randbytes(8 * 1024)}
    out = []
    for name, data in files.items():
        (directory / name).write_bytes(data)
        out.append(directory / name)
    return out


class ProxyServer:
    """What Hub needs of a server: the URL clients use (the proxy's) and the real server's log."""

    def __init__(self, url: str, srv: CairnServer):
        self.url = url
        self._srv = srv

    def log(self) -> str:
        return self._srv.log()


def drive_clients(srv: CairnServer, proxy: Recorder, work: Path, python: str) -> None:
    files = test_files(work / "files")
    hfx = HfXet(python, work / "hfx")
    cas_token = srv.token("seeds", write=True)
    # One upload per file: one small xorb each (all together would make one xorb of ~230 KB).
    up = [m for f in files for m in hfx.upload(proxy.url, cas_token, [f]).result["files"]]
    by_name = {Path(m["path"]).name: m for m in up}
    # A second upload of the same bytes: global dedup queries, a shard naming known xorbs.
    hfx.upload(proxy.url, cas_token, [files[0], files[4]])
    big = by_name["text.txt"]
    hfx.download(proxy.url, cas_token, [(big["hash"], big["size"], work / "down.txt")])
    hfx.stream(proxy.url, cas_token, big["hash"], big["size"],
               [(1000, 9000, work / "part1"), (40000, None, work / "part2")])
    # A download link (cairn's own API; no stock client mints them).
    http("POST", f"{proxy.url}/v1/links", headers={"Authorization": f"Bearer {cas_token}"},
         body=json.dumps({"file_hash": big["hash"], "ttl_seconds": 600, "name": "text.txt"}).encode())

    hub = Hub(python, work / "hub", ProxyServer(proxy.url, srv), srv.token("alice", write=True))
    src = work / "files"
    hub.run(f"""
api.create_repo("alice/seeds")
api.create_repo("alice/data", repo_type="dataset", private=True)
api.upload_file(path_or_fileobj={str(src / "small.bin")!r}, path_in_repo="small.bin", repo_id="alice/seeds")
api.upload_file(path_or_fileobj=b"hello, fuzz\\n", path_in_repo="docs/hello.txt", repo_id="alice/seeds")
api.upload_folder(folder_path={str(src)!r}, repo_id="alice/data", repo_type="dataset", path_in_repo="raw")
api.create_commit("alice/seeds", operations=[
    CommitOperationAdd(path_in_repo="docs/new.txt", path_or_fileobj=b"new\\n"),
    CommitOperationDelete(path_in_repo="docs/hello.txt"),
    CommitOperationCopy(src_path_in_repo="small.bin", path_in_repo="copy.bin"),
], commit_message="ops", commit_description="several operations")
api.create_branch("alice/seeds", branch="dev")
api.create_tag("alice/seeds", tag="v1", tag_message="first")
api.update_repo_settings("alice/seeds", private=True)
result = [e.path for e in api.get_paths_info("alice/seeds", ["small.bin", "docs", "missing"])]
fs = HfFileSystem()
fs.cat_file("datasets/alice/data/raw/small.bin", start=100, end=300)
fs.cat_file("datasets/alice/data/raw/text.txt", start=-500)
fs.cat_file("alice/seeds/docs/new.txt", start=1, end=3)
api.move_repo("alice/seeds", "alice/moved")
api.delete_repo("alice/moved")
""")
    hub.run(f"""
api.create_bucket("alice/files")
api.batch_bucket_files("alice/files", add=[({str(src / "small.bin")!r}, "a/small.bin"),
                                           ({str(src / "text.txt")!r}, "b/text.txt")])
api.batch_bucket_files("alice/files", delete=["a/small.bin"])
result = [f.path for f in api.get_bucket_paths_info("alice/files", ["b/text.txt", "nope"])]
api.update_bucket_settings("alice/files", private=True)
api.create_bucket("alice/private", private=True)
""")


def collect(proxy: Recorder, srv: CairnServer, data_dir: Path, config_text: str) -> Seeds:
    seeds = Seeds()
    xorbs = []
    for ex in proxy.exchanges:
        path = urllib.parse.urlsplit(ex["path"]).path
        query = urllib.parse.urlsplit(ex["path"]).query
        method, body = ex["method"], ex["body"]
        auth = ex["headers"].get("Authorization") or ex["headers"].get("authorization") or ""
        rng = ex["headers"].get("Range") or ex["headers"].get("range")
        if auth.lower().startswith("bearer "):
            seeds.add("auth_fuzz", "bearer", auth[7:].strip().encode())
        if method == "POST" and path.startswith("/v1/xorbs/") and len(body) <= 100 * 1024:
            xorbs.append(body)
            seeds.add("xorb_fuzz", "upload", body)
        elif method == "POST" and path in ("/v1/shards", "/v2/shards"):
            seeds.add("shard_fuzz", "upload", body)
        elif method == "GET" and path.startswith("/v1/chunks/") and ex["status"] == 200:
            seeds.add("shard_fuzz", "dedup-answer", ex["resp_body"])
        elif method == "GET" and path.startswith("/v1/transfer/"):
            xorb_hex = path.rsplit("/", 1)[1]
            seeds.add("transfer_url_fuzz", "url", f"{xorb_hex}?{query}".encode())
            if rng:
                seeds.add("transfer_url_fuzz", "range", rng.encode())
        elif method == "GET" and "/reconstructions" in path:
            if rng:
                seeds.add("cas_requests_fuzz", "range", rng.encode())
            ids = [v for k, v in urllib.parse.parse_qsl(query) if k == "file_id"]
            if ids:
                seeds.add("cas_requests_fuzz", "batch", "\n\n".join(ids).encode())
            if ex["status"] == 200:
                answer = json.loads(ex["resp_body"])
                for urls in json.dumps(answer).split('"url": "')[1:]:
                    u = urllib.parse.urlsplit(urls.split('"', 1)[0])
                    seeds.add("transfer_url_fuzz", "answer-url", f"{u.path.rsplit('/', 1)[1]}?{u.query}".encode())
        elif method == "GET" and "/resolve/" in path and rng:
            total = (ex["resp_headers"].get("content-range") or "/0").rsplit("/", 1)[1]
            size = int(total) if total.isdigit() else 0
            seeds.add("range_fuzz", "resolve", struct.pack("<Q", size) + bytes([64]) + rng.encode())
        elif method == "POST" and "/commit/" in path:
            seeds.add("commit_body_fuzz", "commit", body)
        elif method == "POST" and path.startswith("/api/buckets/") and path.endswith("/batch"):
            seeds.add("bucket_batch_fuzz", "batch", body)
        elif method == "POST" and "/paths-info" in path:
            seeds.add("paths_info_fuzz", "bucket" if path.startswith("/api/buckets/") else "repo", body)
        elif body and (path.startswith("/api/") or path == "/v1/links"):
            what = path.strip("/").split("/")[-1] if not path.startswith("/api/repos/") else path.split("/")[3]
            if path.startswith("/api/buckets/"):
                what = "bucket-settings" if path.endswith("/settings") else "bucket-create"
            elif "/preupload/" in path:
                what = "preupload"
            elif "/branch/" in path:
                what = "branch"
            elif "/tag/" in path:
                what = "tag"
            seeds.add("json_bodies_fuzz", what.replace("/", "_")[:24] or "body", body)
        # Tokens handed out: the Hub's CAS tokens.
        if ex["status"] == 200 and "xet-" in path and "-token" in path:
            tok = json.loads(ex["resp_body"]).get("accessToken")
            if tok:
                seeds.add("auth_fuzz", "cas-token", tok.encode())

    # cairn's stored form of the smallest xorbs: the chunks plus the footer it regenerates.
    stored = sorted((p for p in (data_dir / "blobs").rglob("*") if p.is_file() and p.stat().st_size <= 100 * 1024),
                    key=lambda p: p.stat().st_size)
    for p in stored:
        data = p.read_bytes()
        if data[-4:] and b"XETBLOB" in data[-200 * 1024:] and len(seeds.files.get("xorb_fuzz", {})) < 12:
            seeds.add("xorb_fuzz", "stored", data)
    # Chunks cut out of the uploads: a few of each scheme, as [scheme][uncompressed length, 24 bits][payload].
    per_scheme: dict[int, int] = {}
    for x in xorbs:
        for scheme, ulen, payload in chunks_of(x):
            if per_scheme.get(scheme, 0) >= 4 or len(payload) > 64 * 1024:
                continue
            per_scheme[scheme] = per_scheme.get(scheme, 0) + 1
            seeds.add("chunk_fuzz", ["none", "lz4", "bg4"][scheme] if scheme < 3 else "chunk",
                      bytes([scheme]) + (ulen - 1).to_bytes(3, "little") + payload)
    # Tokens as `cairn token` mints them.
    seeds.add("auth_fuzz", "cli-read", srv.token("alice/model").encode())
    # The configuration the server ran with, and one per source (flags and environment as comment lines).
    seeds.add("config_fuzz", "serve", config_text.encode())
    seeds.add("config_fuzz", "s3", b'store = "s3://bucket/prefix"\ns3_endpoint = "http://127.0.0.1:8333"\n'
                                   b's3_path_style = true\ntransfer_mode = "presigned"\ns3_part_size = "16MiB"\n'
                                   b'index = "postgres://cairn@127.0.0.1:5432/cairn"\nindex_pool_size = 4\n')
    seeds.add("config_fuzz", "env", b'#env CAIRN_LOG_LEVEL=debug\n#env CAIRN_IO_THREADS=2\n'
                                    b'#flag listen=[::1]:0\nmax_link_ttl = "7d"\n')
    return seeds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(REPO / "build" / "release" / "src" / "cli" / "cairn"))
    args = ap.parse_args()
    python = hub_python()
    with tempfile.TemporaryDirectory(prefix="cairn-fuzz-seeds-") as tmp:
        work = Path(tmp)
        data_dir = work / "data"
        port = free_port()
        with Recorder(port) as proxy:
            config_text = (f'listen = "127.0.0.1:{port}"\npublic_url = "{proxy.url}"\n'
                           'log_level = "info"\ntransfer_url_ttl = "1h"\nmax_concurrent_uploads = 16\n'
                           'readahead_unit = "4MiB"\n')
            (work / "cairn.toml").write_text(config_text)
            srv = CairnServer(args.bin, data_dir, work / "cairn.log", port=port, public_url=proxy.url,
                              args=("--config", str(work / "cairn.toml")))
            srv.start()
            try:
                drive_clients(srv, proxy, work, python)
            finally:
                srv.stop()
            seeds = collect(proxy, srv, data_dir, config_text)
    seeds.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())

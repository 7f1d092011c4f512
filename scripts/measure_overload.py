#!/usr/bin/env python3
"""cairn serve under hostile load, measured (SQLite + local disk, one machine):

    make measure-overload
    .venv/bin/python scripts/measure_overload.py --bin build/release/src/cli/cairn --slow 500 --uploads 64

1. Slow connections. A normal client (Python's http.client, one keep-alive connection) alternates a xorb
   upload (4 MiB, validated and committed by the server each time) and a download (a reconstruction and the
   transfer of its first range), first alone, then while --slow connections trickle: half send a request
   header one byte a second, half send a xorb upload's header and then its body at 16 bytes a second. Prints
   the normal client's p50/p99 in both runs and their ratio (the issue's bound: 2x), how the slow connections
   ended (408 answers, closes, still open at the end) and after how long, and the server's RSS and open
   descriptors, sampled every 100 ms.
2. Maximum-size uploads. --uploads concurrent uploads of distinct 64 MiB xorbs (what hf_xet cuts at most,
   written by hf_xet to a local:// CAS first), to a fresh server allowing that many (max_concurrent_uploads),
   then to one allowing half: the server's peak RSS against the budget the setting implies
   (max_concurrent_uploads x 64 MiB), and the answers past the limit (503 with Retry-After, before the body).

One JSON object on stdout; progress on stderr. Fails (exit 1) if a slow connection outlives the server's
timeouts, if an answer past the limits is anything but 503 with Retry-After, or if a normal request fails.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import select
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from harness import CairnServer, HfXet, MiB, write_random  # noqa: E402


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Sampler(threading.Thread):
    """RSS (MiB) and open descriptors of a process, every 100 ms."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.rss, self.fds, self.stop = pid, [], [], threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        self.rss.append(int(line.split()[1]) / 1024)
                self.fds.append(len(os.listdir(f"/proc/{self.pid}/fd")))
            except OSError:
                pass
            time.sleep(0.1)

    def summary(self) -> dict:
        self.stop.set()
        self.join()
        return {"rss_mib_max": round(max(self.rss), 1), "rss_mib_median": round(statistics.median(self.rss), 1),
                "fds_max": max(self.fds), "fds_median": int(statistics.median(self.fds))}


class NormalClient:
    """Uploads and downloads on one keep-alive connection, timing each request."""

    def __init__(self, port: int, token: str, xorb: tuple[str, bytes], file_hash: str):
        self.port, self.auth = port, {"Authorization": f"Bearer {token}"}
        self.xorb, self.file = xorb, file_hash
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None) -> bytes:
        self.conn.request(method, path, body=body, headers={**self.auth, **(headers or {})})
        r = self.conn.getresponse()
        data = r.read()
        if r.status not in (200, 206):
            raise RuntimeError(f"{method} {path}: {r.status} {data[:200]!r}")
        return data

    def run(self, n: int) -> list[float]:
        times = []
        for i in range(n):
            t0 = time.perf_counter()
            if i % 2 == 0:
                self.request("POST", f"/v1/xorbs/default/{self.xorb[0]}", self.xorb[1])
            else:
                rec = json.loads(self.request("GET", f"/v1/reconstructions/{self.file}"))
                fetch = next(iter(rec["fetch_info"].values()))[0]
                url = fetch["url"].split("://", 1)[1].split("/", 1)[1]
                rng = fetch["url_range"]
                self.request("GET", "/" + url, headers={"Range": f"bytes={rng['start']}-{rng['end']}"})
            times.append(time.perf_counter() - t0)
        return times


def percentiles(times: list[float]) -> dict:
    s = sorted(times)
    return {"n": len(s), "p50_ms": round(1000 * s[len(s) // 2], 2),
            "p99_ms": round(1000 * s[min(len(s) - 1, int(len(s) * 0.99))], 2)}


class SlowConnections(threading.Thread):
    """`n` connections trickling bytes: headers one byte a second, or a body 16 bytes a second."""

    def __init__(self, port: int, n: int, token: str, xorb_hex: str):
        super().__init__(daemon=True)
        self.sel = selectors.DefaultSelector()
        self.stop = threading.Event()
        self.ended: dict[str, list[float]] = {"408": [], "503": [], "other_status": [], "closed": []}
        self.started = time.monotonic()
        self.open = 0
        header = b"GET /v1/reconstructions/" + b"0" * 64 + b" HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"a" * 4000
        upload = (f"POST /v1/xorbs/default/{xorb_hex} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                  f"Content-Length: {64 * MiB}\r\n\r\n").encode() + b"\0" * 100_000
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", port))
            s.setblocking(False)
            if i % 2 == 0:
                self.sel.register(s, selectors.EVENT_READ, {"pending": header, "rate": 1, "sent_header": True})
            else:
                # The whole header at once, then the body slowly.
                head_end = upload.index(b"\r\n\r\n") + 4
                s.sendall(upload[:head_end])
                self.sel.register(s, selectors.EVENT_READ, {"pending": upload[head_end:], "rate": 16})
            self.open += 1

    def run(self) -> None:
        while not self.stop.is_set() and self.open:
            for key, _ in self.sel.select(timeout=1.0):
                s, st = key.fileobj, key.data
                try:
                    data = s.recv(65536)
                except (ConnectionError, BlockingIOError):
                    data = b""
                age = time.monotonic() - self.started
                if data.startswith(b"HTTP/1.1 408"):
                    self.ended["408"].append(age)
                elif data.startswith(b"HTTP/1.1 503"):  # refused at its header: the upload slots were full
                    self.ended["503"].append(age)
                elif data:
                    self.ended["other_status"].append(age)
                else:
                    self.ended["closed"].append(age)
                self.sel.unregister(s)
                s.close()
                self.open -= 1
            for key in list(self.sel.get_map().values()):
                st = key.data
                chunk, st["pending"] = st["pending"][:st["rate"]], st["pending"][st["rate"]:]
                try:
                    key.fileobj.send(chunk)
                except OSError:
                    pass

    def summary(self) -> dict:
        self.stop.set()
        self.join()
        out = {k: len(v) for k, v in self.ended.items()}
        out["still_open"] = self.open
        ages = [a for v in self.ended.values() for a in v]
        if ages:
            out["ended_after_s_max"] = round(max(ages), 1)
        return out


def upload_raw(port: int, token: str, xorb: Path) -> str:
    """One xorb upload on a connection of its own: the status, with "+retry-after" when the answer has one. An
    answer before the body (a 503 past the limit) is read without sending the body."""
    size = xorb.stat().st_size
    name = xorb.name.rsplit(".", 1)[-1]
    with socket.create_connection(("127.0.0.1", port), timeout=300) as s:
        s.sendall((f"POST /v1/xorbs/default/{name} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                   f"Content-Length: {size}\r\n\r\n").encode())
        early, _, _ = select.select([s], [], [], 0.3)
        if not early:
            try:
                with open(xorb, "rb") as f:
                    s.sendfile(f)
            except (BrokenPipeError, ConnectionResetError):
                pass  # answered (and closed) while the body went out: the answer is still there to read
        head = b""
        while b"\r\n\r\n" not in head:
            try:
                piece = s.recv(65536)
            except ConnectionResetError:
                break
            if not piece:
                break
            head += piece
    status = head.split(b" ", 2)[1].decode() if head.startswith(b"HTTP/1.1 ") else "no-answer"
    return status + ("+retry-after" if b"\r\nretry-after:" in head.lower() else "")


def upload_at_once(port: int, token: str, xorbs: list[Path]) -> dict:
    """Every xorb uploaded at once, each on its own connection: status → count."""
    results: dict[str, int] = {}
    lock = threading.Lock()
    barrier = threading.Barrier(len(xorbs))

    def one(x: Path) -> None:
        barrier.wait()
        key = upload_raw(port, token, x)
        with lock:
            results[key] = results.get(key, 0) + 1

    threads = [threading.Thread(target=one, args=(x,)) for x in xorbs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def max_size_xorbs(args, work: Path, n: int) -> list[Path]:
    """`n` distinct xorbs of hf_xet's largest size, written by the stock client to a local:// CAS."""
    files = [write_random(work / f"big-{i}.bin", 64 * MiB, 100 + i) for i in range(n)]
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    env.update({"HF_XET_TELEMETRY_ENABLED": "0", "HF_XET_CACHE": str(work / "xet-cache")})
    r = subprocess.run([args.python, str(REPO / "tests/oracle/hf_xet_upload.py"), f"local://{work / 'cas'}",
                        *map(str, files)], capture_output=True, text=True, env=env, timeout=1800)
    if r.returncode != 0:
        raise RuntimeError(f"hf_xet local upload failed: {r.stderr[-2000:]}")
    for f in files:
        f.unlink()
    xorbs = [p for p in (work / "cas" / "xet" / "xorbs" / "xorbs").iterdir() if p.name.startswith("default.")
             and not p.name.endswith(".tagset")]
    big = sorted(xorbs, key=lambda p: p.stat().st_size, reverse=True)[:n]
    log(f"{len(big)} xorbs of {min(p.stat().st_size for p in big)}..{max(p.stat().st_size for p in big)} bytes")
    return big


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=str(REPO / "build/release/src/cli/cairn"))
    ap.add_argument("--python", default=str(REPO / ".venv/bin/python"))
    ap.add_argument("--slow", type=int, default=500)
    ap.add_argument("--requests", type=int, default=300, help="normal-client requests per run")
    ap.add_argument("--uploads", type=int, default=64)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="overload-", dir=REPO / "build"))
    srv = CairnServer(args.bin, work / "data", work / "server.log",
                      env={"CAIRN_MAX_CONCURRENT_UPLOADS": str(args.uploads)})
    srv.start()
    failed = False
    try:
        token = srv.token("overload", write=True)
        hfx = HfXet(args.python, work / "hf")
        small = write_random(work / "small.bin", 4 * MiB, 1)
        up = hfx.upload(srv.url, token, [small]).result["files"]
        xorbs = sorted((p for p in (work / "data" / "blobs" / "xorbs").rglob("*") if p.is_file()),
                       key=lambda p: p.stat().st_size)
        small_xorb = (xorbs[0].name, xorbs[0].read_bytes())
        file_hash = next(m["hash"] for m in up if m["path"].endswith("small.bin"))
        log(f"normal client's xorb: {len(small_xorb[1])} B")

        client = NormalClient(srv.port, token, small_xorb, file_hash)
        client.run(20)  # warm-up
        sampler = Sampler(srv.proc.pid)
        sampler.start()
        alone = percentiles(client.run(args.requests))
        idle = sampler.summary()
        log(f"alone: {alone}")

        slow = SlowConnections(srv.port, args.slow, token, small_xorb[0])
        slow.start()
        time.sleep(2)
        sampler = Sampler(srv.proc.pid)
        sampler.start()
        loaded = percentiles(NormalClient(srv.port, token, small_xorb, file_hash).run(args.requests))
        log(f"with {args.slow} slow connections: {loaded}")
        # Let the server's timeouts end them: header 30 s, body 10 s grace at 4 KiB/s.
        deadline = time.monotonic() + 45
        while slow.open and time.monotonic() < deadline:
            time.sleep(0.5)
        under_load = sampler.summary()
        shed = slow.summary()
        log(f"slow connections: {shed}; server {under_load}")
        failed |= shed["still_open"] > 0

    finally:
        srv.stop()

    # Maximum-size uploads, each a xorb the server has not seen (a known one is answered without its body).
    big_xorbs = max_size_xorbs(args, work, args.uploads)
    results = {}
    for name, limit in (("at_the_limit", args.uploads), ("past_the_limit", args.uploads // 2)):
        node = CairnServer(args.bin, work / f"data-{name}", work / f"server-{name}.log",
                           env={"CAIRN_MAX_CONCURRENT_UPLOADS": str(limit)})
        node.start()
        try:
            sampler = Sampler(node.proc.pid)
            sampler.start()
            answers = upload_at_once(node.port, node.token("overload", write=True), big_xorbs)
            results[name] = {"concurrent": len(big_xorbs), "max_concurrent_uploads": limit, "answers": answers,
                             "budget_mib": limit * 64, **sampler.summary()}
            log(f"{name}: {results[name]}")
        finally:
            node.stop()
    failed |= set(results["at_the_limit"]["answers"]) != {"200"}
    failed |= set(results["past_the_limit"]["answers"]) != {"200", "503+retry-after"}
    print(json.dumps({
        "normal_alone": alone, "normal_with_slow": loaded, "p99_ratio": round(loaded["p99_ms"] / alone["p99_ms"], 2),
        "server_idle": idle, "server_with_slow": under_load, "slow_connections": shed,
        "xorb_bytes": big_xorbs[0].stat().st_size, **results,
    }))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

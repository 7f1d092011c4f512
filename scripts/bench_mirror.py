#!/usr/bin/env python3
"""The pull-through mirror beside a direct download, in one run (BENCHMARKS.md, "The mirror"):

    .venv/bin/python scripts/bench_mirror.py [--size-mib 1024] [--rounds 3] [--clients 8] [--pairs 3]
                                             [--settle 10] [--bin build/release/src/cli/cairn]
                                             [--no-drop-caches] [--olah]

An upstream `cairn serve` (SQLite + local disk) holds bench/big, one --size-mib file of random bytes uploaded with
huggingface_hub and hf_xet. Each round, with a fresh client cache for every download (huggingface_hub 2.4.0 and
hf_xet, timed inside the client process around hf_hub_download):
  cold:   through a fresh mirror of the upstream (the mirror fetches the file through upstream's Xet reconstruction,
          relaying its xorb ranges to the client as they arrive while it chunks and stores them);
  direct: from the upstream itself (the file uploaded directly to cairn);
  hit:    through the same mirror again (what it holds).
Each round: direct, cold, hit, each after a sync, a drop of the page cache (writes 3 to /proc/sys/vm/drop_caches;
where that is refused, one warning on stderr and the run goes on; --no-drop-caches skips it) and --settle seconds of
pause. Then --clients clients download the file at once through another
fresh mirror: the upstream's bytes sent are counted (1.00 x the file is one transfer); then --pairs times a direct
download and a hit on that warm mirror, in turn (the hits of the rounds come right after the mirror's ingest). Last, metadata on the warm
mirror: 2,000 revision-info and 2,000 paths-info requests over one keep-alive connection, p50 and p99 latency.

For every download, of the server that serves it (the upstream for direct, the mirror for cold and hit):
  cpu_s_per_GiB:           its CPU time (utime + stime of its process, /proc/PID/stat) during the download, per GiB
                           of the file; for cold also cpu_s_per_GiB_until_idle: until the mirror has stored the file
                           and its CPU time has stopped growing (< 0.05 s over 1 s), what the cold download cost it;
  client_bytes_over_file:  its response bytes on the file routes (resolve and Xet transfer) during the download, over
                           the file's size (1.00 is the file sent once).
And each round, after the same sync, drop and pause, a bare receiver (a Python process: the file's reconstruction
asked of the upstream as the mirror asks it, then every xorb range of it read into one buffer and dropped) reports
its CPU per GiB ("bare receive"): what only receiving the bytes the cold path receives costs a process on this
machine, the part of the mirror's cold CPU that no work of its own can remove. On a guest whose host takes free
pages back (virtio-balloon free page reporting), the first touch of the upstream's freshly read page cache is
paid by whoever receives it: there, this floor is far above the copy it is elsewhere.

--olah adds olah 0.5.4 (a Python Hugging Face mirror, PyPI `olah`) as the outside yardstick. The script installs it
into a virtualenv of its own, build/olah-venv (reused when it has that version), and each round starts a fresh olah
(its own port and cache directory) whose "Hugging Face" is the upstream cairn, for both the hub API and LFS. Through
it, after the same sync, page-cache drop and pause: olah cold (the first download) and olah hit (a second one, a fresh
client cache: olah answers from its cache). Reported: the speed, olah's CPU per GiB, the upstream's bytes sent over
the file, and whether olah kept Xet for the client (x-xet-hash on its resolve answer; olah strips it by default, and
the client then downloads over plain HTTP through resolve). A failure of olah is reported in its JSON line, and the
run goes on.

Prints one JSON line per measurement and a summary line with the ratios (cold/direct, hit/direct: speed, higher
is better), as ratios of the medians and as medians of each round's ratios (paired), the median CPU per GiB of each
way (cold: during the download and until idle), the largest client bytes over the file of each way, and with --olah
olah's cold and hit speeds, their ratios over direct, its CPU per GiB and the upstream's bytes it fetched. Client and
servers share the machine's cores; the working directory lives under build/.
"""

from __future__ import annotations

import argparse
import http.client
import os
import json
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from harness import CairnServer, Hub, MiB, free_port, write_random  # noqa: E402

GiB = 1024 * MiB
OLAH_VERSION = "0.5.4"
OLAH_VENV = REPO / "build" / "olah-venv"


def file_bytes(srv) -> float:
    """Bytes `srv` sent of files: plain downloads and xorb transfers."""
    return sum(v for n, labels, v in srv.metrics()
               if n == "cairn_http_response_bytes_total"
               and ("resolve" in labels.get("route", "") or labels.get("route") == "transfer"))


def cpu_seconds(pid: int) -> float:
    """utime + stime of process `pid` (/proc/PID/stat fields 14 and 15), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_idle(pid: int, timeout: float = 600) -> float:
    """Until process `pid`'s CPU time stops growing (< 0.05 s over 1 s); returns its CPU time then."""
    deadline = time.monotonic() + timeout
    c = cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(1)
        c, last = cpu_seconds(pid), c
        if c - last < 0.05:
            break
    return c


_drop_warned = False


def settle(args) -> None:
    """Before a download: writes on disk, the page cache dropped (unless --no-drop-caches), then --settle s."""
    global _drop_warned
    os.sync()
    if not args.no_drop_caches:
        try:
            Path("/proc/sys/vm/drop_caches").write_text("3")
        except OSError as e:
            if not _drop_warned:
                print(f"warning: cannot drop the page cache ({e}); going on without dropping it",
                      file=sys.stderr, flush=True)
                _drop_warned = True
    time.sleep(args.settle)


def wait_stored(srv) -> None:
    """Until the mirror has stored bench/big (a cold client may finish before the mirror has chunked it all)."""
    for _ in range(6000):
        tree = srv.get("/api/models/bench/big/tree/main").json()
        if any(f.get("path") == "big.bin" and f.get("xetHash") for f in tree):
            return
        time.sleep(0.1)
    raise SystemExit("the mirror never stored the file")


def download(args, srv, work: Path) -> float:
    """Seconds hf_hub_download of bench/big takes from `srv` with a fresh cache (measured in the client)."""
    hub = Hub(args.python, work, srv, None)
    t = hub.run(f"""
        import time
        t0 = time.monotonic()
        hf_hub_download("bench/big", "big.bin", local_dir={str(work / "out")!r})
        result = time.monotonic() - t0
    """, timeout=3600)
    got = (work / "out" / "big.bin").stat().st_size
    if got != args.size_mib * MiB:
        raise SystemExit(f"downloaded {got} bytes, not {args.size_mib} MiB")
    shutil.rmtree(work, ignore_errors=True)
    return float(t)


def measured(args, srv, pid: int, counted, work: Path) -> tuple[float, float, float]:
    """download() from `srv`: (seconds, CPU seconds of process `pid`, bytes `counted` sent) over it."""
    c0, b0 = cpu_seconds(pid), file_bytes(counted)
    t = download(args, srv, work)
    return t, cpu_seconds(pid) - c0, file_bytes(counted) - b0


# A bare receiver of the file's xorb ranges from the upstream, as the mirror's cold path fetches them (the
# reconstruction through the Hub's xet read token, then each range of its fetch_info), reading into one buffer
# and keeping nothing: its CPU seconds for the transfers, printed. What receiving the bytes alone costs a process
# on this machine, a floor under the cold path's CPU.
RECEIVER = r"""
import http.client, json, resource, sys, urllib.parse
base = urllib.parse.urlsplit(sys.argv[1])
def ask(netloc, method, target, headers=None):
    c = http.client.HTTPConnection(netloc)
    c.request(method, target, headers=headers or {})
    r = c.getresponse()
    return c, r
_, r = ask(base.netloc, "HEAD", "/bench/big/resolve/main/big.bin")
xet_hash = r.getheader("X-Xet-Hash")
_, r = ask(base.netloc, "GET", "/api/models/bench/big/xet-read-token/main")
token = json.loads(r.read())
cas = urllib.parse.urlsplit(token["casUrl"])
_, r = ask(cas.netloc, "GET", cas.path.rstrip("/") + "/v1/reconstructions/" + xet_hash,
           {"Authorization": "Bearer " + token["accessToken"]})
answer = json.loads(r.read())
ranges = {(e["url"], e["url_range"]["start"], e["url_range"]["end"])
          for entries in answer["fetch_info"].values() for e in entries}
buf = memoryview(bytearray(1 << 20))
t0 = resource.getrusage(resource.RUSAGE_SELF)
got = 0
for url, first, last in sorted(ranges):
    u = urllib.parse.urlsplit(url)
    c, r = ask(u.netloc, "GET", u.path + "?" + u.query, {"Range": f"bytes={first}-{last}"})
    while n := r.readinto(buf):
        got += n
    c.close()
t1 = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"bytes": got, "cpu_s": t1.ru_utime + t1.ru_stime - t0.ru_utime - t0.ru_stime}))
"""


def receive_floor(args, upstream) -> tuple[float, int]:
    """RECEIVER run against `upstream`: its CPU seconds and the bytes it received."""
    r = subprocess.run([args.python, "-c", RECEIVER, upstream.url], capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        raise SystemExit(f"the bare receiver failed: {r.stderr[-2000:]}")
    out = json.loads(r.stdout)
    return float(out["cpu_s"]), int(out["bytes"])


def mirror(args, upstream, work: Path) -> CairnServer:
    return CairnServer(args.bin, work, work.with_suffix(".log"),
                       env={"CAIRN_MIRROR_UPSTREAM": upstream.url, "CAIRN_LOG_LEVEL": "warn"}).start()


def olah_python() -> str:
    """The Python of build/olah-venv with olah OLAH_VERSION, made (python3 -m venv, pip install) unless it is there."""
    py = OLAH_VENV / "bin" / "python"
    check = [str(py), "-c", "import importlib.metadata as m; print(m.version('olah'))"]
    if py.is_file():
        r = subprocess.run(check, capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.strip() == OLAH_VERSION:
            return str(py)
    print(f"installing olah {OLAH_VERSION} into {OLAH_VENV}", file=sys.stderr, flush=True)
    for cmd in (["python3", "-m", "venv", str(OLAH_VENV)],
                [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", f"olah=={OLAH_VERSION}"]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"`{' '.join(cmd)}` failed (exit {r.returncode}):\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
    r = subprocess.run(check, capture_output=True, text=True)
    if r.returncode != 0 or r.stdout.strip() != OLAH_VERSION:
        raise RuntimeError(f"olah {OLAH_VERSION} is not importable in {OLAH_VENV}: {r.stdout}{r.stderr}")
    return str(py)


class Olah:
    """One olah server (`olah-cli`) with the upstream cairn as its Hugging Face, for the hub API and for LFS, its
    cache under `work`. Hub(...) needs .url (and .log() for its failure messages)."""

    def __init__(self, python: str, upstream, work: Path):
        self.work = work
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = work / "olah.log"
        up = upstream.url.split("://", 1)
        netloc = f"127.0.0.1:{self.port}"
        self.cmd = [str(Path(python).parent / "olah-cli"),
                    "--host", "127.0.0.1", "--port", str(self.port),
                    "--hf-scheme", up[0], "--hf-netloc", up[1], "--hf-lfs-netloc", up[1],
                    "--mirror-scheme", "http", "--mirror-netloc", netloc, "--mirror-lfs-netloc", netloc,
                    "--repos-path", str(work / "repos"), "--log-path", str(work / "logs")]
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> "Olah":
        self.work.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE", "OLAH_"))}
        env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
        with open(self.log_path, "ab") as log:
            log.write(f"=== {' '.join(self.cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, cwd=self.work)
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                code, self.proc = self.proc.returncode, None
                raise RuntimeError(f"olah exited with {code} before it answered HTTP\n{self.log()}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                conn.request("GET", "/")
                conn.getresponse().read()  # any status: it answers
                conn.close()
                return self
            except OSError as e:
                last = str(e)
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"olah did not answer HTTP within {timeout}s (last: {last})\n{self.log()}")

    def keeps_xet(self) -> bool:
        """Whether olah's answer to a resolve of big.bin carries x-xet-hash (the client then speaks Xet)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        target = "/bench/big/resolve/main/big.bin"
        for _ in range(5):  # relative redirects (a revision to its commit) as huggingface_hub follows them
            conn.request("HEAD", target)
            r = conn.getresponse()
            r.read()
            if r.getheader("x-xet-hash"):
                conn.close()
                return True
            loc = r.getheader("location")
            if not (300 <= r.status < 400 and loc and loc.startswith("/")):
                break
            target = loc
        conn.close()
        return False

    def stop(self, timeout: float = 30) -> None:
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def log(self) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return text[-6000:]


def short_error(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    return text if len(text) <= 1500 else text[:700] + " … " + text[-700:]


def olah_round(args, python: str, upstream, rnd: int, work: Path, size: int) -> list[dict]:
    """Olah cold and hit for one round, through a fresh olah; one result (a JSON line) per way, or the error."""
    out: list[dict] = []
    o = Olah(python, upstream, work / f"olah-{rnd}")
    try:
        try:
            o.start()
        except Exception as e:  # noqa: BLE001 — reported in the JSON line
            print(f"olah failed to start:\n{e}", file=sys.stderr, flush=True)
            return [{"bench": "mirror", "round": rnd, "way": "olah", "error": short_error(e)}]
        for way in ["olah cold", "olah hit"]:
            line: dict = {"bench": "mirror", "round": rnd, "way": way}
            try:
                settle(args)
                t, cpu, up = measured(args, o, o.proc.pid, upstream, work / f"client-{rnd}-{way.replace(' ', '-')}")
                line.update({"seconds": round(t, 3), "MBps": round(size / t / 1e6, 1),
                             "cpu_s_per_GiB": round(cpu / (size / GiB), 3),
                             "upstream_bytes_over_file": round(up / size, 4)})
                line["xet"] = o.keeps_xet()
            except BaseException as e:  # noqa: BLE001 — pytest.fail (Hub) raises a BaseException
                if isinstance(e, KeyboardInterrupt):
                    raise
                print(f"{way} failed:\n{e}\n--- olah log\n{o.log()}", file=sys.stderr, flush=True)
                line["error"] = short_error(e)
            out.append(line)
            print(json.dumps(line), flush=True)
            if "error" in line:
                break
        return out
    finally:
        o.stop()
        shutil.rmtree(work / f"olah-{rnd}", ignore_errors=True)


def latencies(srv, method: str, target: str, body: bytes | None, n: int) -> list[float]:
    port = int(srv.url.rsplit(":", 1)[1])
    conn = http.client.HTTPConnection("127.0.0.1", port)
    out = []
    headers = {"Content-Type": "application/json"} if body else {}
    for _ in range(n):
        t0 = time.perf_counter()
        conn.request(method, target, body=body, headers=headers)
        r = conn.getresponse()
        r.read()
        out.append((time.perf_counter() - t0) * 1000)
        if r.status != 200:
            raise SystemExit(f"{method} {target} answered {r.status}")
    conn.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--settle", type=float, default=10.0, help="seconds of pause before each download")
    ap.add_argument("--pairs", type=int, default=3, help="direct and hit downloads on the warm mirror, in turn")
    ap.add_argument("--no-drop-caches", action="store_true",
                    help="do not drop the page cache (/proc/sys/vm/drop_caches) before each download")
    ap.add_argument("--olah", action="store_true",
                    help=f"also olah {OLAH_VERSION} cold and hit each round (installed into build/olah-venv)")
    ap.add_argument("--bin", default=str(REPO / "build/release/src/cli/cairn"))
    ap.add_argument("--python", default=str(REPO / ".venv/bin/python"))
    args = ap.parse_args()
    (REPO / "build").mkdir(exist_ok=True)
    olah_py = olah_python() if args.olah else None
    work = Path(tempfile.mkdtemp(prefix="bench-mirror-", dir=REPO / "build"))
    servers: list[CairnServer] = []
    try:
        upstream = CairnServer(args.bin, work / "upstream", work / "upstream.log",
                               env={"CAIRN_LOG_LEVEL": "warn"}).start()
        servers.append(upstream)
        src = write_random(work / "big.bin", args.size_mib * MiB, seed=2030)
        Hub(args.python, work / "owner", upstream, upstream.token("bench", write=True)).run(f"""
            api.create_repo("bench/big")
            api.upload_file(repo_id="bench/big", path_or_fileobj={str(src)!r}, path_in_repo="big.bin")
        """, timeout=3600)
        src.unlink()
        size = args.size_mib * MiB
        gib = size / GiB
        times: dict[str, list[float]] = {"direct": [], "cold": [], "hit": []}
        # Server CPU seconds per GiB and client bytes over the file, per way (cold until idle: cold's whole cost).
        cpu: dict[str, list[float]] = {"direct": [], "cold": [], "cold until idle": [], "hit": [],
                                       "warm direct": [], "warm hit": [], "bare receive": []}
        client_bytes: dict[str, list[float]] = {"direct": [], "cold": [], "hit": [], "warm direct": [], "warm hit": []}
        cold_ratios: list[float] = []  # upstream bytes sent for a cold download, over the file
        olah: list[dict] = []
        for rnd in range(args.rounds):
            m = mirror(args, upstream, work / f"mirror-{rnd}")
            servers.append(m)
            ways = {"direct": upstream, "cold": m, "hit": m}
            # direct, then cold on the fresh mirror, then hit; each once the machine has settled from the last
            # (writes on disk, and a pause: freeing the last download's gigabyte slowed whichever download came
            # next by up to 3x on this machine's disk, whatever it was).
            for way in ["direct", "cold", "hit"]:
                srv = ways[way]
                settle(args)
                before = file_bytes(upstream)
                cpu0 = cpu_seconds(srv.proc.pid)
                t, cpu_s, sent = measured(args, srv, srv.proc.pid, srv, work / f"client-{rnd}-{way}")
                times[way].append(t)
                cpu[way].append(cpu_s / gib)
                client_bytes[way].append(sent / size)
                line = {"bench": "mirror", "round": rnd, "way": way, "seconds": round(t, 3),
                        "MBps": round(size / t / 1e6, 1), "cpu_s_per_GiB": round(cpu_s / gib, 3),
                        "client_bytes_over_file": round(sent / size, 4)}
                if way == "cold":
                    wait_stored(m)
                    idle = (wait_idle(m.proc.pid) - cpu0) / gib
                    cpu["cold until idle"].append(idle)
                    line["cpu_s_per_GiB_until_idle"] = round(idle, 3)
                    cold_ratios.append((file_bytes(upstream) - before) / size)
                print(json.dumps(line), flush=True)
            m.stop()
            servers.remove(m)
            shutil.rmtree(work / f"mirror-{rnd}", ignore_errors=True)
            settle(args)
            rcv_cpu, rcv_bytes = receive_floor(args, upstream)
            cpu["bare receive"].append(rcv_cpu / gib)
            print(json.dumps({"bench": "mirror", "round": rnd, "way": "bare receive",
                              "cpu_s_per_GiB": round(rcv_cpu / gib, 3), "bytes_over_file": round(rcv_bytes / size, 4)}),
                  flush=True)
            if olah_py:
                olah.extend({**r, "direct": times["direct"][-1]} for r in olah_round(args, olah_py, upstream, rnd,
                                                                                     work, size))

        # N clients at once through a fresh mirror: one upstream transfer.
        m = mirror(args, upstream, work / "mirror-many")
        servers.append(m)
        settle(args)
        before = file_bytes(upstream)
        before_m, cpu0 = file_bytes(m), cpu_seconds(m.proc.pid)
        errors: list[BaseException] = []

        def one(i: int) -> None:
            try:
                download(args, m, work / f"many-{i}")
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        t0 = time.monotonic()
        threads = [threading.Thread(target=one, args=(i,)) for i in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise SystemExit(f"concurrent downloads failed: {errors[0]}")
        many_s = time.monotonic() - t0
        many_cpu = cpu_seconds(m.proc.pid) - cpu0
        many_sent = file_bytes(m) - before_m
        upstream_ratio = (file_bytes(upstream) - before) / size
        print(json.dumps({"bench": "mirror", "way": f"{args.clients} clients cold", "seconds": round(many_s, 3),
                          "upstream_bytes_over_file": round(upstream_ratio, 4),
                          # the mirror's, per GiB it delivered (the file times the clients)
                          "cpu_s_per_GiB": round(many_cpu / (gib * args.clients), 3),
                          "client_bytes_over_file": round(many_sent / (size * args.clients), 4)}), flush=True)

        # Hits on the warm mirror, each paired with a direct download just before it: the hits above come right
        # after the mirror's ingest (its gigabyte of xorbs and spools still being written back), these once it
        # has settled, as most hits do.
        wait_stored(m)
        warm: dict[str, list[float]] = {"direct": [], "hit": []}
        for i in range(args.pairs):
            for way, srv in (("direct", upstream), ("hit", m)):
                settle(args)
                t, cpu_s, sent = measured(args, srv, srv.proc.pid, srv, work / f"warm-{i}-{way}")
                warm[way].append(t)
                cpu[f"warm {way}"].append(cpu_s / gib)
                client_bytes[f"warm {way}"].append(sent / size)
                print(json.dumps({"bench": "mirror", "pair": i, "way": f"warm {way}", "seconds": round(t, 3),
                                  "MBps": round(size / t / 1e6, 1), "cpu_s_per_GiB": round(cpu_s / gib, 3),
                                  "client_bytes_over_file": round(sent / size, 4)}), flush=True)

        # Metadata on the warm mirror.
        info = latencies(m, "GET", "/api/models/bench/big/revision/main", None, 2000)
        paths = latencies(m, "POST", "/api/models/bench/big/paths-info/main",
                          json.dumps({"paths": ["big.bin", ".gitattributes"], "expand": True}).encode(), 2000)

        def pct(v: list[float], q: float) -> float:
            return round(sorted(v)[min(len(v) - 1, int(q * len(v)))], 3)

        def median(v: list[float], digits: int = 3) -> float | None:
            return round(statistics.median(v), digits) if v else None

        med = {w: statistics.median(v) for w, v in times.items()}
        summary = {
            "bench": "mirror", "size_mib": args.size_mib, "rounds": args.rounds,
            "median_MBps": {w: round(size / t / 1e6, 1) for w, t in med.items()},
            "ratio_cold_over_direct": round(med["direct"] / med["cold"], 3),
            "ratio_hit_over_direct": round(med["direct"] / med["hit"], 3),
            # The same round's downloads compared (each round's direct against its cold and hit): on a guest
            # whose speed drifts between rounds this says more than the ratio of medians.
            "paired_cold_over_direct": round(statistics.median(d / c for d, c in zip(times["direct"], times["cold"])), 3),
            "paired_hit_over_direct": round(statistics.median(d / h for d, h in zip(times["direct"], times["hit"])), 3),
            "direct_seconds_range": [round(min(times["direct"]), 2), round(max(times["direct"]), 2)],
            "warm_hit_over_direct": round(statistics.median(warm["direct"]) / statistics.median(warm["hit"]), 3)
            if warm["hit"] else None,
            "paired_warm_hit_over_direct": round(statistics.median(d / h for d, h in zip(warm["direct"], warm["hit"])), 3)
            if warm["hit"] else None,
            "upstream_bytes_over_file": {"1 client": round(max(cold_ratios), 4),
                                         f"{args.clients} clients": round(upstream_ratio, 4)},
            # The serving server's CPU seconds per GiB of the file (medians; cold until idle: until the mirror
            # had stored the file and gone quiet).
            "cpu_s_per_GiB": {w: median(v) for w, v in cpu.items() if v},
            # The serving server's response bytes on the file routes over the file (the largest of each way).
            "max_client_bytes_over_file": {w: round(max(v), 4) for w, v in client_bytes.items() if v},
            "revision_info_ms": {"p50": pct(info, 0.5), "p99": pct(info, 0.99)},
            "paths_info_ms": {"p50": pct(paths, 0.5), "p99": pct(paths, 0.99)}}
        if olah_py:
            ok = {w: [r for r in olah if r["way"] == f"olah {w}" and "error" not in r] for w in ("cold", "hit")}
            olah_med = {w: statistics.median(r["seconds"] for r in v) if v else None for w, v in ok.items()}
            summary["olah"] = {
                "version": OLAH_VERSION,
                "median_MBps": {w: round(size / t / 1e6, 1) if t else None for w, t in olah_med.items()},
                # direct's median over olah's (speed, higher is better), and paired with each round's direct
                **{f"ratio_{w}_over_direct": round(med["direct"] / t, 3) if t else None for w, t in olah_med.items()},
                **{f"paired_{w}_over_direct": median([r["direct"] / r["seconds"] for r in v]) for w, v in ok.items()},
                "cpu_s_per_GiB": {w: median([r["cpu_s_per_GiB"] for r in v]) for w, v in ok.items()},
                "max_upstream_bytes_over_file": {w: round(max(r["upstream_bytes_over_file"] for r in v), 4) if v
                                                 else None for w, v in ok.items()},
                "xet": sorted({r["xet"] for v in ok.values() for r in v}),
                "errors": sum(1 for r in olah if "error" in r)}
        print(json.dumps(summary), flush=True)
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The pull-through mirror beside a direct download, in one run (BENCHMARKS.md, "The mirror"):

    .venv/bin/python scripts/bench_mirror.py [--size-mib 1024] [--rounds 3] [--clients 8] [--pairs 3]
                                             [--settle 10] [--bin build/release/src/cli/cairn]

An upstream `cairn serve` (SQLite + local disk) holds bench/big, one --size-mib file of random bytes uploaded with
huggingface_hub and hf_xet. Each round, with a fresh client cache for every download (huggingface_hub 2.4.0 and
hf_xet, timed inside the client process around hf_hub_download):
  cold:   through a fresh mirror of the upstream (the mirror fetches the file through upstream's Xet reconstruction,
          relaying its xorb ranges to the client as they arrive while it chunks and stores them);
  direct: from the upstream itself (the file uploaded directly to cairn);
  hit:    through the same mirror again (what it holds).
Each round: direct, cold, hit, each after a sync and --settle seconds of pause. Then --clients clients download the file at once through another
fresh mirror: the upstream's bytes sent are counted (1.00 x the file is one transfer); then --pairs times a direct
download and a hit on that warm mirror, in turn (the hits of the rounds come right after the mirror's ingest). Last, metadata on the warm
mirror: 2,000 revision-info and 2,000 paths-info requests over one keep-alive connection, p50 and p99 latency.

Prints one JSON line per measurement and a summary line with the ratios (cold/direct, hit/direct: speed, higher
is better), as ratios of the medians and as medians of each round's ratios (paired). Client and servers share the machine's cores; the working directory lives under build/.
"""

from __future__ import annotations

import argparse
import http.client
import os
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from harness import CairnServer, Hub, MiB, write_random  # noqa: E402


def file_bytes(srv) -> float:
    """Bytes `srv` sent of files: plain downloads and xorb transfers."""
    return sum(v for n, labels, v in srv.metrics()
               if n == "cairn_http_response_bytes_total"
               and ("resolve" in labels.get("route", "") or labels.get("route") == "transfer"))


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


def mirror(args, upstream, work: Path) -> CairnServer:
    return CairnServer(args.bin, work, work.with_suffix(".log"),
                       env={"CAIRN_MIRROR_UPSTREAM": upstream.url, "CAIRN_LOG_LEVEL": "warn"}).start()


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
    ap.add_argument("--bin", default=str(REPO / "build/release/src/cli/cairn"))
    ap.add_argument("--python", default=str(REPO / ".venv/bin/python"))
    args = ap.parse_args()
    (REPO / "build").mkdir(exist_ok=True)
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
        times: dict[str, list[float]] = {"direct": [], "cold": [], "hit": []}
        cold_ratios: list[float] = []  # upstream bytes sent for a cold download, over the file
        for rnd in range(args.rounds):
            m = mirror(args, upstream, work / f"mirror-{rnd}")
            servers.append(m)
            ways = {"direct": lambda d: download(args, upstream, d), "cold": lambda d: download(args, m, d),
                    "hit": lambda d: download(args, m, d)}
            # direct, then cold on the fresh mirror, then hit; each once the machine has settled from the last
            # (writes on disk, and a pause: freeing the last download's gigabyte slowed whichever download came
            # next by up to 3x on this machine's disk, whatever it was).
            for way in ["direct", "cold", "hit"]:
                os.sync()
                time.sleep(args.settle)
                before = file_bytes(upstream)
                t = ways[way](work / f"client-{rnd}-{way}")
                times[way].append(t)
                if way == "cold":
                    wait_stored(m)
                    cold_ratios.append((file_bytes(upstream) - before) / size)
                print(json.dumps({"bench": "mirror", "round": rnd, "way": way, "seconds": round(t, 3),
                                  "MBps": round(size / t / 1e6, 1)}), flush=True)
            m.stop()
            servers.remove(m)
            shutil.rmtree(work / f"mirror-{rnd}", ignore_errors=True)

        # N clients at once through a fresh mirror: one upstream transfer.
        m = mirror(args, upstream, work / "mirror-many")
        servers.append(m)
        before = file_bytes(upstream)
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
        upstream_ratio = (file_bytes(upstream) - before) / size
        print(json.dumps({"bench": "mirror", "way": f"{args.clients} clients cold", "seconds": round(many_s, 3),
                          "upstream_bytes_over_file": round(upstream_ratio, 4)}), flush=True)

        # Hits on the warm mirror, each paired with a direct download just before it: the hits above come right
        # after the mirror's ingest (its gigabyte of xorbs and spools still being written back), these once it
        # has settled, as most hits do.
        wait_stored(m)
        warm: dict[str, list[float]] = {"direct": [], "hit": []}
        for i in range(args.pairs):
            for way, srv in (("direct", upstream), ("hit", m)):
                os.sync()
                time.sleep(args.settle)
                t = download(args, srv, work / f"warm-{i}-{way}")
                warm[way].append(t)
                print(json.dumps({"bench": "mirror", "pair": i, "way": f"warm {way}", "seconds": round(t, 3),
                                  "MBps": round(size / t / 1e6, 1)}), flush=True)

        # Metadata on the warm mirror.
        info = latencies(m, "GET", "/api/models/bench/big/revision/main", None, 2000)
        paths = latencies(m, "POST", "/api/models/bench/big/paths-info/main",
                          json.dumps({"paths": ["big.bin", ".gitattributes"], "expand": True}).encode(), 2000)

        def pct(v: list[float], q: float) -> float:
            return round(sorted(v)[min(len(v) - 1, int(q * len(v)))], 3)

        med = {w: statistics.median(v) for w, v in times.items()}
        print(json.dumps({
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
            "revision_info_ms": {"p50": pct(info, 0.5), "p99": pct(info, 0.99)},
            "paths_info_ms": {"p50": pct(paths, 0.5), "p99": pct(paths, 0.99)}}), flush=True)
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Reconstruction under load over HTTP, on a large index, on each backend (issue 9's benchmark).

    make bench-load                                    # 1,000,000 files and xorbs, 1,000 req/s for 60 s, both
    make bench-load BENCH_ARGS=--gc                    # and again while the garbage collector marks
    .venv/bin/python scripts/bench_load.py --backend sqlite --files 10000 --xorbs 10000 --seconds 10

For each backend: an index is generated through cairn's own write path (`load_bench generate`: N xorbs of 64
chunks, N files of 200 terms of one whole xorb each, ~1,000 MiB per file, every xorb shared by 200 files), then
a real `cairn serve` on it answers `load_bench run`: random files, a random byte range each, v2 reconstructions,
open loop at the given rate (latency counted from when each request was due). Reported: the client's
percentiles, errors, the answers' size, the server's CPU seconds and peak RSS (VmHWM, reset after the warm-up).
SQLite lives under --dir (disk); PostgreSQL 15 runs as a private server started by cairn-test-postgres, with
its data in the temporary directory (disk here), durable defaults; after its bulk load it is settled (VACUUM
(ANALYZE), CHECKPOINT; --no-settle skips that) as a database in service would be. A generated SQLite index is
kept and reused by the next run with the same sizes (--fresh to regenerate), and read once into the page cache
before the server starts (--cold skips that); --warmup seconds of load run first and do not count.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from harness import CairnServer, free_port, peak_rss_mib, PostgresServer, reset_peak_rss  # noqa: E402


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_json(cmd: list[str]) -> dict:
    r = subprocess.run(cmd, capture_output=True, text=True)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(f"{' '.join(cmd[:2])} failed (exit {r.returncode}):\n{r.stdout}\n{r.stderr[-3000:]}")
    return json.loads(lines[-1])


def settle_postgres(uri: str) -> float:
    """What a database that has served a while has done since the bulk load, before the load is measured:
    VACUUM (ANALYZE) sets the hint bits and visibility map of every page and gathers statistics (else
    autovacuum does it, over tens of GB, during the measurement), then CHECKPOINT writes out what is dirty."""
    print("postgres: VACUUM (ANALYZE), CHECKPOINT…", file=sys.stderr)
    t0 = time.monotonic()
    psql = "/usr/lib/postgresql/15/bin/psql"
    subprocess.run([psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", uri, "-c", "VACUUM (ANALYZE)",
                    "-c", "CHECKPOINT"], check=True)
    return round(time.monotonic() - t0, 1)


def warm_file(path: Path) -> float:
    """Reads a file once so that it is in the page cache, as the index of a server that has been answering
    for a while is (PostgreSQL's data is, having just been written by the generation)."""
    print(f"sqlite: reading {path.name} into the page cache…", file=sys.stderr)
    t0 = time.monotonic()
    with open(path, "rb", buffering=0) as f:
        while f.read(16 << 20):
            pass
    return round(time.monotonic() - t0, 1)


def evict_from_page_cache(paths: list[Path]) -> None:
    """Drops files from the page cache (clean pages only), so that an index kept from an earlier run does not
    compete for memory with the one measured now: a server has one index, not two."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def load_while_marking(args, load: list[str], index: str, data: Path, share: int) -> dict:
    """The same load again, while `cairn gc --dry-run` (a whole mark: every file's terms, every xorb) runs
    back to back against the index the server answers from, its reads paced to `share` percent of the time
    (gc_mark_share). Returns the load's figures and the marks' (the mark under way when the load ends is let
    finish, so at least one is timed whole)."""
    stop = data / "gc.stop"
    stop.unlink(missing_ok=True)
    loop = ("while [ ! -e \"$1\" ]; do \"$2\" gc --dry-run --json --index \"$3\" --data \"$4\" || exit 1; done")
    marker = subprocess.Popen(["bash", "-c", loop, "gc-loop", str(stop), args.bin, index, str(data)],
                              stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "CAIRN_GC_MARK_SHARE": str(share)})
    try:
        res = run_json(load + ["--seconds", str(args.seconds)])
    finally:
        stop.touch()
        out, _ = marker.communicate(timeout=3600)
    marks = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
    if marker.returncode != 0 or not marks:
        raise RuntimeError(f"cairn gc --dry-run failed (exit {marker.returncode})")
    res["mark_share"] = share
    res["marks"] = len(marks)
    res["mark_seconds"] = round(marks[0]["seconds"], 1)
    res["mark_files"] = marks[0]["files"]
    res["mark_xorbs"] = marks[0]["xorbs"]
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    ap.add_argument("--files", type=int, default=1_000_000)
    ap.add_argument("--xorbs", type=int, default=1_000_000)
    ap.add_argument("--terms", type=int, default=200)
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--dir", default=str(REPO / "build" / "bench-load"))
    ap.add_argument("--server-args", default="", help="more `cairn serve` flags, e.g. \"--worker-threads 16\"")
    ap.add_argument("--fresh", action="store_true", help="regenerate the SQLite index even if one exists")
    ap.add_argument("--cold", action="store_true",
                    help="do not read the SQLite index into the page cache first (its pages come from disk)")
    ap.add_argument("--no-settle", action="store_true",
                    help="measure PostgreSQL straight after the bulk load (no VACUUM, no CHECKPOINT)")
    ap.add_argument("--gc", action="store_true",
                    help="then measure the same load again while `cairn gc --dry-run` marks the index back to "
                         "back (issue 26: p99 within 1.5x of the run without)")
    ap.add_argument("--gc-shares", default="50",
                    help="with --gc: the marks' gc_mark_share values to measure, comma-separated; each marking "
                         "run is followed by another run alone, so the noise between runs shows")
    ap.add_argument("--bin", default=str(REPO / "build/release/src/cli/cairn"))
    ap.add_argument("--load-bench", default=str(REPO / "build/release/src/api/load_bench"))
    ap.add_argument("--pg-tool", default=str(REPO / "build/release/src/index/cairn-test-postgres"))
    args = ap.parse_args()

    work = Path(args.dir)
    work.mkdir(parents=True, exist_ok=True)
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    sizes = f"{args.files}f-{args.xorbs}x-{args.terms}t"
    rows = []
    for backend in backends:
        pg = None
        data = work / f"{backend}-{sizes}"
        if backend == "sqlite":
            index = f"sqlite:{data / 'index.db'}"
            generate = args.fresh or not (data / "generated.json").exists()
            if generate and data.exists():
                for p in sorted(data.rglob("*"), reverse=True):
                    p.unlink() if p.is_file() else p.rmdir()
        else:
            evict_from_page_cache(sorted(work.glob("sqlite-*/index.db")))
            pg = PostgresServer(args.pg_tool).start()  # a fresh server each run: its data is temporary
            index = pg.create_database()
            generate = True
        data.mkdir(parents=True, exist_ok=True)
        try:
            if generate:
                print(f"{backend}: generating {args.files:,} files and {args.xorbs:,} xorbs…", file=sys.stderr)
                gen = run_json([args.load_bench, "generate", "--index", index, "--files", str(args.files),
                                "--xorbs", str(args.xorbs), "--terms", str(args.terms)])
                if pg is not None and not args.no_settle:
                    gen["settle_seconds"] = settle_postgres(index)
                if pg is not None:
                    gen["database_bytes"] = int(subprocess.run(
                        ["/usr/lib/postgresql/15/bin/psql", "-X", "-At", "-d", index, "-c",
                         "SELECT pg_database_size(current_database())"],
                        check=True, capture_output=True, text=True).stdout.strip())
                (data / "generated.json").write_text(json.dumps(gen))
            gen = json.loads((data / "generated.json").read_text())
            if pg is None and not args.cold:
                gen["warm_seconds"] = warm_file(data / "index.db")
            srv = CairnServer(args.bin, data, data / "server.log", env={"CAIRN_INDEX": index},
                              args=("--log-level", "warn", *args.server_args.split()), port=free_port())
            srv.start(timeout=120)
            try:
                token = srv.token("bench")
                load = [args.load_bench, "run", "--url", srv.url, "--token", token, "--files", str(args.files),
                        "--terms", str(args.terms), "--rate", str(args.rate),
                        "--connections", str(args.connections)]
                if args.warmup:
                    run_json(load + ["--seconds", str(args.warmup)])
                reset_peak_rss(srv.proc.pid)
                cpu0 = cpu_seconds(srv.proc.pid)
                res = run_json(load + ["--seconds", str(args.seconds)])
                res["server_cpu_s"] = round(cpu_seconds(srv.proc.pid) - cpu0, 1)
                res["server_peak_rss_mib"] = round(peak_rss_mib(srv.proc.pid), 1)
                if args.gc:
                    res["with_gc"] = []
                    for share in (int(x) for x in args.gc_shares.split(",")):
                        g = load_while_marking(args, load, index, data, share)
                        g["alone_after"] = run_json(load + ["--seconds", str(args.seconds)])
                        res["with_gc"].append(g)
            finally:
                srv.stop(timeout=60)
            res.update(backend=backend, generate=gen)
            rows.append(res)
            print(json.dumps(res))
        finally:
            if pg is not None:
                pg.close()

    print(f"\n{args.files:,} files, {args.xorbs:,} xorbs, {args.terms} terms per file; {args.rate} req/s for "
          f"{args.seconds} s after {args.warmup} s of warm-up, {args.connections} connections\n")
    print("| backend | generate (xorbs, files) | p50 | p90 | p99 | p99.9 | p99 of each 10 s | errors | answer | "
          "server CPU | server peak RSS |")
    print("|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    for r in rows:
        g = r["generate"]
        windows = " / ".join(f"{w:.1f}" for w in r.get("p99_by_10s_ms", []))
        print(f"| {r['backend']} | {g['xorb_seconds']:.0f} s, {g['file_seconds']:.0f} s | {r['p50_ms']:.2f} ms | "
              f"{r['p90_ms']:.2f} ms | **{r['p99_ms']:.2f} ms** | {r['p999_ms']:.2f} ms | {windows} | "
              f"{r['errors']} | {r['mean_body_bytes'] / 1000:.1f} kB | {r['server_cpu_s']} s | "
              f"{r['server_peak_rss_mib']} MiB |")
    if any("with_gc" in r for r in rows):
        print("\nThe same load while `cairn gc --dry-run` marks the index back to back:\n")
        print("| backend | mark share | p99 alone before | p99 while marking | p99 alone after | ratio to the "
              "runs alone (mean) | p99 of each 10 s while marking | errors | one mark |")
        print("|---|---:|---:|---:|---:|---:|---|---:|---:|")
        for r in rows:
            before = r
            for g in r["with_gc"]:
                after = g["alone_after"]
                alone = (before["p99_ms"] + after["p99_ms"]) / 2
                windows = " / ".join(f"{w:.1f}" for w in g.get("p99_by_10s_ms", []))
                print(f"| {r['backend']} | {g['mark_share']} % | {before['p99_ms']:.2f} ms | {g['p99_ms']:.2f} ms | "
                      f"{after['p99_ms']:.2f} ms | **{g['p99_ms'] / alone:.2f}** | {windows} | "
                      f"{g['errors'] + after['errors']} | {g['mark_seconds']} s ({g['mark_files']:,} files, "
                      f"{g['mark_xorbs']:,} xorbs) |")
                before = after
    return 0 if all(r["errors"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

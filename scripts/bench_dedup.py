#!/usr/bin/env python3
"""Deduplication side by side: cairn and the reference server of huggingface/xet-core, driven by hf_xet 1.8.0.

    make bench-dedup REFERENCE=/scratch/xet-core/target/release/local_cas_server
    .venv/bin/python scripts/bench_dedup.py --reference PATH [--size-mib 1024] [--rounds 2]

The reference is built from a fetched copy of xet-core in a scratch directory, never from or into this
repository (BENCHMARKS.md says how). Each round runs every scenario against each server, in turn (the order
alternates between rounds), each server on an empty data directory, each client with an empty cache:

  first      A: SIZE of random bytes
  again      A again (a new machine re-uploading the same file)
  edited     A with 1 % of its bytes replaced by random bytes, in ten places
  half       the first half of A followed by SIZE/2 new random bytes
  download   A, into a new file, checked byte for byte (--downloads times; the median is shown, and the
             server CPU per download)

For each: the client's wall time, the xorb and shard bytes it sent (hf_xet's own report), the bytes the server
keeps on disk afterwards (apparent size of its data directory), the server's CPU time (user + system, all
threads) and its peak RSS over the whole round. Every timed step starts after a sync(2), so that no step pays
for writing back what an earlier one left dirty, and on memory just touched (see prefault()). Prints one JSON line per server and round, then a table.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from harness import assert_same_file, CairnServer, free_port, HfXet, http, MiB, peak_rss_mib, write_random  # noqa: E402


SCENARIOS = ("first", "again", "edited", "half", "download")
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14 and 15)


def stored_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


class ReferenceServer:
    """xet-core's local_cas_server on a free port (it takes no tokens; hf_xet's are ignored)."""

    def __init__(self, binary: str, data_dir: Path, log_path: Path):
        self.bin, self.data_dir, self.log_path = binary, data_dir, log_path
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "ReferenceServer":
        self.data_dir.mkdir(parents=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [self.bin, "--data-directory", str(self.data_dir), "--host", "127.0.0.1", "--port", str(self.port)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, "RUST_LOG": "warn"})
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"local_cas_server exited with {self.proc.returncode}; see {self.log_path}")
            try:
                if http("GET", f"{self.url}/health", timeout=2).status == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"local_cas_server did not answer /health; see {self.log_path}")

    def token(self, scope: str, write: bool = False) -> str:
        return "unused"

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def prefault(gib: int) -> None:
    """Touches and frees `gib` GiB. In a virtual machine the first use of a guest page costs a fault in the
    host, and freed pages go back to the host after a while (free page reporting): measured here, 1 GiB
    downloaded into memory not used lately took 2.5–4.1 s, and 0.9 s right after 6 GiB had been touched,
    with either server. A step would pay for it or not by chance, so each one starts on touched memory."""
    for _ in range(gib):
        block = bytearray(1 << 30)  # zero-filled: every page is written
        del block


def make_inputs(work: Path, size: int) -> dict[str, Path]:
    a = write_random(work / "a.bin", size, seed=2026)
    edited = work / "edited.bin"
    shutil.copyfile(a, edited)
    r = random.Random(7)
    piece = size // 1000  # ten pieces of 0.1 %
    with open(edited, "r+b") as f:
        for i in range(10):
            f.seek(size * i // 10 + size // 20)
            f.write(r.randbytes(piece))
    half = work / "half.bin"
    tail = write_random(work / "tail.bin", size - size // 2, seed=2027)
    with open(half, "wb") as out, open(a, "rb") as src, open(tail, "rb") as t:
        out.write(src.read(size // 2))
        shutil.copyfileobj(t, out)
    tail.unlink()
    return {"first": a, "again": a, "edited": edited, "half": half}


def run_server(name: str, srv, inputs: dict[str, Path], hfx: HfXet, work: Path, downloads: int,
               prefault_gib: int) -> dict:
    srv.start()
    pid = srv.proc.pid
    tok = srv.token("bench/dedup", write=True)
    out: dict = {"server": name}
    meta = None
    try:
        for scenario in SCENARIOS:
            # Dirty pages of earlier steps (the inputs, the last download) must not be written back inside
            # the next timed step: it would pay for them, whichever server it measures.
            os.sync()
            prefault(prefault_gib)
            cpu0, t0 = cpu_seconds(pid), time.monotonic()
            if scenario == "download":
                dest = work / f"{name}-download.bin"
                runs = []
                for _ in range(downloads):
                    os.sync()
                    prefault(prefault_gib)
                    t1 = time.monotonic()
                    hfx.download(srv.url, tok, [(meta["hash"], meta["size"], dest)], timeout=3600)
                    runs.append(round(time.monotonic() - t1, 2))
                    assert_same_file(dest, inputs["first"], meta["sha256"])
                    dest.unlink()
                row = {"runs": runs}
            else:
                up = hfx.upload(srv.url, tok, [inputs[scenario]], timeout=3600)
                if scenario == "first":
                    meta = up.result["files"][0]
                d = up.result["dedup"]
                row = {"xorb_bytes_sent": d["xorb_bytes_uploaded"], "shard_bytes_sent": d["shard_bytes_uploaded"],
                       "global_dedup_bytes": d["deduped_bytes_by_global_dedup"]}
            n = len(row.get("runs", [1]))
            row["seconds"] = statistics.median(row["runs"]) if "runs" in row else round(time.monotonic() - t0, 2)
            row["server_cpu_s"] = round((cpu_seconds(pid) - cpu0) / n, 2)  # per run
            row["stored_bytes"] = stored_bytes(srv.data_dir)
            out[scenario] = row
        out["peak_rss_mib"] = round(peak_rss_mib(pid), 1)
    finally:
        srv.kill()
    return out


def table(results: list[dict], size: int) -> str:
    mib = lambda b: f"{b / MiB:,.1f}"  # noqa: E731
    lines = ["| scenario | server | xorb MiB sent | stored MiB after | seconds | MB/s | server CPU s |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for scenario in SCENARIOS:
        for r in results:
            row = r[scenario]
            sent = mib(row["xorb_bytes_sent"]) if "xorb_bytes_sent" in row else "—"
            lines.append(f"| {scenario} | {r['server']} | {sent} | {mib(row['stored_bytes'])} | {row['seconds']} | "
                         f"{size / 1e6 / row['seconds']:,.0f} | {row['server_cpu_s']} |")
    lines.append("")
    lines.append("peak RSS (MiB): " + ", ".join(f"{r['server']} {r['peak_rss_mib']}" for r in results))
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reference", required=True, help="xet-core's local_cas_server binary")
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--downloads", type=int, default=1, help="downloads of A per round (the median is shown)")
    ap.add_argument("--bin", default=str(REPO / "build/release/src/cli/cairn"))
    ap.add_argument("--also", action="append", default=[], metavar="NAME=PATH",
                    help="another cairn binary to run in the same rounds (e.g. an older build, for before/after)")
    ap.add_argument("--python", default=str(REPO / ".venv/bin/python"))
    ap.add_argument("--keep", action="store_true", help="keep the working directory")
    ap.add_argument("--prefault-gib", type=int, default=6,
                    help="memory touched before each timed step (see prefault(); 0: none)")
    args = ap.parse_args()

    (REPO / "build").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-dedup-", dir=REPO / "build"))
    size = args.size_mib * MiB
    try:
        inputs = make_inputs(work, size)
        results = []
        cairns = {"cairn": args.bin, **dict(a.split("=", 1) for a in args.also)}
        names = [*cairns, "reference"]
        for rnd in range(args.rounds):
            order = names if rnd % 2 == 0 else names[::-1]
            for name in order:
                d = work / f"round{rnd}-{name}"
                d.mkdir()
                if name in cairns:
                    srv = CairnServer(cairns[name], d / "data", d / "server.log")
                else:
                    srv = ReferenceServer(args.reference, d / "data", d / "server.log")
                r = run_server(name, srv, inputs, HfXet(args.python, d / "hf"), d, args.downloads,
                               args.prefault_gib)
                r["round"] = rnd
                print(json.dumps(r), flush=True)
                results.append(r)
                shutil.rmtree(d / "data", ignore_errors=True)
        print(table(results, size))
        return 0
    finally:
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""`hf upload` / `hf download` (huggingface_hub's CLI, through cairn's Hub API) beside the same transfer through
hf_xet alone (its XetSession API straight to the CAS), against `cairn serve` (SQLite + local disk) on this
machine, in one run:

    .venv/bin/python scripts/measure_hub.py [--size-mib 1024] [--rounds 2] [--bin build/release/src/cli/cairn]

Each round uploads N MiB of random bytes and downloads them into a new file (checked) both ways, each way on a
server of its own with a fresh data directory and fresh client caches, so that neither dedups against the
other; the two ways alternate in order from round to round. Prints one JSON line per round and way: seconds and
MB/s each way (wall time of the client process, start-up included) and the Hub path's overhead. Client and
server share the machine's cores. The working directory lives under build/ (disk, not tmpfs).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from harness import assert_same_file, CairnServer, HfXet, Hub, MiB, write_random  # noqa: E402


def timed(fn):
    t0 = time.monotonic()
    fn()
    return time.monotonic() - t0


def hub_way(args, work: Path, src: Path) -> tuple[float, float]:
    srv = CairnServer(args.bin, work / "data", work / "server.log").start()
    try:
        hub = Hub(args.python, work / "client", srv, srv.token("measure", write=True))
        hub.cli("repos", "create", "measure/big")
        up = timed(lambda: hub.cli("upload", "measure/big", str(src), "big.bin", timeout=3600))
        dest = work / "down"
        down = timed(lambda: hub.cli("download", "measure/big", "big.bin", "--local-dir", str(dest), timeout=3600))
        assert_same_file(dest / "big.bin", src)
        return up, down
    finally:
        srv.stop()


def xet_way(args, work: Path, src: Path) -> tuple[float, float]:
    srv = CairnServer(args.bin, work / "data", work / "server.log").start()
    try:
        tok = srv.token("measure", write=True)
        hfx = HfXet(args.python, work / "client")
        result = {}
        up = timed(lambda: result.update(hfx.upload(srv.url, tok, [src], timeout=3600).result["files"][0]))
        dest = work / "down.bin"
        down = timed(lambda: hfx.download(srv.url, tok, [(result["hash"], result["size"], dest)], timeout=3600))
        assert_same_file(dest, src)
        return up, down
    finally:
        srv.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--bin", default=str(REPO / "build/release/src/cli/cairn"))
    ap.add_argument("--python", default=str(REPO / ".venv/bin/python"))
    args = ap.parse_args()
    (REPO / "build").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="measure-hub-", dir=REPO / "build"))
    try:
        src = write_random(work / "random.bin", args.size_mib * MiB, seed=2028)
        size = src.stat().st_size
        ways = {"hf upload / hf download": hub_way, "hf_xet alone": xet_way}
        for r in range(args.rounds):
            order = list(ways) if r % 2 == 0 else list(reversed(ways))
            for name in order:
                d = work / f"round{r}-{name.split()[0]}"
                up, down = ways[name](args, d, src)
                shutil.rmtree(d, ignore_errors=True)
                print(json.dumps({"round": r, "way": name, "bytes": size, "upload_s": round(up, 2),
                                  "download_s": round(down, 2), "upload_MBps": round(size / up / 1e6, 1),
                                  "download_MBps": round(size / down / 1e6, 1)}), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

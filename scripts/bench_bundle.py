#!/usr/bin/env python3
"""`cairn export` and `cairn import` of a large repository, timed (BENCHMARKS.md, "Bundles"):

    .venv/bin/python scripts/bench_bundle.py [--size-mib 1024] [--files 4] [--rounds 3]
                                             [--bin build/release/src/cli/cairn]

A `cairn serve` (SQLite + local disk) holds bench/model: --files files of random bytes, --size-mib in all, uploaded
with huggingface_hub and hf_xet, and a small config. Each round, after a sync: `cairn export bench/model DEST`
(beside the running server), `cairn import DEST` into an empty deployment, then `cairn import DEST --as
bench/copy` into the same one (every xorb held already: what the import's checks cost alone). Then a download of
the imported repository with huggingface_hub + hf_xet from a server over the importing deployment, byte-exact.

Prints one JSON line per measurement and a summary line with the medians (MB/s of the repository's large files).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from harness import CairnServer, Hub, MiB, assert_same_file, write_random  # noqa: E402


def timed(cmd: list[str], env: dict) -> tuple[float, dict]:
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, env=env)
    t = time.monotonic() - t0
    if r.returncode != 0:
        raise SystemExit(f"`{' '.join(cmd)}` failed ({r.returncode}):\n{r.stderr}")
    return t, json.loads(r.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bin", default=str(REPO / "build/release/src/cli/cairn"))
    ap.add_argument("--python", default=str(REPO / ".venv/bin/python"))
    args = ap.parse_args()
    (REPO / "build").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-bundle-", dir=REPO / "build"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    env["CAIRN_LOG_LEVEL"] = "warn"
    servers: list[CairnServer] = []
    try:
        source = CairnServer(args.bin, work / "source", work / "source.log", env={"CAIRN_LOG_LEVEL": "warn"}).start()
        servers.append(source)
        folder = work / "model"
        folder.mkdir()
        (folder / "config.json").write_text('{"hidden": 4096}\n')
        size = args.size_mib * MiB
        for i in range(args.files):
            write_random(folder / f"part-{i}.bin", size // args.files, seed=3000 + i)
        Hub(args.python, work / "owner", source, source.token("bench", write=True)).run(f"""
            api.create_repo("bench/model")
            api.upload_folder(repo_id="bench/model", folder_path={str(folder)!r})
        """, timeout=3600)
        times: dict[str, list[float]] = {"export": [], "import": [], "import held": []}
        for rnd in range(args.rounds):
            dest = work / f"bundle-{rnd}"
            target = work / f"target-{rnd}"
            os.sync()
            t, report = timed([args.bin, "export", "bench/model", str(dest), "--json", "--data", str(source.data_dir)], env)
            times["export"].append(t)
            print(json.dumps({"bench": "bundle", "round": rnd, "step": "export", "seconds": round(t, 3),
                              "MBps": round(size / t / 1e6, 1), "xorbs": report["xorbs"]}), flush=True)
            os.sync()
            t, report = timed([args.bin, "import", str(dest), "--json", "--data", str(target)], env)
            times["import"].append(t)
            print(json.dumps({"bench": "bundle", "round": rnd, "step": "import", "seconds": round(t, 3),
                              "MBps": round(size / t / 1e6, 1), "new_xorbs": report["new_xorbs"]}), flush=True)
            os.sync()
            t, report = timed([args.bin, "import", str(dest), "--as", "bench/copy", "--json", "--data", str(target)], env)
            times["import held"].append(t)
            print(json.dumps({"bench": "bundle", "round": rnd, "step": "import held", "seconds": round(t, 3),
                              "MBps": round(size / t / 1e6, 1), "new_xorbs": report["new_xorbs"]}), flush=True)
            if rnd == args.rounds - 1:
                served = CairnServer(args.bin, target, work / "target.log", env={"CAIRN_LOG_LEVEL": "warn"}).start()
                servers.append(served)
                Hub(args.python, work / "reader", served, None).run(
                    f"""snapshot_download("bench/model", local_dir={str(work / "got")!r})""", timeout=3600)
                for f in folder.iterdir():
                    assert_same_file(f, work / "got" / f.name)
            shutil.rmtree(dest, ignore_errors=True)
            if rnd != args.rounds - 1:
                shutil.rmtree(target, ignore_errors=True)
        med = {k: statistics.median(v) for k, v in times.items()}
        print(json.dumps({"bench": "bundle", "size_mib": args.size_mib, "files": args.files, "rounds": args.rounds,
                          "median_seconds": {k: round(v, 3) for k, v in med.items()},
                          "median_MBps": {k: round(size / v / 1e6, 1) for k, v in med.items()},
                          "download_after_import": "byte-exact"}), flush=True)
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

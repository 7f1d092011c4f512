#!/usr/bin/env python3
"""Upload and download throughput of the stock hf_xet client against a real `cairn serve` on this machine.

    make measure-transfer                       # 1 GiB of random bytes
    .venv/bin/python scripts/measure_transfer.py --size-mib 256 --bin build/release/src/cli/cairn

Writes random (incompressible) data, uploads it with hf_xet 1.8.0 (a fresh client cache, the stock defaults),
downloads it into a new file, checks the bytes, and prints MB/s each way (wall time of the client process,
including its start-up, divided by the file size) and the server's peak RSS during each phase (VmHWM, reset
between phases). Client and server share the machine's cores, as they do on a workstation. The working
directory lives under build/ (disk, not tmpfs: durable writes are part of the cost).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "interop"))

from interop_util import MiB, CairnServer, HfXet, assert_same_file, write_random  # noqa: E402


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc status")


def reset_peak_rss(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # 5: reset the peak resident set size


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--bin", default=str(REPO / "build/release/src/cli/cairn"))
    ap.add_argument("--python", default=str(REPO / ".venv/bin/python"))
    ap.add_argument("--keep", action="store_true", help="keep the working directory")
    args = ap.parse_args()

    (REPO / "build").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="measure-transfer-", dir=REPO / "build"))
    srv = CairnServer(args.bin, work / "data", work / "server.log")
    try:
        size = args.size_mib * MiB
        src = write_random(work / "random.bin", size, seed=2026)
        srv.start()
        token = srv.token("measure/transfer", write=True)
        hfx = HfXet(args.python, work / "hf")

        reset_peak_rss(srv.proc.pid)
        t0 = time.monotonic()
        up = hfx.upload(srv.url, token, [src], timeout=3600)
        upload_s = time.monotonic() - t0
        upload_rss = peak_rss_mib(srv.proc.pid)
        meta = up.result["files"][0]

        reset_peak_rss(srv.proc.pid)
        dest = work / "downloaded.bin"
        t0 = time.monotonic()
        hfx.download(srv.url, token, [(meta["hash"], meta["size"], dest)], timeout=3600)
        download_s = time.monotonic() - t0
        download_rss = peak_rss_mib(srv.proc.pid)
        assert_same_file(dest, src, meta["sha256"])

        result = {
            "size_mib": args.size_mib,
            "upload_s": round(upload_s, 2),
            "upload_MBps": round(size / 1e6 / upload_s, 1),
            "upload_server_peak_rss_mib": round(upload_rss, 1),
            "download_s": round(download_s, 2),
            "download_MBps": round(size / 1e6 / download_s, 1),
            "download_server_peak_rss_mib": round(download_rss, 1),
            "xorb_bytes_uploaded": up.result["dedup"]["xorb_bytes_uploaded"],
        }
        print(json.dumps(result))
        srv.stop()
        return 0
    finally:
        if srv.proc is not None:
            srv.kill()
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""`cairn put` / `cairn get` beside the stock client hf_xet 1.8.0, against one `cairn serve` (SQLite + local
disk) on this machine, in one run:

    .venv/bin/python scripts/measure_clients.py [--size-mib 1024] [--bin build/release/src/cli/cairn]

For each client, into a scope of its own: upload N MiB of random bytes, download them into a new file (checked),
then upload a copy with 1 % of it replaced in the middle (hf_xet with a fresh cache, so that both learn what the
server has only through its dedup answers). Prints one JSON line per client: MB/s each way (wall time of the
client process, start-up included, over the file size) and the xorb bytes each upload sent (from the server's
request-body counter for the xorb route, so that both are counted the same way). Client and server share the
machine's cores. The working directory lives under build/ (disk, not tmpfs).
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

from harness import assert_same_file, CairnServer, HfXet, MiB, sha256_file, write_random  # noqa: E402


def xorb_bytes_in(srv) -> float:
    return sum(v for n, labels, v in srv.metrics()
               if n == "cairn_http_request_body_bytes_total" and labels.get("route") == "xorb_upload")


def timed(fn):
    t0 = time.monotonic()
    out = fn()
    return out, time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--bin", default=str(REPO / "build/release/src/cli/cairn"))
    ap.add_argument("--python", default=str(REPO / ".venv/bin/python"))
    args = ap.parse_args()
    (REPO / "build").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="measure-clients-", dir=REPO / "build"))
    srv = CairnServer(args.bin, work / "data", work / "server.log")
    try:
        src = write_random(work / "random.bin", args.size_mib * MiB, seed=2027)
        data = bytearray(src.read_bytes())
        mid, n = len(data) // 2, len(data) // 100
        data[mid:mid + n] = os.urandom(n)
        edited = work / "edited.bin"
        edited.write_bytes(bytes(data))
        del data
        srv.start()
        size = src.stat().st_size
        for client in ("hf_xet", "cairn"):
            tok = srv.token(f"measure/{client}", write=True)
            dest = work / f"down-{client}.bin"
            before = xorb_bytes_in(srv)
            if client == "hf_xet":
                hfx = HfXet(args.python, work / "hf-first")
                up, up_s = timed(lambda: hfx.upload(srv.url, tok, [src], timeout=3600))
                meta = up.result["files"][0]
                _, down_s = timed(lambda: hfx.download(srv.url, tok, [(meta["hash"], meta["size"], dest)],
                                                       timeout=3600))
                sent_first = xorb_bytes_in(srv) - before
                fresh = HfXet(args.python, work / "hf-second")  # a fresh cache: dedup through the server only
                before = xorb_bytes_in(srv)
                _, edit_s = timed(lambda: fresh.upload(srv.url, tok, [edited], timeout=3600))
            else:
                env = {"PATH": "/usr/bin:/bin", "CAIRN_ENDPOINT": srv.url, "CAIRN_TOKEN": tok}

                def run(*a):
                    r = subprocess.run([args.bin, *a], capture_output=True, timeout=3600, env=env)
                    if r.returncode != 0:
                        raise RuntimeError(f"cairn {a[0]}: {r.stderr.decode()}")
                    return json.loads(r.stdout)

                up, up_s = timed(lambda: run("put", str(src), "--json"))
                meta = {"hash": up["files"][0]["hash"], "sha256": up["files"][0]["sha256"]}
                _, down_s = timed(lambda: run("get", meta["hash"], "-o", str(dest), "--json"))
                sent_first = xorb_bytes_in(srv) - before
                before = xorb_bytes_in(srv)
                _, edit_s = timed(lambda: run("put", str(edited), "--json"))
            sent_edit = xorb_bytes_in(srv) - before
            assert_same_file(dest, src, meta["sha256"] or sha256_file(src))
            dest.unlink()
            print(json.dumps({
                "client": client, "size_mib": args.size_mib,
                "upload_MBps": round(size / 1e6 / up_s, 1), "download_MBps": round(size / 1e6 / down_s, 1),
                "upload_xorb_bytes": int(sent_first), "edit_upload_s": round(edit_s, 2),
                "edit_upload_xorb_bytes": int(sent_edit),
            }), flush=True)
        srv.stop()
        return 0
    finally:
        if srv.proc is not None:
            srv.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Upload and download throughput of the stock hf_xet client against a real `cairn serve` on this machine.

    make measure-transfer                       # 1 GiB of random bytes, SQLite + local disk
    .venv/bin/python scripts/measure_transfer.py --size-mib 256 --bin build/release/src/cli/cairn
    .venv/bin/python scripts/measure_transfer.py --deployment local,s3,s3-presigned   # one run, side by side
    .venv/bin/python scripts/measure_transfer.py --deployment local,local-tls,local,local-tls   # HTTPS beside HTTP
    .venv/bin/python scripts/measure_transfer.py --deployment local,local-legacy,local,local-legacy   # upload grants

Deployments: `local` (SQLite + the data directory), `s3` (PostgreSQL + SeaweedFS, both private servers started
here, bytes served through the node), `s3-presigned` (the same, presigned S3 URLs) and `local-tls` (`local` over
HTTPS, a certificate of a test CA the client trusts through SSL_CERT_FILE) and `local-legacy` (`local` with the
client's HF_XET_CLIENT_LEGACY_DIRECT_XORB_UPLOAD=1: xorbs posted without first asking for an upload grant, the
request cairn answers 404; beside `local` it prices that request). One JSON line each; a deployment may
be named more than once (alternate them: the machine's speed drifts), each run on a fresh server.

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

from harness import (  # noqa: E402
    MiB, CairnServer, HfXet, PostgresServer, SeaweedServer, TestCa, assert_same_file, peak_rss_mib, reset_peak_rss,
    write_random,
)


def measure(args, work: Path, name: str, env: dict, src: Path, tls=None, client_env=None) -> dict:
    srv = CairnServer(args.bin, work / f"data-{name}", work / f"server-{name}.log", env=env, tls=tls)
    try:
        size = src.stat().st_size
        srv.start()
        token = srv.token("measure/transfer", write=True)
        hfx = HfXet(args.python, work / f"hf-{name}")

        reset_peak_rss(srv.proc.pid)
        t0 = time.monotonic()
        up = hfx.upload(srv.url, token, [src], timeout=3600, env=client_env)
        upload_s = time.monotonic() - t0
        upload_rss = peak_rss_mib(srv.proc.pid)
        meta = up.result["files"][0]
        grants = srv.requests_count("POST", "xorb_grant")
        xorb_posts = srv.requests_count("POST", "xorb_upload")

        reset_peak_rss(srv.proc.pid)
        dest = work / f"downloaded-{name}.bin"
        t0 = time.monotonic()
        hfx.download(srv.url, token, [(meta["hash"], meta["size"], dest)], timeout=3600, env=client_env)
        download_s = time.monotonic() - t0
        download_rss = peak_rss_mib(srv.proc.pid)
        assert_same_file(dest, src, meta["sha256"])
        dest.unlink()
        srv.stop()
        return {
            "deployment": name.rsplit("-", 1)[0],
            "size_mib": args.size_mib,
            "upload_s": round(upload_s, 2),
            "upload_MBps": round(size / 1e6 / upload_s, 1),
            "upload_server_peak_rss_mib": round(upload_rss, 1),
            "download_s": round(download_s, 2),
            "download_MBps": round(size / 1e6 / download_s, 1),
            "download_server_peak_rss_mib": round(download_rss, 1),
            "xorb_bytes_uploaded": up.result["dedup"]["xorb_bytes_uploaded"],
            "xorb_posts": int(xorb_posts),
            "xorb_grant_requests": int(grants),
        }
    finally:
        if srv.proc is not None:
            srv.kill()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--bin", default=str(REPO / "build/release/src/cli/cairn"))
    ap.add_argument("--python", default=str(REPO / ".venv/bin/python"))
    ap.add_argument("--deployment", default="local", help="comma-separated: local, s3, s3-presigned")
    ap.add_argument("--keep", action="store_true", help="keep the working directory")
    args = ap.parse_args()
    names = [n for n in args.deployment.split(",") if n]
    unknown = set(names) - {"local", "local-tls", "local-legacy", "s3", "s3-presigned"}
    if unknown:
        ap.error(f"unknown deployment(s) {sorted(unknown)}")

    (REPO / "build").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="measure-transfer-", dir=REPO / "build"))
    tools = Path(args.bin).resolve().parents[1]
    pg = sw = None
    try:
        src = write_random(work / "random.bin", args.size_mib * MiB, seed=2026)
        ca = None
        for i, name in enumerate(names):
            env, tls, client_env = {}, None, None
            if name == "local-legacy":
                client_env = {"HF_XET_CLIENT_LEGACY_DIRECT_XORB_UPLOAD": "1"}
            if name == "local-tls":
                ca = ca or TestCa(work / "ca")
                tls = ca.issue()
                client_env = ca.client_env()
            if name.startswith("s3"):
                if pg is None:
                    pg = PostgresServer(str(tools / "index" / "cairn-test-postgres")).start()
                    sw = SeaweedServer(str(tools / "store" / "cairn-test-seaweedfs")).start()
                    sw.create_bucket("measure")
                db = pg.create_database()
                env = {**sw.env(f"s3://measure/{db.rsplit('/', 1)[1]}/"), "CAIRN_INDEX": db,
                       "CAIRN_TRANSFER_MODE": "presigned" if name == "s3-presigned" else "proxy"}
            print(json.dumps(measure(args, work, f"{name}-{i}", env, src, tls, client_env)), flush=True)
        return 0
    finally:
        for service in (sw, pg):
            if service is not None:
                service.close()
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

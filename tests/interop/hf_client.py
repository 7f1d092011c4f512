"""One stock-client (hf_xet, XetSession API) operation against a CAS endpoint, for the interop tests.

Run one process per operation: hf_xet reads its HF_XET_* configuration when XetConfig() is built and sets up
logging once at import, so every configuration the tests want is an environment of its own.

  hf_client.py upload   --endpoint EP [--token T] [--skip-sha256] FILE...
      → {"files": [{"path", "hash", "size", "sha256"}...], "dedup": {DeduplicationMetrics fields}}
  hf_client.py download --endpoint EP [--token T] HASH SIZE DEST [HASH SIZE DEST ...]
      → {"downloaded": [DEST...]}          (one download group; SIZE may be "-" = let the server tell)
  hf_client.py stream   --endpoint EP [--token T] HASH SIZE START END DEST [START END DEST ...]
      → {"streamed": [{"start", "end", "bytes", "dest"}...]}   (ordered stream; END exclusive, "-" = none)

The JSON result is the last line of stdout. On failure the exit status is 2 and the last line of stdout is
{"error": <exception class>, "message": <text>}; the traceback goes to stderr.
`--token ""` (or no --token) means no Authorization header at all.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

import hf_xet

DEDUP_FIELDS = [
    "total_bytes", "deduped_bytes", "new_bytes", "deduped_bytes_by_global_dedup", "defrag_prevented_dedup_bytes",
    "total_chunks", "deduped_chunks", "new_chunks", "deduped_chunks_by_global_dedup",
    "defrag_prevented_dedup_chunks", "xorb_bytes_uploaded", "shard_bytes_uploaded", "total_bytes_uploaded",
]


def _auth(args: argparse.Namespace) -> dict:
    kw: dict = {"endpoint": args.endpoint}
    if args.token:
        # Without an expiry hf_xet silently drops the token; keep it far from the 30 s refresh margin.
        kw["token"] = args.token
        kw["token_expiry_unix_secs"] = int(time.time()) + 24 * 3600
    return kw


def _info(hash_: str, size: str) -> "hf_xet.XetFileInfo":
    return hf_xet.XetFileInfo(hash_, None if size == "-" else int(size))


def _groups(items: list[str], n: int, what: str) -> list[list[str]]:
    if not items or len(items) % n:
        raise SystemExit(f"{what}: expected groups of {n} arguments, got {items!r}")
    return [items[i:i + n] for i in range(0, len(items), n)]


def upload(session: "hf_xet.XetSession", args: argparse.Namespace) -> dict:
    sha = hf_xet.SKIP_SHA256 if args.skip_sha256 else hf_xet.COMPUTE_SHA256
    commit = session.new_upload_commit(**_auth(args))
    handles = [commit.start_upload_file(os.path.abspath(f), sha256=sha) for f in args.files]
    report = commit.wait_to_finish()
    files = []
    for path, handle in zip(args.files, handles):
        info = handle.result().xet_info
        files.append({"path": path, "hash": info.hash, "size": info.file_size, "sha256": info.sha256})
    dm = report.dedup_metrics
    return {"files": files, "dedup": {k: getattr(dm, k) for k in DEDUP_FIELDS}}


def download(session: "hf_xet.XetSession", args: argparse.Namespace) -> dict:
    group = session.new_file_download_group(**_auth(args))
    dests = []
    for hash_, size, dest in _groups(args.items, 3, "download"):
        group.start_download_file(_info(hash_, size), os.path.abspath(dest))
        dests.append(dest)
    group.wait_to_finish()
    return {"downloaded": dests}


def stream(session: "hf_xet.XetSession", args: argparse.Namespace) -> dict:
    hash_, size, rest = args.items[0], args.items[1], args.items[2:]
    info = _info(hash_, size)
    group = session.new_download_stream_group(**_auth(args))
    out = []
    for start, end, dest in _groups(rest, 3, "stream"):
        s = None if start == "-" else int(start)
        e = None if end == "-" else int(end)
        n = 0
        with open(dest, "wb") as f:
            for piece in group.download_stream(info, start=s, end=e):
                f.write(piece)
                n += len(piece)
        out.append({"start": s, "end": e, "bytes": n, "dest": dest})
    group.finish()
    return {"streamed": out}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="op", required=True)
    for name in ("upload", "download", "stream"):
        sp = sub.add_parser(name)
        sp.add_argument("--endpoint", required=True)
        sp.add_argument("--token", default="")
        if name == "upload":
            sp.add_argument("--skip-sha256", action="store_true")
            sp.add_argument("files", nargs="+")
        else:
            sp.add_argument("items", nargs="+")
    args = p.parse_args()
    try:
        session = hf_xet.XetSession(hf_xet.XetConfig())
        result = {"upload": upload, "download": download, "stream": stream}[args.op](session, args)
    except Exception as e:  # noqa: BLE001 — every failure is reported to the test as data
        traceback.print_exc()
        print(json.dumps({"error": type(e).__name__, "message": str(e)}), flush=True)
        return 2
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

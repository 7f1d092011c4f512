#!/usr/bin/env python3
"""git against `cairn serve` (SQLite + local disk) beside its reference, in one run (BENCHMARKS.md, "git"):

    .venv/bin/python scripts/bench_git.py [--files 10000] [--commits 100] [--size-mib 1024] [--rounds 3]
                                          [--only clone|lfs] [--bin build/release/src/cli/cairn]

clone: a repository of --files small files (100 B to 4 KiB of text each) in --commits commits is pushed to cairn
  with git, and a bare copy of the same repository is served by git's own `git http-backend` (CGI) under
  Debian's lighttpd. `git clone` (protocol v2, checkout included) from each, the order alternating per round;
  every clone's HEAD and file count are checked.
lfs: one --size-mib file of random bytes, `git push`ed with git-lfs (the server chunks it, hashes it and stores
  it as xorbs) to a fresh server, beside hf_xet uploading the same bytes straight to the CAS of another fresh
  server; the two ways alternate per round. Only the push and the upload are timed (git's `add` runs the LFS
  clean filter before).

Prints one JSON line per measurement and a summary line per benchmark with the ratios. Client and server share
the machine's cores. The working directory lives under build/ (disk, not tmpfs).
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

from harness import CairnServer, Git, HfXet, Hub, MiB, free_port, write_random  # noqa: E402


def timed(fn) -> float:
    t0 = time.monotonic()
    fn()
    return time.monotonic() - t0


def authed(srv, repo: str, tok: str) -> str:
    scheme, rest = srv.url.split("://", 1)
    return f"{scheme}://user:{tok}@{rest}/{repo}"


def fast_import_stream(files: int, commits: int, seed: int) -> bytes:
    """A `git fast-import` stream of `commits` commits on main (after main's current head), `files` files."""
    rng = random.Random(seed)
    out = []
    per = files // commits
    for c in range(commits):
        out.append(f"commit refs/heads/main\ncommitter bench <b@x> {1_700_000_000 + c} +0000\n"
                   f"data <<EOF\ncommit {c}\nEOF\n")
        if c == 0:
            out.append("from refs/heads/main^0\n")
        for k in range(per):
            body = "".join(f"{rng.getrandbits(64):016x}\n" for _ in range(rng.randint(6, 240)))
            data = body.encode()
            out.append(f"M 100644 inline d{c:03d}/f{k:04d}.txt\ndata {len(data)}\n")
            out.append(data.decode() + "\n")
    return "".join(out).encode()


def lighttpd(root: Path, work: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    conf = work / "lighttpd.conf"
    conf.write_text(f"""
server.document-root = "{work}"
server.bind = "127.0.0.1"
server.port = {port}
server.modules = ("mod_alias", "mod_cgi", "mod_setenv")
server.errorlog = "{work}/lighttpd-error.log"
alias.url = ("/git/" => "/usr/lib/git-core/git-http-backend/")
$HTTP["url"] =~ "^/git/" {{
  cgi.assign = ("" => "")
  setenv.add-environment = ("GIT_PROJECT_ROOT" => "{root}", "GIT_HTTP_EXPORT_ALL" => "1")
}}
""")
    proc = subprocess.Popen(["lighttpd", "-D", "-f", str(conf)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    return proc, f"http://127.0.0.1:{port}/git/repo.git"


def bench_clone(args, work: Path) -> dict:
    srv = CairnServer(args.bin, work / "data", work / "server.log").start()
    tok = srv.token("bench", write=True)
    try:
        Hub(args.python, work / "hub", srv, tok).run('api.create_repo("bench/many")')
        git = Git(work / "git")
        git.run("clone", "-q", authed(srv, "bench/many", tok), "src")
        src = git.home / "src"
        r = subprocess.run(["git", "fast-import", "--quiet"], input=fast_import_stream(args.files, args.commits, 7),
                           cwd=src, env=git.env, capture_output=True)
        assert r.returncode == 0, r.stderr.decode()[-2000:]
        git.run("reset", "-q", "--hard", "main", cwd=src)
        git.run("push", "-q", "origin", "main", cwd=src)
        head = git.run("rev-parse", "HEAD", cwd=src).stdout.strip()
        count = int(git.run("ls-files", cwd=src).stdout.count("\n"))
        root = work / "served"
        root.mkdir()
        git.run("clone", "-q", "--bare", "--no-local", str(src), str(root / "repo.git"))
        proc, backend_url = lighttpd(root, work)
        try:
            ways = {"cairn": authed(srv, "bench/many", tok), "git http-backend": backend_url}
            times: dict[str, list[float]] = {w: [] for w in ways}
            for rnd in range(args.rounds):
                order = list(ways) if rnd % 2 == 0 else list(reversed(ways))
                for way in order:
                    dest = work / f"clone-{rnd}-{way.split()[0]}"
                    os.sync()  # the last clone's files written back first: each clone starts from a quiet disk
                    t = timed(lambda: git.run("clone", "-q", ways[way], str(dest)))
                    assert git.run("rev-parse", "HEAD", cwd=dest).stdout.strip() == head, way
                    assert git.run("ls-files", cwd=dest).stdout.count("\n") == count, way
                    shutil.rmtree(dest)
                    times[way].append(t)
                    print(json.dumps({"bench": "clone", "round": rnd, "way": way, "files": count,
                                      "commits": args.commits + 1, "seconds": round(t, 3)}), flush=True)
        finally:
            proc.terminate()
            proc.wait()
        med = {w: statistics.median(v) for w, v in times.items()}
        return {"bench": "clone", "median_s": {w: round(v, 3) for w, v in med.items()},
                "ratio_cairn_over_http_backend": round(med["cairn"] / med["git http-backend"], 3)}
    finally:
        srv.stop()


def lfs_way(args, work: Path, src: Path) -> float:
    srv = CairnServer(args.bin, work / "data", work / "server.log").start()
    tok = srv.token("bench", write=True)
    try:
        Hub(args.python, work / "hub", srv, tok).run('api.create_repo("bench/big")')
        git = Git(work / "git", lfs=True)
        git.run("clone", "-q", authed(srv, "bench/big", tok), "work")
        w = git.home / "work"
        git.run("lfs", "track", "*.bin", cwd=w)
        shutil.copyfile(src, w / "big.bin")
        git.run("add", "-A", cwd=w)
        git.run("commit", "-q", "-m", "big", cwd=w)
        os.sync()
        return timed(lambda: git.run("push", "-q", "origin", "main", cwd=w))
    finally:
        srv.stop()


def xet_way(args, work: Path, src: Path) -> float:
    srv = CairnServer(args.bin, work / "data", work / "server.log").start()
    try:
        tok = srv.token("bench", write=True)
        hfx = HfXet(args.python, work / "client")
        os.sync()
        return timed(lambda: hfx.upload(srv.url, tok, [src], timeout=3600))
    finally:
        srv.stop()


def bench_lfs(args, work: Path) -> dict:
    src = write_random(work / "random.bin", args.size_mib * MiB, seed=2029)
    size = src.stat().st_size
    ways = {"git-lfs push": lfs_way, "hf_xet": xet_way}
    mbps: dict[str, list[float]] = {w: [] for w in ways}
    for rnd in range(args.rounds):
        order = list(ways) if rnd % 2 == 0 else list(reversed(ways))
        for way in order:
            d = work / f"round{rnd}-{way.split()[0]}"
            t = ways[way](args, d, src)
            shutil.rmtree(d, ignore_errors=True)
            mbps[way].append(size / t / 1e6)
            print(json.dumps({"bench": "lfs", "round": rnd, "way": way, "bytes": size, "seconds": round(t, 2),
                              "MBps": round(size / t / 1e6, 1)}), flush=True)
    med = {w: statistics.median(v) for w, v in mbps.items()}
    return {"bench": "lfs", "median_MBps": {w: round(v, 1) for w, v in med.items()},
            "ratio_git_lfs_over_hf_xet": round(med["git-lfs push"] / med["hf_xet"], 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--commits", type=int, default=100)
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", choices=["clone", "lfs"])
    ap.add_argument("--bin", default=str(REPO / "build/release/src/cli/cairn"))
    ap.add_argument("--python", default=str(REPO / ".venv/bin/python"))
    args = ap.parse_args()
    if shutil.which("lighttpd") is None and args.only != "lfs":
        print("lighttpd is missing: run scripts/bootstrap.sh", file=sys.stderr)
        return 2
    (REPO / "build").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-git-", dir=REPO / "build"))
    try:
        for name, fn in (("clone", bench_clone), ("lfs", bench_lfs)):
            if args.only in (None, name):
                d = work / name
                d.mkdir()
                print(json.dumps(fn(args, d)), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

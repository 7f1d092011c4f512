"""Crash safety, proven with the stock clients: `cairn serve` killed with SIGKILL at random moments while 32
hf_xet uploads run at once (half registering their shards through /v1/shards, half through /v2/shards) and two
`git push`es with git-lfs (each commit a small file and a large one, the large one's bytes through the LFS upload
links), then started again on the same port and data while the clients retry. Afterwards every upload a client
saw succeed downloads byte-exact, every push git saw succeed is in a fresh clone with its files byte-exact,
`cairn fsck --deep` finds no damage, and no temporary file is left behind.

CAIRN_CRASH_KILLS (default 50) and CAIRN_CRASH_CLIENTS (default 32) set the run's size; `make crash-test`
runs a longer one (docs/testing.md)."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import threading
import time

import pytest

from clients import HfXet
from common import MiB, assert_same_file, write_random
from hub_util import Hub
from git_util import Git, url

KILLS = int(os.environ.get("CAIRN_CRASH_KILLS", "50"))
CLIENTS = int(os.environ.get("CAIRN_CRASH_CLIENTS", "32"))
PUSHERS = 2
# Long enough to outlast every restart on a loaded machine.
RETRY = {"HF_XET_CLIENT_RETRY_MAX_ATTEMPTS": "1000", "HF_XET_CLIENT_RETRY_BASE_DELAY": "200ms",
         "HF_XET_CLIENT_RETRY_MAX_DURATION": "300s"}


@pytest.mark.backends("sqlite", "s3")
def test_sigkill_during_uploads_loses_nothing_acknowledged(server, hf_python, hub_py, tmp_path, backend, capsys):
    srv = server()
    tok = srv.token("crash", write=True)
    stop = threading.Event()
    lock = threading.Lock()
    acknowledged: list[tuple[dict, os.PathLike]] = []
    failures: list[str] = []
    pushed: dict[int, list[str]] = {i: [] for i in range(PUSHERS)}  # per pusher: files of acknowledged pushes
    gits = []
    for i in range(PUSHERS):
        Hub(hub_py, tmp_path / f"hub-{i}", srv, tok).run(f'api.create_repo("crash/pushed-{i}")')
        git = Git(tmp_path / f"git-{i}", lfs=True)
        git.run("clone", "-q", url(srv, f"crash/pushed-{i}", tok), "work")
        git.run("lfs", "track", "*.bin", cwd=git.home / "work")
        gits.append(git)

    def pusher(i: int) -> None:
        git, work = gits[i], gits[i].home / "work"
        rng = random.Random(100 + i)
        n = 0
        while not stop.is_set():
            (work / f"note-{n}.txt").write_text(f"push {n}\n")
            write_random(work / f"w-{n}.bin", rng.randint(64 * 1024, 2 * MiB), seed=5000 + 100 * i + n)
            git.run("add", "-A", cwd=work)
            git.run("commit", "-q", "-m", f"push {n}", cwd=work)
            while True:  # until git sees it land (a push cut short by a kill is tried again)
                if git.run("push", "-q", "origin", "main", cwd=work, check=False).returncode == 0:
                    with lock:
                        pushed[i] += [f"note-{n}.txt", f"w-{n}.bin"]
                    break
                if stop.is_set():
                    return
                time.sleep(0.3)
            n += 1

    def client(i: int) -> None:
        hfx = HfXet(hf_python, tmp_path / f"client-{i}")
        rng = random.Random(i)
        n = 0
        while not stop.is_set():
            f = write_random(tmp_path / f"c{i}-{n}.bin", rng.randint(64 * 1024, 3 * MiB), seed=1000 * i + n)
            env = {**RETRY, "HF_XET_CLIENT_SHARD_API_VERSION": "1" if i % 2 else "2"}
            r = hfx.upload(srv.url, tok, [f], env=env, expect_ok=False, timeout=600)
            with lock:
                if r.ok:
                    acknowledged.append((r.result["files"][0], f))
                else:
                    failures.append(r.describe()[-2000:])
            n += 1

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(CLIENTS)]
    threads += [threading.Thread(target=pusher, args=(i,), daemon=True) for i in range(PUSHERS)]
    for t in threads:
        t.start()
    kills = 0
    rng = random.Random(2026)
    started = time.monotonic()
    try:
        while kills < KILLS:
            time.sleep(rng.uniform(0.2, 1.2))  # uploads in every stage: xorbs, shards, index commits
            srv.kill()
            kills += 1
            srv.start()
    finally:
        stop.set()
        for t in threads:
            t.join(700)
    assert not any(t.is_alive() for t in threads), "a client never finished"
    elapsed = time.monotonic() - started
    # Into the run's output even under -q (make test's interop log): the figures the closing notes quote.
    def say(line: str) -> None:
        with capsys.disabled():
            print(line, flush=True)

    say(f"\ncrash test [{backend}]: {kills} kills in {elapsed:.0f} s, {len(acknowledged)} uploads acknowledged, "
        f"{len(failures)} failed (given up by the client)")
    assert kills >= KILLS
    assert len(acknowledged) >= CLIENTS, f"too few uploads completed to prove anything: {len(acknowledged)}"
    log = srv.log_path.read_text(errors="replace")  # every run of the server, appended
    v1, v2 = log.count("path=/v1/shards status=200"), log.count("path=/v2/shards status=200")
    assert v1 > 0 and v2 > 0, (v1, v2)  # both shard APIs took registrations

    # Nothing half-written: no temporary file, and no damage anywhere (unindexed leftovers of uploads that
    # were never acknowledged are allowed: they are garbage, not loss).
    srv.stop()
    if backend == "sqlite":
        blobs = srv.data_dir / "blobs"
        srv.start()  # a start removes what a kill left; then nothing may remain
        srv.stop()
        leftovers = [p for p in blobs.rglob("*") if p.is_file() and not _is_blob_name(p.name)]
        assert not leftovers, leftovers[:10]
    r = subprocess.run([srv.bin, "fsck", "--deep", "--json", "--data", str(srv.data_dir)], capture_output=True,
                       text=True, timeout=600, env=srv._env())
    report = json.loads(r.stdout)
    damage = [f for f in report["findings"] if f["kind"] != "unindexed"]
    assert r.returncode == 0 and not damage, (damage[:10], r.stderr)
    say(f"crash test [{backend}]: fsck --deep: {report['indexed_xorbs']} xorbs, {report['checked_files']} files, "
        f"{len(report['findings'])} unindexed leftovers, no damage")

    # Every acknowledged upload, downloaded byte-exact.
    srv.start()
    hfx = HfXet(hf_python, tmp_path / "verify")
    batch = 64
    for k in range(0, len(acknowledged), batch):
        part = acknowledged[k:k + batch]
        items = [(m["hash"], m["size"], tmp_path / f"got-{k + j}") for j, (m, _) in enumerate(part)]
        hfx.download(srv.url, tok, items)
        for j, (m, original) in enumerate(part):
            assert_same_file(tmp_path / f"got-{k + j}", original, m["sha256"])
            (tmp_path / f"got-{k + j}").unlink()
    say(f"crash test [{backend}]: all {len(acknowledged)} acknowledged uploads downloaded byte-exact: 0 lost")

    # Every acknowledged push: in a fresh clone, its files byte-exact (the large ones through git-lfs).
    check = Git(tmp_path / "git-check", lfs=True)
    for i in range(PUSHERS):
        assert pushed[i], f"pusher {i} never got a push through"
        check.run("clone", "-q", url(srv, f"crash/pushed-{i}", tok), f"clone-{i}")
        for name in pushed[i]:
            assert_same_file(check.home / f"clone-{i}" / name, gits[i].home / "work" / name)
    say(f"crash test [{backend}]: {sum(len(p) // 2 for p in pushed.values())} acknowledged git pushes "
        f"(git-lfs) in fresh clones, byte-exact: 0 lost")
    # Checked: the uploaded files, the clients' caches and the clones go (the suite's temporary directory may be
    # a tmpfs: scripts/isolated.sh); the server's data directory goes at the fixture's teardown.
    for entry in tmp_path.iterdir():
        if not (entry.name.startswith(("client-", "git-", "hub-", "verify")) or entry.suffix == ".bin"):
            continue
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def _is_blob_name(name: str) -> bool:
    return len(name) == 64 and all(c in "0123456789abcdef" for c in name)

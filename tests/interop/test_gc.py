"""Deletion and garbage collection against the stock client's own cache (docs/operations.md).

hf_xet keeps the shards of its own uploads for 21 days and dedups new files against them without asking the
server: a client may send a shard naming xorbs it uploaded weeks ago and never send them again. cairn's
collector waits a grace period (30 days by default) before it frees what became unreferenced; these tests
run the stock client (hf_xet 1.8.0) with its cache kept across a deletion and `cairn gc` runs, first inside the
grace, then with both the server's collector and the client moved two months ahead (Debian's faketime).
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import secrets
from pathlib import Path

import pytest

from common import MiB, assert_same_file, fail, http, sha256_file, write_random
from hub_util import Hub, hub_python

SCOPE = "gc"


def gc(srv, *args: str, fake: str | None = None) -> dict:
    """One `cairn gc --json` run on the server's data, its clock moved by `fake` (a faketime offset)."""
    return run_json(srv, "gc", *args, fake=fake)


def run_json(srv, command: str, *args: str, fake: str | None = None) -> dict:
    """`cairn COMMAND --json ARGS` on the server's data (its clock moved by `fake`, a faketime offset): the
    report it prints last."""
    cmd = [srv.bin, command, "--json", "--data", str(srv.data_dir), *args]
    if fake:
        cmd = ["faketime", "-f", fake, *cmd]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=srv._env())
    if r.returncode != 0:
        fail(f"`{' '.join(cmd)}` failed (exit {r.returncode})\n--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def delete(srv, tok: str, file_hash: str) -> None:
    r = http("DELETE", f"{srv.url}/v1/files/{file_hash}", headers={"Authorization": f"Bearer {tok}"})
    assert r.status == 204, f"DELETE /v1/files/{file_hash}: {r.status} {r.body[:300]!r}"


def fsck(srv, *args: str) -> dict:
    return json.loads(srv.cli("fsck", "--json", *args).stdout.strip().splitlines()[-1])


def stored_xorbs(srv) -> int:
    """Xorbs in the store (local disk or S3), as fsck lists them."""
    return fsck(srv)["stored_xorbs"]


def past_the_grace(srv, backend: str) -> dict:
    """Runs the collector twice as if two months passed (it marks, then it frees): with its clock moved by
    faketime; on S3, whose requests carry the time and would be refused from a clock two months off, with a
    grace of one second instead (--force), which is the same decision reached sooner."""
    if backend.startswith("s3"):
        gc(srv, "--grace", "1s", "--force")
        time.sleep(1.5)
        return gc(srv, "--grace", "1s", "--force")
    gc(srv, fake="+31d")
    return gc(srv, fake="+62d")


def test_the_stock_clients_warm_cache_survives_deletion_and_gc(server, hfx, tmp_path, backend):
    f = write_random(tmp_path / "kept.bin", 6 * MiB + 7, seed=71)
    srv = server()
    tok = srv.token(SCOPE, write=True)
    cache = hfx.new_cache()
    first = hfx.upload(srv.url, tok, [f], cache=cache)
    meta = first.result["files"][0]
    assert first.result["dedup"]["xorb_bytes_uploaded"] > 0, first.result
    xorbs = stored_xorbs(srv)
    assert xorbs > 0

    # Deleted, then collected with the default grace: quarantined, nothing freed.
    delete(srv, tok, meta["hash"])
    rep = gc(srv)
    assert rep["newly_quarantined"] == 1 + xorbs, rep
    assert rep["swept_xorbs"] == 0 and rep["reclaimed_bytes"] == 0, rep
    report = fsck(srv)  # the quarantine is reported, and is not damage
    assert report["stored_xorbs"] == xorbs and not report["damaged"], report
    assert report["gc"]["quarantined_files"] == 1 and report["gc"]["quarantined_xorbs"] == xorbs, report
    assert report["gc"]["reclaimable_xorbs"] == 0, report

    # The same client with its cache kept uploads the same file again: it sends no xorb (its cache names
    # them) and the server, which still has them, accepts the shard and revives them.
    second = hfx.upload(srv.url, tok, [f], cache=cache)
    assert second.result["files"][0]["hash"] == meta["hash"]
    assert second.result["dedup"]["xorb_bytes_uploaded"] == 0, second.result
    hfx.download(srv.url, tok, [(meta["hash"], meta["size"], tmp_path / "second.bin")])
    assert_same_file(tmp_path / "second.bin", f, meta["sha256"])
    rep = gc(srv)  # revived by the upload: nothing is unreferenced any more
    assert rep["quarantined_files"] == 0 and rep["quarantined_xorbs"] == 0, rep

    # Deleted again; the collector's clock moves past the grace: one run marks, the next frees.
    delete(srv, tok, meta["hash"])
    rep = past_the_grace(srv, backend)
    assert rep["swept_files"] == 1 and rep["swept_xorbs"] == xorbs, rep
    assert rep["reclaimed_bytes"] > 0, rep
    assert stored_xorbs(srv) == 0

    # The client, its clock past its cache's 21 days as well: its cached shard has expired, so it asks the
    # server, finds nothing, and sends the bytes again. The upload succeeds and the file downloads.
    third = hfx.upload(srv.url, tok, [f], cache=cache, wrapper=("faketime", "-f", "+62d"))
    assert third.result["files"][0]["hash"] == meta["hash"]
    assert third.result["dedup"]["xorb_bytes_uploaded"] > 0, third.result
    assert stored_xorbs(srv) == xorbs
    hfx.download(srv.url, tok, [(meta["hash"], meta["size"], tmp_path / "third.bin")])
    assert_same_file(tmp_path / "third.bin", f, meta["sha256"])
    report = fsck(srv, "--deep")
    assert not report["damaged"], report


def test_a_grace_shorter_than_the_clients_caches_needs_force(server):
    srv = server()
    r = subprocess.run([srv.bin, "gc", "--grace", "1d", "--data", str(srv.data_dir)], capture_output=True,
                       text=True, timeout=60, env=srv._env())
    assert r.returncode == 2, r
    assert "--force" in r.stderr and "21 d" in r.stderr, r.stderr
    r = subprocess.run([srv.bin, "gc", "--grace", "1d", "--force", "--json", "--data", str(srv.data_dir)],
                       capture_output=True, text=True, timeout=60, env=srv._env())
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["dry_run"] is False


def test_serve_refuses_a_scheduled_grace_shorter_than_the_clients_caches(cairn_bin, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    env.update({"CAIRN_GC_INTERVAL": "1h", "CAIRN_GC_GRACE": "1d"})
    r = subprocess.run([cairn_bin, "serve", "--listen", "127.0.0.1:0", "--data", str(tmp_path / "data")],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 2, r
    assert "gc_grace" in r.stderr and "21 d" in r.stderr, r.stderr


def test_the_scheduled_collector_runs_and_reports_on_metrics(server, hfx, tmp_path):
    srv = server(env={"CAIRN_GC_INTERVAL": "1s"})
    tok = srv.token(SCOPE, write=True)
    f = write_random(tmp_path / "scheduled.bin", 2 * MiB + 3, seed=72)
    meta = hfx.upload(srv.url, tok, [f]).result["files"][0]
    delete(srv, tok, meta["hash"])

    def gauge(name: str) -> float:
        return sum(v for n, _, v in srv.metrics() if n == name)

    deadline = time.monotonic() + 120
    while gauge("cairn_gc_quarantined_objects") == 0:  # a run after the deletion quarantined it
        assert time.monotonic() < deadline, "no scheduled run quarantined the deleted file in 120 s"
        time.sleep(0.2)
    assert gauge("cairn_gc_runs") >= 1 and gauge("cairn_gc_failures") == 0
    assert gauge("cairn_gc_quarantined_bytes") > 0
    assert gauge("cairn_gc_last_run_timestamp_seconds") > 0


def planted(path: Path, size: int, seed: int, marker: bytes) -> Path:
    """A random file with `marker` in its middle."""
    write_random(path, size, seed)
    with open(path, "r+b") as f:
        f.seek(size // 2)
        f.write(marker)
    return path


def files_holding(root: Path, marker: bytes) -> list[str]:
    found = []
    for p in root.rglob("*"):
        if p.is_file() and marker in p.read_bytes():
            found.append(str(p))
    return found


def objects_holding(srv, request, marker: bytes) -> list[str]:
    """Objects of the server's bucket (its key prefix) that hold `marker`."""
    sw = request.getfixturevalue("seaweedfs")
    bucket, _, prefix = srv.extra_env["CAIRN_STORE"].removeprefix("s3://").partition("/")
    return [k for k in sw.list_keys(bucket, prefix) if marker in sw.get_object(bucket, k)]


@pytest.mark.backends("sqlite", "s3")
def test_purge_leaves_no_trace_of_a_secret(server, tmp_path, backend, request):
    """A secret committed in a large file and in a small one, then squashed away with super_squash_history;
    another large file removed with permanently_delete_lfs_files (rewriting history), unreadable by any token
    from that moment: after one `cairn gc --grace 0 --force`, no marker is in any file of the data directory (the SQLite index and its write-ahead log
    included) nor in any object of the bucket, and what the repository still holds downloads."""
    srv = server()
    hub = Hub(hub_python(), tmp_path / "alice", srv, srv.token("alice", write=True))
    squashed, deleted = (f"cairn-marker-{secrets.token_hex(16)}".encode() for _ in range(2))
    big = planted(tmp_path / "model.bin", 3 * MiB + 5, 81, squashed)
    other = planted(tmp_path / "other.bin", 2 * MiB + 3, 82, deleted)
    keep = write_random(tmp_path / "keep.bin", 2 * MiB + 9, 83)
    hub.run(f'''
        api.create_repo("alice/m")
        api.upload_file(path_or_fileobj={str(big)!r}, path_in_repo="model.bin", repo_id="alice/m")
        api.upload_file(path_or_fileobj=b"token=" + {squashed!r} + b"\\n", path_in_repo="secrets.env",
                        repo_id="alice/m")
        api.delete_files("alice/m", delete_patterns=["model.bin", "secrets.env"])
        api.upload_file(path_or_fileobj=b"ok\\n", path_in_repo="README.md", repo_id="alice/m")''')
    if backend == "sqlite":
        assert files_holding(srv.data_dir, squashed), "the test plants what it looks for"
    hub.run('api.super_squash_history("alice/m", commit_message="squash")')
    assert hub.run('result = [c.title for c in api.list_repo_commits("alice/m")]') == ["squash"]

    hub.run(f'''
        api.upload_file(path_or_fileobj={str(other)!r}, path_in_repo="w/other.bin", repo_id="alice/m")
        api.upload_file(path_or_fileobj={str(keep)!r}, path_in_repo="keep.bin", repo_id="alice/m")''')
    listed = hub.run('''result = sorted((f.filename, f.size, f.file_oid, f.oid) for f in
                                 api.list_lfs_files("alice/m"))''')
    by_name = {name: (size, file_oid, oid) for name, size, file_oid, oid in listed}
    assert by_name["w/other.bin"][:2] == (other.stat().st_size, sha256_file(other)), listed
    assert by_name["keep.bin"][0] == keep.stat().st_size, listed
    writer = {"Authorization": f"Bearer {srv.token('alice', write=True)}"}
    lfs_files = http("GET", f"{srv.url}/api/models/alice/m/lfs-files", headers=writer).json()
    xet = next(f["xetHash"] for f in lfs_files if f["fileOid"] == sha256_file(other))

    def cas_token(kind: str) -> dict:
        got = http("GET", f"{srv.url}/api/models/alice/m/xet-{kind}-token/main", headers=writer).json()
        return {"Authorization": f"Bearer {got['accessToken']}"}

    before = cas_token("read")  # minted while the file is the repository's
    for path in (f"/v2/reconstructions/{xet}", f"/v1/files/{xet}"):
        assert http("GET", srv.url + path, headers=before).status == 200, path
    hub.run('''
        doomed = [f for f in api.list_lfs_files("alice/m") if f.filename == "w/other.bin"]
        api.permanently_delete_lfs_files("alice/m", doomed)''')
    # From that moment no token of the repository reads the purged file by its hash, minted before the purge
    # or after, read or write, on the reconstruction and the plain download alike.
    for headers in (before, cas_token("read"), cas_token("write")):
        for path in (f"/v2/reconstructions/{xet}", f"/v1/files/{xet}"):
            got = http("GET", srv.url + path, headers=headers)
            assert got.status == 404, (path, got.status)
    assert sorted(hub.run('result = api.list_repo_files("alice/m")')) == [".gitattributes", "README.md",
                                                                       "keep.bin"]
    # The squashed-away model.bin is still stored (no ref names it: no filename) until a collection frees it.
    lfs_names = 'result = sorted(f.filename for f in api.list_lfs_files("alice/m"))'
    assert hub.run(lfs_names) == ["", "keep.bin"]

    # One command frees it all now (the operator's answer to a leaked secret): no grace, forced.
    rep = gc(srv, "--grace", "0", "--force")
    assert rep["swept_repo_objects"] > 0 and rep["swept_xorbs"] > 0, rep
    assert rep["scrub"], rep
    assert hub.run(lfs_names) == ["keep.bin"]
    for marker in (squashed, deleted):
        assert not files_holding(srv.data_dir, marker), files_holding(srv.data_dir, marker)
        if backend != "sqlite":
            assert not objects_holding(srv, request, marker)
    got = hub.run(f'''
        result = [hf_hub_download("alice/m", "keep.bin", cache_dir={str(tmp_path / "dl")!r}),
                  hf_hub_download("alice/m", "README.md", cache_dir={str(tmp_path / "dl")!r})]''')
    assert sha256_file(got[0]) == sha256_file(keep)
    assert Path(got[1]).read_bytes() == b"ok\n"
    report = fsck(srv, "--deep")
    assert not report["damaged"], report

"""`cairn fsck` and `cairn index rebuild` on real deployments (SQLite + local disk, PostgreSQL + SeaweedFS):
files uploaded with the stock client hf_xet 1.8.0, one of them removed from its scope, checked, the index
rebuilt from the store alone, and every file downloaded again byte-exact from a server on the rebuilt index,
visible to the scopes it was before and to no other (the removed one to none). On local disk, damage made behind the server's back is found and reported with exit status 1."""

from __future__ import annotations

import json
import subprocess

import pytest

from clients import upload_random_files
from common import MiB, assert_same_file, http


def cairn(srv, *args: str, index: str | None = None) -> tuple[int, dict, str]:
    """Runs `cairn ARGS --json` on a stopped server's configuration: (exit status, the JSON report or {} when it
    could not run, stderr)."""
    env = srv._env()
    if index:
        env["CAIRN_INDEX"] = index
    r = subprocess.run([srv.bin, *args, "--data", str(srv.data_dir), "--json"], capture_output=True, text=True,
                       timeout=300, env=env)
    try:
        report = json.loads(r.stdout) if r.returncode != 2 else {}  # 2: it could not run, and said why
    except json.JSONDecodeError:
        pytest.fail(f"`cairn {' '.join(args)}` printed no JSON (exit {r.returncode})\n{r.stdout}\n{r.stderr}")
    return r.returncode, report, r.stderr


@pytest.mark.backends("sqlite", "s3")
def test_fsck_is_clean_and_a_rebuilt_index_serves_every_file(server, hfx, tmp_path, request, backend):
    srv = server()
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
    alice, alice_paths = upload_random_files(hfx, srv, "alice", tmp_path / "a",
                                             {"one.bin": (3 * MiB, 1), "two.bin": (5 * MiB + 7, 2)})
    bob, bob_paths = upload_random_files(hfx, srv, "bob", tmp_path / "b", {"three.bin": (2 * MiB + 1, 3)})
    # Alice removes two.bin: its shard (one.bin's too) and its xorbs stay, and so does the shard's grant.
    removed = alice.pop("two.bin")["hash"]
    r = http("DELETE", f"{srv.url}/v1/files/{removed}",
             headers={"Authorization": f"Bearer {srv.token('alice', write=True)}"})
    assert r.status == 204, (r.status, r.body)
    srv.stop()

    rc, report, err = cairn(srv, "fsck", "--deep")
    assert rc == 0 and report["findings"] == [], (report, err)
    assert report["indexed_xorbs"] == report["stored_xorbs"] > 0, report
    assert report["indexed_shards"] == report["stored_shards"] == report["stored_grants"] == 2, report
    assert report["stored_revocations"] == 1, report
    assert report["checked_files"] == 3 and report["verified_bytes"] > 10 * MiB, report

    # The index is lost: rebuild a new one from the store alone.
    if backend == "sqlite":
        rebuilt_index = f"sqlite:{tmp_path / 'rebuilt.db'}"
    else:
        rebuilt_index = request.getfixturevalue("postgres").create_database()
    rc, rebuilt, err = cairn(srv, "index", "rebuild", index=rebuilt_index)
    assert rc == 0 and not rebuilt["damaged"], (rebuilt, err)
    assert rebuilt["repaired"] == report["stored_xorbs"] + 2 + 1, rebuilt  # xorbs, shards, the revocation
    rc, again, err = cairn(srv, "index", "rebuild", index=rebuilt_index)
    assert rc == 2 and "not empty" in err, err  # never into an index that holds something

    node = server(data_dir=srv.data_dir, env={**srv.extra_env, "CAIRN_INDEX": rebuilt_index})
    for scope, files, paths in (("alice", alice, alice_paths), ("bob", bob, bob_paths)):
        tok = node.token(scope)
        items = [(m["hash"], m["size"], tmp_path / f"got-{name}") for name, m in files.items()]
        hfx.download(node.url, tok, items)
        for name, m in files.items():
            assert_same_file(tmp_path / f"got-{name}", paths[name], m["sha256"])
    # Each file is still visible to its own scope only, and the removed one to none.
    r = node.get(f"/v1/reconstructions/{alice['one.bin']['hash']}", token=node.token("bob"))
    assert r.status == 404, r.status
    r = node.get(f"/v1/reconstructions/{removed}", token=node.token("alice"))
    assert r.status == 404, r.status
    node.stop()
    rc, report, err = cairn(node, "fsck", "--deep")
    assert rc == 0 and report["findings"] == [], (report, err)


@pytest.mark.backends("sqlite")
def test_fsck_reports_damage_with_exit_status_one(server, hfx, tmp_path):
    srv = server()
    (tmp_path / "a").mkdir()
    up, _ = upload_random_files(hfx, srv, "alice", tmp_path / "a", {"one.bin": (4 * MiB, 9)})
    srv.stop()
    xorbs = sorted(p for p in (srv.data_dir / "blobs" / "xorbs").rglob("*") if p.is_file())
    assert len(xorbs) >= 1, xorbs

    # A flipped byte: invisible to the quick check, found by the deep one.
    data = bytearray(xorbs[0].read_bytes())
    data[len(data) // 2] ^= 0x01
    xorbs[0].write_bytes(bytes(data))
    rc, report, _ = cairn(srv, "fsck")
    assert rc == 0, report
    rc, report, _ = cairn(srv, "fsck", "--deep")
    assert rc == 1 and report["damaged"], report
    assert [(f["kind"], f["object"], f["hash"]) for f in report["findings"]] == [("corrupt", "xorb", xorbs[0].name)]

    # A missing object: found by the quick check; a repair cannot bring it back and says so.
    xorbs[0].unlink()
    for args in (("fsck",), ("fsck", "--repair")):
        rc, report, _ = cairn(srv, *args)
        assert rc == 1 and [(f["kind"], f["hash"]) for f in report["findings"]] == [("missing", xorbs[0].name)], report

"""Online backup and restore with the stock clients (docs/operations.md, "Backup and restore").

`cairn backup` runs while hf_xet uploads and `cairn gc` runs against the same deployment; the backup is then
restored into a fresh data directory (SQLite + local disk) and into a fresh PostgreSQL database and bucket,
and every file acknowledged before the backup began downloads byte-exact from a server on the restored
deployment, through hf_xet and through huggingface_hub. The deployment on SQLite keeps its backups in a
directory, the one on PostgreSQL + S3 in another bucket's prefix.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest

from common import MiB, assert_same_file, fail, http, write_random
from hub_util import Hub, hub_python


def cairn(srv_bin: str, args: list[str], env: dict, expect: int = 0) -> dict:
    r = subprocess.run([srv_bin, *args], capture_output=True, text=True, timeout=600, env=env)
    if r.returncode != expect:
        fail(f"`cairn {' '.join(args)}` exited {r.returncode}, expected {expect}\n--- stdout\n{r.stdout}"
             f"\n--- stderr\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def backup(srv, dest: Path | str, *args: str, expect: int = 0) -> dict:
    return cairn(srv.bin, ["backup", "--json", "--data", str(srv.data_dir), *args, str(dest)], srv._env(), expect)


def has_file(srv, tok: str, file_hash: str) -> bool:
    r = http("GET", f"{srv.url}/v1/reconstructions/{file_hash}", headers={"Authorization": f"Bearer {tok}"})
    assert r.status in (200, 404), f"reconstruction of {file_hash}: {r.status} {r.body[:200]!r}"
    return r.status == 200


@pytest.mark.backends("sqlite", "s3")
def test_a_backup_taken_during_uploads_and_a_gc_restores_on_either_backend(server, hfx, tmp_path, backend,
                                                                            request):
    srv = server()
    tok = srv.token("plain", write=True)
    hub = Hub(hub_python(), tmp_path / "alice", srv, srv.token("alice", write=True))
    folder = tmp_path / "folder"
    (folder / "data").mkdir(parents=True)
    (folder / "config.json").write_text('{"hidden_size": 64}\n')
    write_random(folder / "model.bin", 5 * MiB + 3, seed=101)
    write_random(folder / "data" / "part.bin", 3 * MiB + 1, seed=102)
    hub.run(f'''
        api.create_repo("alice/m")
        api.upload_folder(folder_path={str(folder)!r}, repo_id="alice/m")''')
    before = write_random(tmp_path / "before.bin", 4 * MiB + 5, seed=103)
    before_meta = hfx.upload(srv.url, tok, [before]).result["files"][0]
    doomed = write_random(tmp_path / "doomed.bin", 2 * MiB, seed=104)
    doomed_meta = hfx.upload(srv.url, tok, [doomed]).result["files"][0]
    r = http("DELETE", f"{srv.url}/v1/files/{doomed_meta['hash']}", headers={"Authorization": f"Bearer {tok}"})
    assert r.status == 204

    # Uploads go on in a thread while a collection and the backup run.
    stop = threading.Event()
    during: list[tuple[Path, dict]] = []
    errors: list[BaseException] = []

    def uploader() -> None:
        i = 0
        try:
            while not stop.is_set() and i < 40:
                f = write_random(tmp_path / f"during-{i}.bin", MiB + 17 * i, seed=200 + i)
                during.append((f, hfx.upload(srv.url, tok, [f]).result["files"][0]))
                i += 1
        except BaseException as e:  # noqa: BLE001 — reported by the test
            errors.append(e)

    t = threading.Thread(target=uploader)
    t.start()
    while len(during) < 2 and not errors:  # uploads are under way when the backup begins
        time.sleep(0.05)
    collector = subprocess.Popen([srv.bin, "gc", "--json", "--data", str(srv.data_dir)], env=srv._env(),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    acknowledged = len(during)  # before the backup begins
    in_bucket = backend == "s3"
    dest_prefix = f"backup-{tmp_path.name}/"
    dest = f"s3://interop/{dest_prefix}" if in_bucket else tmp_path / "backup"
    first = backup(srv, dest)
    out, err = collector.communicate(timeout=600)
    assert collector.returncode == 0, err
    stop.set()
    t.join(timeout=600)
    assert not errors, errors
    print(f"backup: {acknowledged} uploads acknowledged before it began, {len(during)} by its end; {first}")
    assert json.loads(out.strip().splitlines()[-1])["newly_quarantined"] >= 1  # the doomed file
    assert first["xorbs"]["copied"] > 0 and first["xorbs"]["copied"] == first["xorbs"]["named"], first

    # A second backup copies only what is new (nothing was freed: the grace is 30 days).
    after = write_random(tmp_path / "after.bin", 3 * MiB, seed=105)
    after_meta = hfx.upload(srv.url, tok, [after]).result["files"][0]
    second = backup(srv, dest)
    assert second["xorbs"]["already"] == first["xorbs"]["named"], (first, second)
    assert second["xorbs"]["copied"] == second["xorbs"]["named"] - first["xorbs"]["named"] > 0, second
    assert cairn(srv.bin, ["backup", "--verify", "--json", str(dest)], srv._env())["failed"] == []

    # The first snapshot (taken during the uploads) into a fresh data directory, the latest into a fresh
    # PostgreSQL database and bucket.
    pg = request.getfixturevalue("postgres")
    sw = request.getfixturevalue("seaweedfs")
    db = pg.create_database()
    targets = [("sqlite", first, {}),
               ("s3", second, {"CAIRN_INDEX": db, **sw.env(f"s3://interop/restored-{db.rsplit('/', 1)[1]}")})]
    for name, taken, extra in targets:
        data = tmp_path / f"restored-{name}"
        env = {"CAIRN_INDEX": f"sqlite:{data}/index.db", "CAIRN_STORE": f"file:{data}/blobs", **extra}
        run_env = {**srv._env(), **env}
        for k in ("CAIRN_S3_ENDPOINT", "CAIRN_S3_PATH_STYLE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            if k not in extra and not in_bucket:  # a backup in a bucket is read with the s3_* settings
                run_env.pop(k, None)
        restored = cairn(srv.bin, ["restore", "--json", "--snapshot", taken["snapshot"], "--data", str(data),
                                   str(dest)], run_env)
        assert restored["snapshot"] == taken["snapshot"]
        assert restored["xorbs"]["copied"] == taken["xorbs"]["named"], (taken, restored)
        there = server(data_dir=data, env=env)
        tok2 = there.token("plain")
        got = tmp_path / f"{name}-before.bin"
        hfx.download(there.url, tok2, [(before_meta["hash"], before_meta["size"], got)])
        assert_same_file(got, before, before_meta["sha256"])
        if taken is second:
            got = tmp_path / f"{name}-after.bin"
            hfx.download(there.url, tok2, [(after_meta["hash"], after_meta["size"], got)])
            assert_same_file(got, after, after_meta["sha256"])
        else:
            assert not has_file(there, tok2, after_meta["hash"])  # uploaded after that backup
        for i, (f, meta) in enumerate(during):
            # Acknowledged before the backup began: in it. Later: in it or not, whole if in it.
            if taken is first and i >= acknowledged and not has_file(there, tok2, meta["hash"]):
                continue
            got = tmp_path / f"{name}-during-{i}.bin"
            hfx.download(there.url, tok2, [(meta["hash"], meta["size"], got)])
            assert_same_file(got, f, meta["sha256"])
        assert not has_file(there, tok2, doomed_meta["hash"])  # removed before the backup
        hub2 = Hub(hub_python(), tmp_path / f"alice-{name}", there, there.token("alice"))
        snap = Path(hub2.run('result = snapshot_download("alice/m")'))
        for rel in ("config.json", "model.bin", "data/part.bin"):
            assert (snap / rel).read_bytes() == (folder / rel).read_bytes(), rel
        report = json.loads(there.cli("fsck", "--deep", "--json").stdout.strip().splitlines()[-1])
        assert not report["damaged"] and report["findings"] == [], report
        # The restored index's audit log has the backup it came from, then its restore.
        actions = [json.loads(line)["action"] for line in there.cli("audit", "--json").stdout.splitlines() if line]
        assert actions[0] == "backup.restore", actions

    # --verify finds a flipped byte in a backed-up xorb.
    if in_bucket:
        key = sorted(sw.list_keys("interop", dest_prefix + "objects/xorbs/"))[0]
        body = bytearray(sw.get_object("interop", key))
        body[200] ^= 1
        sw.put_object("interop", key, bytes(body))
        name = key.rsplit("/", 1)[1]
    else:
        xorb = next(p for p in sorted((dest / "objects" / "xorbs").rglob("*")) if p.is_file())
        with open(xorb, "r+b") as f:
            f.seek(200)
            b = f.read(1)
            f.seek(200)
            f.write(bytes([b[0] ^ 1]))
        name = xorb.name
    verified = cairn(srv.bin, ["backup", "--verify", "--json", str(dest)], srv._env(), expect=1)
    assert len(verified["failed"]) == 1 and name[:16] in verified["failed"][0], verified


@pytest.mark.backends("sqlite", "s3")
def test_restore_refuses_a_deployment_a_server_has_used(server, hfx, tmp_path, backend, request):
    srv = server()
    tok = srv.token("plain", write=True)
    hfx.upload(srv.url, tok, [write_random(tmp_path / "a.bin", MiB, seed=106)])
    dest = tmp_path / "backup"
    backup(srv, dest)
    r = subprocess.run([srv.bin, "restore", "--data", str(srv.data_dir), str(dest)], capture_output=True, text=True,
                       timeout=120, env=srv._env())
    assert r.returncode == 2 and "not empty" in r.stderr, r
    if backend == "s3":  # a backup inside the store it backs up is refused
        inside = srv._env()["CAIRN_STORE"].rstrip("/") + "/backup"
        r = subprocess.run([srv.bin, "backup", "--data", str(srv.data_dir), inside], capture_output=True, text=True,
                           timeout=120, env=srv._env())
        assert r.returncode == 2 and "inside the store" in r.stderr, r
    else:  # a deployment on local disk backs up into a bucket through the backup_s3_* settings
        sw = request.getfixturevalue("seaweedfs")
        sw.create_bucket("interop")
        env = {**srv._env(), "CAIRN_BACKUP_S3_ENDPOINT": sw.endpoint, "CAIRN_BACKUP_S3_PATH_STYLE": "true",
               "CAIRN_BACKUP_S3_ACCESS_KEY_ID": sw.access_key, "CAIRN_BACKUP_S3_SECRET_ACCESS_KEY": sw.secret_key}
        dest = f"s3://interop/backup-{tmp_path.name}"
        taken = cairn(srv.bin, ["backup", "--json", "--data", str(srv.data_dir), dest], env)
        assert taken["xorbs"]["copied"] == taken["xorbs"]["named"] > 0, taken
        assert cairn(srv.bin, ["backup", "--verify", "--json", dest], env)["failed"] == []
        data = tmp_path / "restored"
        restored = cairn(srv.bin, ["restore", "--json", "--data", str(data), dest],
                         {**env, "CAIRN_INDEX": f"sqlite:{data}/index.db", "CAIRN_STORE": f"file:{data}/blobs"})
        assert restored["xorbs"]["copied"] == taken["xorbs"]["named"], restored

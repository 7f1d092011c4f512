"""Uploads through git-lfs's batch API (docs/git.md), made Xet files by the server: huggingface_hub 2.4.0 with
HF_HUB_DISABLE_XET=1 and with a file object (which goes through the batch API even with hf_xet), in one PUT and in
parts; git push with git-lfs. Each file is then downloaded byte-exact through Xet and without it, listed with a
xetHash, and an hf_xet upload of the same bytes sends nothing."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from common import MiB, assert_same_file, sha256_file, write_random
from hub_util import Hub, release_python
from git_util import Git, url

NO_XET = {"HF_HUB_DISABLE_XET": "1"}
BOTH = pytest.mark.backends("sqlite", "s3")


def xorb_bytes(srv) -> float:
    """Body bytes the server received on its xorb upload route."""
    return sum(v for n, labels, v in srv.metrics()
               if n == "cairn_http_request_body_bytes_total" and "xorb" in labels.get("route", ""))


def download_all(hub: Hub, repo: str, dest: Path, env: dict | None = None) -> list:
    """snapshot_download into `dest`; the paths-info of every file (path, xetHash, lfs sha256)."""
    return hub.run(f"""
        snapshot_download({repo!r}, local_dir={str(dest)!r})
        files = api.list_repo_tree({repo!r}, recursive=True)
        result = sorted([f.path, getattr(f, "xet_hash", None), f.lfs.sha256 if getattr(f, "lfs", None) else None]
                        for f in files if hasattr(f, "size"))
    """, env=env)


@BOTH
def test_uploads_without_xet_become_xet_files(server, hub_py, tmp_path):
    srv = server()
    hub = Hub(hub_py, tmp_path / "alice", srv, srv.token("alice", write=True))
    folder = tmp_path / "upload"
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text('{"a": 1}\n')
    write_random(folder / "weights.bin", 3 * MiB, seed=11)
    write_random(folder / "sub" / "shard.bin", 1 * MiB + 5, seed=12)
    hub.run("""
        api.create_repo("alice/model")
        api.upload_folder(repo_id="alice/model", folder_path=FOLDER, commit_message="no xet")
    """.replace("FOLDER", repr(str(folder))), env=NO_XET)
    assert srv.requests_count("PUT", "lfs_upload", status="200") == 2, srv.requests_table()
    assert srv.requests_count("POST", "lfs_verify", status="200") == 2, srv.requests_table()
    assert xorb_bytes(srv) == 0  # the server chunked them itself

    # A file object goes through the batch API even with hf_xet installed.
    fileobj = write_random(tmp_path / "fileobj.bin", 2 * MiB, seed=13)
    hub.run(f"""
        with open({str(fileobj)!r}, "rb") as f:
            api.upload_file(repo_id="alice/model", path_or_fileobj=f, path_in_repo="fileobj.bin")
    """)
    assert srv.requests_count("PUT", "lfs_upload", status="200") == 3, srv.requests_table()

    for name, env in (("xet", None), ("plain", NO_XET)):
        dest = tmp_path / f"down-{name}"
        listed = download_all(hub, "alice/model", dest, env)
        for path, xet_hash, sha in listed:
            if path == ".gitattributes":
                continue
            want = fileobj if path == "fileobj.bin" else folder / path
            assert_same_file(dest / path, want)
            if path != "config.json":  # a large file: a Xet file, listed with its hash, under its SHA-256
                assert xet_hash and sha == sha256_file(want), listed

    # Uploaded again by hf_xet under another name: every chunk is on the server already.
    before = xorb_bytes(srv)
    hub.run(f"""
        api.upload_file(repo_id="alice/model", path_or_fileobj={str(folder / "weights.bin")!r},
                        path_in_repo="again.bin")
    """)
    assert xorb_bytes(srv) == before


@pytest.mark.backends("sqlite")
def test_large_files_go_in_parts(server, hub_py, tmp_path):
    srv = server()
    hub = Hub(hub_py, tmp_path / "alice", srv, srv.token("alice", write=True))
    big = write_random(tmp_path / "big.bin", 64 * MiB + 3 * MiB, seed=21)  # parts of 64 MiB: two
    hub.run(f"""
        api.create_repo("alice/big")
        api.upload_file(repo_id="alice/big", path_or_fileobj={str(big)!r}, path_in_repo="big.bin")
    """, env=NO_XET)
    assert srv.requests_count("PUT", "lfs_upload_part", status="200") == 2, srv.requests_table()
    assert srv.requests_count("POST", "lfs_upload_complete", status="200") == 1, srv.requests_table()
    got = hub.run('result = hf_hub_download("alice/big", "big.bin")')
    assert_same_file(got, big)


@pytest.mark.backends("sqlite")
def test_an_lfs_upload_dedups_like_an_hf_xet_one(server, hub_py, tmp_path):
    """200 MiB uploaded without Xet, then by hf_xet: nothing is sent again; with ten 64 KiB edits, hf_xet sends
    at most 1.2 x what it sends for the same edits after its own upload of the original."""
    size = 200 * MiB
    original = write_random(tmp_path / "original.bin", size, seed=31)
    edited = tmp_path / "edited.bin"
    data = bytearray(original.read_bytes())
    rng = random.Random(5)
    for k in range(10):
        at = k * (size // 10) + rng.randrange(size // 20)
        data[at:at + 64 * 1024] = rng.randbytes(64 * 1024)
    edited.write_bytes(bytes(data))
    del data

    def upload(hub: Hub, path: Path, name: str, env: dict | None = None) -> None:
        hub.run(f"""
            api.upload_file(repo_id="alice/m", path_or_fileobj={str(path)!r}, path_in_repo={name!r})
        """, env=env)

    after = {}
    for first in ("lfs", "xet"):
        srv = server()
        hub = Hub(hub_py, tmp_path / f"alice-{first}", srv, srv.token("alice", write=True))
        hub.run('api.create_repo("alice/m")')
        upload(hub, original, "original.bin", NO_XET if first == "lfs" else None)
        if first == "lfs":
            before = xorb_bytes(srv)
            upload(hub, original, "copy.bin")
            assert xorb_bytes(srv) == before, "hf_xet sent bytes the LFS upload had stored"
        before = xorb_bytes(srv)
        upload(hub, edited, "edited.bin")
        after[first] = xorb_bytes(srv) - before
        got = hub.run('result = hf_hub_download("alice/m", "edited.bin")')
        assert_same_file(got, edited)
    print(f"xorb bytes hf_xet sent for ten 64 KiB edits: after an LFS upload {after['lfs']:.0f}, after its own "
          f"{after['xet']:.0f} (ratio {after['lfs'] / after['xet']:.3f})")
    assert 0 < after["xet"] and after["lfs"] <= 1.2 * after["xet"], after


@BOTH
def test_git_push_with_new_lfs_files(server, hub_py, tmp_path):
    srv = server()
    tok = srv.token("alice", write=True)
    hub = Hub(hub_py, tmp_path / "alice", srv, tok)
    hub.run('api.create_repo("alice/model"); api.upload_file(repo_id="alice/model", path_or_fileobj=b"x\\n", '
            'path_in_repo="README.md")')
    git = Git(tmp_path / "git", lfs=True)
    git.run("clone", "-q", url(srv, "alice/model", tok), "work")
    work = git.home / "work"
    git.run("lfs", "track", "*.bin", cwd=work)
    big = write_random(work / "weights.bin", 5 * MiB, seed=41)
    git.run("add", "-A", cwd=work)
    git.run("commit", "-q", "-m", "weights through git-lfs", cwd=work)
    push = git.run("push", "origin", "main", cwd=work)
    assert "Locking support detected" not in push.stderr, push.stderr  # locks/verify answered
    assert srv.requests_count("PUT", "lfs_upload", status="200") == 1, srv.requests_table()
    got = hub.run("""
        p = hf_hub_download("alice/model", "weights.bin")
        info = api.get_paths_info("alice/model", ["weights.bin"])[0]
        result = [p, info.lfs.sha256, getattr(info, "xet_hash", None)]
    """)
    assert_same_file(got[0], big)
    assert got[1] == sha256_file(big) and got[2], got
    # A pointer to bytes the server never received is refused, changing nothing.
    (work / "ghost.bin").write_text("version https://git-lfs.github.com/spec/v1\noid sha256:" + "ab" * 32 +
                                    "\nsize 12\n")
    git.env["GIT_LFS_SKIP_PUSH"] = "1"
    git.run("-c", "filter.lfs.clean=cat", "add", "ghost.bin", cwd=work)
    git.run("commit", "-q", "-m", "ghost", cwd=work)
    ghost = git.run("push", "origin", "main", cwd=work, check=False)
    assert ghost.returncode != 0 and "not on this server" in ghost.stderr, ghost.stderr


@pytest.mark.backends("sqlite")
def test_older_releases_upload_and_download(server, tmp_path):
    """huggingface_hub 0.25 (before hf_xet) uploads through the batch API; 1.5 with hf_xet asks for Xet through it
    and is sent to the CAS. Each downloads what it uploaded, byte-exact."""
    srv = server()
    tok = srv.token("alice", write=True)
    folder = tmp_path / "upload"
    folder.mkdir()
    (folder / "config.json").write_text('{"a": 1}\n')
    write_random(folder / "weights.bin", 3 * MiB, seed=51)
    for release in ("0.25", "1.5"):
        hub = Hub(release_python(release), tmp_path / release, srv, tok)
        repo = f"alice/from-{release.replace('.', '-')}"
        puts, xorbs = srv.requests_count("PUT", "lfs_upload", status="200"), xorb_bytes(srv)
        batches = srv.requests_count("POST", "lfs_batch", status="200")
        version = hub.run(f"""
            api.create_repo({repo!r})
            api.upload_folder(repo_id={repo!r}, folder_path={str(folder)!r})
            import huggingface_hub
            result = huggingface_hub.__version__
        """)
        assert version.startswith(release + "."), version
        if release == "0.25":
            assert srv.requests_count("PUT", "lfs_upload", status="200") == puts + 1, srv.requests_table()
            assert xorb_bytes(srv) == xorbs
        else:
            assert srv.requests_count("PUT", "lfs_upload", status="200") == puts, srv.requests_table()
            assert xorb_bytes(srv) > xorbs  # hf_xet sent them, after the batch answered "xet"
        assert srv.requests_count("POST", "lfs_batch", status="200") == batches + 1, srv.requests_table()
        dest = tmp_path / f"down-{release}"
        hub.run(f"snapshot_download({repo!r}, local_dir={str(dest)!r})")
        for name in ("config.json", "weights.bin"):
            assert_same_file(dest / name, folder / name)

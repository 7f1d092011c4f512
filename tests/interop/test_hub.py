"""The Hub API against the pinned huggingface_hub and its `hf` CLI, pointed at `cairn serve` with HF_ENDPOINT:
repositories of the three types, commits through hf_xet (large files) and inline (small ones), refs, history,
trees, downloads through hf_xet and as plain bytes, the local cache, HfFileSystem, visibility, and the CLI.
On SQLite + local disk and on PostgreSQL + S3 (SeaweedFS)."""

from __future__ import annotations

import json
import os
import struct
import threading
from pathlib import Path

import pytest

from hub_util import Hub
from common import MiB, assert_same_file, http, sha256_file, write_random

BOTH = pytest.mark.backends("sqlite", "s3")


@pytest.fixture
def hub(server, hub_py, tmp_path):
    """A server and the stock client with a write token of namespace `alice`."""
    srv = server()
    return Hub(hub_py, tmp_path / "alice", srv, srv.token("alice", write=True))


def other_client(hub: Hub, name: str, token: str | None) -> Hub:
    return Hub(hub.python, hub.workdir.parent / name, hub.server, token)


def safetensors_like(path: Path, size: int, seed: int) -> Path:
    """A safetensors-shaped file: an 8-byte little-endian header length, a JSON header, then tensor bytes."""
    header = json.dumps({"__metadata__": {"format": "pt"},
                         "weight": {"dtype": "F16", "shape": [(size - 4096) // 2], "data_offsets": [0, size - 4096]}})
    header = header.ljust(4096 - 8).encode()
    body = path.with_suffix(".body")
    write_random(body, size - 4096, seed)
    with open(path, "wb") as out, open(body, "rb") as src:
        out.write(struct.pack("<Q", len(header)))
        out.write(header)
        while block := src.read(4 * MiB):
            out.write(block)
    body.unlink()
    return path


@BOTH
def test_large_and_small_files_round_trip_through_the_cache(hub, tmp_path):
    weights = safetensors_like(tmp_path / "model.safetensors", 200 * MiB, 1)
    folder = tmp_path / "folder"
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text('{"hidden_size": 8}\n')
    (folder / "README.md").write_text("---\nlicense: mit\n---\n# a model\n")
    (folder / "sub" / "notes.txt").write_text("notes\n" * 100)
    write_random(folder / "sub" / "blob.bin", 3 * MiB + 17, 2)
    (folder / "empty.txt").write_bytes(b"")
    (folder / "skip.log").write_text("ignored\n")

    url = hub.run('result = str(api.create_repo("alice/model"))')
    assert url == f"{hub.server.url}/alice/model"
    hub.run(f'''
        api.upload_file(path_or_fileobj={str(weights)!r}, path_in_repo="model.safetensors", repo_id="alice/model")
        api.upload_folder(folder_path={str(folder)!r}, repo_id="alice/model", ignore_patterns=["*.log"],
                          commit_message="Add the folder")
        api.upload_folder(folder_path={str(folder)!r}, repo_id="alice/model", path_in_repo="only-text",
                          allow_patterns=["*.txt", "sub/*.txt"])''')
    only = hub.run('result = sorted(f for f in api.list_repo_files("alice/model") if f.startswith("only-text/"))')
    assert only == ["only-text/empty.txt", "only-text/sub/notes.txt"], only
    hub.run('api.delete_folder("only-text", repo_id="alice/model")')
    files = hub.run('result = sorted(api.list_repo_files("alice/model"))')
    assert files == [".gitattributes", "README.md", "config.json", "empty.txt", "model.safetensors",
                     "sub/blob.bin", "sub/notes.txt"]

    # The whole repository, then again: the second time nothing is transferred.
    snap = Path(hub.run(f'result = snapshot_download("alice/model", cache_dir={str(tmp_path / "cache")!r})'))
    assert_same_file(snap / "model.safetensors", weights)
    assert_same_file(snap / "sub" / "blob.bin", folder / "sub" / "blob.bin")
    for name in ("config.json", "README.md", "sub/notes.txt", "empty.txt"):
        assert (snap / name).read_bytes() == (folder / name).read_bytes(), name
    assert not (snap / "skip.log").exists()
    before = {k: hub.server.requests_count("GET", k) for k in ("reconstruction", "resolve", "xet_read_token")}
    again = hub.run(f'result = snapshot_download("alice/model", cache_dir={str(tmp_path / "cache")!r})')
    assert Path(again) == snap
    after = {k: hub.server.requests_count("GET", k) for k in before}
    assert after == before, (before, after)

    # A second hf_hub_download of a cached file asks for its metadata only (a HEAD), and transfers nothing.
    hub.run(f'hf_hub_download("alice/model", "model.safetensors", cache_dir={str(tmp_path / "cache")!r})')
    assert {k: hub.server.requests_count("GET", k) for k in before} == before
    # One file into a local folder, by path; its metadata agrees with the upload.
    got = hub.run(f'result = hf_hub_download("alice/model", "sub/blob.bin", local_dir={str(tmp_path / "local")!r})')
    assert_same_file(got, folder / "sub" / "blob.bin")
    info = hub.run('''
        i = api.model_info("alice/model", files_metadata=True)
        result = {"sha": i.sha, "siblings": {s.rfilename: [s.size, s.lfs.sha256 if s.lfs else None] for s in i.siblings}}''')
    assert info["siblings"]["model.safetensors"] == [200 * MiB, sha256_file(weights)]
    assert info["siblings"]["config.json"][1] is None


@BOTH
def test_concurrent_commits_one_wins_the_other_is_refused_then_retries(hub, tmp_path):
    hub.run('api.create_repo("alice/race")')
    head = hub.run('result = api.model_info("alice/race").sha')
    code = '''
        import time
        op = CommitOperationAdd(path_in_repo="{name}.txt", path_or_fileobj=b"{name}\\n")
        api.create_commit("alice/race", [op], commit_message="{name}", parent_commit="{head}")
        result = "ok"'''
    outcomes = {}

    def commit(name):
        try:
            outcomes[name] = hub.run(code.format(name=name, head=head))
        except Exception as e:  # noqa: BLE001
            outcomes[name] = e

    threads = [threading.Thread(target=commit, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wins = [n for n, o in outcomes.items() if o == "ok"]
    assert len(wins) == 1, outcomes
    loser = "b" if wins == ["a"] else "a"
    assert getattr(outcomes[loser], "status", None) == 412, outcomes
    assert "A commit has happened since" in outcomes[loser].message
    assert hub.run('result = sorted(api.list_repo_files("alice/race"))') == [".gitattributes", f"{wins[0]}.txt"]
    # The loser refreshes and tries again.
    new_head = hub.run('result = api.model_info("alice/race").sha')
    assert hub.run(code.format(name=loser, head=new_head)) == "ok"
    assert hub.run('result = sorted(api.list_repo_files("alice/race"))') == [".gitattributes", "a.txt", "b.txt"]


@BOTH
def test_private_repositories_are_invisible_to_others(hub, tmp_path):
    hub.run('''
        api.create_repo("alice/secret", private=True)
        api.create_repo("alice/open", repo_type="dataset")
        api.upload_file(path_or_fileobj=b"x" * 10, path_in_repo="a.txt", repo_id="alice/secret")''')
    bob = other_client(hub, "bob", hub.server.token("bob", write=True))
    anon = other_client(hub, "anon", None)
    for client in (bob, anon):
        assert client.run('result = api.repo_exists("alice/secret")') is False
        assert client.run('result = api.repo_exists("alice/open", repo_type="dataset")') is True
        assert client.run('result = api.repo_exists("gpt2")') is False  # no namespace: none here
        e = client.fails('hf_hub_download("alice/secret", "a.txt")')
        assert e.kind == "RepositoryNotFoundError", e
        assert client.run('result = [m.id for m in api.list_models(author="alice")]') == []
    assert hub.run('result = [m.id for m in api.list_models(author="alice")]') == ["alice/secret"]
    # Bob may read the public dataset but not write to it, nor create repositories in alice's namespace.
    e = bob.fails('api.upload_file(path_or_fileobj=b"y", path_in_repo="b.txt", repo_id="alice/open", repo_type="dataset")')
    assert e.status == 403, e
    e = bob.fails('api.create_repo("alice/bobs")')
    assert e.status == 403, e
    # A token scoped to one repository sees that repository only.
    one = other_client(hub, "one", hub.server.token("alice/secret"))
    assert one.run('result = api.repo_exists("alice/secret")') is True
    assert one.run('result = open(hf_hub_download("alice/secret", "a.txt"), "rb").read().decode()') == "x" * 10
    # Public again, then visible to everybody.
    hub.run('api.update_repo_settings("alice/secret", private=False)')
    assert anon.run('result = api.repo_exists("alice/secret")') is True


@BOTH
def test_revisions_branches_tags_and_old_commits(hub, tmp_path):
    big = write_random(tmp_path / "big.bin", 2 * MiB, 3)
    hub.run(f'''
        api.create_repo("alice/revs", repo_type="dataset")
        api.upload_file(path_or_fileobj={str(big)!r}, path_in_repo="data/big.bin", repo_id="alice/revs", repo_type="dataset")
        api.upload_file(path_or_fileobj=b"v1\\n", path_in_repo="version.txt", repo_id="alice/revs", repo_type="dataset")''')
    old = hub.run('result = api.dataset_info("alice/revs").sha')
    hub.run('''
        api.create_tag("alice/revs", tag="v1", repo_type="dataset", tag_message="first")
        api.create_branch("alice/revs", branch="dev/work", repo_type="dataset")
        api.delete_file("data/big.bin", repo_id="alice/revs", repo_type="dataset")
        api.upload_file(path_or_fileobj=b"v2\\n", path_in_repo="version.txt", repo_id="alice/revs", repo_type="dataset")
        api.upload_file(path_or_fileobj=b"dev\\n", path_in_repo="dev.txt", repo_id="alice/revs", repo_type="dataset",
                        revision="dev/work")''')
    refs = hub.run('''
        r = api.list_repo_refs("alice/revs", repo_type="dataset")
        result = {"branches": sorted(b.name for b in r.branches), "tags": {t.name: t.target_commit for t in r.tags}}''')
    assert refs == {"branches": ["dev/work", "main"], "tags": {"v1": old}}
    # The deleted file is still there at the old commit and at the tag; not at main.
    for rev in (old, "v1"):
        got = hub.run(f'result = hf_hub_download("alice/revs", "data/big.bin", repo_type="dataset", revision="{rev}",'
                      f' cache_dir={str(tmp_path / "c")!r})')
        assert_same_file(got, big)
    # snapshot_download at a tag into a folder, with patterns.
    snap = Path(hub.run(f'''
        result = snapshot_download("alice/revs", repo_type="dataset", revision="v1", allow_patterns=["data/*"],
                                   local_dir={str(tmp_path / "snap")!r})'''))
    assert sorted(str(p.relative_to(snap)) for p in snap.rglob("*") if p.is_file() and ".cache" not in p.parts) == [
        "data/big.bin"]
    assert_same_file(snap / "data" / "big.bin", big)
    snap = Path(hub.run(f'''
        result = snapshot_download("alice/revs", repo_type="dataset", ignore_patterns=["*.txt", ".git*"],
                                   local_dir={str(tmp_path / "snap2")!r})'''))
    assert [p.name for p in snap.iterdir() if p.name != ".cache"] == []  # main has only .gitattributes and text
    info = hub.run('''
        r = api.repo_info("alice/revs", repo_type="dataset", revision="v1", files_metadata=True)
        result = [r.id, r.sha, sorted(s.rfilename for s in r.siblings)]''')
    assert info == ["alice/revs", old, [".gitattributes", "data/big.bin", "version.txt"]]
    e = hub.fails('hf_hub_download("alice/revs", "data/big.bin", repo_type="dataset")')
    assert e.kind in ("EntryNotFoundError", "RemoteEntryNotFoundError"), e
    text = hub.run('result = open(hf_hub_download("alice/revs", "version.txt", repo_type="dataset",'
                   ' revision="v1"), encoding="utf-8").read()')
    assert text == "v1\n"
    assert hub.run('result = api.file_exists("alice/revs", "dev.txt", repo_type="dataset", revision="dev/work")')
    assert not hub.run('result = api.file_exists("alice/revs", "dev.txt", repo_type="dataset")')
    hub.run('''
        api.upload_file(path_or_fileobj=b"notes", path_in_repo="notes.md", repo_id="alice/revs", repo_type="dataset",
                        revision="dev/work", commit_message="Add notes", commit_description="Why: for the record.")''')
    last = hub.run('''
        c = api.list_repo_commits("alice/revs", repo_type="dataset", revision="dev/work")[0]
        result = [c.title, c.message, c.authors]''')
    assert last == ["Add notes", "Why: for the record.", ["alice"]]
    assert hub.run('result = [d.id for d in api.list_datasets(author="alice")]') == ["alice/revs"]
    titles = hub.run('result = [c.title for c in api.list_repo_commits("alice/revs", repo_type="dataset")]')
    assert titles[0] == "Upload version.txt with huggingface_hub" and titles[-1] == "initial commit", titles
    assert len(titles) == 5
    e = hub.fails('api.list_repo_files("alice/revs", repo_type="dataset", revision="nope")')
    assert e.kind == "RevisionNotFoundError", e
    hub.run('''
        api.delete_branch("alice/revs", branch="dev/work", repo_type="dataset")
        api.delete_tag("alice/revs", tag="v1", repo_type="dataset")''')
    refs = hub.run('r = api.list_repo_refs("alice/revs", repo_type="dataset"); result = [len(r.branches), len(r.tags)]')
    assert refs == [1, 0]
    # The commit stays reachable by its id.
    assert hub.run(f'result = api.file_exists("alice/revs", "data/big.bin", repo_type="dataset", revision="{old}")')


@BOTH
def test_plain_downloads_ranges_and_hffilesystem(hub, tmp_path):
    big = write_random(tmp_path / "w.bin", 5 * MiB + 3, 4)
    hub.run(f'''
        api.create_repo("alice/plain")
        api.upload_file(path_or_fileobj={str(big)!r}, path_in_repo="w.bin", repo_id="alice/plain")
        api.upload_file(path_or_fileobj=b"small text\\n", path_in_repo="s.txt", repo_id="alice/plain")''')
    # Without hf_xet: the resolve URL streams the bytes.
    got = hub.run(f'result = hf_hub_download("alice/plain", "w.bin", cache_dir={str(tmp_path / "nx")!r})',
                  env={"HF_HUB_DISABLE_XET": "1"})
    assert_same_file(got, big)
    data = big.read_bytes()
    # curl-like: a public file, no token, a range; HEAD agrees with GET.
    r = http("GET", f"{hub.server.url}/alice/plain/resolve/main/w.bin", headers={"Range": "bytes=1000-1999"})
    assert r.status == 206 and r.body == data[1000:2000], r.status
    assert r.headers["content-range"] == f"bytes 1000-1999/{len(data)}"
    head = http("HEAD", f"{hub.server.url}/alice/plain/resolve/main/w.bin")
    assert head.status == 200
    assert head.headers["content-length"] == str(len(data))
    assert head.headers["x-linked-size"] == str(len(data))
    assert head.headers["x-linked-etag"] == f'"{sha256_file(big)}"' == head.headers["etag"]
    assert len(head.headers["x-repo-commit"]) == 40 and len(head.headers["x-xet-hash"]) == 64
    assert 'rel="xet-auth"' in head.headers["link"]
    small = http("HEAD", f"{hub.server.url}/alice/plain/resolve/main/s.txt")
    assert small.status == 200 and small.headers["content-length"] == "11" and "x-xet-hash" not in small.headers
    # HfFileSystem: listing, glob, ranged reads.
    out = hub.run('''
        fs = HfFileSystem()
        with fs.open("alice/plain/w.bin", "rb", block_size=4096) as f:
            f.seek(123456)
            part = f.read(5000)
        result = {"ls": sorted(e["name"] for e in fs.ls("alice/plain")), "glob": fs.glob("alice/plain/*.bin"),
                  "part": part.hex(), "size": fs.info("alice/plain/w.bin")["size"],
                  "text": fs.read_text("alice/plain/s.txt")}''')
    assert out["ls"] == ["alice/plain/.gitattributes", "alice/plain/s.txt", "alice/plain/w.bin"]
    assert out["glob"] == ["alice/plain/w.bin"]
    assert bytes.fromhex(out["part"]) == data[123456:128456]
    assert out["size"] == len(data) and out["text"] == "small text\n"


@BOTH
def test_trees_paths_info_and_repository_management(hub, tmp_path):
    hub.run('''
        api.create_repo("alice/tree", repo_type="space", space_sdk="static")
        ops = [CommitOperationAdd(path_in_repo=p, path_or_fileobj=p.encode()) for p in ("a/b/c.txt", "a/d.txt", "e.txt")]
        api.create_commit("alice/tree", ops, commit_message="three", repo_type="space")''')
    assert hub.run('result = api.space_info("alice/tree").id') == "alice/tree"
    tree = hub.run('''
        result = [[e.path, type(e).__name__] for e in api.list_repo_tree("alice/tree", repo_type="space", recursive=True)]''')
    assert ["a/b/c.txt", "RepoFile"] in tree and ["a/b", "RepoFolder"] in tree and ["e.txt", "RepoFile"] in tree
    expanded = hub.run('''
        result = sorted([e.path, e.size] for e in api.list_repo_tree("alice/tree", repo_type="space", recursive=True,
                                                                     expand=True) if hasattr(e, "size"))''')
    assert ["a/b/c.txt", 9] in expanded
    top = hub.run('result = sorted(e.path for e in api.list_repo_tree("alice/tree", path_in_repo="a", repo_type="space"))')
    assert top == ["a/b", "a/d.txt"]
    info = hub.run('result = [e.path for e in api.get_paths_info("alice/tree", ["e.txt", "a", "missing"], repo_type="space")]')
    assert info == ["e.txt", "a"]
    e = hub.fails('list(api.list_repo_tree("alice/tree", path_in_repo="nope", repo_type="space"))')
    assert e.kind in ("EntryNotFoundError", "RemoteEntryNotFoundError"), e
    # A folder deleted at once; a copy of a file.
    hub.run('''
        api.create_commit("alice/tree", [CommitOperationDelete("a/"), CommitOperationCopy("e.txt", "f.txt")],
                          commit_message="reshape", repo_type="space")''')
    assert hub.run('result = sorted(api.list_repo_files("alice/tree", repo_type="space"))') == [
        ".gitattributes", "e.txt", "f.txt"]
    # Moves and deletes.
    hub.run('api.move_repo("alice/tree", "alice/moved", repo_type="space")')
    assert hub.run('result = [api.repo_exists("alice/tree", repo_type="space"), api.repo_exists("alice/moved", repo_type="space")]') == [False, True]
    assert hub.run('result = sorted(api.list_repo_files("alice/moved", repo_type="space"))')[-1] == "f.txt"
    hub.run('api.delete_repo("alice/moved", repo_type="space"); api.delete_repo("alice/moved", repo_type="space", missing_ok=True)')
    assert hub.run('result = api.repo_exists("alice/moved", repo_type="space")') is False
    e = hub.fails('api.delete_repo("alice/moved", repo_type="space")')
    assert e.kind == "RepositoryNotFoundError", e


@BOTH
def test_the_hf_cli(hub, tmp_path):
    who = hub.cli("auth", "whoami").stdout
    assert "alice" in who
    created = hub.cli("repos", "create", "cli-model").stdout
    assert "alice/cli-model" in created, created
    folder = tmp_path / "up"
    folder.mkdir()
    write_random(folder / "weights.bin", 4 * MiB, 5)
    (folder / "config.json").write_text("{}\n")
    (folder / "old.log").write_text("x\n")
    hub.cli("upload", "alice/cli-model", str(folder), ".")
    assert "alice/cli-model" in hub.cli("models", "ls", "--author", "alice").stdout
    # --delete removes what the folder no longer has; --revision makes the branch.
    (folder / "old.log").unlink()
    hub.cli("upload", "alice/cli-model", str(folder), ".", "--delete", "*.log")
    hub.cli("upload", "alice/cli-model", str(folder / "config.json"), "config.json", "--revision", "feature")
    hub.cli("repos", "tag", "create", "alice/cli-model", "v1")
    out = tmp_path / "down"
    hub.cli("download", "alice/cli-model", "--local-dir", str(out))
    assert_same_file(out / "weights.bin", folder / "weights.bin")
    assert not (out / "old.log").exists()
    hub.cli("download", "alice/cli-model", "config.json", "--revision", "v1", "--local-dir", str(tmp_path / "one"))
    assert (tmp_path / "one" / "config.json").read_text() == "{}\n"
    r = hub.cli("cp", "hf://alice/cli-model/config.json", str(tmp_path / "copied.json"))
    assert (tmp_path / "copied.json").read_text() == "{}\n", r.stdout
    hub.cli("repos", "delete", "alice/cli-model", "-y")
    assert "alice/cli-model" not in hub.cli("models", "ls", "--author", "alice").stdout


@BOTH
def test_buckets_through_the_api_and_the_cli(hub, tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text("hello\n")
    big = write_random(src / "sub" / "big.bin", 3 * MiB + 1, 6)
    (src / "empty").write_bytes(b"")
    url = hub.run(f'''
        u = api.create_bucket("alice/files")
        api.create_bucket("alice/files", exist_ok=True)
        api.batch_bucket_files("alice/files", add=[({str(src / "a.txt")!r}, "a.txt"),
                                                   ({str(big)!r}, "sub/big.bin"), ({str(src / "empty")!r}, "empty")])
        result = u.url''')
    assert url == f"{hub.server.url}/buckets/alice/files"
    info = hub.run('i = api.bucket_info("alice/files"); result = [i.size, i.total_files, i.private]')
    assert info == [6 + big.stat().st_size, 3, False]
    tree = hub.run('result = sorted([e.path, type(e).__name__] for e in api.list_bucket_tree("alice/files", recursive=False))')
    assert tree == [["a.txt", "BucketFile"], ["empty", "BucketFile"], ["sub", "BucketFolder"]]
    paths = hub.run('result = [f.path for f in api.get_bucket_paths_info("alice/files", ["sub/big.bin", "sub", "nope"])]')
    assert paths == ["sub/big.bin"]
    dest = tmp_path / "dest"
    dest.mkdir()
    hub.run(f'''
        api.download_bucket_files("alice/files", [("sub/big.bin", {str(dest / "big.bin")!r}),
                                                  ("empty", {str(dest / "empty")!r})])''')
    assert_same_file(dest / "big.bin", big)
    assert (dest / "empty").read_bytes() == b""

    # Private buckets are invisible to other namespaces; a hash uploaded elsewhere cannot be added.
    hub.run('api.update_bucket_settings("alice/files", private=True)')
    bob = other_client(hub, "bob", hub.server.token("bob", write=True))
    e = bob.fails('api.bucket_info("alice/files")')
    assert e.kind == "BucketNotFoundError", e
    xet_hash = hub.run('result = next(iter(api.get_bucket_paths_info("alice/files", ["sub/big.bin"]))).xet_hash')
    bob.run('api.create_bucket("bob/mine")')
    r = http("POST", f"{hub.server.url}/api/buckets/bob/mine/batch",
             headers={"Authorization": f"Bearer {bob.token}", "Content-Type": "application/x-ndjson"},
             body=json.dumps({"type": "addFile", "path": "stolen.bin", "xetHash": xet_hash, "mtime": 0}).encode())
    assert r.status == 422 and b"was uploaded to this bucket" in r.body, (r.status, r.body)

    # The CLI: create, ls, sync both ways (a second sync sends nothing), cp, rm, delete.
    hub.cli("buckets", "create", "synced")
    hub.cli("sync", str(src), "hf://buckets/alice/synced/data")
    listing = hub.cli("buckets", "ls", "alice/synced/data", "-R").stdout
    assert "data/sub/big.bin" in listing and "data/a.txt" in listing, listing
    before = hub.server.requests_count("POST", "xorb_upload")
    again = hub.cli("sync", str(src), "hf://buckets/alice/synced/data").stdout
    assert hub.server.requests_count("POST", "xorb_upload") == before, again
    back = tmp_path / "back"
    hub.cli("sync", "hf://buckets/alice/synced/data", str(back))
    assert_same_file(back / "sub" / "big.bin", big)
    assert (back / "a.txt").read_text() == "hello\n"
    hub.cli("cp", "hf://buckets/alice/synced/data/a.txt", str(tmp_path / "one.txt"))
    assert (tmp_path / "one.txt").read_text() == "hello\n"
    hub.cli("cp", str(src / "a.txt"), "hf://buckets/alice/synced/copied.txt")
    hub.cli("buckets", "rm", "alice/synced/data/a.txt", "-y")
    listing = hub.cli("buckets", "ls", "alice/synced", "-R").stdout
    assert "copied.txt" in listing and "data/a.txt" not in listing, listing
    assert "alice/synced" in hub.cli("buckets", "ls").stdout
    hub.cli("buckets", "delete", "alice/synced", "-y")
    assert "alice/synced" not in hub.cli("buckets", "ls").stdout


@BOTH
def test_copies_between_repositories_and_buckets(hub, tmp_path):
    w = write_random(tmp_path / "w.bin", 2 * MiB + 9, 7)
    hub.run(f'''
        api.create_repo("alice/src")
        api.create_repo("alice/dst", repo_type="dataset")
        api.create_bucket("alice/bkt")
        api.create_bucket("alice/bkt2")
        api.upload_file(path_or_fileobj={str(w)!r}, path_in_repo="w.bin", repo_id="alice/src")
        api.upload_file(path_or_fileobj=b"small\\n", path_in_repo="s.txt", repo_id="alice/src")''')
    before = hub.server.requests_count("POST", "xorb_upload")
    # Repository to repository (large and small files), to a bucket, and bucket to bucket: no bytes move.
    hub.cli("cp", "hf://alice/src/w.bin", "hf://datasets/alice/dst/copies/")
    hub.cli("cp", "hf://alice/src/s.txt", "hf://datasets/alice/dst/copies/s.txt")
    hub.cli("cp", "hf://alice/src/w.bin", "hf://buckets/alice/bkt/w.bin")
    hub.cli("cp", "hf://buckets/alice/bkt/w.bin", "hf://buckets/alice/bkt2/again.bin")
    assert hub.server.requests_count("POST", "xorb_upload") == before
    assert sorted(hub.run('result = api.list_repo_files("alice/dst", repo_type="dataset")')) == [
        ".gitattributes", "copies/s.txt", "copies/w.bin"]
    got = hub.run(f'result = hf_hub_download("alice/dst", "copies/w.bin", repo_type="dataset", cache_dir={str(tmp_path / "c")!r})')
    assert_same_file(got, w)
    dest = tmp_path / "from-bucket.bin"
    hub.run(f'api.download_bucket_files("alice/bkt2", [("again.bin", {str(dest)!r})])')
    assert_same_file(dest, w)
    # Nobody copies out of what they cannot read.
    hub.run('api.update_repo_settings("alice/src", private=True)')
    bob = other_client(hub, "bob", hub.server.token("bob", write=True))
    bob.run('api.create_bucket("bob/mine")')
    r = bob.cli("cp", "hf://alice/src/w.bin", "hf://buckets/bob/mine/w.bin", check=False)
    assert r.returncode != 0
    assert bob.run('result = [f.path for f in api.list_bucket_tree("bob/mine")]') == []

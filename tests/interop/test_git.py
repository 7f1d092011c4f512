"""git over smart HTTP against Debian's git (docs/git.md): clones and fetches of repositories huggingface_hub
wrote, in protocol v2 and v0, shallow and partial, public and private. The commit ids git sees are the ones the
Hub API lists, and the files are the bytes huggingface_hub committed (large files as the LFS pointers the Hub
writes; their bytes come through git-lfs, a later step). On SQLite + local disk and on PostgreSQL + S3."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from common import MiB, assert_same_file, sha256_file, write_random
from git_util import Git, url
from hub_util import Hub

BOTH = pytest.mark.backends("sqlite", "s3")


def make_history(hub: Hub, tmp_path: Path, repo: str, repo_type: str = "model", private: bool = False) -> dict:
    """A repository with small files in folders, a large file, and three commits; its files and commits."""
    folder = tmp_path / "upload"
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text('{"hidden_size": 8}\n')
    (folder / "sub" / "notes.txt").write_text("first\n")
    write_random(folder / "weights.bin", 3 * MiB, seed=7)
    hub.run(f"""
        api.create_repo({repo!r}, repo_type={repo_type!r}, private={private!r})
        api.upload_folder(repo_id={repo!r}, repo_type={repo_type!r}, folder_path={str(folder)!r},
                          commit_message="one")
        api.upload_file(repo_id={repo!r}, repo_type={repo_type!r}, path_or_fileobj=b"second\\n",
                        path_in_repo="sub/notes.txt", commit_message="two")
        api.upload_file(repo_id={repo!r}, repo_type={repo_type!r}, path_or_fileobj=b"new\\n",
                        path_in_repo="added.txt", commit_message="three")
    """)
    commits = hub.run(f"""
        result = [c.commit_id for c in api.list_repo_commits({repo!r}, repo_type={repo_type!r})]
    """)
    return {"folder": folder, "commits": commits}


@BOTH
def test_clone_and_fetch_see_what_the_hub_api_wrote(server, hub_py, tmp_path):
    srv = server()
    hub = Hub(hub_py, tmp_path / "alice", srv, srv.token("alice", write=True))
    made = make_history(hub, tmp_path, "alice/model")
    git = Git(tmp_path / "git")
    git.run("clone", "-q", url(srv, "alice/model"), "clone")
    work = git.home / "clone"
    log = git.run("log", "--format=%H", cwd=work).stdout.split()
    assert log == made["commits"], (log, made["commits"])
    assert (work / "config.json").read_text() == '{"hidden_size": 8}\n'
    assert (work / "sub" / "notes.txt").read_text() == "second\n"
    assert (work / "added.txt").read_text() == "new\n"
    pointer = (work / "weights.bin").read_text()
    assert pointer.startswith("version https://git-lfs.github.com/spec/v1\noid sha256:"), pointer
    assert pointer.endswith(f"size {3 * MiB}\n"), pointer
    git.run("fsck", "--strict", cwd=work)

    # A new commit through the Hub API, then `git pull` fetches only it.
    hub.run("""api.upload_file(repo_id="alice/model", path_or_fileobj=b"four\\n", path_in_repo="four.txt",
                               commit_message="four")""")
    git.run("pull", "-q", "--ff-only", cwd=work)
    assert (work / "four.txt").read_text() == "four\n"
    head = hub.run('result = api.list_repo_commits("alice/model")[0].commit_id')
    assert git.run("rev-parse", "HEAD", cwd=work).stdout.strip() == head

    # The same with the .git suffix and with protocol v0 (older clients).
    git.run("-c", "protocol.version=0", "clone", "-q", url(srv, "alice/model.git"), "v0")
    assert git.run("rev-parse", "HEAD", cwd=git.home / "v0").stdout.strip() == head
    git.run("fsck", "--strict", cwd=git.home / "v0")
    # v0's negotiation (multi_ack_detailed, stateless): a fetch after one more commit gets only that commit.
    hub.run("""api.upload_file(repo_id="alice/model", path_or_fileobj=b"five\\n", path_in_repo="five.txt",
                               commit_message="five")""")
    fetched = git.run("-c", "protocol.version=0", "fetch", "-v", "origin", cwd=git.home / "v0")
    git.run("merge", "-q", "--ff-only", "origin/main", cwd=git.home / "v0")
    assert (git.home / "v0" / "five.txt").read_text() == "five\n"
    git.run("fsck", "--strict", cwd=git.home / "v0")
    assert "main" in fetched.stderr, fetched.stderr


@BOTH
def test_shallow_and_partial_clones(server, hub_py, tmp_path):
    srv = server()
    hub = Hub(hub_py, tmp_path / "alice", srv, srv.token("alice", write=True))
    made = make_history(hub, tmp_path, "alice/data", repo_type="dataset")
    git = Git(tmp_path / "git")
    git.run("clone", "-q", "--depth", "1", url(srv, "datasets/alice/data"), "shallow")
    shallow = git.home / "shallow"
    assert git.run("rev-list", "--count", "HEAD", cwd=shallow).stdout.strip() == "1"
    assert (shallow / "sub" / "notes.txt").read_text() == "second\n"
    git.run("fetch", "-q", "--depth", "3", cwd=shallow)
    assert git.run("rev-list", "--count", "origin/main", cwd=shallow).stdout.strip() == "3"
    git.run("fetch", "-q", "--unshallow", cwd=shallow)
    assert git.run("rev-list", "--count", "origin/main", cwd=shallow).stdout.strip() == str(len(made["commits"]))

    # blob:none: the checkout fetches the blobs it needs, later revisions theirs on demand.
    git.run("clone", "-q", "--filter=blob:none", url(srv, "datasets/alice/data"), "partial")
    partial = git.home / "partial"
    assert (partial / "added.txt").read_text() == "new\n"
    first = made["commits"][-2]  # "one", after the initial commit
    assert git.run("show", f"{first}:sub/notes.txt", cwd=partial).stdout == "first\n"
    git.run("-c", "protocol.version=0", "clone", "-q", "--depth", "1", url(srv, "datasets/alice/data"), "v0")
    assert git.run("rev-list", "--count", "HEAD", cwd=git.home / "v0").stdout.strip() == "1"


@BOTH
def test_git_lfs_fetches_the_large_files_bytes(server, hub_py, tmp_path):
    srv = server()
    tok = srv.token("alice", write=True)
    hub = Hub(hub_py, tmp_path / "alice", srv, tok)
    made = make_history(hub, tmp_path, "alice/model")
    make_history(hub, tmp_path / "p", "alice/private", private=True)
    git = Git(tmp_path / "git", lfs=True)
    # The clone's checkout runs git-lfs's smudge filter: the large file's bytes through the batch API.
    git.run("clone", "-q", url(srv, "alice/model"), "clone")
    assert_same_file(git.home / "clone" / "weights.bin", made["folder"] / "weights.bin")
    # The same for a private repository with the token as the password, and `git lfs pull` after a pointer-only
    # clone.
    git.run("clone", "-q", url(srv, "alice/private", tok), "private")
    assert_same_file(git.home / "private" / "weights.bin", tmp_path / "p" / "upload" / "weights.bin")
    git.env["GIT_LFS_SKIP_SMUDGE"] = "1"
    git.run("clone", "-q", url(srv, "alice/model"), "pointers")
    assert (git.home / "pointers" / "weights.bin").stat().st_size < 200
    del git.env["GIT_LFS_SKIP_SMUDGE"]
    git.run("lfs", "pull", cwd=git.home / "pointers")
    assert_same_file(git.home / "pointers" / "weights.bin", made["folder"] / "weights.bin")
    files = git.run("lfs", "ls-files", "--long", cwd=git.home / "pointers").stdout
    assert sha256_file(made["folder"] / "weights.bin") in files, files


@pytest.mark.backends("sqlite")
def test_private_and_missing_repositories_look_alike_without_a_token(server, hub_py, tmp_path):
    srv = server()
    tok = srv.token("alice", write=True)
    hub = Hub(hub_py, tmp_path / "alice", srv, tok)
    make_history(hub, tmp_path, "alice/secret", private=True)
    git = Git(tmp_path / "git")
    private = git.run("clone", "-q", url(srv, "alice/secret"), "a", check=False)
    missing = git.run("clone", "-q", url(srv, "alice/nothing"), "b", check=False)
    assert private.returncode != 0 and missing.returncode != 0
    # git asked for credentials both times (a 401) and, not allowed to prompt, gave up the same way.
    for r in (private, missing):
        assert "could not read Username" in r.stderr, r.stderr
    assert private.stderr.replace("secret", "X") == missing.stderr.replace("nothing", "X")
    # With the token as the password: cloned. Another namespace's token: not found, as if missing.
    git.run("clone", "-q", url(srv, "alice/secret", tok), "c")
    assert (git.home / "c" / "added.txt").read_text() == "new\n"
    other = git.run("clone", "-q", url(srv, "alice/secret", srv.token("bob")), "d", check=False)
    assert other.returncode != 0 and "not found" in other.stderr, other.stderr
    bad = git.run("clone", "-q", url(srv, "alice/secret", "not-a-token"), "e", check=False)
    assert bad.returncode != 0 and "Authentication failed" in bad.stderr, bad.stderr


@BOTH
def test_push_lands_where_the_hub_api_sees_it(server, hub_py, tmp_path):
    srv = server()
    tok = srv.token("alice", write=True)
    hub = Hub(hub_py, tmp_path / "alice", srv, tok)
    make_history(hub, tmp_path, "alice/model")
    git = Git(tmp_path / "git")
    git.run("clone", "-q", url(srv, "alice/model", tok), "work")
    work = git.home / "work"
    (work / "sub" / "notes.txt").write_text("pushed\n")
    (work / "new.txt").write_text("new file\n")
    os.symlink("new.txt", work / "link")
    git.run("add", "-A", cwd=work)
    git.run("commit", "-q", "-m", "from git", cwd=work)
    git.run("push", "-q", "origin", "main", cwd=work)
    head = git.run("rev-parse", "HEAD", cwd=work).stdout.strip()
    got = hub.run("""
        c = api.list_repo_commits("alice/model")[0]
        p = hf_hub_download("alice/model", "sub/notes.txt", revision=c.commit_id)
        result = [c.commit_id, c.title, open(p).read(), sorted(api.list_repo_files("alice/model"))]
    """)
    assert got[0] == head and got[1] == "from git" and got[2] == "pushed\n", got
    assert "new.txt" in got[3] and "link" in got[3], got

    # Another clone pushes first: this one's push is not a fast-forward and is refused, changing nothing.
    git.run("clone", "-q", url(srv, "alice/model", tok), "other")
    (git.home / "other" / "other.txt").write_text("other\n")
    git.run("add", "-A", cwd=git.home / "other")
    git.run("commit", "-q", "-m", "other", cwd=git.home / "other")
    git.run("push", "-q", "origin", "main", cwd=git.home / "other")
    (work / "late.txt").write_text("late\n")
    git.run("add", "-A", cwd=work)
    git.run("commit", "-q", "-m", "late", cwd=work)
    stale = git.run("push", "origin", "main", cwd=work, check=False)
    assert stale.returncode != 0 and "rejected" in stale.stderr, stale.stderr
    assert hub.run('result = api.list_repo_commits("alice/model")[0].title') == "other"
    git.run("pull", "-q", "--no-rebase", "--no-edit", cwd=work)
    git.run("push", "-q", "origin", "main", cwd=work)  # a merge is a fast-forward of both

    # A read token, another namespace's token, no token: refused.
    for who in (srv.token("alice"), srv.token("bob", write=True)):
        r = git.run("push", url(srv, "alice/model", who), "main", cwd=work, check=False)
        assert r.returncode != 0 and "403" in r.stderr, r.stderr
    anon = git.run("push", url(srv, "alice/model"), "main", cwd=work, check=False)
    assert anon.returncode != 0 and "could not read Username" in anon.stderr, anon.stderr

    # Branches: created and deleted by push; the default branch cannot be deleted; tags created.
    git.run("push", "-q", "origin", "HEAD:refs/heads/feature", cwd=work)
    git.run("push", "-q", "origin", "HEAD:refs/tags/v1", cwd=work)
    refs = hub.run('r = api.list_repo_refs("alice/model"); result = [[b.name for b in r.branches], [t.name for t in r.tags]]')
    assert sorted(refs[0]) == ["feature", "main"] and refs[1] == ["v1"], refs
    git.run("push", "-q", "origin", ":feature", cwd=work)
    main = git.run("push", "origin", ":main", cwd=work, check=False)
    assert main.returncode != 0 and "default branch cannot be deleted" in main.stderr, main.stderr

    # A file over 10 MiB that is not an LFS pointer: refused with the message Hub users know.
    write_random(work / "huge.dat", 11 * MiB, seed=3)
    git.run("add", "huge.dat", cwd=work)
    git.run("commit", "-q", "-m", "huge", cwd=work)
    huge = git.run("push", "origin", "main", cwd=work, check=False)
    assert huge.returncode != 0 and "larger than 10 MiB" in huge.stderr, huge.stderr
    assert hub.run('result = "huge.dat" in api.list_repo_files("alice/model")') is False


def _write_tree(git: Git, work: Path, entries: list[tuple[str, str, str]], literally: bool = False) -> str:
    """A tree object of (mode, name, hex id) entries as given (in that order), written into `work`'s repository."""
    body = b"".join(mode.encode() + b" " + name.encode() + b"\0" + bytes.fromhex(oid) for mode, name, oid in entries)
    args = ["hash-object", "-w", "-t", "tree", "--stdin"] + (["--literally"] if literally else [])
    r = subprocess.run(["git", *args], input=body, capture_output=True, env=git.env, cwd=work, check=True)
    return r.stdout.decode().strip()


def _push_tree(git: Git, work: Path, tree: str, message: str) -> subprocess.CompletedProcess:
    commit = git.run("commit-tree", tree, "-p", "HEAD", "-m", message, cwd=work).stdout.strip()
    return git.run("push", "origin", f"{commit}:refs/heads/main", cwd=work, check=False)


@BOTH
def test_push_of_what_the_api_would_refuse_is_refused(server, hub_py, tmp_path):
    """A tree deeper than a 4,096-byte path allows, a name given as a file and a folder, a second LFS pointer
    giving another size than its file's: each refused by a real git push, main unchanged."""
    srv = server()
    tok = srv.token("alice", write=True)
    hub = Hub(hub_py, tmp_path / "alice", srv, tok)
    make_history(hub, tmp_path, "alice/model")
    git = Git(tmp_path / "git")
    git.run("clone", "-q", url(srv, "alice/model", tok), "work")
    work = git.home / "work"
    before = git.run("rev-parse", "HEAD", cwd=work).stdout.strip()
    blob = git.run("hash-object", "-w", "--stdin", cwd=work).stdout.strip()  # the empty blob

    # 2,100 folders "a": the path is 4,201 bytes long, past the API's 4,096.
    tree = _write_tree(git, work, [("100644", "f", blob)])
    for _ in range(2100):
        tree = _write_tree(git, work, [("40000", "a", tree)])
    deep = _push_tree(git, work, tree, "deep")
    assert deep.returncode != 0 and "more than 4096" in deep.stderr, deep.stderr

    # "a" as a file and as a folder ("a-b" between them in git's order): git's fsck calls it duplicateEntries.
    sub = _write_tree(git, work, [("100644", "f", blob)])
    twice = _write_tree(git, work, [("100644", "a", blob), ("100644", "a-b", blob), ("40000", "a", sub)],
                        literally=True)
    dup = _push_tree(git, work, twice, "twice")
    assert dup.returncode != 0 and "appears twice" in dup.stderr, dup.stderr

    # The large file's pointer, copied with another size.
    pointer = (work / "weights.bin").read_text()
    assert pointer.startswith("version https://git-lfs.github.com/spec/v1"), pointer
    size = int(pointer.rsplit("size ", 1)[1])
    (work / "copy.bin").write_text(pointer.replace(f"size {size}", f"size {size + 4096}"))
    git.run("add", "copy.bin", cwd=work)
    git.run("commit", "-q", "-m", "lying pointer", cwd=work)
    lying = git.run("push", "origin", "main", cwd=work, check=False)
    assert lying.returncode != 0 and "gives another size" in lying.stderr, lying.stderr

    after = hub.run('result = api.list_repo_commits("alice/model")[0].commit_id')
    assert after == before

    git.run("reset", "-q", "--hard", before, cwd=work)
    # As deep as the bound allows: "deep/", 2,042 folders and a 7-byte name, 4,096 bytes; it lands and lists (never
    # checked out here: the path would not fit in PATH_MAX under the test's directory).
    tree = _write_tree(git, work, [("100644", "weights", blob)])
    for _ in range(2042):
        tree = _write_tree(git, work, [("40000", "a", tree)])
    root = git.run("ls-tree", "HEAD", cwd=work).stdout.splitlines()
    entries = [(line.split()[0], line.split("\t")[1], line.split()[2]) for line in root]
    entries.append(("40000", "deep", tree))
    entries.sort(key=lambda e: e[1] + ("/" if e[0] == "40000" else ""))
    fits = _push_tree(git, work, _write_tree(git, work, entries), "at the bound")
    assert fits.returncode == 0, fits.stderr
    longest = "deep/" + "a/" * 2041 + "a"
    listed = hub.run(f'result = [f for f in api.list_repo_files("alice/model") if f.startswith({longest!r})]')
    assert listed == [longest + "/weights"], listed

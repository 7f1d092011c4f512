"""cairn's own client commands against a running server, on files uploaded by the stock client hf_xet 1.8.0:
`cairn get` (whole files verified against their hash, ranges, a download killed and resumed, transfer URLs
expiring under it, its exit codes), `cairn ls`, `cairn stat`, and `cairn rm` (on `cairn put`'s uploads). On
local disk and on S3."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from clients import upload_random_files
from common import MiB, free_port, http, write_random
from proxies import DelayProxy

SCOPE = "interop"
BOTH_STORES = pytest.mark.backends("sqlite", "s3")
TTL = 2


def _cairn(cairn_bin, *args, env=None, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([cairn_bin, *args], capture_output=True, timeout=timeout,
                          env={"PATH": "/usr/bin:/bin", **(env or {})})


@pytest.fixture
def uploaded(server, hfx, tmp_path):
    srv = server()
    up, paths = upload_random_files(hfx, srv, SCOPE, tmp_path,
                                    {"big.bin": (70 * MiB + 7, 950), "small.bin": (1 * MiB + 3, 951)})
    env = {"CAIRN_ENDPOINT": srv.url, "CAIRN_TOKEN": srv.token(SCOPE)}
    return srv, env, up, paths


@BOTH_STORES
def test_get_whole_files_and_ranges(uploaded, cairn_bin, tmp_path):
    srv, env, up, files = uploaded
    for name, m in up.items():
        out = tmp_path / f"got-{name}"
        r = _cairn(cairn_bin, "get", m["hash"], "-o", str(out), "--json", env=env)
        assert r.returncode == 0, r.stderr
        report = json.loads(r.stdout)
        assert report["verified"] and report["size"] == m["size"], report
        assert hashlib.sha256(out.read_bytes()).hexdigest() == m["sha256"]
        assert not Path(str(out) + ".cairn-part").exists() and not Path(str(out) + ".cairn-part.chunks").exists()
    big = files["big.bin"].read_bytes()
    for a, b in [(0, 0), (64 * MiB - 3, 64 * MiB + 2), (len(big) - 10, len(big) - 1), (1000, 20 * MiB)]:
        r = _cairn(cairn_bin, "get", up["big.bin"]["hash"], "--range", f"{a}-{b}", "-o", "-", env=env)
        assert r.returncode == 0, r.stderr
        assert r.stdout == big[a:b + 1], (a, b)


def test_get_file_that_repeats_itself(server, hfx, cairn_bin, tmp_path):
    """A file whose later parts repeat its first (dedup within the upload: many terms name one xorb's chunks):
    byte-exact with one connection or eight, the repeated ranges kept or fetched again as memory allows."""
    srv = server()
    tok = srv.token(SCOPE, write=True)
    a = write_random(tmp_path / "a.bin", 3 * MiB, seed=960).read_bytes()
    parts = [a]
    for i in range(12):
        parts += [write_random(tmp_path / f"p{i}.bin", 1 * MiB + i, seed=961 + i).read_bytes(), a]
    path = tmp_path / "repeats.bin"
    path.write_bytes(b"".join(parts))
    m = hfx.upload(srv.url, tok, [path]).result["files"][0]
    env = {"CAIRN_ENDPOINT": srv.url, "CAIRN_TOKEN": srv.token(SCOPE)}
    for parallel in ("1", "8"):
        out = tmp_path / f"got-{parallel}"
        r = _cairn(cairn_bin, "get", m["hash"], "-o", str(out), "--parallel", parallel, "--json", env=env)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["verified"]
        assert hashlib.sha256(out.read_bytes()).hexdigest() == m["sha256"]


def _kill_midway(cairn_bin, env, file_hash: str, out: Path) -> int:
    """Starts `cairn get` and SIGKILLs it once 8 MiB are written; returns the size of the part it left."""
    part = Path(str(out) + ".cairn-part")
    for _ in range(5):  # a fast machine may finish before the kill lands: try again
        proc = subprocess.Popen([cairn_bin, "get", file_hash, "-o", str(out), "--parallel", "1"],
                                env={"PATH": "/usr/bin:/bin", **env}, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        while proc.poll() is None and (not part.exists() or part.stat().st_size < 8 * MiB):
            time.sleep(0.002)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return part.stat().st_size
        out.unlink()
    pytest.fail("every download finished before it could be killed")


@BOTH_STORES
def test_get_resumes_a_killed_download(uploaded, cairn_bin, tmp_path):
    srv, env, up, files = uploaded
    m = up["big.bin"]
    out = tmp_path / "resumed.bin"
    part = Path(str(out) + ".cairn-part")
    killed_at = _kill_midway(cairn_bin, env, m["hash"], out)
    assert not out.exists()
    r = _cairn(cairn_bin, "get", m["hash"], "-o", str(out), "--json", env=env)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["verified"] and 0 < report["resumed_from"] <= killed_at, (report, killed_at)
    assert report["written"] == m["size"] - report["resumed_from"]
    assert hashlib.sha256(out.read_bytes()).hexdigest() == m["sha256"]
    # A part damaged on disk: its bytes are hashed again before they count, so the download resumes before
    # the damage (here: from the start) and the result is still exact.
    out.unlink()
    _kill_midway(cairn_bin, env, m["hash"], out)
    with open(part, "r+b") as p:
        p.seek(100)
        b = p.read(1)
        p.seek(100)
        p.write(bytes([b[0] ^ 1]))
    r = _cairn(cairn_bin, "get", m["hash"], "-o", str(out), "--json", env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["resumed_from"] == 0
    assert hashlib.sha256(out.read_bytes()).hexdigest() == m["sha256"]


@pytest.mark.backends("sqlite", "s3")  # presigned URLs do not pass through the node's public URL
def test_get_refreshes_expired_transfer_urls(server, hfx, cairn_bin, tmp_path):
    f = write_random(tmp_path / "slow.bin", 3 * MiB + 11, seed=952)
    port = free_port()
    proxy = DelayProxy(port, delay=TTL + 2.0, delayed=1)
    try:
        srv = server(env={"CAIRN_TRANSFER_URL_TTL": str(TTL)}, port=port, public_url=proxy.url)
        tok = srv.token(SCOPE, write=True)
        m = hfx.upload(srv.url, tok, [f]).result["files"][0]
        r = _cairn(cairn_bin, "get", m["hash"], "-o", str(tmp_path / "out.bin"), "--parallel", "1", "--json",
                   env={"CAIRN_ENDPOINT": srv.url, "CAIRN_TOKEN": tok})
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["refreshed_urls"] >= 1
        assert (tmp_path / "out.bin").read_bytes() == f.read_bytes()
        assert srv.requests_count("GET", "transfer", status="403") >= 1
    finally:
        proxy.close()


def test_get_exit_codes(uploaded, cairn_bin, tmp_path):
    srv, env, up, files = uploaded
    h = up["small.bin"]["hash"]
    assert _cairn(cairn_bin, "get", "ab" * 32, "-o", str(tmp_path / "x"), env=env).returncode == 3
    other = {**env, "CAIRN_TOKEN": srv.token("other")}
    assert _cairn(cairn_bin, "get", h, "-o", str(tmp_path / "x"), env=other).returncode == 3
    assert _cairn(cairn_bin, "get", h, "--range", "5-1", env=env).returncode == 2
    assert _cairn(cairn_bin, "get", h, "-o", str(tmp_path / "x")).returncode == 2  # no endpoint
    bad = {**env, "CAIRN_TOKEN": "not-a-token"}
    r = _cairn(cairn_bin, "get", h, "-o", str(tmp_path / "x"), env=bad)
    assert r.returncode == 1 and b"401" in r.stderr, r.stderr
    assert _cairn(cairn_bin, "get", h, "-o", str(tmp_path / "no-such-dir" / "x"), env=env).returncode == 5
    unreachable = {**env, "CAIRN_ENDPOINT": f"http://127.0.0.1:{free_port()}"}
    r = _cairn(cairn_bin, "get", h, "-o", str(tmp_path / "x"), "--attempts", "2", env=unreachable)
    assert r.returncode == 1 and b"after 2 attempts" in r.stderr, r.stderr


@BOTH_STORES
def test_ls_and_stat(uploaded, cairn_bin):
    srv, env, up, files = uploaded
    r = _cairn(cairn_bin, "ls", env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.decode().splitlines()
    assert sorted(line.split()[0] for line in lines) == sorted(m["hash"] for m in up.values())
    for line in lines:
        h, size, sha, created = line.split()
        m = next(m for m in up.values() if m["hash"] == h)
        assert int(size) == m["size"] and sha == m["sha256"] and abs(int(created) - time.time()) < 600
    listed = json.loads(_cairn(cairn_bin, "ls", "--json", env=env).stdout)
    assert {f["hash"] for f in listed} == {m["hash"] for m in up.values()}
    stat = json.loads(_cairn(cairn_bin, "stat", "--json", env=env).stdout)
    assert stat["files"] == 2 and stat["bytes"] == sum(m["size"] for m in up.values())
    assert stat["server_dedup_ratio"] > 0.9
    text = _cairn(cairn_bin, "stat", env=env).stdout.decode()
    assert "files: 2" in text


@BOTH_STORES
def test_rm(server, cairn_bin, tmp_path):
    """`cairn rm` takes files out of the token's scope alone and says which; `ls`, `stat` and `get` there lose
    them, another scope keeps them. A second removal, a read token and a repository's token fail with exit 1
    and the server's message; a malformed hash is bad usage."""
    srv = server()
    env = {"CAIRN_ENDPOINT": srv.url, "CAIRN_TOKEN": srv.token(SCOPE, write=True)}
    other = {**env, "CAIRN_TOKEN": srv.token("other", write=True)}
    paths = [write_random(tmp_path / f"{n}.bin", 300_000 + n, seed=980 + n) for n in range(3)]
    up = _put(cairn_bin, env, *paths)
    _put(cairn_bin, other, *paths)
    a, b, c = (f["hash"] for f in up["files"])
    r = _cairn(cairn_bin, "rm", a, b, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().splitlines() == [f"removed {a}", f"removed {b}"]
    assert [line.split()[0] for line in _cairn(cairn_bin, "ls", env=env).stdout.decode().splitlines()] == [c]
    assert json.loads(_cairn(cairn_bin, "stat", "--json", env=env).stdout)["files"] == 1
    assert _cairn(cairn_bin, "get", a, "-o", str(tmp_path / "x"), env=env).returncode == 3
    assert _cairn(cairn_bin, "get", a, "-o", str(tmp_path / "y"), env=other).returncode == 0
    assert (tmp_path / "y").read_bytes() == paths[0].read_bytes()
    # Failures: what removed nothing exits 1 with the server's message; the files after it are still tried.
    r = _cairn(cairn_bin, "rm", a, c, env=env)
    assert r.returncode == 1 and f"file {a} is unknown".encode() in r.stderr and b"404" in r.stderr, r.stderr
    assert r.stdout.decode().splitlines() == [f"removed {c}"]
    r = _cairn(cairn_bin, "rm", a, env={**env, "CAIRN_TOKEN": srv.token("other")})
    assert r.returncode == 1 and b"403" in r.stderr, r.stderr
    assert _cairn(cairn_bin, "rm", "xyz", env=env).returncode == 2
    hub = srv.token("alice", write=True)
    auth = {"Authorization": f"Bearer {hub}"}
    made = http("POST", f"{srv.url}/api/repos/create", headers={**auth, "Content-Type": "application/json"},
                body=json.dumps({"name": "m", "organization": "alice", "type": "model"}).encode())
    assert made.status == 200, made.body
    w = http("GET", f"{srv.url}/api/models/alice/m/xet-write-token/main", headers=auth).json()["accessToken"]
    r = _cairn(cairn_bin, "rm", b, env={**env, "CAIRN_TOKEN": w})
    assert r.returncode == 1 and b"409" in r.stderr and b"repository" in r.stderr, r.stderr
    assert len(_cairn(cairn_bin, "ls", env=other).stdout.decode().splitlines()) == 3


def _put(cairn_bin, env, *paths, extra=()) -> dict:
    r = _cairn(cairn_bin, "put", *map(str, paths), "--json", *extra, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@BOTH_STORES
def test_put_then_every_client_downloads(server, hfx, hubjs, cairn_bin, tmp_path):
    """What `cairn put` uploads (a big file, a directory of small ones packed together, an empty file)
    downloads byte-exact with hf_xet, @huggingface/hub, `cairn get` and curl, and has the file hash hf_xet
    gives the same bytes."""
    srv = server()
    env = {"CAIRN_ENDPOINT": srv.url, "CAIRN_TOKEN": srv.token(SCOPE, write=True)}
    d = tmp_path / "dir"
    (d / "sub").mkdir(parents=True)
    big = write_random(tmp_path / "big.bin", 70 * MiB + 5, seed=960)
    small = [write_random(d / "a.bin", 3000, seed=961), write_random(d / "sub" / "b.bin", 200_000, seed=962)]
    text = d / "c.txt"
    text.write_bytes(b"".join(b"line %d of a text file\n" % i for i in range(100_000)))  # compressible
    empty = d / "empty"
    empty.write_bytes(b"")
    report = _put(cairn_bin, env, big, d)
    got = {Path(f["path"]).name: f for f in report["files"]}
    assert set(got) == {"big.bin", "a.bin", "b.bin", "c.txt", "empty"}, report
    assert report["shard_registered"] and report["xorbs_sent"] == 2, report  # 70 MiB: two xorbs, small ones in
    assert report["xorb_bytes_sent"] < big.stat().st_size + 3 * MiB  # c.txt went compressed
    paths = {"big.bin": big, "a.bin": small[0], "b.bin": small[1], "c.txt": text, "empty": empty}
    for name, f in paths.items():
        assert got[name]["size"] == f.stat().st_size
        assert got[name]["sha256"] == hashlib.sha256(f.read_bytes()).hexdigest()
    # hf_xet gives the same hashes for the same bytes (uploaded to another scope).
    other = hfx.upload(srv.url, srv.token("other", write=True), list(paths.values())).result["files"]
    for m in other:
        assert m["hash"] == got[Path(m["path"]).name]["hash"], m
    rtok = srv.token(SCOPE)
    items = [(got[n]["hash"], got[n]["size"], tmp_path / f"hf-{n}") for n in paths]
    hfx.download(srv.url, rtok, items)
    for n, f in paths.items():
        assert (tmp_path / f"hf-{n}").read_bytes() == f.read_bytes(), n
        out = tmp_path / f"get-{n}"
        assert _cairn(cairn_bin, "get", got[n]["hash"], "-o", str(out), env={**env, "CAIRN_TOKEN": rtok}).returncode == 0
        assert out.read_bytes() == f.read_bytes(), n
    js = hubjs.run("download", ["--cas", srv.url, "--token", rtok, "--hash", got["big.bin"]["hash"],
                                "--size", got["big.bin"]["size"], "--out", tmp_path / "js-big.bin"])
    assert (tmp_path / "js-big.bin").read_bytes() == big.read_bytes(), js.result
    c = subprocess.run(["curl", "-sS", "--fail", "-H", f"Authorization: Bearer {rtok}",
                        f"{srv.url}/v1/files/{got['c.txt']['hash']}"], capture_output=True, timeout=60)
    assert c.returncode == 0 and c.stdout == text.read_bytes()


@BOTH_STORES
def test_put_dedups_a_reupload_and_an_edit(server, cairn_bin, tmp_path):
    srv = server()
    env = {"CAIRN_ENDPOINT": srv.url, "CAIRN_TOKEN": srv.token(SCOPE, write=True)}
    f = write_random(tmp_path / "model.bin", 70 * MiB, seed=970)
    first = _put(cairn_bin, env, f)
    assert first["xorbs_sent"] == 2, first
    # The same bytes again, from a fresh process: the server's dedup answers leave nothing to send.
    again = _put(cairn_bin, env, f)
    assert again["xorbs_sent"] == 0 and again["files"][0]["hash"] == first["files"][0]["hash"], again
    # A 1 % edit in the middle: only the chunks around it go up.
    data = bytearray(f.read_bytes())
    mid = len(data) // 2
    data[mid:mid + len(data) // 100] = write_random(tmp_path / "patch", len(data) // 100, seed=971).read_bytes()
    edited = tmp_path / "edited.bin"
    edited.write_bytes(bytes(data))
    edit = _put(cairn_bin, env, edited)
    assert 0 < edit["xorb_bytes_sent"] < len(data) // 20, edit  # the 0.7 MiB edit, a chunk or two around it
    out = tmp_path / "back.bin"
    assert _cairn(cairn_bin, "get", edit["files"][0]["hash"], "-o", str(out), env=env).returncode == 0
    assert out.read_bytes() == bytes(data)


def test_put_errors(server, cairn_bin, tmp_path):
    srv = server()
    env = {"CAIRN_ENDPOINT": srv.url, "CAIRN_TOKEN": srv.token(SCOPE)}  # read only
    f = write_random(tmp_path / "x.bin", 1000, seed=972)
    r = _cairn(cairn_bin, "put", str(f), env=env)
    assert r.returncode == 1 and b"403" in r.stderr, r.stderr
    r = _cairn(cairn_bin, "put", str(tmp_path / "missing"), env={**env, "CAIRN_TOKEN": srv.token(SCOPE, write=True)})
    assert r.returncode == 5 and b"missing" in r.stderr, r.stderr
    assert _cairn(cairn_bin, "put", str(f)).returncode == 2  # no endpoint

"""cairn on a shared PostgreSQL index, driven by the stock client hf_xet 1.8.0: PostgreSQL restarting in the
middle of an upload, and two `cairn serve` nodes on one database (and one data directory or one S3 bucket for
the blobs) receiving the same uploads at the same moment. The rest of the interop suite runs on PostgreSQL
too (every test, once per deployment: conftest.BACKENDS)."""

from __future__ import annotations

import subprocess
import time

import pytest

from common import Background, MiB, assert_same_file, http, write_random

SCOPE = "interop"


def _gauge(srv, name: str) -> float:
    return next(v for n, _, v in srv.metrics() if n == name)


@pytest.mark.backends("postgres")
def test_postgres_restart_mid_upload(server, hfx, own_postgres, tmp_path):
    """PostgreSQL goes away while an upload is in flight: requests that need it answer 503 (the client
    retries), /readyz says so, and once it is back the upload completes and downloads byte-exact, without
    restarting cairn."""
    files = [write_random(tmp_path / f"f{i}.bin", 70 * MiB, seed=300 + i) for i in range(3)]
    postgres = own_postgres
    srv = server(env={"CAIRN_INDEX": postgres.create_database()})
    tok = srv.token(SCOPE, write=True)
    assert http("GET", f"{srv.url}/readyz").status == 200
    # The stock client retries a 503 with jittered back-off (by default 5 attempts over up to minutes); the
    # suite's other tests make it give up at once. Here: many quick attempts, so that it outlasts a PostgreSQL
    # restart on a loaded machine (observed: 30 attempts with a 1 s base span under a second) without waiting
    # long once PostgreSQL is back.
    retry = {"HF_XET_CLIENT_RETRY_MAX_ATTEMPTS": "1000", "HF_XET_CLIENT_RETRY_BASE_DELAY": "1s",
             "HF_XET_CLIENT_RETRY_MAX_DURATION": "120s"}

    uploader = Background(lambda: hfx.upload(srv.url, tok, files, env=retry))
    # Cut the database once the first xorb is stored, and keep it away for a few seconds.
    srv.await_requests("POST", "xorb_upload", status="2", timeout=60)
    cut = time.monotonic()
    postgres.stop()
    try:
        down = http("GET", f"{srv.url}/readyz")
        assert down.status == 503, down.body
        assert b"index" in down.body, down.body
        time.sleep(2)
    finally:
        postgres.restart()
    outage = time.monotonic() - cut
    up = uploader.result(timeout=300, context=f" (PostgreSQL was away for {outage:.1f} s)")
    assert http("GET", f"{srv.url}/readyz").status == 200
    refused = srv.requests_count("POST", status="503")
    assert refused >= 1, f"no request met the outage (the test proved nothing)\n{srv.requests_table()}"
    meta = {f["path"]: f for f in up.result["files"]}
    items = [(meta[str(f)]["hash"], meta[str(f)]["size"], tmp_path / f"back-{f.name}") for f in files]
    hfx.download(srv.url, tok, items)
    for f in files:
        assert_same_file(tmp_path / f"back-{f.name}", f, meta[str(f)]["sha256"])


@pytest.mark.backends("postgres", "s3")
def test_two_nodes_same_uploads_at_once(server, hfx, tmp_path):
    """Two nodes share one PostgreSQL index and one blob store (a data directory, or a SeaweedFS bucket). The
    same files go to both at the same moment from two clients: both succeed, each xorb and file is stored
    once, a token minted through one node works on the other, and each node serves what the other received."""
    files = [write_random(tmp_path / f"s{i}.bin", 40 * MiB, seed=400 + i) for i in range(2)]
    a = server()
    b = server(data_dir=a.data_dir)  # the same data directory: the same database
    tok = a.token(SCOPE, write=True)  # minted with the key in the database: valid on both nodes
    uploads = {n: Background(lambda s=s: hfx.upload(s.url, tok, files)) for n, s in (("a", a), ("b", b))}
    runs = {n: u.result(timeout=300, context=f" (the upload through node {n})") for n, u in uploads.items()}
    hashes = {n: sorted((f["path"], f["hash"]) for f in r.result["files"]) for n, r in runs.items()}
    assert hashes["a"] == hashes["b"]
    # One copy of everything, whichever node stored it; both nodes count the same.
    for srv in (a, b):
        assert _gauge(srv, "cairn_stored_files") == len(files)
        assert _gauge(srv, "cairn_file_bytes") == sum(f.stat().st_size for f in files)
    assert _gauge(a, "cairn_stored_xorbs") == _gauge(b, "cairn_stored_xorbs")
    assert _gauge(a, "cairn_stored_unpacked_bytes") <= sum(f.stat().st_size for f in files) * 1.01
    # Each node serves the files to a client that talks only to it.
    for srv in (a, b):
        meta = {f["path"]: f for f in runs["a" if srv is b else "b"].result["files"]}
        items = [(meta[str(f)]["hash"], meta[str(f)]["size"], tmp_path / f"{srv.port}-{f.name}") for f in files]
        hfx.download(srv.url, tok, items)
        for f in files:
            assert_same_file(tmp_path / f"{srv.port}-{f.name}", f, meta[str(f)]["sha256"])


def test_bad_or_unreachable_index_is_one_clear_error(cairn_bin, tmp_path):
    """`cairn serve` refuses to start on an index it cannot use, with one message naming the setting, never
    the password: exit 2 for a URL that is not one, 1 for a server that does not answer."""
    env = {"PATH": "/usr/bin:/bin", "PGCONNECT_TIMEOUT": "3"}
    bad = subprocess.run([cairn_bin, "serve", "--data", str(tmp_path / "d"), "--index", "mysql://u:hunter2@db/x"],
                         capture_output=True, text=True, timeout=30, env=env)
    assert bad.returncode == 2, bad
    assert "--index" in bad.stderr and "hunter2" not in bad.stderr, bad.stderr
    down = subprocess.run([cairn_bin, "serve", "--data", str(tmp_path / "d"), "--listen", "127.0.0.1:0",
                           "--index", "postgres://cairn:hunter2@127.0.0.1:1/cairn"],
                          capture_output=True, text=True, timeout=30, env=env)
    assert down.returncode == 1, down
    assert "CAIRN_INDEX" in down.stderr and "127.0.0.1:1" in down.stderr, down.stderr
    assert "hunter2" not in down.stderr + down.stdout, down.stderr
    assert len(down.stderr.strip().splitlines()) == 1, down.stderr

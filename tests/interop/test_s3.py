"""Several `cairn serve` nodes on one PostgreSQL index and one SeaweedFS bucket behave as one server, driven by
the stock client hf_xet 1.8.0: three nodes behind a load balancer, a node killed with SIGKILL in the middle of
uploads while the client carries on against the others, and the store itself going away during uploads and
downloads. (The rest of the interop suite runs on PostgreSQL + SeaweedFS too, in both transfer modes.)"""

from __future__ import annotations

import subprocess
import time

import pytest

from common import Background, MiB, assert_same_file, free_port, http, write_random, xet_hex
from proxies import TcpForwarder

SCOPE = "interop"
# hf_xet's retries, long enough to outlast a node or the store going away on a loaded machine (the suite's
# other tests make it give up at once).
RETRY = {"HF_XET_CLIENT_RETRY_MAX_ATTEMPTS": "1000", "HF_XET_CLIENT_RETRY_BASE_DELAY": "1s",
         "HF_XET_CLIENT_RETRY_MAX_DURATION": "120s"}


def _store_prefix(srv) -> tuple[str, str]:
    """(bucket, key prefix) of a node's CAIRN_STORE (s3://BUCKET/PREFIX/)."""
    bucket, _, prefix = srv.extra_env["CAIRN_STORE"][len("s3://"):].partition("/")
    return bucket, prefix if prefix.endswith("/") else prefix + "/"


def _indexed(srv, table: str) -> set[str]:
    """Xet hex of every hash in an index table (PostgreSQL, through psql)."""
    r = subprocess.run(["psql", "-At", srv.extra_env["CAIRN_INDEX"], "-c", f"SELECT encode(hash, 'hex') FROM {table}"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return {xet_hex(line) for line in r.stdout.split()}


def _assert_index_objects_stored(srv, seaweedfs) -> None:
    """Every xorb and shard the index names is an object in the store."""
    bucket, prefix = _store_prefix(srv)
    keys = seaweedfs.list_keys(bucket, prefix)
    for table, kind in (("xorbs", "xorbs"), ("shards", "shards")):
        named = _indexed(srv, table)
        assert named, f"the index names no {table}: the test proved nothing"
        missing = {h for h in named if f"{prefix}{kind}/{h}" not in keys}
        assert not missing, f"{len(missing)} of {len(named)} indexed {table} are not in the store: {sorted(missing)[:5]}"


def _download_all(hfx, srv, tok, uploaded: dict, tmp_path, tag: str, **kw) -> None:
    items = [(m["hash"], m["size"], tmp_path / f"{tag}-{name}") for name, (m, _) in uploaded.items()]
    hfx.download(srv.url, tok, items, **kw)
    for name, (m, original) in uploaded.items():
        assert_same_file(tmp_path / f"{tag}-{name}", original, m["sha256"])


@pytest.mark.backends("s3")
def test_three_nodes_upload_through_one_download_through_another(server, hfx, tmp_path):
    """Any node answers any request: what one node received, the other two serve, with a token minted once."""
    files = [write_random(tmp_path / f"t{i}.bin", 20 * MiB + i, seed=500 + i) for i in range(2)]
    a = server()
    b = server(data_dir=a.data_dir)  # the same data directory: the same database and bucket prefix
    c = server(data_dir=a.data_dir)
    tok = b.token(SCOPE, write=True)
    up = hfx.upload(a.url, tok, files).result["files"]
    uploaded = {f.name: (next(m for m in up if m["path"] == str(f)), f) for f in files}
    for srv, tag in ((b, "b"), (c, "c")):
        _download_all(hfx, srv, tok, uploaded, tmp_path, tag)
    # Each node reads the same totals from the shared index.
    for srv in (a, b, c):
        stored = next(v for n, _, v in srv.metrics() if n == "cairn_stored_files")
        assert stored == len(files)


@pytest.mark.backends("s3")
def test_node_killed_mid_upload(server, hfx, seaweedfs, tmp_path):
    """Three nodes behind a load balancer (every node's public URL); one is killed with SIGKILL while uploads go
    on. The client's failed requests are retried against the other nodes; afterwards every file the client saw
    committed downloads byte-exact from every node (the killed one restarted), and every object the index names
    is in the store."""
    ports = [free_port() for _ in range(3)]
    lb = TcpForwarder(ports)
    try:
        first = server(port=ports[0], public_url=lb.url)
        nodes = [first] + [server(port=p, public_url=lb.url, data_dir=first.data_dir) for p in ports[1:]]
        tok = first.token(SCOPE, write=True)
        files = [write_random(tmp_path / f"k{i}.bin", 24 * MiB + i, seed=600 + i) for i in range(4)]

        def upload_all() -> dict:
            uploaded = {}
            for f in files:  # one commit per file: each success is a file the client saw committed
                uploaded[f.name] = (hfx.upload(lb.url, tok, [f], env=RETRY).result["files"][0], f)
            return uploaded

        uploader = Background(upload_all)
        victim = nodes[0]
        victim.await_requests("POST", "xorb_upload", status="2", timeout=120)
        assert victim.requests_count("POST", "xorb_upload", status="2") >= 1, "no xorb reached the node to kill"
        victim.kill()  # SIGKILL, in the middle of the uploads
        uploaded = uploader.result(timeout=600, context=" (the uploads after the node was killed)")
        assert len(uploaded) == len(files)
        victim.start()
        for srv in nodes:
            _download_all(hfx, srv, tok, uploaded, tmp_path, f"n{srv.port}")
        _assert_index_objects_stored(nodes[1], seaweedfs)
        assert min(lb.per_target[p] for p in ports[1:]) >= 1, f"the balancer used only some nodes: {lb.per_target}"
    finally:
        lb.close()


@pytest.mark.backends("s3")
def test_store_outage_during_uploads_and_downloads(server, hfx, seaweedfs, tmp_path):
    """SeaweedFS goes away while an upload is in flight, and again during a download: requests that need it
    answer 503 with Retry-After (the client retries), /readyz names the store, and once it is back everything
    completes without a cairn restart; nothing acknowledged is lost."""
    files = [write_random(tmp_path / f"o{i}.bin", 40 * MiB + i, seed=700 + i) for i in range(3)]
    srv = server()
    tok = srv.token(SCOPE, write=True)
    assert http("GET", f"{srv.url}/readyz").status == 200

    # 1. Upload.
    uploader = Background(lambda: hfx.upload(srv.url, tok, files, env=RETRY))
    srv.await_requests("POST", "xorb_upload", status="2", timeout=60)
    seaweedfs.stop()
    try:
        down = http("GET", f"{srv.url}/readyz")
        assert down.status == 503 and b"store" in down.body, (down.status, down.body)
        time.sleep(3)
    finally:
        seaweedfs.restart()
    up = uploader.result(timeout=300, context=" (the upload after the store came back)").result["files"]
    assert srv.requests_count("POST", status="503") >= 1, f"no upload met the outage\n{srv.requests_table()}"
    uploaded = {f.name: (next(m for m in up if m["path"] == str(f)), f) for f in files}

    # 2. A transfer while the store is down: 503 with Retry-After, before any byte of the body.
    meta = uploaded[files[0].name][0]
    rec = srv.get(f"/v2/reconstructions/{meta['hash']}", token=tok).json()
    entry = next(iter(rec["xorbs"].values()))[0]
    b = entry["ranges"][0]["bytes"]
    seaweedfs.stop()
    try:
        t = http("GET", entry["url"], headers={"Range": f"bytes={b['start']}-{b['end']}"})
        assert t.status == 503, (t.status, t.body[:200])
        assert t.headers.get("retry-after") == "1", t.headers
    finally:
        seaweedfs.restart()

    # 3. A download in flight when the store goes away.
    items = [(m["hash"], m["size"], tmp_path / f"back-{name}") for name, (m, _) in uploaded.items()]
    env = {**RETRY, "HF_XET_FIXED_DOWNLOAD_CONCURRENCY": "2"}
    transfers_before = srv.requests_count("GET", "transfer", status="2")
    downloader = Background(lambda: hfx.download(srv.url, tok, items, env=env))
    srv.await_requests("GET", "transfer", status="2", at_least=int(transfers_before) + 1)
    seaweedfs.stop()
    time.sleep(2)
    seaweedfs.restart()
    downloader.result(timeout=300, context=" (the download after the store came back)")
    assert srv.requests_count("GET", "transfer", status="503") >= 1, \
        f"no transfer met the outage (the test proved nothing)\n{srv.requests_table()}"
    for name, (m, original) in uploaded.items():
        assert_same_file(tmp_path / f"back-{name}", original, m["sha256"])
    assert http("GET", f"{srv.url}/readyz").status == 200


@pytest.mark.backends("sqlite")
def test_one_box_moves_its_blobs_to_s3(server, hfx, seaweedfs, cairn_bin, tmp_path):
    """`cairn store copy` moves a one-box deployment's blobs from its data directory to a bucket, verified;
    a second run has nothing left to copy; a node on the same index and the bucket serves every file. Then on
    from that bucket to another S3 endpoint, each side with a configuration file of its own."""
    files = [write_random(tmp_path / f"m{i}.bin", 6 * MiB + i, seed=800 + i) for i in range(2)]
    local = server()
    tok = local.token(SCOPE, write=True)
    up = hfx.upload(local.url, tok, files).result["files"]
    uploaded = {f.name: (next(m for m in up if m["path"] == str(f)), f) for f in files}
    local.stop()
    target = f"s3://interop/moved-{local.port}/"
    env = {k: v for k, v in seaweedfs.env(target).items() if k != "CAIRN_STORE"}
    cmd = [cairn_bin, "store", "copy", "--from", f"file:{local.data_dir / 'blobs'}", "--to", target]
    runs = [subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={"PATH": "/usr/bin:/bin", **env})
            for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stdout + r.stderr
        assert "verified:" in r.stdout, r.stdout
    assert ", 0 already there" in runs[0].stdout and "(0 copied now" in runs[1].stdout, runs[0].stdout + runs[1].stdout
    moved = server(data_dir=local.data_dir, env=seaweedfs.env(target))
    _download_all(hfx, moved, tok, uploaded, tmp_path, "moved")
    moved.stop()

    # On to another endpoint: each side's settings in a file of its own (two forwarders stand for two S3
    # services), nothing in the environment.
    port = int(seaweedfs.endpoint.rsplit(":", 1)[1])
    ends = [TcpForwarder([port]), TcpForwarder([port])]
    try:
        configs = []
        for side, end in zip(("from", "to"), ends):
            cfg = tmp_path / f"{side}.toml"
            cfg.write_text(f's3_endpoint = "{end.url}"\ns3_path_style = true\n'
                           f's3_access_key_id = "{seaweedfs.access_key}"\n'
                           f's3_secret_access_key = "{seaweedfs.secret_key}"\n')
            configs.append(cfg)
        second = f"s3://interop/again-{local.port}/"
        r = subprocess.run([cairn_bin, "store", "copy", "--from", target, "--to", second, "--from-config",
                            str(configs[0]), "--to-config", str(configs[1])],
                           capture_output=True, text=True, timeout=300, env={"PATH": "/usr/bin:/bin"})
        assert r.returncode == 0 and "verified:" in r.stdout, r.stdout + r.stderr
        assert ends[0].url in r.stderr and ends[1].url in r.stderr, r.stderr  # "copying A -> B"
        assert all(end.connections >= 1 for end in ends), [end.connections for end in ends]
    finally:
        for end in ends:
            end.close()
    again = server(data_dir=local.data_dir, env=seaweedfs.env(second))
    _download_all(hfx, again, tok, uploaded, tmp_path, "again")


def test_missing_bucket_or_bad_credentials_is_one_clear_error(cairn_bin, seaweedfs, tmp_path):
    """`cairn serve` refuses to start on a store it cannot use, with one line naming the setting and the cause
    (never the secret key), exit 1."""
    cases = [("missing bucket", seaweedfs.env("s3://no-such-bucket/x/"), "does not exist"),
             ("bad credentials", {**seaweedfs.env("s3://interop/x/"), "AWS_SECRET_ACCESS_KEY": "wrong-secret-0123"},
              "access denied"),
             ("no credentials", {k: v for k, v in seaweedfs.env("s3://interop/x/").items()
                                 if not k.startswith("AWS_")}, "AWS_ACCESS_KEY_ID")]
    for name, env, words in cases:
        r = subprocess.run([cairn_bin, "serve", "--data", str(tmp_path / "d"), "--listen", "127.0.0.1:0"],
                           capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin", **env})
        assert r.returncode == 1, (name, r)
        assert "CAIRN_STORE" in r.stderr and words in r.stderr, (name, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, (name, r.stderr)
        assert "wrong-secret-0123" not in r.stderr + r.stdout and seaweedfs.secret_key not in r.stderr, name

"""`cairn serve` driven by the stock Python client hf_xet 1.8.0 (XetSession API, via hf_client.py in subprocesses).

Every download is checked byte for byte and by SHA-256 against the source file and what hf_xet reported at upload.
Route assertions read the server's /metrics (cairn_http_requests_total{route,method,status}); a route matches
when its label contains all the given words (e.g. "v1" + "shard" for /v1/shards).
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest

from common import KiB, MiB, assert_same_file, free_port, http, sha256_file, write_random
from proxies import DelayProxy

SCOPE = "interop"


@pytest.fixture(scope="session")
def size_matrix(tmp_path_factory) -> list[Path]:
    """0 B, 1 B, 7 KiB, 3 MiB and 200 MiB (several 64 MiB xorbs) of pseudo-random data, made once."""
    d = tmp_path_factory.mktemp("sizes")
    sizes = [("empty", 0), ("one", 1), ("7k", 7 * KiB), ("3m", 3 * MiB), ("200m", 200 * MiB)]
    return [write_random(d / f"{name}.bin", n, seed=100 + i) for i, (name, n) in enumerate(sizes)]


def _gauge(srv, name: str) -> float:
    return next(v for n, _, v in srv.metrics() if n == name)


def _by_path(up) -> dict:
    return {f["path"]: f for f in up.result["files"]}


def _check_upload_report(up, files: list[Path]) -> dict:
    got = _by_path(up)
    for f in files:
        meta = got[str(f)]
        assert meta["size"] == f.stat().st_size, meta
        assert len(meta["hash"]) == 64, meta
        if meta["size"] == 0:
            # hf_xet 1.8.0 reports (and stores in the shard) 64 zeros as the SHA-256 of an empty file.
            assert meta["sha256"] in ("0" * 64, sha256_file(f)), meta
        else:
            assert meta["sha256"] == sha256_file(f), meta
    return got


def _sha(meta: dict) -> str | None:
    """The SHA-256 a download must have, as reported by the uploader (None for empty files, see above)."""
    return meta["sha256"] if meta["size"] else None


def _roundtrip(hfx, srv, tok, files: list[Path], dest: Path, *, up_env=None, down_env=None, cache=None) -> dict:
    up = hfx.upload(srv.url, tok, files, env=up_env, cache=cache)
    meta = _check_upload_report(up, files)
    dest.mkdir(parents=True, exist_ok=True)
    items = [(meta[str(f)]["hash"], meta[str(f)]["size"], dest / f.name) for f in files]
    hfx.download(srv.url, tok, items, env=down_env)
    for f in files:
        assert_same_file(dest / f.name, f, _sha(meta[str(f)]))
    return {"upload": up, "meta": meta}


# ---------------------------------------------------------------------------------------------- 1. sizes


def test_roundtrip_sizes(server, hfx, size_matrix, tmp_path):
    srv = server()
    tok = srv.token(SCOPE, write=True)
    r = _roundtrip(hfx, srv, tok, size_matrix, tmp_path / "out")
    dm = r["upload"].result["dedup"]
    assert dm["total_bytes"] == sum(f.stat().st_size for f in size_matrix), dm
    assert dm["xorb_bytes_uploaded"] >= dm["new_bytes"] > 200 * MiB, dm
    # 200 MiB of random data does not fit one xorb (≤ 64 MiB): several xorb POSTs must have succeeded.
    xorbs = srv.requests_count("POST", "xorb_upload", status="200")
    assert xorbs >= 4, f"expected ≥ 4 successful xorb POSTs, got {xorbs}\n{srv.requests_table()}"

    # Size unknown to the client (file_size=None): it reads until the server answers 416 past the end.
    m = r["meta"][str(size_matrix[3])]
    hfx.download(srv.url, tok, [(m["hash"], None, tmp_path / "nosize.bin")])
    assert_same_file(tmp_path / "nosize.bin", size_matrix[3], m["sha256"])

    # A read-only token of the same scope downloads too.
    rtok = srv.token(SCOPE)
    m = r["meta"][str(size_matrix[2])]
    hfx.download(srv.url, rtok, [(m["hash"], m["size"], tmp_path / "ro.bin")])
    assert_same_file(tmp_path / "ro.bin", size_matrix[2], m["sha256"])


# ---------------------------------------------------------------------------------------------- 2. many files


def test_many_files_one_commit(server, hfx, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    rng = random.Random(7)
    files = [write_random(src / f"small-{i:02d}.bin", rng.randrange(1, 48 * KiB), seed=1000 + i) for i in range(20)]
    files += [write_random(src / "medium-a.bin", 5 * MiB + 123, seed=2000),
              write_random(src / "medium-b.bin", 9 * MiB - 77, seed=2001)]
    # Two files with identical content in the same commit: same hash, both downloadable.
    (src / "copy-of-small-03.bin").write_bytes(files[3].read_bytes())
    files.append(src / "copy-of-small-03.bin")

    srv = server()
    tok = srv.token(SCOPE, write=True)
    r = _roundtrip(hfx, srv, tok, files, tmp_path / "out")
    assert r["meta"][str(files[3])]["hash"] == r["meta"][str(files[-1])]["hash"]
    # One commit: one shard registers all 23 files, and they share xorbs (14.5 MiB fit one 64 MiB xorb; the
    # client packs files together rather than sending a xorb per file).
    table = srv.requests_table()
    assert srv.requests_count("POST", "shard", status="200") == 1, table
    assert srv.requests_count("POST", "shard") == 1, table
    xorbs_posted = srv.requests_count("POST", "xorb_upload", status="200")
    assert 1 <= xorbs_posted < 5, table
    # Every file's reconstruction reads from the xorbs of that one upload, and the small files share them.
    xorbs_named: set[str] = set()
    small_xorbs: set[str] = set()
    for f in files:
        m = r["meta"][str(f)]
        if m["size"] == 0:
            continue
        rec = _reconstruction(srv, tok, m["hash"], m["size"])
        named = {t["hash"] for t in rec["terms"]}
        xorbs_named |= named
        if f.name.startswith("small-"):
            small_xorbs |= named
    assert len(xorbs_named) == xorbs_posted, (xorbs_named, table)
    assert len(small_xorbs) < 20, small_xorbs


# ---------------------------------------------------------------------------------------------- 3./4. dedup


def test_reupload_fresh_cache_uses_global_dedup(server, hfx, tmp_path):
    f = write_random(tmp_path / "dedup.bin", 10 * MiB + 5, seed=31)
    srv = server()
    tok = srv.token(SCOPE, write=True)
    first = hfx.upload(srv.url, tok, [f])
    d1 = first.result["dedup"]
    assert d1["xorb_bytes_uploaded"] > 0 and d1["deduped_bytes_by_global_dedup"] == 0, d1

    # A new client with an empty cache knows nothing locally: only GET /v1/chunks/default/{h} can tell it.
    second = hfx.upload(srv.url, tok, [f])
    d2 = second.result["dedup"]
    assert second.result["files"][0]["hash"] == first.result["files"][0]["hash"]
    assert d2["deduped_bytes_by_global_dedup"] > 0, f"no global dedup on re-upload: {d2}\n{srv.requests_table()}"
    assert d2["xorb_bytes_uploaded"] < d1["xorb_bytes_uploaded"], (d1, d2)
    hits = srv.requests_count("GET", "chunk|dedup", status="200")
    assert hits >= 1, f"no 200 from /v1/chunks\n{srv.requests_table()}"

    meta = second.result["files"][0]
    hfx.download(srv.url, tok, [(meta["hash"], meta["size"], tmp_path / "out.bin")])
    assert_same_file(tmp_path / "out.bin", f, meta["sha256"])

    # /metrics: one distinct file stored once (ratio 1), then a longer copy that shares its chunks.
    def gauge(name):
        return _gauge(srv, name)

    assert gauge("cairn_file_bytes") == f.stat().st_size
    assert 0.99 < gauge("cairn_dedup_ratio") <= 1.0
    longer = tmp_path / "longer.bin"
    longer.write_bytes(f.read_bytes() + write_random(tmp_path / "tail.bin", 1 * MiB, seed=32).read_bytes())
    hfx.upload(srv.url, tok, [longer])
    assert gauge("cairn_file_bytes") == f.stat().st_size + longer.stat().st_size
    assert gauge("cairn_dedup_ratio") > 1.8, srv.metrics()


def test_reupload_fresh_cache_of_several_xorbs_sends_nothing(server, hfx, size_matrix, tmp_path):
    """200 MiB (four xorbs) again from a client with an empty cache. The stock client asks the server about
    one chunk in ~1,024, so a xorb without such a chunk is found only as the neighbour of one that has one:
    the dedup answer must carry the whole uploaded shard. Nothing may be sent or stored twice."""
    f = size_matrix[-1]
    srv = server()
    tok = srv.token(SCOPE, write=True)
    first = hfx.upload(srv.url, tok, [f])
    assert first.result["dedup"]["xorb_bytes_uploaded"] > 0, first.result
    xorbs = _gauge(srv, "cairn_stored_xorbs")
    unpacked = _gauge(srv, "cairn_stored_unpacked_bytes")
    posts = srv.requests_count("POST", "xorb_upload")

    second = hfx.upload(srv.url, tok, [f])
    d2 = second.result["dedup"]
    assert second.result["files"][0]["hash"] == first.result["files"][0]["hash"]
    assert d2["xorb_bytes_uploaded"] == 0, f"xorbs sent again: {d2}\n{srv.requests_table()}"
    assert d2["deduped_bytes"] == d2["total_bytes"] == f.stat().st_size, d2
    assert srv.requests_count("POST", "xorb_upload") == posts, srv.requests_table()
    assert (_gauge(srv, "cairn_stored_xorbs"), _gauge(srv, "cairn_stored_unpacked_bytes")) == (xorbs, unpacked)

    # A copy with ten 64 KiB pieces replaced, from yet another empty cache: only the chunks around each piece
    # are new (each edit touches its own chunks and at most one 128 KiB chunk either side).
    edited = tmp_path / "edited.bin"
    data = bytearray(f.read_bytes())
    rnd = random.Random(77)
    for i in range(10):
        at = len(data) * i // 10 + len(data) // 20
        data[at:at + 64 * KiB] = rnd.randbytes(64 * KiB)
    edited.write_bytes(data)
    third = hfx.upload(srv.url, tok, [edited])
    d3 = third.result["dedup"]
    assert 0 < d3["xorb_bytes_uploaded"] <= 10 * (64 + 2 * 128 + 128) * KiB, f"edited copy: {d3}"


def test_reupload_warm_cache_sends_no_xorbs(server, hfx, tmp_path):
    f = write_random(tmp_path / "warm.bin", 6 * MiB + 99, seed=41)
    srv = server()
    tok = srv.token(SCOPE, write=True)
    cache = hfx.new_cache()
    first = hfx.upload(srv.url, tok, [f], cache=cache)
    assert first.result["dedup"]["xorb_bytes_uploaded"] > 0, first.result
    xorbs_before = srv.requests_count("POST", "xorb_upload")

    second = hfx.upload(srv.url, tok, [f], cache=cache)
    d2 = second.result["dedup"]
    assert second.result["files"][0]["hash"] == first.result["files"][0]["hash"]
    assert d2["xorb_bytes_uploaded"] == 0, d2
    assert d2["deduped_bytes"] == d2["total_bytes"] == f.stat().st_size, d2
    assert srv.requests_count("POST", "xorb_upload") == xorbs_before, srv.requests_table()

    meta = second.result["files"][0]
    hfx.download(srv.url, tok, [(meta["hash"], meta["size"], tmp_path / "out.bin")])
    assert_same_file(tmp_path / "out.bin", f, meta["sha256"])


# ---------------------------------------------------------------------------------------------- 5. ranges


def test_ranged_stream_reads(server, hfx, tmp_path):
    size = 2 * MiB + 4321
    f = write_random(tmp_path / "ranged.bin", size, seed=51)
    data = f.read_bytes()
    srv = server()
    tok = srv.token(SCOPE, write=True)
    meta = hfx.upload(srv.url, tok, [f]).result["files"][0]

    # Chunks average 64 KiB (8 KiB..128 KiB): spans ≥ 128 KiB cross at least one boundary wherever they start.
    spans = [(0, 1), (0, 64 * KiB), (1, 200 * KiB), (65530, 65540 + 128 * KiB), (100_000, 900_000),
             (777_777, 777_778), (size // 2, size // 2 + 300 * KiB), (size - 200 * KiB, size - 3),
             (size - 1, size), (size - 70_000, size), (None, None)]
    ranges = [(s, e, tmp_path / f"range-{i}.bin") for i, (s, e) in enumerate(spans)]
    hfx.stream(srv.url, tok, meta["hash"], meta["size"], ranges)
    for s, e, out in ranges:
        want = data[(s or 0):(size if e is None else e)]
        got = out.read_bytes()
        assert len(got) == len(want), f"range [{s}, {e}): {len(got)} bytes, expected {len(want)}"
        assert got == want, f"range [{s}, {e}) differs"
    # Ranged reads force a reconstruction query with Range; the same spans through forced v1.
    ranges_v1 = [(s, e, tmp_path / f"v1-range-{i}.bin") for i, (s, e) in enumerate(spans[:6])]
    hfx.stream(srv.url, tok, meta["hash"], meta["size"], ranges_v1,
               env={"HF_XET_CLIENT_RECONSTRUCTION_API_VERSION": "1"})
    for s, e, out in ranges_v1:
        assert out.read_bytes() == data[(s or 0):(size if e is None else e)], f"v1 range [{s}, {e})"


# ---------------------------------------------------------------------------------------------- 6. API versions


@pytest.mark.parametrize("shard_v,recon_v", [("2", "2"), ("1", "1"), ("1", "2"), ("2", "1")])
def test_forced_api_versions(server, hfx, tmp_path, shard_v, recon_v):
    files = [write_random(tmp_path / "a.bin", 3 * MiB + 1, seed=61), write_random(tmp_path / "b.bin", 9000, seed=62)]
    srv = server()
    tok = srv.token(SCOPE, write=True)
    _roundtrip(hfx, srv, tok, files, tmp_path / "out",
               up_env={"HF_XET_CLIENT_SHARD_API_VERSION": shard_v},
               down_env={"HF_XET_CLIENT_RECONSTRUCTION_API_VERSION": recon_v})
    other = "1" if shard_v == "2" else "2"
    table = srv.requests_table()
    assert srv.requests_count("POST", f"v{shard_v}", "shard", status="200") >= 1, table
    assert srv.requests_count("POST", f"v{other}", "shard") == 0, table
    other = "1" if recon_v == "2" else "2"
    assert srv.requests_count("GET", f"v{recon_v}", "reconstruction", status="200") >= 1, table
    assert srv.requests_count("GET", f"v{other}", "reconstruction") == 0, table


# ---------------------------------------------------------------------------------------------- 7. compression


@pytest.mark.parametrize("policy", ["none", "lz4", "bg4-lz4"])
def test_compression_policies(server, hfx, tmp_path, policy):
    src = tmp_path / "src"
    src.mkdir()
    rnd = write_random(src / "random.bin", 2 * MiB + 17, seed=71)
    text = src / "text.txt"  # compressible: lz4 / bg4-lz4 really compress it
    r = random.Random(72)
    words = [b"xorb", b"shard", b"chunk", b"cairn", b"merkle", b"blake3"]
    text.write_bytes(b"".join(b"%07d %s %s\n" % (i, r.choice(words), r.choice(words)) for i in range(150_000)))
    counters = src / "counters.bin"  # little-endian u32 counters: what BG4 is for
    counters.write_bytes(b"".join(i.to_bytes(4, "little") for i in range(600_000)))
    files = [rnd, text, counters]

    srv = server()
    tok = srv.token(SCOPE, write=True)
    r = _roundtrip(hfx, srv, tok, files, tmp_path / "out", up_env={"HF_XET_XORB_COMPRESSION_POLICY": policy})
    dm = r["upload"].result["dedup"]
    total = sum(f.stat().st_size for f in files)
    if policy == "none":
        assert dm["xorb_bytes_uploaded"] >= total, dm  # chunk headers on top of the raw bytes
    else:
        assert dm["xorb_bytes_uploaded"] < total, dm
    # The policy as stored: every chunk's header names its compression (0 none, 1 LZ4, 2 byte-grouped LZ4), read
    # from the bytes the server serves for each file.
    schemes: dict[str, set[int]] = {}
    for f in files:
        m = r["meta"][str(f)]
        schemes[f.name] = _chunk_schemes(_reconstruction(srv, tok, m["hash"], m["size"]))
    everything = set().union(*schemes.values())
    if policy == "none":
        assert everything == {0}, schemes
    elif policy == "lz4":
        assert everything <= {0, 1} and 1 in schemes["text.txt"], schemes
    else:
        assert everything <= {0, 2} and 2 in schemes["counters.bin"], schemes
    assert schemes["random.bin"] == {0}, schemes  # incompressible: stored as it is under every policy


def _chunk_schemes(rec: dict) -> set[int]:
    """The compression schemes of every chunk a v2 reconstruction answer's transfer ranges serve."""
    found: set[int] = set()
    for entries in rec["xorbs"].values():
        for entry in entries:
            for rng in entry["ranges"]:
                b = rng["bytes"]
                got = _fetch(entry["url"], b["start"], b["end"])
                assert got.status == 206, got.status
                data, at = got.body, 0
                while at < len(data):  # chunk header: version, compressed size (3 bytes LE), scheme, size (3 LE)
                    assert data[at] == 0, f"chunk header version {data[at]} at {at}"
                    compressed = int.from_bytes(data[at + 1:at + 4], "little")
                    found.add(data[at + 4])
                    at += 8 + compressed
                assert at == len(data), (at, len(data))
    return found


# ---------------------------------------------------------------------------------------------- 7b. upload grants


def test_stock_defaults_ask_a_grant_per_xorb_and_fall_back_at_once(server, hfx, tmp_path):
    """hf_xet 1.8 with its defaults asks POST /v1/xorb-grants/... before each xorb; cairn's 404 is the one answer
    that makes it POST the xorb at once (no retry, no back-off): one grant request per xorb, each answered 404."""
    files = [write_random(tmp_path / "grant.bin", 70 * MiB + 11, seed=77)]  # two xorbs
    srv = server()
    tok = srv.token(SCOPE, write=True)
    _roundtrip(hfx, srv, tok, files, tmp_path / "out")
    table = srv.requests_table()
    xorbs = srv.requests_count("POST", "xorb_upload", status="200")
    assert xorbs >= 2, table
    assert srv.requests_count("POST", "xorb_grant", status="404") == xorbs, table
    assert srv.requests_count("POST", "xorb_grant") == xorbs, table  # nothing but 404s, each asked once


def test_legacy_direct_xorb_upload_asks_no_grant(server, hfx, tmp_path):
    """HF_XET_CLIENT_LEGACY_DIRECT_XORB_UPLOAD=1 (the client's switch back to its pre-1.8 path, which deployments
    that pinned it still use) posts xorbs without asking for a grant: it must keep working."""
    files = [write_random(tmp_path / "legacy.bin", 3 * MiB + 5, seed=78)]
    srv = server()
    tok = srv.token(SCOPE, write=True)
    _roundtrip(hfx, srv, tok, files, tmp_path / "out", up_env={"HF_XET_CLIENT_LEGACY_DIRECT_XORB_UPLOAD": "1"})
    table = srv.requests_table()
    assert srv.requests_count("POST", "xorb_upload", status="200") >= 1, table
    assert srv.requests_count("POST", "xorb_grant") == 0, table


# ---------------------------------------------------------------------------------------------- 8. URL expiry

TTL = 2


def _reconstruction(srv, tok, file_hash: str, size: int, version: int = 2) -> dict:
    r = srv.get(f"/v{version}/reconstructions/{file_hash}", token=tok, headers={"Range": f"bytes=0-{size - 1}"})
    assert r.status == 200, f"v{version} reconstruction: HTTP {r.status} {r.body[:300]!r}"
    return r.json()


def _first_fetch(rec: dict) -> tuple[str, int, int]:
    """(url, first byte, last byte) of the first transfer range, from a v2 or v1 answer."""
    if "xorbs" in rec:
        entry = next(iter(rec["xorbs"].values()))[0]
        b = entry["ranges"][0]["bytes"]
        return entry["url"], b["start"], b["end"]
    entry = next(iter(rec["fetch_info"].values()))[0]
    return entry["url"], entry["url_range"]["start"], entry["url_range"]["end"]


def _fetch(url: str, a: int, b: int):
    return http("GET", url, headers={"Range": f"bytes={a}-{b}"})


def test_transfer_url_expiry_http_level(server, hfx, tmp_path, backend):
    """At the HTTP level with urllib, against real reconstruction answers (TTL = 2 s): a fresh transfer URL
    serves its bytes, a tampered one is 403, the same URL after its expiry is 403, and a new reconstruction
    hands out a URL that works again. Presigned S3 URLs alike (their signature and expiry are the store's
    to check), except that one grants the whole object, not only the answer's ranges."""
    f = write_random(tmp_path / "ttl.bin", 1 * MiB + 3, seed=81)
    srv = server(env={"CAIRN_TRANSFER_URL_TTL": str(TTL)})
    tok = srv.token(SCOPE, write=True)
    meta = hfx.upload(srv.url, tok, [f]).result["files"][0]
    presigned = backend == "s3-presigned"

    for version in (2, 1):
        rec = _reconstruction(srv, tok, meta["hash"], meta["size"], version)
        url, a, b = _first_fetch(rec)
        fresh = _fetch(url, a, b)
        assert fresh.status in (200, 206), f"v{version} fresh URL: HTTP {fresh.status} {fresh.body[:200]!r}"
        assert len(fresh.body) == b - a + 1, (len(fresh.body), a, b)
        base, _, query = url.partition("?")
        params = dict(p.split("=", 1) for p in query.split("&"))
        if presigned:
            assert not url.startswith(srv.public_url + "/"), url
            assert {"X-Amz-Signature", "X-Amz-Expires", "X-Amz-Date"} <= params.keys(), url
            whole = http("GET", url)  # no Range: the whole stored xorb, footer included
            assert whole.status == 200 and len(whole.body) > b, (whole.status, len(whole.body))
            bad_sig = params["X-Amz-Signature"][:-1] + ("0" if params["X-Amz-Signature"][-1] != "0" else "1")
            tampers = [("signature", {**params, "X-Amz-Signature": bad_sig}),
                       ("expiry", {**params, "X-Amz-Expires": "3600"})]
        else:
            assert url.startswith(srv.public_url + "/"), url
            assert {"r", "x", "s"} <= params.keys(), url
            bad_sig = params["s"][:-1] + ("0" if params["s"][-1] != "0" else "1")
            tampers = [("signature", {**params, "s": bad_sig}),
                       ("expiry", {**params, "x": str(int(params["x"]) + 3600)}),
                       ("ranges", {**params, "r": f"0-{b + 1000}"})]
        # Tampering: another signature, a later expiry, a wider range — all refused with 403.
        for name, tampered in tampers:
            u = base + "?" + "&".join(f"{k}={v}" for k, v in tampered.items())
            t = _fetch(u, a, b)
            assert t.status == 403, f"v{version} tampered {name}: HTTP {t.status} (expected 403)"
        time.sleep(TTL + 1.5)
        stale = _fetch(url, a, b)
        assert stale.status == 403, f"v{version} expired URL: HTTP {stale.status} (expected 403)"
        url2, a2, b2 = _first_fetch(_reconstruction(srv, tok, meta["hash"], meta["size"], version))
        again = _fetch(url2, a2, b2)
        assert again.status in (200, 206) and again.body == fresh.body, f"refreshed URL: HTTP {again.status}"


@pytest.mark.backends("sqlite", "postgres", "s3")  # presigned URLs do not pass through the node's public URL
def test_transfer_url_expires_mid_download(server, hfx, tmp_path):
    """hf_xet downloads while its transfer URL expires under it (deterministically): the server's --public-url
    points at a proxy that holds the first transfer request for TTL + 2 s, so it reaches cairn expired → 403 →
    hf_xet re-queries the reconstruction for fresh URLs → the retry passes straight through → success.
    The whole download therefore spans > TTL seconds."""
    f = write_random(tmp_path / "slow.bin", 3 * MiB + 11, seed=82)
    port = free_port()
    proxy = DelayProxy(port, delay=TTL + 2.0, delayed=1)
    try:
        srv = server(env={"CAIRN_TRANSFER_URL_TTL": str(TTL)}, port=port, public_url=proxy.url)
        tok = srv.token(SCOPE, write=True)
        meta = hfx.upload(srv.url, tok, [f]).result["files"][0]
        recon_before = srv.requests_count("GET", "reconstruction")
        t0 = time.monotonic()
        # One connection at a time; one retry allowed (the 403 refresh is the retry).
        env = {"HF_XET_FIXED_DOWNLOAD_CONCURRENCY": "1", "HF_XET_CLIENT_RETRY_MAX_ATTEMPTS": "3"}
        run = hfx.download(srv.url, tok, [(meta["hash"], meta["size"], tmp_path / "out.bin")], env=env)
        elapsed = time.monotonic() - t0
        assert_same_file(tmp_path / "out.bin", f, meta["sha256"])
        assert proxy.delayed_done >= 1, "the proxy never held a transfer request (were transfer URLs proxied?)"
        assert elapsed > TTL, elapsed
        table = srv.requests_table()
        assert srv.requests_count("GET", "transfer", status="403") >= 1, f"no 403 on a transfer URL\n{table}"
        assert srv.requests_count("GET", "reconstruction") >= recon_before + 2, \
            f"hf_xet did not re-query the reconstruction after the 403\n{table}\n{run.log[-3000:]}"
    finally:
        proxy.close()


# ---------------------------------------------------------------------------------------------- 9. restart


def test_server_restart_between_upload_and_download(server, hfx, size_matrix, tmp_path):
    files = size_matrix[1:4]  # 1 B, 7 KiB, 3 MiB
    srv = server()
    tok = srv.token(SCOPE, write=True)
    meta = _check_upload_report(hfx.upload(srv.url, tok, files), files)
    srv.restart()  # SIGTERM (must exit 0), then the same port and data directory
    # The token minted before the restart still works: the signing key lives in the data directory.
    items = [(meta[str(f)]["hash"], meta[str(f)]["size"], tmp_path / f.name) for f in files]
    hfx.download(srv.url, tok, items)
    for f in files:
        assert_same_file(tmp_path / f.name, f, _sha(meta[str(f)]))
    # ...and uploads after the restart dedup against what was stored before it.
    again = hfx.upload(srv.url, tok, [files[2]])
    assert again.result["dedup"]["deduped_bytes_by_global_dedup"] > 0, again.result


# ---------------------------------------------------------------------------------------------- 10. scopes


def test_wrong_scope_cannot_download(server, hfx, tmp_path):
    f = write_random(tmp_path / "private.bin", 200 * KiB, seed=91)
    srv = server()
    tok_a = srv.token("team-a", write=True)
    meta = hfx.upload(srv.url, tok_a, [f]).result["files"][0]

    for tok_b in (srv.token("team-b"), srv.token("team-b", write=True)):
        run = hfx.download(srv.url, tok_b, [(meta["hash"], meta["size"], tmp_path / "stolen.bin")],
                           expect_ok=False)
        assert not run.ok, "a token of another scope downloaded the file"
        text = run.error_text().lower()
        assert "404" in text or "not found" in text, f"error does not say 404 / not found\n{run.describe()}"
        assert not (tmp_path / "stolen.bin").exists() or (tmp_path / "stolen.bin").read_bytes() != f.read_bytes()
    # Raw HTTP: other scope → 404 on both reconstruction versions (the file's existence is not revealed).
    for v in (1, 2):
        r = srv.get(f"/v{v}/reconstructions/{meta['hash']}", token=srv.token("team-b"))
        assert r.status == 404, f"v{v} reconstruction with another scope: HTTP {r.status}"
    # The owner scope's read token still works.
    hfx.download(srv.url, srv.token("team-a"), [(meta["hash"], meta["size"], tmp_path / "mine.bin")])
    assert_same_file(tmp_path / "mine.bin", f, meta["sha256"])


def test_read_only_token_cannot_upload(server, hfx, tmp_path):
    # Small enough for the whole xorb body to sit in socket buffers, so the client reads the 403 even if the
    # server answers before reading the body.
    f = write_random(tmp_path / "ro.bin", 100 * KiB, seed=92)
    srv = server()
    run = hfx.upload(srv.url, srv.token(SCOPE), [f], expect_ok=False)
    assert not run.ok, "a read-only token uploaded a file"
    text = run.error_text().lower()
    assert "403" in text or "forbidden" in text, f"error does not say 403 / forbidden\n{run.describe()}"
    assert srv.requests_count("POST", "xorb", status="403") + srv.requests_count("POST", "shard", status="403") >= 1, \
        srv.requests_table()
    assert srv.requests_count("POST", "xorb_upload", status="200") == 0, srv.requests_table()
    # No token at all → 401 on the same route.
    r = http("POST", f"{srv.url}/v1/shards", body=b"x")
    assert r.status == 401, f"POST /v1/shards without a token: HTTP {r.status}"


# ---------------------------------------------------------------------------------------------- 11. telemetry


def test_telemetry_enabled_upload_and_download(server, hfx, tmp_path):
    f = write_random(tmp_path / "tele.bin", 1 * MiB, seed=111)
    srv = server()
    tok = srv.token(SCOPE, write=True)
    on = {"HF_XET_TELEMETRY_ENABLED": None}  # the client's default: telemetry on
    meta = hfx.upload(srv.url, tok, [f], env=on).result["files"][0]
    hfx.download(srv.url, tok, [(meta["hash"], meta["size"], tmp_path / "out.bin")], env=on)
    assert_same_file(tmp_path / "out.bin", f, meta["sha256"])
    posts = srv.requests_count("POST", "telemetry")
    assert posts >= 1, f"no POST /v1/telemetry reached the server\n{srv.requests_table()}"
    assert srv.requests_count("POST", "telemetry", status="2") == posts, srv.requests_table()
    # Direct: a telemetry body as hf_xet sends it is accepted.
    body = json.dumps({"time": "2026-01-01T00:00:00Z", "event": "xet_upload_summary", "session_id": "s",
                       "user_agent": "interop", "metrics": {"bytes": 1}}).encode()
    r = http("POST", f"{srv.url}/v1/telemetry", body=body,
             headers={"Content-Type": "application/json", "Authorization": f"Bearer {tok}"})
    assert r.status == 200, f"POST /v1/telemetry: HTTP {r.status} {r.body[:200]!r}"

"""`cairn serve` driven by the stock JavaScript client @huggingface/hub 2.17.5 (js/hub_client.mjs), crossed with
hf_xet 1.8.0: files go up with one client and come down with the other.

The JS client speaks /v2/reconstructions only and /v1/shards only (shards with a footer); downloads use XetBlob
with a pre-fetched read token (no Hub); uploads use uploadFiles() to a bucket repo whose two Hub calls are answered
by a fetch stub inside the Node process — all CAS traffic goes to cairn with a cairn write token.
"""

from __future__ import annotations

import random
from pathlib import Path

from common import KiB, MiB, assert_same_file, sha256_file, write_random

SCOPE = "interop-js"


def _text(path: Path, n: int, seed: int) -> Path:
    r = random.Random(seed)
    words = [b"xorb", b"shard", b"chunk", b"cairn", b"merkle", b"blake3", b"bucket"]
    out, i = bytearray(), 0
    while len(out) < n:
        out += b"%07d %s %s\n" % (i, r.choice(words), r.choice(words))
        i += 1
    path.write_bytes(bytes(out[:n]))
    return path


def _cas_requests(run, srv) -> list[dict]:
    return [q for q in run.result.get("requests", []) if q["url"].startswith(srv.url + "/")]


def _js_download(hubjs, srv, tok, meta: dict, out: Path, slices: list[tuple[int, int]], *, serial=False):
    args = ["--cas", srv.url, "--token", tok, "--hash", meta["hash"], "--size", meta["size"], "--out", out]
    outs = []
    for i, (s, e) in enumerate(slices):
        p = out.with_name(f"{out.stem}-slice{i}.bin")
        outs.append((s, e, p))
        args += ["--slice", f"{s}:{e}:{p}"]
    if serial:
        args.append("--serial")
    return hubjs.run("download", args), outs


def _js_upload(hubjs, srv, tok, files: list[Path]) -> tuple[dict, object]:
    run = hubjs.run("upload", ["--cas", srv.url, "--token", tok, *files])
    got = {f["path"]: f for f in run.result["files"]}
    for f in files:
        assert str(f) in got, run.result
        assert got[str(f)]["size"] == f.stat().st_size
        assert len(got[str(f)]["xetHash"]) == 64, got[str(f)]
    # The CAS traffic went to cairn and succeeded; the JS client never uses /v2/shards.
    cas = _cas_requests(run, srv)
    assert any(q["method"] == "POST" and "/v1/xorbs/" in q["url"] and q["status"] == 200 for q in cas), cas
    assert any(q["method"] == "POST" and q["url"].endswith("/v1/shards") and q["status"] == 200 for q in cas), cas
    assert all(q["status"] < 300 or "/v1/chunks/" in q["url"] for q in cas), cas
    assert len(run.result["hubCalls"]) >= 2, run.result["hubCalls"]
    return got, run


def test_js_downloads_what_hf_xet_uploaded(server, hfx, hubjs, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    files = [write_random(src / "random.bin", 5 * MiB + 333, seed=201),
             _text(src / "text.txt", 2 * MiB + 1, seed=202),  # compressible: exercises the JS LZ4/BG4 decoders
             write_random(src / "small.bin", 7 * KiB, seed=203)]
    counters = src / "counters.bin"  # u32 counters: hf_xet's "auto" policy picks BG4-LZ4 for these
    counters.write_bytes(b"".join(i.to_bytes(4, "little") for i in range(400_000)))
    files.append(counters)
    srv = server()
    wtok = srv.token(SCOPE, write=True)
    up = hfx.upload(srv.url, wtok, files)
    meta = {f["path"]: f for f in up.result["files"]}
    rtok = srv.token(SCOPE)  # downloads need only a read token

    for serial in (False, True):
        for f in files:
            m = meta[str(f)]
            size = m["size"]
            slices = [(0, 1), (size - 1, size), (size // 3, min(size, size // 3 + 200 * KiB))]
            if size > 300 * KiB:
                slices += [(65530, 65540 + 128 * KiB), (size - 150 * KiB, size)]
            out = tmp_path / f"js-{'serial' if serial else 'par'}-{f.name}"
            run, outs = _js_download(hubjs, srv, rtok, m, out, slices, serial=serial)
            assert_same_file(out, f, m["sha256"])
            data = f.read_bytes()
            for s, e, p in outs:
                assert p.read_bytes() == data[s:e], f"{f.name} slice [{s}, {e}) differs"
            cas = _cas_requests(run, srv)
            assert any("/v2/reconstructions/" in q["url"] and q["status"] == 200 for q in cas), cas
            # Transfer URLs are fetched from the public URL (= the server here) and answered 200/206.
            transfers = [q for q in run.result["requests"] if "/v2/reconstructions/" not in q["url"]]
            assert transfers and all(q["status"] in (200, 206) for q in transfers), transfers


def test_js_bucket_upload_then_hf_xet_download(server, hfx, hubjs, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    files = [write_random(src / "one.bin", 1, seed=211),
             write_random(src / "seven-k.bin", 7 * KiB, seed=212),
             write_random(src / "three-m.bin", 3 * MiB + 7, seed=213),
             _text(src / "text.txt", 1 * MiB + 5, seed=214)]
    srv = server()
    wtok = srv.token(SCOPE, write=True)
    got, _ = _js_upload(hubjs, srv, wtok, files)

    items = [(got[str(f)]["xetHash"], f.stat().st_size, tmp_path / f"hf-{f.name}") for f in files]
    hfx.download(srv.url, srv.token(SCOPE), items)
    for f in files:
        assert_same_file(tmp_path / f"hf-{f.name}", f, sha256_file(f))
    # Forced v1 reconstruction and a ranged stream on a JS-uploaded file too.
    big = got[str(files[2])]
    size = files[2].stat().st_size
    data = files[2].read_bytes()
    ranges = [(0, 1, tmp_path / "r0"), (70_000, 400_000, tmp_path / "r1"), (size - 1, size, tmp_path / "r2")]
    hfx.stream(srv.url, wtok, big["xetHash"], size, ranges, env={"HF_XET_CLIENT_RECONSTRUCTION_API_VERSION": "1"})
    for s, e, p in ranges:
        assert p.read_bytes() == data[s:e], f"range [{s}, {e})"


def test_js_and_hf_xet_crossing(server, hfx, hubjs, tmp_path):
    """Both directions on one server: bytes uploaded by either client download identically with either client,
    and a JS upload is global-dedup material for hf_xet."""
    src = tmp_path / "src"
    src.mkdir()
    shared = write_random(src / "shared.bin", 4 * MiB + 1234, seed=221)     # uploaded by both
    js_only = write_random(src / "js-only.bin", 6 * MiB + 5, seed=222)      # JS up → hf_xet down + dedup
    hf_only = _text(src / "hf-only.txt", 3 * MiB + 9, seed=223)              # hf_xet up → JS down
    srv = server()
    wtok = srv.token(SCOPE, write=True)
    rtok = srv.token(SCOPE)

    hf_up = hfx.upload(srv.url, wtok, [shared, hf_only])
    hf_meta = {f["path"]: f for f in hf_up.result["files"]}
    js_meta, _ = _js_upload(hubjs, srv, wtok, [shared, js_only])
    # The two clients need NOT agree on the Xet hash of the same bytes: @huggingface/hub 2.17.5 chunks with
    # @huggingface/xetchunk-wasm 0.2.0, which also cuts at chunk lengths 8128..8191 (see tests/oracle/README.md),
    # so its file hash differs whenever such a cut happens. Whichever hash a client registered, both clients
    # must download the same bytes from it.
    for h in {hf_meta[str(shared)]["hash"], js_meta[str(shared)]["xetHash"]}:
        hfx.download(srv.url, rtok, [(h, shared.stat().st_size, tmp_path / f"hf-shared-{h[:8]}.bin")])
        assert_same_file(tmp_path / f"hf-shared-{h[:8]}.bin", shared, sha256_file(shared))
        _js_download(hubjs, srv, rtok, {"hash": h, "size": shared.stat().st_size},
                     tmp_path / f"js-shared-{h[:8]}.bin", [])
        assert_same_file(tmp_path / f"js-shared-{h[:8]}.bin", shared, sha256_file(shared))

    # hf_xet → JS
    m = hf_meta[str(hf_only)]
    _js_download(hubjs, srv, rtok, m, tmp_path / "js-hf-only.txt", [])
    assert_same_file(tmp_path / "js-hf-only.txt", hf_only, m["sha256"])
    # JS → hf_xet
    jm = js_meta[str(js_only)]
    hfx.download(srv.url, rtok, [(jm["xetHash"], jm["size"], tmp_path / "hf-js-only.bin")])
    assert_same_file(tmp_path / "hf-js-only.bin", js_only, sha256_file(js_only))
    # JS → JS
    _js_download(hubjs, srv, rtok, {"hash": jm["xetHash"], "size": jm["size"]}, tmp_path / "js-js-only.bin",
                 [(1000, 2 * MiB)])
    assert_same_file(tmp_path / "js-js-only.bin", js_only)
    assert (tmp_path / "js-js-only-slice0.bin").read_bytes() == js_only.read_bytes()[1000:2 * MiB]

    # A fresh hf_xet client re-uploading what JS uploaded finds it through GET /v1/chunks (JS's shard was
    # indexed for global dedup) and sends fewer xorb bytes than the file size.
    # (The first chunk of this seeded file is the same under both chunkers, so the probe for it hits.)
    again = hfx.upload(srv.url, wtok, [js_only])
    d = again.result["dedup"]
    assert d["deduped_bytes_by_global_dedup"] > 0, d
    assert d["xorb_bytes_uploaded"] < js_only.stat().st_size, d

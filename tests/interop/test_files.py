"""Plain downloads (GET /v1/files) of files uploaded by the stock client hf_xet 1.8.0, read with curl and with
plain HTTP: whole files, ranges at chunk and xorb boundaries, several ranges at once, conditional requests,
download links (minted, expired, tampered), lookups by SHA-256, and a corrupted stored xorb, which is never
served as good data. On local disk and on S3 (SeaweedFS, bytes through the node)."""

from __future__ import annotations

import json
import re
import subprocess
import time

import pytest

from clients import upload_random_files
from common import MiB, http

SCOPE = "interop"
BOTH_STORES = pytest.mark.backends("sqlite", "s3")


def _curl(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["curl", "-sS", *args], capture_output=True, timeout=timeout)


@pytest.fixture
def stored(server, hfx, tmp_path):
    """A node with two files uploaded by hf_xet: 70 MiB (two xorbs) and 3 MiB."""
    srv = server()
    meta, paths = upload_random_files(hfx, srv, SCOPE, tmp_path,
                                      {"big.bin": (70 * MiB + 123, 900), "small.bin": (3 * MiB + 5, 901)})
    return srv, srv.token(SCOPE), meta, {name: p.read_bytes() for name, p in paths.items()}


@BOTH_STORES
def test_curl_downloads_whole_files_and_ranges(stored, tmp_path):
    srv, tok, meta, data = stored
    auth = f"Authorization: Bearer {tok}"
    for name, m in meta.items():
        out = tmp_path / f"curl-{name}"
        r = _curl("--fail", "-H", auth, "-o", str(out), "-D", "-", f"{srv.url}/v1/files/{m['hash']}")
        assert r.returncode == 0, r.stderr
        assert out.read_bytes() == data[name]
        head = r.stdout.decode().lower()
        assert f'etag: "{m["hash"]}"' in head and "accept-ranges: bytes" in head, head
    big = data["big.bin"]
    h = meta["big.bin"]["hash"]
    # Ranges that cut chunks, cross the xorb boundary (64 MiB) and reach the end.
    for first, last in [(0, 0), (1, 65535), (64 * MiB - 10, 64 * MiB + 10), (len(big) - 7, len(big) - 1),
                        (12345, 5 * MiB)]:
        r = http("GET", f"{srv.url}/v1/files/{h}", headers={"Authorization": f"Bearer {tok}",
                                                            "Range": f"bytes={first}-{last}"})
        assert r.status == 206, (first, last, r.status, r.body[:200])
        assert r.headers["content-range"] == f"bytes {first}-{last}/{len(big)}"
        assert r.body == big[first:last + 1], (first, last)
    # A suffix range, and several ranges in one multipart/byteranges answer.
    r = http("GET", f"{srv.url}/v1/files/{h}", headers={"Authorization": f"Bearer {tok}", "Range": "bytes=-100"})
    assert r.status == 206 and r.body == big[-100:]
    r = http("GET", f"{srv.url}/v1/files/{h}",
             headers={"Authorization": f"Bearer {tok}", "Range": "bytes=0-9,64000000-64000999,-5"})
    assert r.status == 206 and r.headers["content-type"].startswith("multipart/byteranges; boundary=")
    boundary = r.headers["content-type"].split("boundary=")[1].encode()
    parts = [p for p in r.body.split(b"--" + boundary) if p.strip() not in (b"", b"--")]
    bodies = [p.split(b"\r\n\r\n", 1)[1][:-2] for p in parts]
    assert bodies == [big[0:10], big[64000000:64001000], big[-5:]]
    # HEAD: the headers of the GET, no body.
    r = http("HEAD", f"{srv.url}/v1/files/{h}", headers={"Authorization": f"Bearer {tok}"})
    assert r.status == 200 and int(r.headers["content-length"]) == len(big) and r.body == b""


@BOTH_STORES
def test_conditional_requests_and_errors(stored):
    srv, tok, meta, data = stored
    h = meta["small.bin"]["hash"]
    url = f"{srv.url}/v1/files/{h}"
    auth = {"Authorization": f"Bearer {tok}"}
    etag = f'"{h}"'
    assert http("GET", url, headers={**auth, "If-None-Match": etag}).status == 304
    assert http("GET", url, headers={**auth, "If-None-Match": f'"{"0" * 64}", W/{etag}'}).status == 304
    assert http("GET", url, headers={**auth, "If-None-Match": f'"{"0" * 64}"'}).status == 200
    # If-Range: the range when the tag matches, the whole file when it does not.
    r = http("GET", url, headers={**auth, "Range": "bytes=0-99", "If-Range": etag})
    assert r.status == 206 and r.body == data["small.bin"][:100]
    r = http("GET", url, headers={**auth, "Range": "bytes=0-99", "If-Range": '"stale"'})
    assert r.status == 200 and r.body == data["small.bin"]
    r = http("GET", url, headers={**auth, "Range": f"bytes={len(data['small.bin'])}-"})
    assert r.status == 416 and r.headers["content-range"] == f"bytes */{len(data['small.bin'])}"
    assert http("GET", url, headers={**auth, "Range": "bytes=oops"}).status == 400
    assert http("GET", url).status == 401  # no token, no link
    assert http("GET", url, headers={"Authorization": f"Bearer {srv.token('other')}"}).status == 404
    assert http("GET", f"{srv.url}/v1/files/{'ab' * 32}", headers=auth).status == 404
    assert http("GET", f"{srv.url}/v1/files/xyz", headers=auth).status == 400
    # By SHA-256: the same bytes, for the scope that stored them only.
    sha = meta["small.bin"]["sha256"]
    r = http("GET", f"{srv.url}/v1/files/by-sha256/{sha}", headers=auth)
    assert r.status == 200 and r.body == data["small.bin"] and r.headers["etag"] == etag
    assert http("GET", f"{srv.url}/v1/files/by-sha256/{sha}",
                headers={"Authorization": f"Bearer {srv.token('other')}"}).status == 404


@BOTH_STORES
def test_links_for_browsers_and_curl(stored, cairn_bin, tmp_path):
    srv, tok, meta, data = stored
    h = meta["small.bin"]["hash"]
    # Minted through the API by a reader of the file...
    r = http("POST", f"{srv.url}/v1/links", headers={"Authorization": f"Bearer {tok}"},
             body=json.dumps({"file_hash": h, "ttl_seconds": 600, "name": "small model.bin"}).encode())
    assert r.status == 201, r.body
    url = json.loads(r.body)["url"]
    assert url.startswith(f"{srv.url}/v1/files/{h}?")
    out = tmp_path / "dl"
    c = _curl("--fail", "-o", str(out), "-D", "-", url)
    assert c.returncode == 0, c.stderr
    assert out.read_bytes() == data["small.bin"]
    assert "content-disposition: attachment; filename=\"small model.bin\"" in c.stdout.decode().lower()
    # ... resumable, as download managers do it.
    part = tmp_path / "partial"
    part.write_bytes(data["small.bin"][:1000])
    c = _curl("--fail", "-C", "-", "-o", str(part), url)
    assert c.returncode == 0, c.stderr
    assert part.read_bytes() == data["small.bin"]
    # Tampered: another file, a longer life, another name, another scope.
    big = meta["big.bin"]["hash"]
    for bad in [url.replace(h, big), re.sub(r"x=(\d+)", lambda m: f"x={int(m[1]) + 1}", url),
                url.replace("name=small", "name=other"), url.replace(f"scope={SCOPE}", "scope=evil")]:
        assert bad != url
        assert http("GET", bad).status == 403, bad
    # Not for files the asker cannot read.
    r = http("POST", f"{srv.url}/v1/links", headers={"Authorization": f"Bearer {srv.token('other')}"},
             body=json.dumps({"file_hash": h}).encode())
    assert r.status == 404
    # From the command line (the node's own secrets), and expired after its time.
    c = subprocess.run([cairn_bin, "link", h, "--data", str(srv.data_dir), "--scope", SCOPE, "--ttl", "2s",
                        "--public-url", srv.url], capture_output=True, text=True, timeout=60, env=srv._env())
    assert c.returncode == 0, c.stderr
    link = c.stdout.strip()
    assert http("GET", link).body == data["small.bin"]
    time.sleep(3)
    assert http("GET", link).status == 403


@pytest.mark.backends("sqlite")
def test_corrupt_xorb_is_never_served(stored):
    srv, tok, meta, data = stored
    h = meta["big.bin"]["hash"]
    xorbs = sorted((srv.data_dir / "blobs").rglob("*"), key=lambda p: p.stat().st_size if p.is_file() else 0)
    victim = xorbs[-1]  # the largest blob: the first 64 MiB xorb of big.bin
    raw = bytearray(victim.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    victim.write_bytes(bytes(raw))
    auth = {"Authorization": f"Bearer {tok}"}
    # The bad chunk is deep inside: the header is out, so the connection is cut and the body comes up short.
    c = _curl("-H", f"Authorization: Bearer {tok}", "-o", "/dev/null", "-w", "%{http_code} %{size_download}",
              f"{srv.url}/v1/files/{h}")
    assert c.returncode != 0, "curl saw a complete body"
    code, got = c.stdout.decode().split()
    assert code == "200" and int(got) < len(data["big.bin"]), c.stdout
    # A range whose first megabyte holds the bad chunk fails before any header. (The flipped byte is about
    # 4 KiB of chunk headers past its place in the file.)
    r = http("GET", f"{srv.url}/v1/files/{h}", headers={**auth, "Range": f"bytes={len(raw) // 2 - 300_000}-"})
    assert r.status == 500 and b"corrupt" in r.body, (r.status, r.body[:300])
    corrupt = next(v for n, _, v in srv.metrics() if n == "cairn_file_corrupt_chunks")
    assert corrupt >= 2
    assert "corrupt" in srv.log()
    # The other file is untouched.
    r = http("GET", f"{srv.url}/v1/files/{meta['small.bin']['hash']}", headers=auth)
    assert r.status == 200 and r.body == data["small.bin"]


@BOTH_STORES
def test_clients_that_stop_reading_hold_no_more_than_the_budget(server, hfx, tmp_path):
    """Eight clients ask for a 70 MiB file and read nothing: read-ahead stops at each stream's budget and the
    server-wide one, instead of buffering the file, and everything is given back when they go."""
    import socket

    srv = server(env={"CAIRN_READAHEAD_STREAM_BYTES": "8MiB", "CAIRN_READAHEAD_TOTAL_BYTES": "24MiB",
                      "CAIRN_READAHEAD_UNIT": "1MiB", "CAIRN_READAHEAD_DEPTH": "16"})
    tok = srv.token(SCOPE, write=True)
    h = upload_random_files(hfx, srv, SCOPE, tmp_path, {"big.bin": (70 * MiB, 902)})[0]["big.bin"]["hash"]
    socks = []
    try:
        for _ in range(8):
            s = socket.create_connection(("127.0.0.1", srv.port))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(f"GET /v1/files/{h} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {tok}\r\n\r\n".encode())
            assert s.recv(4096).startswith(b"HTTP/1.1 200"), "no answer"
            socks.append(s)
        time.sleep(2)
        held = next(v for n, _, v in srv.metrics() if n == "cairn_file_readahead_bytes")
        # The server-wide budget, plus one unit (stored and decoded) that a stream holding nothing may take.
        assert 0 < held <= 24 * MiB + 8 * 2 * MiB, held
    finally:
        for s in socks:
            s.close()
    deadline = time.time() + 30
    while time.time() < deadline:
        if next(v for n, _, v in srv.metrics() if n == "cairn_file_readahead_bytes") == 0:
            break
        time.sleep(0.2)
    assert next(v for n, _, v in srv.metrics() if n == "cairn_file_readahead_bytes") == 0


@BOTH_STORES
def test_listing_pages_through_a_scopes_files(stored):
    srv, tok, meta, data = stored
    auth = {"Authorization": f"Bearer {tok}"}
    r = http("GET", f"{srv.url}/v1/files?limit=1", headers=auth)
    assert r.status == 200, r.body
    first = json.loads(r.body)
    assert first["totals"] == {"files": 2, "bytes": sum(len(d) for d in data.values())}
    assert first["server_dedup_ratio"] > 0 and len(first["files"]) == 1 and first["next_cursor"]
    r = http("GET", f"{srv.url}/v1/files?limit=1&cursor={first['next_cursor']}", headers=auth)
    second = json.loads(r.body)
    assert second["next_cursor"] is None and "totals" not in second
    listed = {f["hash"]: f for f in first["files"] + second["files"]}
    assert set(listed) == {m["hash"] for m in meta.values()}
    for m in meta.values():
        assert listed[m["hash"]]["size"] == m["size"] and listed[m["hash"]]["sha256"] == m["sha256"]
        assert abs(listed[m["hash"]]["created_at"] - time.time()) < 600
    other = json.loads(http("GET", f"{srv.url}/v1/files", headers={"Authorization": f"Bearer {srv.token('x')}"}).body)
    assert other["files"] == [] and other["totals"] == {"files": 0, "bytes": 0}
    assert http("GET", f"{srv.url}/v1/files?cursor=zz", headers=auth).status == 400
    assert http("GET", f"{srv.url}/v1/files?limit=0", headers=auth).status == 400
    assert http("GET", f"{srv.url}/v1/files").status == 401

"""What an attacker's review of the Hub API found (issue 24), against a real `cairn serve`: on the wire (raw
sockets: request smuggling through Transfer-Encoding, headers a stored media type could inject) and with the
stock clients (hf_xet and huggingface_hub: a read token that outlives a repository going private, uploads never
committed). Each test failed at 3cdf82a."""

from __future__ import annotations

import json
import socket

import pytest

from hub_util import Hub
from common import MiB, http, write_random

SQLITE = pytest.mark.backends("sqlite")
BOTH = pytest.mark.backends("sqlite", "s3")


def raw_exchange(port: int, payload: bytes, timeout: float = 10) -> bytes:
    """Sends `payload` on one connection and reads until the server closes it (or the timeout)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(payload)
        chunks = []
        try:
            while data := s.recv(65536):
                chunks.append(data)
        except socket.timeout:
            pass
        return b"".join(chunks)


def responses(raw: bytes) -> list[tuple[int, list[tuple[str, str]]]]:
    """The status and header lines of every response in `raw` (bodies skipped by Content-Length)."""
    out = []
    while raw.startswith(b"HTTP/1.1 "):
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = [tuple(x.strip() for x in ln.split(":", 1)) for ln in lines[1:]]
        out.append((int(lines[0].split()[1]), headers))
        length = next((int(v) for k, v in headers if k.lower() == "content-length"), 0)
        raw = rest[length:]
    return out


@SQLITE
@pytest.mark.parametrize("coding", ["gzip", "xchunked", "identity", "chunked, identity", "gzip, chunked"])
def test_a_transfer_encoding_cairn_cannot_frame_closes_the_connection(server, coding):
    """RFC 9112 §6.3: a request whose final transfer coding is not chunked is answered 400 and the connection
    closed, so the bytes after it never run as a second request; other codings before chunked: 501."""
    srv = server()
    smuggled = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    payload = (f"POST /api/validate-yaml HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: {coding}\r\n"
               f"Content-Type: application/json\r\n\r\n").encode() + smuggled
    got = responses(raw_exchange(srv.port, payload))
    assert len(got) == 1, got  # the smuggled request was not answered
    status, headers = got[0]
    assert status == (501 if coding == "gzip, chunked" else 400), got
    assert ("Connection", "close") in headers, headers
    # Chunked alone is still read, and the connection kept.
    ok = raw_exchange(srv.port, b"POST /api/validate-yaml HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                                b"2\r\n{}\r\n0\r\n\r\n" + smuggled, timeout=3)
    assert [s for s, _ in responses(ok)] == [200, 200], ok[:400]


@SQLITE
def test_stored_media_types_never_reach_a_header_raw(server, hub_py, tmp_path):
    """A bucket file's contentType is checked where it enters; what is served carries one Content-Type, one
    Accept-Ranges, nosniff and a sandboxing CSP, and an HTML file is a download, not a page on cairn's origin."""
    srv = server()
    alice = srv.token("alice", write=True)
    auth = {"Authorization": f"Bearer {alice}"}
    assert http("POST", f"{srv.url}/api/buckets/alice/b", headers=auth, body=b"{}").status == 200
    empty = "0" * 64
    bad = "text/plain\r\nX-Injected: x\r\nSet-Cookie: session=probe"
    lines = [{"type": "addFile", "path": p, "xetHash": empty, "contentType": t}
             for p, t in (("evil.txt", bad), ("nl.txt", "text/plain\nX-Injected: x"), ("nul.txt", "text/plain\0x"),
                          ("page.html", "text/html; charset=utf-8"), ("img.svg", "image/svg+xml"),
                          ("plain.txt", "text/plain"))]
    r = http("POST", f"{srv.url}/api/buckets/alice/b/batch", headers=auth,
             body="".join(json.dumps(ln) + "\n" for ln in lines).encode())
    assert r.status == 200, r.body
    assert sorted(f["path"] for f in r.json()["failed"]) == ["evil.txt", "nl.txt", "nul.txt"], r.body
    for path, kind, attachment in (("page.html", "text/html; charset=utf-8", True),
                                   ("img.svg", "image/svg+xml", True), ("plain.txt", "text/plain", False)):
        raw = raw_exchange(srv.port, f"GET /buckets/alice/b/resolve/{path} HTTP/1.1\r\nHost: x\r\n"
                                     f"Connection: close\r\n\r\n".encode())
        (status, headers), = responses(raw)
        assert status == 200, raw[:500]
        names = [k.lower() for k, _ in headers]
        assert len(names) == len(set(names)), headers  # nothing twice
        h = {k.lower(): v for k, v in headers}
        assert h["content-type"] == kind
        assert h["x-content-type-options"] == "nosniff"
        assert h["content-security-policy"] == "sandbox; default-src 'none'"
        assert h.get("content-disposition", "").startswith("attachment") == attachment, headers
        assert b"X-Injected" not in raw and b"Set-Cookie" not in raw


def _upload(hub: Hub, tmp_path, name: str, seed: int) -> str:
    """Commits a large file to alice/m through huggingface_hub (hf_xet); returns its Xet hash."""
    f = write_random(tmp_path / name, 3 * MiB, seed)
    hub.run(f"api.upload_file(path_or_fileobj={str(f)!r}, path_in_repo={name!r}, repo_id='alice/m')")
    r = http("HEAD", f"{hub.server.url}/alice/m/resolve/main/{name}", headers={"Authorization": f"Bearer {hub.token}"})
    assert r.status == 200 and len(r.headers.get("x-xet-hash", "")) == 64, r.headers
    return r.headers["x-xet-hash"]


@BOTH
def test_going_private_cuts_off_read_tokens_fetched_while_public(server, hub_py, tmp_path, hfx):
    """A xet read token anyone could fetch while alice/m was public reads nothing once it is private: not the
    files committed after, not the ones before, not through a link it minted; hf_xet with it fails."""
    srv = server()
    hub = Hub(hub_py, tmp_path / "alice", srv, srv.token("alice", write=True))
    hub.run("api.create_repo('alice/m')")
    before = _upload(hub, tmp_path, "a.bin", 1)
    r = http("GET", f"{srv.url}/api/models/alice/m/xet-read-token/main")
    assert r.status == 200, r.body
    anonymous = r.json()["accessToken"]
    assert [f["hash"] for f in srv.get("/v1/files", token=anonymous).json()["files"]] == [before]
    link = http("POST", f"{srv.url}/v1/links", headers={"Authorization": f"Bearer {anonymous}"},
                body=json.dumps({"file_hash": before, "ttl_seconds": 30 * 86400}).encode())
    assert link.status == 201, link.body
    assert link.json()["expires"] <= r.json()["exp"], link.body  # no longer than the token that minted it
    hub.run("api.update_repo_settings('alice/m', private=True)")
    after = _upload(hub, tmp_path, "b.bin", 2)
    assert srv.get("/v1/files", token=anonymous).json()["files"] == []
    for h in (before, after):
        assert srv.get(f"/v1/files/{h}", token=anonymous).status == 404
        assert srv.get(f"/v2/reconstructions/{h}", token=anonymous).status == 404
    assert http("GET", link.json()["url"]).status == 404
    run = hfx.download(srv.url, anonymous, [(after, 3 * MiB, tmp_path / "stolen.bin")], expect_ok=False)
    assert not run.ok, run.describe()
    stolen = tmp_path / "stolen.bin"  # hf_xet may leave what it opened: none of the file's bytes in it
    assert not stolen.exists() or stolen.read_bytes() != (tmp_path / "b.bin").read_bytes()
    # The owner still reads everything through the Hub.
    got = hub.run("result = hf_hub_download('alice/m', 'b.bin')")
    assert open(got, "rb").read() == open(tmp_path / "b.bin", "rb").read()


@BOTH
def test_an_upload_no_commit_named_is_invisible_to_readers(server, hub_py, tmp_path, hfx):
    """hf_xet uploads with a repository's write token, no commit follows: the repository's read token (anyone's,
    it is public) neither lists nor downloads it; the commit that names it publishes it."""
    srv = server()
    hub = Hub(hub_py, tmp_path / "alice", srv, srv.token("alice", write=True))
    hub.run("api.create_repo('alice/m')")
    w = http("GET", f"{srv.url}/api/models/alice/m/xet-write-token/main", headers={"Authorization": f"Bearer {hub.token}"})
    f = write_random(tmp_path / "secret.bin", 2 * MiB, 7)
    up = hfx.upload(srv.url, w.json()["accessToken"], [f])
    file_hash = up.result["files"][0]["hash"]
    reader = http("GET", f"{srv.url}/api/models/alice/m/xet-read-token/main").json()["accessToken"]
    assert srv.get("/v1/files", token=reader).json()["files"] == []
    assert srv.get(f"/v1/files/{file_hash}", token=reader).status == 404
    run = hfx.download(srv.url, reader, [(file_hash, 2 * MiB, tmp_path / "got.bin")], expect_ok=False)
    assert not run.ok
    hub.run(f"api.upload_file(path_or_fileobj={str(f)!r}, path_in_repo='secret.bin', repo_id='alice/m')")
    assert srv.get(f"/v1/files/{file_hash}", token=reader).status == 200
    hfx.download(srv.url, reader, [(file_hash, 2 * MiB, tmp_path / "got2.bin")])
    assert open(tmp_path / "got2.bin", "rb").read() == open(f, "rb").read()

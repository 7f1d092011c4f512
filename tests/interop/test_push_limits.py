"""What a push and a git-lfs upload may take from a real `cairn serve` before they are refused: a push that
will be refused is answered from its header (no body read), pushes in flight are bounded, a push body goes to
a spool file rather than the heap (the server's anonymous memory measured while 200 MiB arrive), and git-lfs
uploads past max_concurrent_uploads are turned away with 503 and Retry-After before their bodies are read."""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import threading
import time

import pytest

from common import MiB, http

pytestmark = pytest.mark.backends("sqlite")  # limits of the HTTP layer, the same on every backend

PUSH = "application/x-git-receive-pack-request"


def basic(token: str) -> str:
    return "Basic " + base64.b64encode(f"git:{token}".encode()).decode()


def rss_anon(pid: int) -> int:
    """The process's anonymous resident memory (heap, not the page cache a mapped file uses), in bytes."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no RssAnon")


def send_header(port: int, method: str, target: str, headers: dict, length: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    lines = [f"{method} {target} HTTP/1.1", "Host: 127.0.0.1", f"Content-Length: {length}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    return s


def read_answer(s: socket.socket) -> tuple[int, dict]:
    """The status and header of the answer (the socket's 5 s timeout fails the test if none comes)."""
    data = b""
    while b"\r\n\r\n" not in data:
        got = s.recv(65536)
        assert got, f"closed before an answer: {data!r}"
        data += got
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in head[1:])}
    return int(head[0].split()[1]), headers


def create_repo(srv, token: str, name: str) -> None:
    made = http("POST", f"{srv.url}/api/repos/create",
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
                body=json.dumps({"name": name, "organization": "alice", "type": "model"}).encode())
    assert made.status == 200, made


def test_a_push_that_will_be_refused_is_answered_from_its_header(server):
    srv = server()
    write = srv.token("alice", write=True)
    create_repo(srv, write, "model")
    for auth, status in ((None, 401), (basic("garbage"), 401), (basic(srv.token("alice")), 403),
                         (basic(srv.token("bob", write=True)), 403)):
        headers = {"Content-Type": PUSH, **({"Authorization": auth} if auth else {})}
        with send_header(srv.port, "POST", "/alice/model.git/git-receive-pack", headers, 256 * MiB) as s:
            start = time.monotonic()
            got, answer_headers = read_answer(s)
            assert got == status, (auth is None, got)
            assert time.monotonic() - start < 5
            if status == 401:
                assert answer_headers.get("www-authenticate") == 'Basic realm="cairn"'

    # Two anonymous clients that send their 100 MiB bodies anyway: the server answers and closes, holding none.
    pid = srv.proc.pid
    before = rss_anon(pid)

    def anonymous_body() -> None:
        with send_header(srv.port, "POST", "/alice/model.git/git-receive-pack", {"Content-Type": PUSH},
                         100 * MiB) as s:
            block = b"\0" * MiB
            try:
                for _ in range(100):
                    s.sendall(block)
            except OSError:
                pass  # closed by the server after its 401: what is wanted

    threads = [threading.Thread(target=anonymous_body) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert rss_anon(pid) - before < 32 * MiB


def test_a_push_body_is_spooled_not_held(server):
    """200 MiB of push body with a write token: the server's heap grows by far less than the body (it went to
    DATA_DIR/git-push), and the push is answered (an ERR line: the bytes are not a pack) with nothing left in
    the spool directory."""
    srv = server()
    write = srv.token("alice", write=True)
    create_repo(srv, write, "model")
    pid = srv.proc.pid
    before = rss_anon(pid)
    peak = [before]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss_anon(pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    cmd = f"{'0' * 40} {'a' * 40} refs/heads/other\0report-status\n"
    body = f"{len(cmd) + 4:04x}{cmd}0000PACK".encode()
    size = len(body) + 200 * MiB
    try:
        with send_header(srv.port, "POST", "/alice/model.git/git-receive-pack",
                         {"Content-Type": PUSH, "Authorization": basic(write)}, size) as s:
            s.settimeout(60)
            s.sendall(body)
            block = b"\x5a" * MiB
            for _ in range(200):
                s.sendall(block)
            status, _ = read_answer(s)
    finally:
        done.set()
        sampler.join()
    assert status == 200
    assert peak[0] - before < 64 * MiB, f"the heap grew by {(peak[0] - before) / MiB:.0f} MiB"
    assert list((srv.data_dir / "git-push").iterdir()) == []


def test_pushes_in_flight_are_bounded(server):
    srv = server(env={"CAIRN_MAX_CONCURRENT_PUSHES": "1"})
    write = srv.token("alice", write=True)
    create_repo(srv, write, "model")
    headers = {"Content-Type": PUSH, "Authorization": basic(write)}
    # The holder sends half its body first: the gate lets a push slower than 256 KiB/s give way to a new one
    # after a second (preemption), and 4 MiB keeps it above that rate for 16 s, not the one second four bytes
    # gave, which a loaded machine (make test's lanes side by side) once outlasted before the probe's header.
    with send_header(srv.port, "POST", "/alice/model.git/git-receive-pack", headers, 8 * MiB) as holder:
        holder.sendall(b"0000" + b"\0" * (4 * MiB - 4))
        with send_header(srv.port, "POST", "/alice/model.git/git-receive-pack", headers, MiB) as s:
            status, answer_headers = read_answer(s)
            assert status == 503
            assert answer_headers.get("retry-after") == "1"


def test_lfs_uploads_past_the_limit_answer_503(server):
    """With max_concurrent_uploads = 2, a third git-lfs upload while two are in flight is answered 503 with
    Retry-After from its header; once they are done it goes through."""
    srv = server(env={"CAIRN_MAX_CONCURRENT_UPLOADS": "2"})
    write = srv.token("alice", write=True)
    create_repo(srv, write, "model")
    size = 4 * MiB
    objects = []
    for seed in range(3):
        data = bytes([seed + 1]) * size
        objects.append((hashlib.sha256(data).hexdigest(), data))
    batch = http("POST", f"{srv.url}/alice/model.git/info/lfs/objects/batch",
                 headers={"Authorization": basic(write), "Content-Type": "application/vnd.git-lfs+json"},
                 body=json.dumps({"operation": "upload", "transfers": ["basic"],
                                  "objects": [{"oid": oid, "size": size} for oid, _ in objects]}).encode())
    assert batch.status == 200, batch
    hrefs = [o["actions"]["upload"]["href"] for o in json.loads(batch.body)["objects"]]
    targets = [h[len(srv.url):] for h in hrefs]
    # Each holder sends half its body first: the gate lets an upload slower than 256 KiB/s give way to a new one
    # after a second (preemption), and half a body keeps a holder above that rate for 8 s, not the one second
    # 1,000 bytes gave, which a loaded machine (make test's lanes side by side) once outlasted before the probe.
    held = size // 2
    holders = []
    for (_, data), target in zip(objects[:2], targets[:2]):
        s = send_header(srv.port, "PUT", target, {}, size)
        s.sendall(data[:held])
        holders.append(s)
    deadline = time.monotonic() + 5
    status = None
    while time.monotonic() < deadline:  # the two are admitted in the order the server reads them
        with send_header(srv.port, "PUT", targets[2], {}, size) as s:
            status, answer_headers = read_answer(s)
        if status == 503:
            break
        time.sleep(0.05)
    assert status == 503
    assert answer_headers.get("retry-after") == "1"
    for (_, data), s in zip(objects[:2], holders):
        s.settimeout(30)
        s.sendall(data[held:])
        assert read_answer(s)[0] == 200
        s.close()
    assert http("PUT", srv.url + targets[2], body=objects[2][1]).status == 200

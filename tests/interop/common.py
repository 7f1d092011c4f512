"""Shared by every interop module: the repository's paths, sizes, failing a test, threads, HTTP without
proxies, free ports, /metrics, and random files and their comparison."""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import ssl
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest



INTEROP_DIR = Path(__file__).resolve().parent


REPO_ROOT = INTEROP_DIR.parent.parent


ORACLE_DIR = REPO_ROOT / "tests" / "oracle"


HF_CLIENT = INTEROP_DIR / "hf_client.py"


HUB_CLIENT = INTEROP_DIR / "js" / "hub_client.mjs"


HUB_PKG = "@huggingface/hub"


KiB = 1024


MiB = 1024 * 1024


ANSI = re.compile(r"\x1b\[[0-9;]*m")


# urllib must never go through a proxy to reach 127.0.0.1. HTTPS trusts the system's CAs and every TestCa made.
TLS_CONTEXT = ssl.create_default_context()


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                      urllib.request.HTTPSHandler(context=TLS_CONTEXT))


def fail(msg: str) -> None:
    pytest.fail(msg, pytrace=False)


class Background:
    """fn() on a thread of its own. result() waits for it and returns what fn returned, or fails the test with
    what it raised (a client that gave up during an outage), followed by `context`."""

    def __init__(self, fn):
        self._value = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self._thread.start()

    def _run(self, fn) -> None:
        try:
            self._value = fn()
        except BaseException as e:  # noqa: BLE001 — handed to result()
            self._error = e

    def result(self, timeout: float, context: str = ""):
        self._thread.join(timeout)
        if self._thread.is_alive():
            fail(f"still running after {timeout} s{context}")
        if self._error is not None:
            fail(f"{self._error}{context}")
        return self._value


def tail(text: str, n: int = 6000) -> str:
    return text if len(text) <= n else "…" + text[-n:]


def write_random(path: Path, size: int, seed: int) -> Path:
    """`size` pseudo-random (incompressible, non-repeating) bytes from `seed`, written in 1 MiB blocks."""
    import random

    r = random.Random(seed)
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, MiB)
            f.write(r.randbytes(n))
            left -= n
    return path


def sha256_file(path: os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(4 * MiB):
            h.update(block)
    return h.hexdigest()


def assert_same_file(got: os.PathLike, want: os.PathLike, sha256: str | None = None) -> None:
    """Byte equality (streamed) plus the SHA-256 (against `sha256` if given, e.g. what the uploader reported)."""
    got, want = Path(got), Path(want)
    assert got.is_file(), f"{got} was not written"
    gs, ws = got.stat().st_size, want.stat().st_size
    assert gs == ws, f"{got}: {gs} bytes, expected {ws} (as {want})"
    with open(got, "rb") as a, open(want, "rb") as b:
        off = 0
        while True:
            x, y = a.read(4 * MiB), b.read(4 * MiB)
            if x != y:
                i = next((k for k in range(min(len(x), len(y))) if x[k] != y[k]), min(len(x), len(y)))
                raise AssertionError(f"{got} differs from {want} at byte {off + i}")
            if not x:
                break
            off += len(x)
    digest = sha256_file(got)
    assert digest == sha256_file(want)
    if sha256 is not None:
        assert digest == sha256, f"{got}: sha256 {digest}, uploader reported {sha256}"


@dataclass
class HttpResult:
    status: int
    headers: dict
    body: bytes

    def json(self):
        return json.loads(self.body)


def http(method: str, url: str, *, headers: dict | None = None, body: bytes | None = None,
         timeout: float = 30) -> HttpResult:
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with _OPENER.open(req, timeout=timeout) as r:
            return HttpResult(r.status, {k.lower(): v for k, v in r.headers.items()}, r.read())
    except urllib.error.HTTPError as e:
        return HttpResult(e.code, {k.lower(): v for k, v in e.headers.items()}, e.read())


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_metrics(text: str) -> list[tuple[str, dict, float]]:
    """Prometheus text format → [(name, labels, value)]."""
    out = []
    line_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
    label_re = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = line_re.match(line)
        if m:
            out.append((m.group(1), dict(label_re.findall(m.group(2) or "")), float(m.group(3))))
    return out


EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def xet_hex(raw_hex: str) -> str:
    """Xet's hex form of a hash from the hex of its 32 bytes (as the index stores them): each 8-byte word
    little-endian."""
    b = bytes.fromhex(raw_hex)
    return "".join(b[w * 8:(w + 1) * 8][::-1].hex() for w in range(4))

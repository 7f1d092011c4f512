"""Helpers for the stock-client interop suite (imported by conftest.py and the test modules): data and
file comparison, HTTP without proxies, the `cairn serve` process wrapper, the client runners (hf_xet and
@huggingface/hub in subprocesses) and a delaying TCP proxy."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
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


class TestCa:
    """A certificate authority of the test's own (openssl CLI, ECDSA P-256, valid two days) and the server
    certificates it issues for 127.0.0.1 and localhost. Its certificate is trusted by `http()` at once;
    clients are pointed at `ca_pem` (SSL_CERT_FILE, NODE_EXTRA_CA_CERTS)."""

    __test__ = False  # not a test class, despite the name

    def __init__(self, directory: Path, name: str = "cairn test CA"):
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ca_key = self.dir / "ca.key"
        self.ca_pem = self.dir / "ca.pem"
        self._run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                  "-keyout", self.ca_key, "-out", self.ca_pem, "-days", "2", "-subj", f"/CN={name}",
                  "-addext", "basicConstraints=critical,CA:TRUE",
                  "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        TLS_CONTEXT.load_verify_locations(cafile=str(self.ca_pem))
        self.issued = 0

    def _run(self, *args) -> None:
        r = subprocess.run(["openssl", *map(str, args)], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            fail(f"openssl {' '.join(map(str, args))} failed:\n{r.stderr}")

    def issue(self, name: str = "server", common_name: str = "localhost") -> tuple[Path, Path]:
        """A server certificate (leaf, serverAuth, SAN 127.0.0.1 + localhost) and its key: (cert, key)."""
        self.issued += 1
        key, csr, cert = (self.dir / f"{name}.key", self.dir / f"{name}.csr", self.dir / f"{name}.pem")
        ext = self.dir / f"{name}.ext"
        ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=critical,CA:FALSE\n"
                       "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n")
        self._run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                  "-keyout", key, "-out", csr, "-subj", f"/CN={common_name}")
        self._run("x509", "-req", "-in", csr, "-CA", self.ca_pem, "-CAkey", self.ca_key,
                  "-set_serial", str(1000 + self.issued), "-out", cert, "-days", "2", "-extfile", ext)
        return cert, key

    def client_env(self) -> dict:
        """What makes the stock clients trust this CA: OpenSSL and rustls-native-certs read SSL_CERT_FILE,
        Node NODE_EXTRA_CA_CERTS, requests REQUESTS_CA_BUNDLE."""
        ca = str(self.ca_pem)
        return {"SSL_CERT_FILE": ca, "NODE_EXTRA_CA_CERTS": ca, "REQUESTS_CA_BUNDLE": ca, "CURL_CA_BUNDLE": ca}


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


# ---------------------------------------------------------------------------------------------- data helpers


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


def upload_random_files(hfx, srv, scope: str, directory: Path,
                        files: dict[str, tuple[int, int]]) -> tuple[dict, dict[str, Path]]:
    """Writes `files` ({name: (size, seed)}) of random bytes into `directory` and uploads them with hf_xet into
    `scope`: hf_xet's report of each file by name, and the files' paths by name."""
    paths = {name: write_random(directory / name, size, seed) for name, (size, seed) in files.items()}
    up = hfx.upload(srv.url, srv.token(scope, write=True), list(paths.values())).result["files"]
    return {Path(m["path"]).name: m for m in up}, paths


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


# ---------------------------------------------------------------------------------------------- HTTP helpers


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


# ---------------------------------------------------------------------------------------------- no secret in logs


# What a secret looks like in text, whoever made it (a token the server minted itself, a signed URL's MAC).
LEAK_PATTERNS = {
    "a JWT": re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,}"),
    "a bearer credential": re.compile(r"\bBearer\s+[A-Za-z0-9._~+/-]{16,}", re.IGNORECASE),
    "a transfer-URL or link MAC": re.compile(r"[?&]s=[0-9a-f]{32}(?:[0-9a-f]{32})?\b"),
    "an S3 presigned signature": re.compile(r"X-Amz-Signature=[0-9a-f]{16,}", re.IGNORECASE),
    "an S3 credential header": re.compile(r"AWS4-HMAC-SHA256\s+Credential=\S+,\s*SignedHeaders=\S+,\s*Signature="),
    "a password in a URI": re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s/:@]+:(?!\*\*\*@)[^\s/@]+@", re.IGNORECASE),
}


class SecretWatch:
    """The secrets the suite gives cairn or gets from it (tokens minted, signing keys, the S3 secret key,
    PostgreSQL passwords) and the texts cairn writes (each server's log: its stdout and stderr; the other
    commands' stderr). `leaks()` names every secret, and every secret-shaped string (LEAK_PATTERNS), found in
    them. The conftest checks each server's log when it stops and everything at the end of the session."""

    def __init__(self) -> None:
        self.secrets: dict[str, str] = {}  # value -> what it is
        self.logs: set[Path] = set()
        self.texts: list[tuple[str, str]] = []  # (where, text)

    def add_secret(self, what: str, value: str | None) -> None:
        if value and len(value) >= 8:  # shorter strings would match by chance; cairn's secrets are longer
            self.secrets.setdefault(value, what)

    def add_env(self, env: dict) -> None:
        """The secrets in a cairn process's environment."""
        for name in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "CAIRN_S3_SECRET_ACCESS_KEY",
                     "CAIRN_S3_SESSION_TOKEN", "CAIRN_JWT_SECRET", "CAIRN_URL_SECRET", "PGPASSWORD"):
            self.add_secret(name, env.get(name))
        for name in ("CAIRN_JWT_KEYS", "CAIRN_URL_KEYS"):
            for item in (env.get(name) or "").split(","):
                self.add_secret(f"{name} key {item.partition(':')[0]}", item.partition(":")[2].strip())
        m = re.match(r"[a-z]+://[^/:@]+:([^/@]+)@", env.get("CAIRN_INDEX", ""))
        if m:
            self.add_secret("the PostgreSQL password in CAIRN_INDEX", m.group(1))

    def add_log(self, path: Path) -> None:
        self.logs.add(Path(path))

    def add_text(self, where: str, text: str) -> None:
        self.texts.append((where, text))

    def leaks(self, paths=None, texts=None) -> list[str]:
        found = []
        sources = [(str(p), p.read_text(errors="replace")) for p in sorted(paths if paths is not None else self.logs)
                   if p.exists()]
        sources += list(texts if texts is not None else self.texts)
        for where, text in sources:
            for lineno, line in enumerate(text.splitlines(), 1):
                for value, what in self.secrets.items():
                    if value in line:
                        found.append(f"{where}:{lineno}: {what} ({len(value)} characters)")
                for what, pattern in LEAK_PATTERNS.items():
                    if pattern.search(line):
                        found.append(f"{where}:{lineno}: {what}")
        return found


WATCH = SecretWatch()


def index_secrets(data_dir: Path, index: str | None) -> list[tuple[str, str]] | None:
    """The (name, value) rows of a server's secrets table (its signing keys); None while the index does not
    answer (a test that stopped its PostgreSQL)."""
    if index and index.startswith("postgres"):
        r = subprocess.run(["psql", index, "-AtqX", "-F", "\t", "-c", "SELECT name, value FROM secrets"],
                           capture_output=True, text=True, timeout=30, env={**os.environ, "PGCONNECT_TIMEOUT": "5"})
        if r.returncode != 0:
            return None
        return [tuple(line.split("\t", 1)) for line in r.stdout.splitlines() if "\t" in line]
    import sqlite3

    path = index[len("sqlite:"):] if index and index.startswith("sqlite:") else str(data_dir / "index.db")
    if not os.path.exists(path):
        return []
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return list(db.execute("SELECT name, value FROM secrets"))


# ---------------------------------------------------------------------------------------------- the server


class CairnServer:
    """One `cairn serve` process. `restart()` keeps the port and the data directory."""

    def __init__(self, cairn_bin: str, data_dir: Path, log_path: Path, *, env: dict | None = None,
                 args: tuple = (), public_url: str | None = None, port: int | None = None,
                 tls: tuple[Path, Path] | None = None):
        self.bin = cairn_bin
        self.data_dir = data_dir
        self.log_path = log_path
        self.extra_env = dict(env or {})
        self.args = tuple(args)
        if tls:  # (certificate chain, key): HTTPS
            self.args += ("--tls-cert", str(tls[0]), "--tls-key", str(tls[1]))
        self.port = port or free_port()
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.public_url = public_url or self.url
        self.proc: subprocess.Popen | None = None
        self.exit_codes: list[int] = []
        self.keys_read = False  # watch_index_secrets read them once

    # -- lifecycle
    def _env(self) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
        env["CAIRN_LOG_LEVEL"] = "debug"  # where a leak would hide (SecretWatch); a test may ask otherwise
        env.update({k: str(v) for k, v in self.extra_env.items()})
        env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
        return env

    def start(self, timeout: float = 30) -> "CairnServer":
        assert self.proc is None, "already running"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = [self.bin, "serve", "--listen", f"127.0.0.1:{self.port}", "--data", str(self.data_dir),
               "--public-url", self.public_url, *self.args]
        WATCH.add_log(self.log_path)
        WATCH.add_env(self._env())
        log = open(self.log_path, "ab")
        log.write(f"\n=== {' '.join(cmd)}\n".encode())
        log.flush()
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=self._env())
        log.close()
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                code = self.proc.returncode
                self.proc = None
                fail(f"cairn serve exited with {code} before /healthz answered\n--- server log\n{self.log()}")
            try:
                r = http("GET", f"{self.url}/healthz", timeout=2)
                if r.status == 200:
                    self.watch_index_secrets()  # made at the first start
                    return self
                last = f"HTTP {r.status}"
            except OSError as e:
                last = str(e)
            time.sleep(0.05)
        self.kill()
        fail(f"cairn serve: /healthz not 200 within {timeout}s (last: {last})\n--- server log\n{self.log()}")
        return self

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM and wait; the exit status must be 0."""
        if self.proc is None:
            return 0
        proc, self.proc = self.proc, None
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            fail(f"cairn serve did not exit within {timeout}s of SIGTERM\n--- server log\n{self.log()}")
        self.exit_codes.append(code)
        if code != 0:
            fail(f"cairn serve exited with {code} after SIGTERM (expected 0)\n--- server log\n{self.log()}")
        return code

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def restart(self) -> "CairnServer":
        self.stop()
        return self.start()

    def log(self) -> str:
        try:
            return tail(ANSI.sub("", self.log_path.read_text(errors="replace")), 20000)
        except FileNotFoundError:
            return "(no log)"

    # -- tokens and HTTP
    def token(self, scope: str, write: bool = False, ttl: int | None = None) -> str:
        cmd = [self.bin, "token", "--data", str(self.data_dir), "--scope", scope]
        if write:
            cmd.append("--write")
        if ttl is not None:
            cmd += ["--ttl", str(ttl)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30, env=self._env())
        lines = [ln.strip() for ln in r.stdout.splitlines() if ln.strip()]
        if r.returncode != 0 or not lines:
            fail(f"`{' '.join(cmd)}` failed (exit {r.returncode})\n--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}")
        tok = lines[-1]
        if tok.count(".") != 2:
            fail(f"`{' '.join(cmd)}`: last stdout line is not a JWT: {tok!r}")
        WATCH.add_secret(f"a token of {scope}", tok)
        WATCH.add_text(f"`cairn token --scope {scope}` stderr", r.stderr)
        return tok

    def cli(self, *args: str, expect_ok: bool = True, secret_output: bool = False) -> subprocess.CompletedProcess:
        """`cairn ARGS --data DIR` with the server's environment (its index, its settings). Its stderr, and its
        stdout unless that is a credential (`secret_output`: a link), must hold no secret (SecretWatch)."""
        cmd = [self.bin, *args, "--data", str(self.data_dir)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=self._env())
        WATCH.add_text(f"`cairn {' '.join(args)}`", r.stderr if secret_output else r.stdout + r.stderr)
        if args and args[0] == "keys":
            self.watch_index_secrets()
        if expect_ok and r.returncode != 0:
            fail(f"`{' '.join(cmd)}` failed (exit {r.returncode})\n--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}")
        return r

    def watch_index_secrets(self) -> None:
        """Adds the signing keys in the server's index to WATCH: when it starts, after `cairn keys`, and when it
        stops. Fails only if they could never be read."""
        rows = index_secrets(self.data_dir, self._env().get("CAIRN_INDEX"))
        if rows is None and not self.keys_read:
            fail(f"cannot read the signing keys of {self._env().get('CAIRN_INDEX')} to check the logs for them")
        for name, value in rows or []:
            WATCH.add_secret(f"signing key {name}", value)
        self.keys_read = self.keys_read or rows is not None

    def get(self, path: str, *, token: str | None = None, headers: dict | None = None) -> HttpResult:
        h = dict(headers or {})
        if token:
            h["Authorization"] = f"Bearer {token}"
        return http("GET", f"{self.url}{path}", headers=h)

    def metrics(self) -> list[tuple[str, dict, float]]:
        r = http("GET", f"{self.url}/metrics")
        assert r.status == 200, f"/metrics answered {r.status}"
        return parse_metrics(r.body.decode())

    def requests_count(self, method: str, *route_words: str, status: str | None = None) -> float:
        """Sum of cairn_http_requests_total over routes whose label contains every word of `route_words`
        (case-insensitive; "a|b" = either word; e.g. ("v1", "shard") matches "shard_v1" and "/v1/shards") and
        whose status starts with `status`
        ("2" = any 2xx, "403" = exactly 403; None = any)."""
        total = 0.0
        for name, labels, value in self.metrics():
            if name != "cairn_http_requests_total" or labels.get("method", "").upper() != method.upper():
                continue
            route = labels.get("route", "").lower()
            if all(any(alt in route for alt in w.lower().split("|")) for w in route_words) \
                    and labels.get("status", "").startswith(status or ""):
                total += value
        return total

    def await_requests(self, method: str, *route_words: str, status: str | None = None, at_least: int = 1,
                       timeout: float = 60) -> float:
        """Waits until requests_count(...) reaches `at_least` (or the timeout); returns the count."""
        deadline = time.monotonic() + timeout
        while (n := self.requests_count(method, *route_words, status=status)) < at_least and \
                time.monotonic() < deadline:
            time.sleep(0.005)
        return n

    def requests_table(self) -> str:
        return "\n".join(f"{labels}: {v:g}" for n, labels, v in self.metrics() if n == "cairn_http_requests_total")



class _ToolServer:
    """A private server run by one of cairn's test tools (cairn-test-postgres, cairn-test-seaweedfs): the tool
    prints what the server is on its first line, then answers one command per line with "ok ..." or
    "error: ..."; closing its stdin stops the server and removes everything."""

    kind = "server"

    def __init__(self, tool: str):
        self.tool = tool
        self.proc: subprocess.Popen | None = None

    def start(self):
        self.proc = subprocess.Popen([self.tool], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        first = self.proc.stdout.readline().strip()
        if not self._started(first):
            err = self.proc.stderr.read() if self.proc.poll() is not None else ""
            fail(f"{self.tool} did not start {self.kind}: {first!r} {err}")
        return self

    def _started(self, first_line: str) -> bool:
        raise NotImplementedError

    def command(self, line: str) -> str:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()
        if answer != "ok" and not answer.startswith("ok "):
            fail(f"{Path(self.tool).name} {line!r}: {answer!r}")
        return answer[3:]

    def stop(self) -> None:
        self.command("stop")

    def restart(self) -> None:
        self.command("start")

    def close(self) -> None:
        """Stops the server and removes its directory. Teardown is not what the suite tests: a slow one (CI
        once took over 60 s to stop the session's PostgreSQL while other lanes loaded its disk) is waited for
        up to 5 minutes and reported as a warning, and a tool that does not finish by then is killed."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        started = time.monotonic()
        proc.stdin.close()
        try:
            proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        took = time.monotonic() - started
        if took > 30 or proc.returncode != 0:
            import warnings
            warnings.warn(f"{Path(self.tool).name}: teardown took {took:.0f} s, exit {proc.returncode}: "
                          f"{proc.stderr.read()[-2000:]}")


class PostgresServer(_ToolServer):
    """A private PostgreSQL server (cairn-test-postgres): fresh databases on demand."""

    kind = "PostgreSQL"

    def __init__(self, tool: str):
        super().__init__(tool)
        self.uri = ""
        self._next = 0

    def _started(self, first_line: str) -> bool:
        self.uri = first_line
        return first_line.startswith("postgres://")

    def create_database(self) -> str:
        """A fresh database; returns its URI."""
        self._next += 1
        return self.command(f"createdb t{self._next}")


EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def xet_hex(raw_hex: str) -> str:
    """Xet's hex form of a hash from the hex of its 32 bytes (as the index stores them): each 8-byte word
    little-endian."""
    b = bytes.fromhex(raw_hex)
    return "".join(b[w * 8:(w + 1) * 8][::-1].hex() for w in range(4))


class SeaweedServer(_ToolServer):
    """A private SeaweedFS server (cairn-test-seaweedfs): one S3 endpoint with made-up keys, buckets on demand."""

    kind = "SeaweedFS"

    def __init__(self, tool: str):
        super().__init__(tool)
        self.endpoint = self.access_key = self.secret_key = ""

    def _started(self, first_line: str) -> bool:
        parts = first_line.split()
        if len(parts) != 3 or not parts[0].startswith("http://"):
            return False
        self.endpoint, self.access_key, self.secret_key = parts
        return True

    def create_bucket(self, name: str) -> None:
        self.command(f"bucket {name}")

    def list_keys(self, bucket: str, prefix: str) -> set[str]:
        """Every object key under `prefix` (ListObjectsV2, signed by curl as cairn signs)."""
        import re
        import urllib.parse

        keys: set[str] = set()
        token = ""
        while True:
            query = {"list-type": "2", "prefix": prefix}
            if token:
                query["continuation-token"] = token
            qs = "&".join(f"{k}={urllib.parse.quote(v, safe='-_.~')}" for k, v in sorted(query.items()))
            r = subprocess.run(
                ["curl", "-sS", "--fail", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
                 f"{self.access_key}:{self.secret_key}", "-H", "x-amz-content-sha256: " + EMPTY_SHA256,
                 f"{self.endpoint}/{bucket}?{qs}"], capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                fail(f"listing s3://{bucket}/{prefix}: {r.stderr}")
            keys |= set(re.findall(r"<Key>([^<]*)</Key>", r.stdout))
            m = re.search(r"<NextContinuationToken>([^<]*)</NextContinuationToken>", r.stdout)
            if "<IsTruncated>true</IsTruncated>" not in r.stdout or not m:
                return keys
            token = m.group(1)

    def env(self, store_url: str) -> dict:
        """The settings of a cairn node storing its blobs at `store_url` on this server."""
        return {"CAIRN_STORE": store_url, "CAIRN_S3_ENDPOINT": self.endpoint, "CAIRN_S3_PATH_STYLE": "true",
                "AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key}


def pinned(requirement: str) -> str:
    for line in (REPO_ROOT / "tests" / "requirements.txt").read_text().splitlines():
        name, _, ver = line.partition("==")
        if name.strip().lower().replace("-", "_") == requirement:
            return ver.strip()
    fail(f"tests/requirements.txt pins no {requirement}")
    return ""



@dataclass
class ClientRun:
    returncode: int
    result: dict
    stdout: str
    stderr: str
    log: str  # the client's own log (hf_xet: HF_XET_LOG_DEST, ANSI stripped)
    cmd: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and "error" not in self.result

    def error_text(self) -> str:
        """Everything the client said about a failure: message, stderr and its log."""
        return "\n".join([json.dumps(self.result), self.stderr, self.log])

    def describe(self) -> str:
        return (f"exit {self.returncode}: {' '.join(map(str, self.cmd))}\n--- result\n{json.dumps(self.result)}\n"
                f"--- stderr\n{tail(self.stderr, 4000)}\n--- client log\n{tail(self.log, 8000)}")


def _text(b) -> str:
    return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")


def _last_json(stdout: str) -> dict:
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                break
    return {"error": "NoResult", "message": f"no JSON result line on stdout: {stdout[-500:]!r}"}


class HfXet:
    """Runs hf_client.py operations in subprocesses with a fresh, explicit environment.

    `cache`: an HF_XET_CACHE directory to reuse (warm cache); default a fresh one per call.
    `env`: extra variables; a value of None removes a default (e.g. {"HF_XET_TELEMETRY_ENABLED": None}).
    """

    def __init__(self, python: str, workdir: Path):
        self.python = python
        self.workdir = workdir
        self.n = 0

    def new_cache(self) -> Path:
        self.n += 1
        p = self.workdir / f"xet-cache-{self.n}"
        p.mkdir(parents=True)
        return p

    def environment(self, run_dir: Path, cache: Path, env: dict | None) -> dict:
        base = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT") if k in os.environ}
        home = run_dir / "home"
        home.mkdir(exist_ok=True)
        base.update({
            "HOME": str(home),
            "HF_HOME": str(run_dir / "hf-home"),
            "HF_XET_CACHE": str(cache),
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
            "HF_XET_TELEMETRY_ENABLED": "0",
            "HF_XET_CLIENT_RETRY_MAX_ATTEMPTS": "1",
            "HF_XET_CLIENT_RETRY_BASE_DELAY": "100ms",
            "HF_XET_LOG_DEST": str(run_dir / "xet.log"),
            "HF_XET_LOG_FORMAT": "text",
            "RUST_LOG": "info",
            "NO_COLOR": "1",
            "PYTHONUNBUFFERED": "1",
        })
        for k, v in (env or {}).items():
            if v is None:
                base.pop(k, None)
            else:
                base[k] = str(v)
        return base

    def run(self, op: str, endpoint: str, token: str | None, args: list, *, cache: Path | None = None,
            env: dict | None = None, expect_ok: bool = True, timeout: float = 300) -> ClientRun:
        self.n += 1
        run_dir = self.workdir / f"hf-{self.n}-{op}"
        run_dir.mkdir(parents=True)
        cache = cache if cache is not None else self.new_cache()
        cmd = [self.python, str(HF_CLIENT), op, "--endpoint", endpoint, "--token", token or "", *map(str, args)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                               env=self.environment(run_dir, cache, env), cwd=run_dir)
            rc, out, err = r.returncode, r.stdout, r.stderr
        except subprocess.TimeoutExpired as e:
            rc, out, err = -1, _text(e.stdout), f"TIMEOUT after {timeout}s\n{_text(e.stderr)}"
        log_file = run_dir / "xet.log"
        log = ANSI.sub("", log_file.read_text(errors="replace")) if log_file.exists() else ""
        res = ClientRun(rc, _last_json(out), out, err, log, cmd)
        if expect_ok and not res.ok:
            fail(f"hf_xet {op} failed\n{res.describe()}")
        return res

    # -- conveniences
    def upload(self, endpoint: str, token: str | None, files: list, **kw) -> ClientRun:
        return self.run("upload", endpoint, token, [str(f) for f in files], **kw)

    def download(self, endpoint: str, token: str | None, items: list[tuple], **kw) -> ClientRun:
        """items: (hash, size or None, dest)."""
        args = []
        for h, size, dest in items:
            args += [h, "-" if size is None else size, dest]
        return self.run("download", endpoint, token, args, **kw)

    def stream(self, endpoint: str, token: str | None, hash_: str, size: int | None, ranges: list[tuple],
               **kw) -> ClientRun:
        """ranges: (start or None, end-exclusive or None, dest)."""
        args = [hash_, "-" if size is None else size]
        for s, e, dest in ranges:
            args += ["-" if s is None else s, "-" if e is None else e, dest]
        return self.run("stream", endpoint, token, args, **kw)


class HubJs:
    def __init__(self, node: str, workdir: Path):
        self.node = node
        self.workdir = workdir
        self.n = 0

    def run(self, op: str, args: list, *, expect_ok: bool = True, timeout: float = 300,
            env: dict | None = None) -> ClientRun:
        self.n += 1
        run_dir = self.workdir / f"js-{self.n}-{op}"
        run_dir.mkdir(parents=True)
        extra = env
        env = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL", "TMPDIR") if k in os.environ}
        env.update({"HOME": str(run_dir), "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
        env.update(extra or {})
        cmd = [self.node, str(HUB_CLIENT), op, *map(str, args)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=run_dir)
            rc, out, err = r.returncode, r.stdout, r.stderr
        except subprocess.TimeoutExpired as e:
            rc, out, err = -1, _text(e.stdout), f"TIMEOUT after {timeout}s\n{_text(e.stderr)}"
        res = ClientRun(rc, _last_json(out), out, err, "", cmd)
        if expect_ok and not res.ok:
            fail(f"@huggingface/hub {op} failed\n{res.describe()}")
        return res


# ---------------------------------------------------------------------------------------------- a delaying proxy


class TcpForwarder:
    """TCP forwarder 127.0.0.1:<port> → 127.0.0.1:<one of targets>, each connection to the next target in turn,
    skipping targets that refuse (a load balancer in front of several nodes: a node killed is passed over). The
    first `delayed` connections hold the client's first bytes (its request) for `delay` seconds before
    forwarding them; everything else passes straight through."""

    def __init__(self, targets: list[int], delay: float = 0.0, delayed: int = 0):
        self.targets = list(targets)
        self.next_target = 0
        self.per_target = {t: 0 for t in self.targets}
        self.delay = delay
        self.delayed_left = delayed
        self.delayed_done = 0
        self.connections = 0
        self.lock = threading.Lock()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
                hold = self.delayed_left > 0
                if hold:
                    self.delayed_left -= 1
            threading.Thread(target=self._serve, args=(client, hold), daemon=True).start()

    def _connect(self) -> socket.socket | None:
        for _ in range(len(self.targets)):
            with self.lock:
                target = self.targets[self.next_target % len(self.targets)]
                self.next_target += 1
            try:
                upstream = socket.create_connection(("127.0.0.1", target), timeout=5)
                upstream.settimeout(None)
            except OSError:
                continue
            with self.lock:
                self.per_target[target] += 1
            return upstream
        return None

    def _serve(self, client: socket.socket, hold: bool) -> None:
        upstream = self._connect()
        if upstream is None:
            client.close()
            return

        def pump(src, dst, first_delay):
            try:
                first = True
                while True:
                    data = src.recv(256 * 1024)
                    if not data:
                        break
                    if first and first_delay:
                        time.sleep(first_delay)
                        with self.lock:
                            self.delayed_done += 1
                    first = False
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                for s in (src, dst):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        t = threading.Thread(target=pump, args=(upstream, client, 0), daemon=True)
        t.start()
        pump(client, upstream, self.delay if hold else 0)
        t.join(5)
        client.close()
        upstream.close()

    def close(self) -> None:
        self.closed = True
        self.sock.close()


class DelayProxy(TcpForwarder):
    """A TcpForwarder to one target whose first `delayed` connections are held `delay` seconds. Used as the
    server's --public-url so transfer URLs (and only those) go through it."""

    def __init__(self, target_port: int, delay: float, delayed: int = 1):
        super().__init__([target_port], delay, delayed)

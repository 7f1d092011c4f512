"""The processes a test talks to: `cairn serve` (CairnServer), and private PostgreSQL and SeaweedFS servers
(through cairn-test-postgres and cairn-test-seaweedfs); SecretWatch, which checks no secret leaks into logs."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

from common import ANSI, EMPTY_SHA256, fail, free_port, http, HttpResult, parse_metrics, tail


# What a secret looks like in text, whoever made it (a token the server minted itself, a signed URL's MAC).
LEAK_PATTERNS = {
    "a JWT": re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,}"),
    "a person's token": re.compile(r"cairn_[0-9a-f]{16}_[0-9a-f]{64}"),
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

    def cli(self, *args: str, expect_ok: bool = True, secret_output: bool = False,
            stdin: str | None = None) -> subprocess.CompletedProcess:
        """`cairn ARGS --data DIR` with the server's environment (its index, its settings), `stdin` its input.
        Its stderr, and its stdout unless that is a credential (`secret_output`: a link), must hold no secret
        (SecretWatch)."""
        cmd = [self.bin, *args, "--data", str(self.data_dir)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=self._env(), input=stdin)
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

    def get_object(self, bucket: str, key: str) -> bytes:
        """One object's bytes (GetObject, signed by curl as cairn signs)."""
        import urllib.parse

        r = subprocess.run(
            ["curl", "-sS", "--fail", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
             f"{self.access_key}:{self.secret_key}", "-H", "x-amz-content-sha256: " + EMPTY_SHA256,
             f"{self.endpoint}/{bucket}/{urllib.parse.quote(key, safe='/-_.~')}"], capture_output=True, timeout=60)
        if r.returncode != 0:
            fail(f"reading s3://{bucket}/{key}: {r.stderr.decode(errors='replace')}")
        return r.stdout

    def put_object(self, bucket: str, key: str, body: bytes) -> None:
        """Replaces one object (PutObject, signed by curl as cairn signs; the body's SHA-256 signed too)."""
        import hashlib
        import urllib.parse

        r = subprocess.run(
            ["curl", "-sS", "--fail", "-X", "PUT", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
             f"{self.access_key}:{self.secret_key}", "-H",
             "x-amz-content-sha256: " + hashlib.sha256(body).hexdigest(), "--data-binary", "@-",
             f"{self.endpoint}/{bucket}/{urllib.parse.quote(key, safe='/-_.~')}"], input=body, capture_output=True,
            timeout=60)
        if r.returncode != 0:
            fail(f"writing s3://{bucket}/{key}: {r.stderr.decode(errors='replace')}")

    def env(self, store_url: str) -> dict:
        """The settings of a cairn node storing its blobs at `store_url` on this server."""
        return {"CAIRN_STORE": store_url, "CAIRN_S3_ENDPOINT": self.endpoint, "CAIRN_S3_PATH_STYLE": "true",
                "AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key}

"""The stock clients in processes of their own: hf_xet (HfXet, through hf_client.py) and @huggingface/hub
(HubJs, through js/hub_client.mjs), at their pinned versions."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from common import ANSI, fail, HF_CLIENT, HUB_CLIENT, REPO_ROOT, tail, write_random


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
            env: dict | None = None, expect_ok: bool = True, timeout: float = 300,
            wrapper: tuple = ()) -> ClientRun:
        """`wrapper`: a command the client runs under (`("faketime", "-f", "+62d")`: a client whose clock is
        two months ahead)."""
        self.n += 1
        run_dir = self.workdir / f"hf-{self.n}-{op}"
        run_dir.mkdir(parents=True)
        cache = cache if cache is not None else self.new_cache()
        cmd = [*wrapper, self.python, str(HF_CLIENT), op, "--endpoint", endpoint, "--token", token or "",
               *map(str, args)]
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


def upload_random_files(hfx, srv, scope: str, directory: Path,
                        files: dict[str, tuple[int, int]]) -> tuple[dict, dict[str, Path]]:
    """Writes `files` ({name: (size, seed)}) of random bytes into `directory` and uploads them with hf_xet into
    `scope`: hf_xet's report of each file by name, and the files' paths by name."""
    paths = {name: write_random(directory / name, size, seed) for name, (size, seed) in files.items()}
    up = hfx.upload(srv.url, srv.token(scope, write=True), list(paths.values())).result["files"]
    return {Path(m["path"]).name: m for m in up}, paths

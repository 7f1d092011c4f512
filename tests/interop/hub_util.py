"""huggingface_hub (pinned in tests/requirements.txt) and its `hf` CLI pointed at a cairn server.

Each step runs in a process of its own: huggingface_hub reads HF_ENDPOINT when it is imported, and hf_xet its
configuration when a session starts.

  hub.run(code, token=...) runs `code` with `api = HfApi()` and every public name of huggingface_hub in scope;
      `code` sets `result`, which comes back (through JSON). An exception comes back as HubFailure with the
      class name, the message and the HTTP status.
  hub.cli("repos", "create", ...) runs the `hf` command and returns the CompletedProcess (text).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from common import fail, http, tail

_PRELUDE = """
import json, os, sys, traceback
from huggingface_hub import *
from huggingface_hub import HfApi, HfFileSystem
from huggingface_hub.errors import *
api = HfApi()
result = None
try:
{body}
except Exception as e:  # noqa: BLE001 — reported to the test
    resp = getattr(e, "response", None)
    traceback.print_exc()
    print(json.dumps({{"__error__": type(e).__name__, "message": str(e),
                      "status": getattr(resp, "status_code", None)}}))
    sys.exit(3)
print(json.dumps(result, default=str))
"""


class HubFailure(Exception):
    def __init__(self, kind: str, message: str, status: int | None):
        super().__init__(f"{kind} (HTTP {status}): {message}")
        self.kind = kind
        self.message = message
        self.status = status


class Hub:
    """The stock Hub client against `server`, its caches under `workdir` (fresh for every test)."""

    def __init__(self, python: str, workdir: Path, server, token: str | None):
        self.python = python
        self.workdir = workdir
        self.server = server
        self.token = token
        workdir.mkdir(parents=True, exist_ok=True)
        self._n = 0

    def env(self, token: str | None | bool = True, extra: dict | None = None) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE"))}
        env.update({
            "HF_ENDPOINT": self.server.url,
            "HF_HOME": str(self.workdir / "hf-home"),
            "HF_XET_CACHE": str(self.workdir / "xet-cache"),
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HUB_DISABLE_UPDATE_CHECK": "1",
            "HF_HUB_DISABLE_PROGRESS_BARS": "1",
            "HF_XET_TELEMETRY_ENABLED": "0",
            "HF_XET_CLIENT_RETRY_MAX_ATTEMPTS": "2",
            "HF_XET_CLIENT_RETRY_BASE_DELAY": "200ms",
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        })
        tok = self.token if token is True else token
        if tok:
            env["HF_TOKEN"] = tok
        env.update(extra or {})
        return env

    def run(self, code: str, *, token: str | None | bool = True, env: dict | None = None,
            timeout: float = 600):
        self._n += 1
        script = self.workdir / f"step-{self._n}.py"
        script.write_text(_PRELUDE.format(body=textwrap.indent(textwrap.dedent(code).strip() or "pass", "    ")))
        r = subprocess.run([self.python, str(script)], capture_output=True, text=True, timeout=timeout,
                           env=self.env(token, env), cwd=self.workdir)
        lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
        try:
            out = json.loads(lines[-1]) if lines else None
        except json.JSONDecodeError:
            out = None
        if isinstance(out, dict) and "__error__" in out:
            raise HubFailure(out["__error__"], out["message"], out["status"])
        if r.returncode != 0 or not lines:
            fail(f"step {script.name} failed (exit {r.returncode})\n--- code\n{code}\n--- stdout\n{tail(r.stdout)}"
                 f"\n--- stderr\n{tail(r.stderr)}\n--- server log\n{self.server.log()}")
        return out

    def fails(self, code: str, **kw) -> HubFailure:
        """Runs `code`, which must raise; returns what it raised."""
        try:
            got = self.run(code, **kw)
        except HubFailure as e:
            return e
        fail(f"expected a failure, got {got!r}\n--- code\n{code}")
        raise AssertionError  # unreachable

    def cli(self, *args: str, token: str | None | bool = True, env: dict | None = None, check: bool = True,
            timeout: float = 600) -> subprocess.CompletedProcess:
        hf = str(Path(self.python).parent / "hf")
        r = subprocess.run([hf, *args], capture_output=True, text=True, timeout=timeout,
                           env=self.env(token, env), cwd=self.workdir)
        if check and r.returncode != 0:
            fail(f"`hf {' '.join(args)}` failed (exit {r.returncode})\n--- stdout\n{tail(r.stdout)}"
                 f"\n--- stderr\n{tail(r.stderr)}\n--- server log\n{self.server.log()}")
        return r


def hub_python() -> str:
    """The venv's Python, which has the pinned huggingface_hub and hf_xet."""
    root = Path(__file__).resolve().parents[2]
    for py in (sys.executable, str(root / ".venv" / "bin" / "python")):
        r = subprocess.run([py, "-c", "import huggingface_hub, hf_xet"], capture_output=True)
        if r.returncode == 0:
            return py
    fail("huggingface_hub is not importable: run scripts/bootstrap.sh (installs tests/requirements.txt)")
    return ""


def release_python(release: str) -> str:
    """The Python of an older huggingface_hub release's venv (.venv-hub-RELEASE, tests/requirements-hub-*.txt)."""
    py = Path(__file__).resolve().parents[2] / f".venv-hub-{release}" / "bin" / "python"
    if not py.is_file():
        fail(f"{py} is missing: run scripts/bootstrap.sh (installs tests/requirements-hub-{release}.txt)")
    return str(py)


def hub_api(srv, method: str, path: str, token: str | None, body: dict | None = None):
    """One Hub API request to `srv` with a bearer token (None: none) and a JSON body (None: none)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = None
    if body is not None:
        headers["Content-Type"] = "application/json"
        data = json.dumps(body).encode()
    return http(method, f"{srv.url}{path}", headers=headers, body=data)

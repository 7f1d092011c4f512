"""Shared fixtures for the oracle tests (stock Hugging Face implementations vs cairn).

Nothing here skips: a missing tool is a test failure with a message saying how to fix it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:  # so the test modules can import the oracle_* helpers in any import mode
    sys.path.insert(0, _HERE)

from oracle_util import ORACLE_DIR, REPO_ROOT  # noqa: E402

XETCHUNK_PKG = "@huggingface/xetchunk-wasm"


@pytest.fixture(scope="session")
def cairn_bin() -> str:
    path = os.environ.get("CAIRN_BIN")
    if not path:
        pytest.fail("CAIRN_BIN is not set: point it at the cairn binary (make test does this)", pytrace=False)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        pytest.fail(f"CAIRN_BIN={path!r} is not an executable file (build cairn first)", pytrace=False)
    return path


@pytest.fixture(scope="session")
def node_bin() -> str:
    node = shutil.which("node")
    if not node:
        pytest.fail("node not found on PATH: run scripts/bootstrap.sh", pytrace=False)
    wanted = json.loads((ORACLE_DIR / "package.json").read_text())["dependencies"][XETCHUNK_PKG]
    installed_pkg = ORACLE_DIR / "node_modules" / XETCHUNK_PKG / "package.json"
    if not installed_pkg.is_file():
        pytest.fail(f"{XETCHUNK_PKG} is not installed: run `npm ci` in {ORACLE_DIR} (scripts/bootstrap.sh)",
                    pytrace=False)
    got = json.loads(installed_pkg.read_text())["version"]
    if got != wanted:
        pytest.fail(f"{XETCHUNK_PKG} {got} installed, package.json pins {wanted}: run `npm ci` in {ORACLE_DIR}",
                    pytrace=False)
    return node


@pytest.fixture(scope="session")
def hf_xet_python() -> str:
    """A Python interpreter that can import the pinned hf_xet (normally the one running pytest)."""
    want = next(line.split("==", 1)[1].strip() for line in (REPO_ROOT / "tests" / "requirements.txt").read_text()
                .splitlines() if line.lower().replace("-", "_").startswith("hf_xet=="))
    for py in (sys.executable, str(REPO_ROOT / ".venv" / "bin" / "python")):
        if not os.path.exists(py):
            continue
        r = subprocess.run([py, "-c", "import importlib.metadata as m; print(m.version('hf_xet'))"],
                           capture_output=True, text=True)
        if r.returncode == 0:
            got = r.stdout.strip()
            if got != want:
                pytest.fail(f"{py} has hf_xet {got}, tests/requirements.txt pins {want}: run scripts/bootstrap.sh",
                            pytrace=False)
            return py
    pytest.fail("hf_xet is not importable: run scripts/bootstrap.sh (creates .venv from tests/requirements.txt)",
                pytrace=False)

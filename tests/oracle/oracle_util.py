"""Helpers shared by the oracle tests (imported by conftest.py and the test modules)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ORACLE_DIR = Path(__file__).resolve().parent
REPO_ROOT = ORACLE_DIR.parent.parent


def run(cmd: list[str], *, timeout: float = 120, env: dict | None = None, check: bool = True,
        cwd: str | os.PathLike | None = None) -> subprocess.CompletedProcess:
    """Run a command, capturing output; on failure (if check) fail the test with both streams shown."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"timed out after {timeout}s: {' '.join(map(str, cmd))}", pytrace=False)
        raise AssertionError from e  # unreachable
    if check and r.returncode != 0:
        pytest.fail(f"exit {r.returncode}: {' '.join(map(str, cmd))}\n--- stdout\n{r.stdout[-4000:]}\n"
                    f"--- stderr\n{r.stderr[-4000:]}", pytrace=False)
    return r


def json_lines(text: str, what: str) -> list[dict]:
    out = []
    for i, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as e:
            pytest.fail(f"{what}: line {i + 1} is not JSON ({e}): {line[:300]!r}", pytrace=False)
    return out


def json_one(text: str, what: str) -> dict:
    objs = json_lines(text, what)
    if len(objs) != 1 or not isinstance(objs[0], dict):
        pytest.fail(f"{what}: expected exactly one JSON object, got {len(objs)}: {text[:500]!r}", pytrace=False)
    return objs[0]

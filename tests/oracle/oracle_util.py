"""Helpers shared by the oracle tests (imported by conftest.py and the test modules)."""

from __future__ import annotations

import json
import os
import random
import struct
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


def hf_xet_env(work: Path, **settings: str) -> dict:
    """The environment for one stock-client process: this one's without HF_XET_*, its cache, home and log under
    `work`, telemetry off, then `settings` (e.g. XORB_COMPRESSION_POLICY="none" sets HF_XET_XORB_COMPRESSION_POLICY)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_XET_")}
    env.update({"HF_XET_CACHE": str(work / "cache"), "HF_HOME": str(work / "hf_home"),
                "HF_XET_TELEMETRY_ENABLED": "0", "HF_XET_LOG_DEST": str(work / "xet.log")})
    env.update({f"HF_XET_{k}": v for k, v in settings.items()})
    return env


def splitmix64(seed: int, n: int) -> bytes:
    """The SplitMix64 byte stream of the test vectors: each output appended as 8 little-endian bytes, cut to n."""
    m = (1 << 64) - 1
    s, out = seed, bytearray()
    while len(out) < n:
        s = (s + 0x9E3779B97F4A7C15) & m
        z = s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
        out += struct.pack("<Q", z ^ (z >> 31))
    return bytes(out[:n])


def text_lines(seed: int, n: int) -> bytes:
    """n bytes of numbered lines of words: compressible, and varied enough to cut chunks by content."""
    r = random.Random(seed)
    words = [b"alpha", b"beta", b"gamma", b"delta", b"xorb", b"shard", b"chunk", b"merkle", b"hash", b"cairn"]
    out, i = bytearray(), 0
    while len(out) < n:
        out += b"%08d %s %s %d\n" % (i, r.choice(words), r.choice(words), r.randrange(100000))
        i += 1
    return bytes(out[:n])

"""Debian's git (and git-lfs) pointed at a cairn server, for the git tests, the crash harness and the git
benchmark (scripts/bench_git.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from common import fail, tail


class Git:
    """Debian's git with a configuration of its own (no user's or system's), never prompting; with git-lfs's
    filters installed when `lfs`, else large files stay pointers."""

    def __init__(self, home: Path, lfs: bool = False):
        self.home = home
        home.mkdir(parents=True, exist_ok=True)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        self.env.update({"HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
                         "NO_PROXY": "127.0.0.1,localhost",
                         "no_proxy": "127.0.0.1,localhost", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x",
                         "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"})
        if lfs:
            self.run("lfs", "install", "--skip-repo")
        else:
            self.env["GIT_LFS_SKIP_SMUDGE"] = "1"

    def run(self, *args: str, cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess:
        r = subprocess.run(["git", *args], capture_output=True, text=True, timeout=300, env=self.env,
                           cwd=cwd or self.home)
        if check and r.returncode != 0:
            fail(f"`git {' '.join(args)}` failed (exit {r.returncode})\n--- stdout\n{tail(r.stdout)}"
                 f"\n--- stderr\n{tail(r.stderr)}")
        return r


def url(srv, repo: str, token: str | None = None) -> str:
    base = srv.url
    if token:
        scheme, rest = base.split("://", 1)
        base = f"{scheme}://user:{token}@{rest}"
    return f"{base}/{repo}"

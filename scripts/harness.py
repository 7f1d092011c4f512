"""What the measurement, benchmark and seed scripts share, in one module: the interop suite's wrappers for the
processes they drive (tests/interop/: `cairn serve`, private PostgreSQL and SeaweedFS servers, the stock clients,
the test CA, HTTP and random files) and a process's peak memory. A script imports this module, never a test
module or another script."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "interop"))

from clients import HfXet, HubJs  # noqa: E402
from git_util import Git  # noqa: E402
from common import MiB, assert_same_file, free_port, http, sha256_file, write_random  # noqa: E402
from hub_util import Hub, hub_python  # noqa: E402
from servers import CairnServer, PostgresServer, SeaweedServer  # noqa: E402
from tls_ca import TestCa  # noqa: E402

__all__ = ["CairnServer", "Git", "HfXet", "Hub", "HubJs", "MiB", "PostgresServer", "SeaweedServer", "TestCa",
           "assert_same_file", "free_port", "http", "hub_python", "peak_rss_mib", "reset_peak_rss", "sha256_file",
           "write_random"]


def peak_rss_mib(pid: int) -> float:
    """The peak resident set size of process `pid` (VmHWM), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc status")


def reset_peak_rss(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # 5: reset the peak resident set size

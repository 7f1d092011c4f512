"""Fixtures for the stock-client interop suite: a real `cairn serve` process driven by the stock Xet clients
(hf_xet 1.8.0 from .venv, @huggingface/hub 2.17.5 from tests/oracle/node_modules).

Run: CAIRN_BIN=build/release/src/cli/cairn .venv/bin/pytest -q tests/interop

Nothing here skips: a missing prerequisite (binary, venv, node package) is a test failure saying how to fix it.
Every client operation runs in a subprocess of its own with a fresh environment (hf_xet reads its configuration
once per process), and every server runs on a free port with a fresh data directory unless a test asks otherwise.
On a test failure the server log(s) are attached to the report.
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
if _HERE not in sys.path:  # so the test modules can import common, servers, clients... in any import mode
    sys.path.insert(0, _HERE)

from clients import HfXet, HubJs, pinned  # noqa: E402
from common import HUB_PKG, ORACLE_DIR, REPO_ROOT, fail  # noqa: E402
from servers import WATCH, CairnServer, PostgresServer, SeaweedServer  # noqa: E402


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        item._cairn_failed = True  # its servers' data directories are kept for a look (`server` below)
        for srv in getattr(item, "_cairn_servers", []):
            rep.sections.append((f"cairn server log ({srv.url}, data {srv.data_dir})", srv.log()))


def pytest_sessionfinish(session, exitstatus):
    """No secret in any log: every server log and command output of the session, against every secret the
    session knew by its end (a token minted for one server and sent to another is caught here)."""
    leaks = WATCH.leaks()
    if leaks:
        session.config.get_terminal_writer().line(
            "SECRETS IN LOGS (tests/interop/servers.py SecretWatch):\n  " + "\n  ".join(leaks[:50]), red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def cairn_bin() -> str:
    path = os.environ.get("CAIRN_BIN")
    if not path:
        fail("CAIRN_BIN is not set: point it at the cairn binary (`make test` does; or "
             "CAIRN_BIN=build/release/src/cli/cairn .venv/bin/pytest -q tests/interop)")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        fail(f"CAIRN_BIN={path!r} is not an executable file (run `make build`)")
    # CLI11 answers `<unknown> --help` with the top-level help and exit 0, so look for the subcommands there.
    r = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=30)
    listed = {line.split()[0] for line in r.stdout.splitlines() if line.startswith("  ") and line.split()}
    missing = [sub for sub in ("serve", "token") if sub not in listed]
    if r.returncode != 0 or missing:
        fail(f"{path} lacks the subcommand(s) {missing} (rebuild cairn: `make build`); its --help says:\n"
             f"{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return os.path.abspath(path)


def _postgres_tool(cairn_bin) -> str:
    tool = os.environ.get("CAIRN_TEST_POSTGRES") or str(
        Path(cairn_bin).resolve().parents[1] / "index" / "cairn-test-postgres")
    if not (os.path.isfile(tool) and os.access(tool, os.X_OK)):
        fail(f"{tool} is not an executable file (run `make build`, or set CAIRN_TEST_POSTGRES)")
    return tool


@pytest.fixture(scope="session")
def postgres(cairn_bin) -> PostgresServer:
    """One private PostgreSQL server for the session (cairn-test-postgres, built beside cairn)."""
    pg = PostgresServer(_postgres_tool(cairn_bin)).start()
    yield pg
    pg.close()


@pytest.fixture
def own_postgres(cairn_bin) -> PostgresServer:
    """A PostgreSQL server of the test's own, for tests that stop it: the shutdown checkpoint of the session's
    server fsyncs the files of every database the suite created so far (observed: 70 s for 70 databases),
    an outage that would grow with the suite rather than be the test's own."""
    pg = PostgresServer(_postgres_tool(cairn_bin)).start()
    yield pg
    pg.close()


@pytest.fixture(scope="session")
def seaweedfs(cairn_bin) -> SeaweedServer:
    """One private SeaweedFS server for the session (cairn-test-seaweedfs, built beside cairn), with one
    bucket; each data directory keeps its blobs under a prefix of its own."""
    tool = os.environ.get("CAIRN_TEST_SEAWEEDFS") or str(
        Path(cairn_bin).resolve().parents[1] / "store" / "cairn-test-seaweedfs")
    if not (os.path.isfile(tool) and os.access(tool, os.X_OK)):
        fail(f"{tool} is not an executable file (run `make build`, or set CAIRN_TEST_SEAWEEDFS)")
    sw = SeaweedServer(tool).start()
    sw.create_bucket("interop")
    yield sw
    sw.close()


@pytest.fixture(autouse=True)
def _free_disk(tmp_path):
    """After each test (and after its servers stopped: this fixture is set up first, so torn down last), the
    large files it left in its temporary directory are removed; logs stay for inspection. The suite's files
    would otherwise add up to ~10 GB by its end."""
    yield
    for p in tmp_path.rglob("*"):
        try:
            if p.is_file() and not p.is_symlink() and p.stat().st_size >= 4 * 1024 * 1024:
                p.unlink()
        except OSError:
            pass


# The deployments every server test runs on: (index, store, transfer mode).
BACKENDS = {
    "sqlite": ("sqlite", "file", None),           # the one-box default: SQLite and a local data directory
    "postgres": ("postgres", "file", None),       # PostgreSQL, blobs still local
    "s3": ("postgres", "s3", "proxy"),            # PostgreSQL + SeaweedFS, bytes served through the node
    "s3-presigned": ("postgres", "s3", "presigned"),  # ... bytes from SeaweedFS straight to the client
}


def pytest_configure(config):
    config.addinivalue_line("markers", "backends(*names): the deployments a test runs on (default: all of "
                                       + ", ".join(BACKENDS) + ")")


def pytest_generate_tests(metafunc):
    """Every test that starts a server runs once per deployment (BACKENDS), or on those its `backends`
    marker names."""
    if "backend" in metafunc.fixturenames:
        marker = metafunc.definition.get_closest_marker("backends")
        metafunc.parametrize("backend", list(marker.args) if marker else list(BACKENDS))


@pytest.fixture
def server(cairn_bin, tmp_path, request, backend):
    """Factory: server(env={"CAIRN_TRANSFER_URL_TTL": "2"}, args=(), data_dir=None, public_url=None, port=None,
    tls=(cert, key)) → started
    CairnServer. Every server is stopped with SIGTERM at teardown and must exit 0, and its log (stdout and
    stderr, at log level debug) must hold no secret (SecretWatch). On PostgreSQL each data
    directory gets a database of its own, on S3 a key prefix of its own (servers sharing a data directory
    share them)."""
    started: list[CairnServer] = []
    request.node._cairn_servers = started
    databases: dict[Path, str] = {}
    index_kind, store_kind, transfer_mode = BACKENDS[backend]

    def make(*, env: dict | None = None, args: tuple = (), data_dir: Path | None = None,
             public_url: str | None = None, port: int | None = None,
             tls: tuple[Path, Path] | None = None) -> CairnServer:
        n = len(started)
        data_dir = data_dir or tmp_path / f"cairn-data-{n}"
        env = dict(env or {})
        if index_kind == "postgres" and "CAIRN_INDEX" not in env:
            if data_dir not in databases:
                databases[data_dir] = request.getfixturevalue("postgres").create_database()
            env["CAIRN_INDEX"] = databases[data_dir]
        if store_kind == "s3" and "CAIRN_STORE" not in env:
            sw = request.getfixturevalue("seaweedfs")
            env = {**sw.env(f"s3://interop/{databases[data_dir].rsplit('/', 1)[1]}"), **env}
            env.setdefault("CAIRN_TRANSFER_MODE", transfer_mode)
        srv = CairnServer(cairn_bin, data_dir, tmp_path / f"cairn-{n}.log",
                          env=env, args=args, public_url=public_url, port=port, tls=tls)
        started.append(srv)
        return srv.start()

    yield make
    errors = []
    for srv in started:
        try:
            srv.stop()
        except BaseException as e:  # noqa: BLE001 — stop all of them, then report
            srv.kill()
            errors.append(str(e))
    # No secret in a log: each server's, against its signing keys and everything the session knows so far.
    for srv in started:
        srv.watch_index_secrets()
    leaks = WATCH.leaks(paths=[srv.log_path for srv in started], texts=[])
    if leaks:
        errors.append("secrets in the server logs:\n  " + "\n  ".join(leaks[:50]))
    if errors:
        fail("\n\n".join(errors))
    # A passing test's stored blobs go now (its logs stay for the session's last secret check): the suite's
    # temporary directory is a tmpfs when the repository sits in /tmp (scripts/isolated.sh), and the large-file
    # tests would otherwise fill it for the tests after them.
    if not getattr(request.node, "_cairn_failed", False):
        for srv in started:
            shutil.rmtree(srv.data_dir, ignore_errors=True)


# ---------------------------------------------------------------------------------------------- hf_xet


@pytest.fixture(scope="session")
def hub_py() -> str:
    """A Python with the pinned huggingface_hub and hf_xet (tests/requirements.txt)."""
    from hub_util import hub_python
    return hub_python()


@pytest.fixture(scope="session")
def hf_python() -> str:
    """A Python that imports the pinned hf_xet (normally the one running pytest, i.e. .venv)."""
    want = pinned("hf_xet")
    tried = []
    for py in (sys.executable, str(REPO_ROOT / ".venv" / "bin" / "python")):
        if not os.path.exists(py):
            continue
        r = subprocess.run([py, "-c", "import importlib.metadata as m, hf_xet; print(m.version('hf_xet'))"],
                           capture_output=True, text=True)
        if r.returncode == 0:
            got = r.stdout.strip()
            if got != want:
                fail(f"{py} has hf_xet {got}, tests/requirements.txt pins {want}: run scripts/bootstrap.sh")
            return py
        tried.append(f"{py}: {r.stderr.strip()[-300:]}")
    fail("hf_xet is not importable: run scripts/bootstrap.sh (creates .venv from tests/requirements.txt)\n"
         + "\n".join(tried))
    return ""



@pytest.fixture
def hfx(hf_python, tmp_path) -> HfXet:
    return HfXet(hf_python, tmp_path / "hf")


# ---------------------------------------------------------------------------------------------- @huggingface/hub


@pytest.fixture(scope="session")
def node_bin() -> str:
    import shutil

    node = shutil.which("node")
    if not node:
        fail("node not found on PATH: run scripts/bootstrap.sh")
    wanted = json.loads((ORACLE_DIR / "package.json").read_text())["dependencies"].get(HUB_PKG)
    if not wanted:
        fail(f"tests/oracle/package.json does not pin {HUB_PKG}")
    pkg = ORACLE_DIR / "node_modules" / HUB_PKG / "package.json"
    if not pkg.is_file():
        fail(f"{HUB_PKG} is not installed: run `npm ci` in {ORACLE_DIR} (scripts/bootstrap.sh)")
    got = json.loads(pkg.read_text())["version"]
    if got != wanted:
        fail(f"{HUB_PKG} {got} installed, package.json pins {wanted}: run `npm ci` in {ORACLE_DIR}")
    return node



@pytest.fixture
def hubjs(node_bin, tmp_path) -> HubJs:
    return HubJs(node_bin, tmp_path / "js")

#!/usr/bin/env python3
"""The layering (scripts/layers.py), clang-format (check only) and clang-tidy over cairn's sources; any finding fails.

    scripts/lint.py [-p BUILD_DIR] [-j JOBS] [--no-cache] [FILE...]

clang-tidy reads the compile commands of BUILD_DIR (default build/release; only a configured tree is needed, not a
built one). The shipped sources get every check of .clang-tidy; tests, benchmarks and fuzz targets (`*_test.cc`,
`*_bench.cc`, `*_fuzz.cc`) get every check but the static analyzer (clang-analyzer-*, most of clang-tidy's time),
since they run under ASan/UBSan anyway, and but the function size limit (a test case reads best whole); the
analyzer runs with a node budget per function (ANALYZER_BUDGET).

A translation unit found clean is not analysed again until something it is made of changes: the key of a clean
result covers the file, every project header it includes (transitively), its compile command, .clang-tidy, the
checks it got, the clang-tidy binary and the installed system packages (/var/lib/dpkg/status), with the
repository's own path taken out, so that another clone of the same code (CI's fresh one) finds them too. Results
live outside the repository, in ${CAIRN_LINT_CACHE:-${CAIRN_CACHE_DIR:-~/.cache/cairn}/lint} (like the SeaweedFS
build: a cache, never an input); --no-cache ignores them. The slowest units start first (times from earlier runs, else the
number of project headers) so that the last minutes do not leave a core idle.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import layers  # noqa: E402  (scripts/layers.py, beside this file)

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "src"
INCLUDE = re.compile(rb'^\s*#\s*include\s*"([^"]+)"', re.M)
TEST_OR_BENCH = re.compile(r"_(test|bench|fuzz)\.cc$")
TOOL_CANDIDATES = ["clang-tidy", "clang-tidy-14"]
# The static analyzer explores at most this many nodes of each top-level function's paths (clang's own budget
# in its "shallow" mode; 225,000 by default), inlining callees as deeply as by default. It halves the analyzer's
# time on the largest units (cas/service.cc 22 -> 10 s, api/hub_routes.cc 62 -> 31 s, http/server.cc 126 -> 50
# s, alone on one core), which is most of a cold lint's CPU; only paths past the budget in the largest
# functions go unexplored.
ANALYZER_BUDGET = ["--extra-arg=-Xclang", "--extra-arg=-analyzer-config", "--extra-arg=-Xclang",
                   "--extra-arg=max-nodes=75000"]


def tracked_sources() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "src/*.cc", "src/*.h"],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout
    return [REPO / line for line in out.splitlines() if (REPO / line).is_file()]


def project_headers(path: Path, seen: set[Path] | None = None) -> set[Path]:
    """The project headers `path` includes, transitively (quoted includes resolved against src/ and its folder)."""
    seen = set() if seen is None else seen
    for name in INCLUDE.findall(path.read_bytes()):
        rel = name.decode()
        for base in (SRC, path.parent):
            h = (base / rel).resolve()
            if h.is_file() and h not in seen:
                seen.add(h)
                project_headers(h, seen)
                break
    return seen


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-p", dest="build_dir", default=str(REPO / "build" / "release"))
    ap.add_argument("-j", dest="jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--no-cache", action="store_true")
    ap.add_argument("files", nargs="*", help="limit clang-tidy to these sources (default: every .cc under src/)")
    args = ap.parse_args()

    # --- the layering: no include runs up the order of scripts/layers.py
    layer_problems = layers.self_test() + layers.check()
    if layer_problems:
        sys.stderr.write("\n".join(layer_problems) + "\nlint: includes against the layering (scripts/layers.py)\n")
        return 1

    # --- clang-format: every tracked source, check only
    sources = tracked_sources()
    fmt = subprocess.run(["clang-format", "--dry-run", "-Werror", *map(str, sources)], cwd=REPO,
                         capture_output=True, text=True)
    if fmt.returncode != 0:
        sys.stderr.write(fmt.stderr[-6000:])
        sys.stderr.write("lint: clang-format found unformatted code (make format rewrites it)\n")
        return 1

    # --- clang-tidy
    build = Path(args.build_dir).resolve()
    db_path = build / "compile_commands.json"
    if not db_path.is_file():
        sys.stderr.write(f"lint: no {db_path}; configure first (cmake --preset release)\n")
        return 1
    tool = next((t for t in TOOL_CANDIDATES if shutil.which(t)), None)
    if tool is None:
        sys.stderr.write("lint: clang-tidy not found: run scripts/bootstrap.sh\n")
        return 1
    commands: dict[Path, dict] = {}
    for entry in json.loads(db_path.read_text()):
        f = (Path(entry["directory"]) / entry["file"]).resolve()
        if f.suffix == ".cc" and SRC in f.parents:
            if f in commands:  # one file in two targets would be analysed twice, once per compile command
                sys.stderr.write(f"lint: {f.relative_to(REPO)} is compiled in more than one target; make it a "
                                 "library so it is compiled (and analysed) once\n")
                return 1
            commands[f] = entry
    wanted = [Path(f).resolve() for f in args.files] or sorted(commands)
    missing = [f for f in wanted if f not in commands]
    if missing:
        sys.stderr.write(f"lint: not in {db_path}: {', '.join(map(str, missing))}\n")
        return 1

    tool_id = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout
    dpkg = Path("/var/lib/dpkg/status")
    system_id = f"{dpkg.stat().st_mtime_ns}:{dpkg.stat().st_size}" if dpkg.exists() else ""
    config = (REPO / ".clang-tidy").read_bytes()
    cache = Path(os.environ.get("CAIRN_LINT_CACHE") or
                 Path(os.environ.get("CAIRN_CACHE_DIR") or Path.home() / ".cache" / "cairn") / "lint")
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError:  # no writable home: a cache in the build tree still spares a second run
        cache = build / "lint-cache"
        cache.mkdir(exist_ok=True)
    times_path = cache / "times.json"
    times = json.loads(times_path.read_text()) if times_path.is_file() else {}

    jobs = []
    for f in wanted:
        extra = (["-checks=-clang-analyzer-*,-readability-function-size"] if TEST_OR_BENCH.search(f.name)
                 else ANALYZER_BUDGET)
        headers = sorted(project_headers(f))
        command = json.dumps(commands[f].get("arguments") or commands[f]["command"]).replace(str(REPO), "<repo>")
        key = sha(b"\0".join([tool_id.encode(), system_id.encode(), config, json.dumps(extra).encode(),
                              command.encode(), str(f.relative_to(REPO)).encode(), f.read_bytes(),
                              *[str(h.relative_to(REPO)).encode() + h.read_bytes() for h in headers]]))
        rel = str(f.relative_to(REPO))
        if not args.no_cache and (cache / key).exists():
            continue
        # Without earlier times: units the analyzer runs on first, larger files first (the slowest unit, the
        # HTTP server, took a sixth of the whole analysis on its own; started last it would run alone at the end).
        guess = (0 if extra else 1000) + f.stat().st_size / 1000
        jobs.append((times.get(rel, guess), rel, f, extra, key))
    jobs.sort(reverse=True)
    skipped = len(wanted) - len(jobs)

    def run(job):
        _, rel, f, extra, key = job
        start = time.monotonic()
        r = subprocess.run([tool, "-p", str(build), "--quiet", *extra, str(f)], cwd=REPO, capture_output=True,
                           text=True)
        return rel, key, r, time.monotonic() - start

    failed = []
    start = time.monotonic()
    with cf.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for rel, key, r, secs in pool.map(run, jobs):
            times[rel] = round(secs, 1)
            if r.returncode == 0:
                (cache / key).touch()
            else:
                failed.append(rel)
                findings = [ln for ln in (r.stdout + r.stderr).splitlines()
                            if re.search(r"(error|warning):", ln) or ln.startswith(" ")]
                sys.stderr.write(f"--- clang-tidy {rel}\n" + "\n".join(findings[:80]) + "\n")
    tmp = times_path.with_suffix(f".{os.getpid()}.tmp")  # clones may lint side by side
    tmp.write_text(json.dumps(times, indent=1, sort_keys=True))
    tmp.replace(times_path)
    print(f"lint: clang-format clean; clang-tidy analysed {len(jobs)} units in {time.monotonic() - start:.0f} s "
          f"({skipped} unchanged since found clean), {len(failed)} with findings")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

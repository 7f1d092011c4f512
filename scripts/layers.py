#!/usr/bin/env python3
"""The layering of src/: which folder may include which, checked on every quoted include (`make lint` runs it).

    scripts/layers.py            check; exit 1 naming each include that runs against the order
    scripts/layers.py --graph    print the layers and what each may use

Each folder of src/ is a layer and names the layers below it that its code may include (LAYERS). Tests,
benchmarks, fuzz targets and test fixtures (TEST_FILE) may also use the layers in TEST_ONLY: a layer's tests may
drive it through a higher one (the client's tests run against the server's routes in process), never its
shipped code. The table itself must stay acyclic, tests' edges included, and every folder of src/ must appear
in it: a new concern declares its place before its first include.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "src"
INCLUDE = re.compile(r'^\s*#\s*include\s*"(([a-z_]+)/[^"]+)"', re.M)
# Tests, benchmarks, fuzz targets and the fixtures only they use (clusters, in-process servers, test backends,
# fault seams; a layer's testing/ room holds nothing else).
TEST_FILE = re.compile(r"(_test|_bench|_fuzz|_tool)\.cc$|(^|/)testing/|(^|/)(test_[a-z_]+|[a-z_]+_cluster|[a-z_]+_test_server)"
                       r"\.(h|cc)$|(^|/)(bench_main|fuzz_driver|fuzz_check)\.")

# layer: the layers its shipped code may include (besides itself). Bottom first.
LAYERS: dict[str, list[str]] = {
    "common": [],                                   # threads, buffers, encodings, the LRU cache, descriptors
    "xet": ["common"],                              # the protocol: bytes in, bytes out
    "ingest": ["xet", "common"],                    # chunking, shard records, uploads built in memory
    "config": ["xet", "common"],
    "http": ["common"],
    "store": ["xet", "common"],
    "index": ["xet", "common"],
    "quota": ["index", "xet", "common"],           # storage quotas per namespace: measured, enforced
    "people": ["index", "xet", "common"],          # users, organizations, members, their tokens
    "cas": ["index", "store", "xet", "common"],
    "files": ["cas", "index", "xet", "common"],
    "repair": ["cas", "ingest", "index", "store", "xet", "common"],
    "hub": ["people", "files", "quota", "index", "xet", "common"],
    "git": ["hub", "index", "xet", "common"],      # git smart HTTP: pkt-lines, packs, upload-pack
    "lfs": ["files", "cas", "ingest", "index", "xet", "common"],  # git-lfs uploads made Xet files
    # the pull-through mirror: upstream repositories copied as git, their large files chunked into the CAS
    "mirror": ["lfs", "git", "hub", "files", "cas", "net", "index", "xet", "common"],
    "api": ["mirror", "lfs", "git", "hub", "publish", "oidc", "people", "files", "cas", "quota", "http", "index", "xet", "common"],
    "gc": ["hub", "cas", "quota", "index", "store", "xet", "common"],  # the garbage collector: mark, quarantine, sweep
    "compact": ["cas", "ingest", "index", "store", "xet", "common"],  # cairn compact: rewrites mostly dead xorbs
    "backup": ["repair", "cas", "index", "store", "xet", "common"],  # cairn backup / restore
    # cairn export / import: a repository carried between servers (air-gapped), in backup's object layout
    "bundle": ["backup", "repair", "git", "hub", "files", "cas", "ingest", "index", "store", "xet", "common"],
    "net": ["xet", "common"],                       # an HTTP client (libcurl) with the stock client's retries
    # OpenID Connect: id tokens, issuers' keys, and signing people in with a company's provider
    "oidc": ["people", "net", "index", "xet", "common"],
    # trusted publishers: OpenID Connect id tokens checked against trust policies, exchanged for tokens
    "publish": ["oidc", "people", "net", "index", "xet", "common"],
    "client": ["net", "ingest", "xet", "common"],   # cairn put/get: a client of any Xet server
    # the web pages: repositories, files and history in a browser, rendered on the server
    "web": ["hub", "oidc", "people", "files", "http", "index", "xet", "common"],
    "cli": ["web", "api", "mirror", "lfs", "git", "client", "net", "repair", "gc", "compact", "backup", "bundle", "hub", "publish", "oidc", "people", "files", "cas", "quota", "index", "store", "http", "config", "ingest", "xet",
            "common"],
}

# layer: what its tests and fixtures may include beyond LAYERS[layer].
TEST_ONLY: dict[str, list[str]] = {
    "cas": ["ingest"],
    "files": ["ingest", "store"],
    "hub": ["cas", "store", "ingest"],
    "api": ["store", "ingest"],
    "gc": ["repair", "files", "cas", "ingest"],
    "backup": ["gc", "hub", "files", "ingest"],
    "compact": ["gc", "repair", "hub", "files"],
    "client": ["api", "http", "index", "store", "cas"],
    "git": ["cas", "files", "store", "ingest"],
    "lfs": ["store"],
    "mirror": ["ingest", "store"],
    "bundle": ["gc"],
    "web": ["api", "cas", "store", "ingest"],
}


def allowed(layer: str, test: bool) -> set[str]:
    return {layer, *LAYERS[layer], *(TEST_ONLY.get(layer, []) if test else [])}


def cycle() -> list[str] | None:
    """A cycle in the table (tests' edges included), or None."""
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for dep in [*LAYERS[node], *TEST_ONLY.get(node, [])]:
            if state.get(dep) == 1:
                return path[path.index(dep):] + [dep] if dep in path else [node, dep]
            if dep not in state:
                found = visit(dep, path + [dep])
                if found:
                    return found
        state[node] = 2
        return None

    for layer in LAYERS:
        if layer not in state:
            found = visit(layer, [layer])
            if found:
                return found
    return None


def check(src: Path = SRC) -> list[str]:
    problems: list[str] = []
    unknown_deps = {d for deps in [*LAYERS.values(), *TEST_ONLY.values()] for d in deps} - set(LAYERS)
    if unknown_deps:
        problems.append(f"layers.py names layers that are not in LAYERS: {sorted(unknown_deps)}")
    if (c := cycle()) is not None:
        problems.append("layers.py: the table has a cycle: " + " -> ".join(c))
    for folder in sorted(p for p in src.iterdir() if p.is_dir()):
        if folder.name not in LAYERS:
            problems.append(f"src/{folder.name}/ is not a layer in scripts/layers.py: give it its place in LAYERS")
            continue
        for f in sorted(folder.rglob("*")):
            if f.suffix not in (".h", ".cc"):
                continue
            rel = f.relative_to(src).as_posix()
            test = bool(TEST_FILE.search(rel))
            ok = allowed(folder.name, test)
            text = f.read_text(errors="replace")
            for m in INCLUDE.finditer(text):
                path, target = m.group(1), m.group(2)
                line = text.count("\n", 0, m.start()) + 1
                if (src / target).is_dir() and target not in ok:
                    kind = "a test of " if test else ""
                    problems.append(f"src/{rel}:{line}: {kind}layer '{folder.name}' includes '{target}/', which "
                                    f"it may not use (scripts/layers.py)")
                elif not test and "/testing/" in path:
                    problems.append(f"src/{rel}:{line}: shipped code includes the test fixture '{path}' "
                                    f"(a testing/ room is for tests alone)")
    return problems


def self_test() -> list[str]:
    """The checker on a made-up tree: an upward include, one from a test, an unknown folder and shipped code
    using a testing/ room must each be found, and a lawful include (a test using that room) must not (so a checker that finds nothing cannot pass unseen)."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name, text in {"cas/a.h": '#include "api/b.h"\n#include "index/c.h"\n', "api/b.h": "",
                           "index/c.h": "", "cas/a_test.cc": '#include "client/d.h"\n#include "ingest/e.h"\n',
                           "client/d.h": "", "ingest/e.h": "", "nowhere/f.h": "",
                           "index/g.cc": '#include "index/testing/h.h"\n', "index/testing/h.h": "",
                           "index/g_test.cc": '#include "index/testing/h.h"\n'}.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        found = check(root)
    want = ["src/cas/a.h:1: layer 'cas' includes 'api/'", "src/cas/a_test.cc:1: a test of layer 'cas' includes "
            "'client/'", "src/nowhere/ is not a layer", "src/index/g.cc:1: shipped code includes the test fixture"]
    missed = [w for w in want if not any(f.startswith(w) for f in found)]
    return [f"layers.py self-test: did not find {m!r} (found {found})" for m in missed] + \
        ([f"layers.py self-test: found more than it should: {found}"] if len(found) != len(want) else [])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graph", action="store_true", help="print the layers and what each may use")
    args = ap.parse_args()
    if args.graph:
        for layer, deps in LAYERS.items():
            extra = TEST_ONLY.get(layer)
            print(f"{layer:8} -> {', '.join(deps) or '(nothing)'}" + (f"   [tests also: {', '.join(extra)}]"
                                                                          if extra else ""))
        return 0
    problems = self_test() + check()
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"layers: {len(problems)} include(s) against the layering", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

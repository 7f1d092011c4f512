#!/usr/bin/env python3
"""The web pages under load: a repository's card and a page of its 10,000-file folder, read by 100 concurrent
readers (keep-alive connections, one thread each) from `cairn serve` (SQLite + local disk) on this machine,
timed on the server (each request's `ms` in its request log: from its header read to its answer written):

    .venv/bin/python scripts/bench_pages.py [--seconds 20] [--readers 100] [--files 10000] [--bin ...]

The repository is written by huggingface_hub (a model card with metadata, a safetensors file, 10,000 small
files in one folder). Prints one JSON line per page: requests, p50/p99/max server ms, the first request's
(the page rendered from the index, before anything of it was kept) and the page's weight (its HTML without the
README's, and the one stylesheet). Clients and server share the machine's cores.
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import statistics
import struct
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from harness import CairnServer, Hub, hub_python  # noqa: E402

README = "---\nlicense: mit\ntags:\n- bench\n---\n# Bench model\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"


def make_repo(hub: Hub, files: int, work: Path) -> None:
    header = json.dumps({"w": {"dtype": "F16", "shape": [512, 512], "data_offsets": [0, 524288]}}).encode()
    st = work / "model.safetensors"
    st.write_bytes(struct.pack("<Q", len(header)) + header + bytes(524288))
    hub.run(f"""
        api.create_repo('bench/many')
        ops = [CommitOperationAdd(path_in_repo=f'data/f{{i:05d}}.txt', path_or_fileobj=str(i).encode())
               for i in range({files})]
        ops.append(CommitOperationAdd(path_in_repo='README.md', path_or_fileobj={README.encode()!r}))
        ops.append(CommitOperationAdd(path_in_repo='model.safetensors', path_or_fileobj={str(st)!r}))
        api.create_commit('bench/many', operations=ops, commit_message='bench')
    """, timeout=1800)


def reader(port: int, paths: list[str], stop: threading.Event, counts: list[int], i: int) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    n = 0
    while not stop.is_set():
        conn.request("GET", paths[n % len(paths)])
        r = conn.getresponse()
        r.read()
        assert r.status == 200, r.status
        n += 1
    counts[i] = n
    conn.close()


def server_ms(log: str, path: str) -> list[float]:
    return [float(m.group(1)) for m in re.finditer(rf"path={re.escape(path)} status=200 .*? ms=([0-9.]+)", log)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(REPO / "build/release/src/cli/cairn"))
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--readers", type=int, default=100)
    ap.add_argument("--files", type=int, default=10000)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-pages-", dir=REPO / "build"))
    srv = CairnServer(args.bin, work / "data", work / "server.log").start()
    try:
        hub = Hub(hub_python(), work / "client", srv, srv.token("bench", write=True))
        make_repo(hub, args.files, work)
        pages = {"card": "/bench/many", "tree": "/bench/many/tree/main/data"}
        weights = {}
        first_at = len(srv.log_path.read_text(errors='replace'))
        for name, path in pages.items():
            conn = http.client.HTTPConnection("127.0.0.1", srv.port)
            conn.request("GET", path)
            body = conn.getresponse().read().decode()
            weights[name] = len(body.encode())
            if name == "card":
                start, end = body.find("<h1>Bench model"), body.find("</article>")
                weights["card_without_readme"] = weights[name] - (end - start)
                sheet = re.search(r'href="(/static/[^"]+)"', body).group(1)
                conn.request("GET", sheet)
                weights["stylesheet"] = len(conn.getresponse().read())
            conn.close()
        first_log = srv.log_path.read_text(errors='replace')[first_at:]
        first_ms = {name: server_ms(first_log, path)[0] for name, path in pages.items()}
        before = len(srv.log_path.read_text(errors='replace'))
        stop = threading.Event()
        counts = [0] * args.readers
        threads = [threading.Thread(target=reader, args=(srv.port, list(pages.values()), stop, counts, i))
                   for i in range(args.readers)]
        for t in threads:
            t.start()
        time.sleep(args.seconds)
        stop.set()
        for t in threads:
            t.join()
        log = srv.log_path.read_text(errors='replace')[before:]
        for name, path in pages.items():
            ms = sorted(server_ms(log, path))
            print(json.dumps({"page": name, "path": path, "readers": args.readers, "files": args.files,
                              "requests": len(ms), "per_second": round(len(ms) / args.seconds, 1),
                              "p50_ms": round(statistics.median(ms), 2), "p99_ms": round(ms[int(len(ms) * 0.99)], 2),
                              "max_ms": round(ms[-1], 2), "first_ms": round(first_ms[name], 2),
                              "bytes": weights[name]}))
        print(json.dumps({"weights": weights}))
    finally:
        srv.stop()


if __name__ == "__main__":
    main()

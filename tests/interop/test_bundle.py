"""Air-gapped transfer (docs/mirror.md, "Export and import"): `cairn export` writes a repository into a bundle
directory on one server, `cairn import` loads it into another that reaches no upstream (a mirror in offline
mode), and huggingface_hub 2.4.0 with hf_xet downloads it there byte for byte, with the exporter's commit ids. A
repository the exporter holds itself and one it mirrors both travel; a bundle that is not what its manifest says
is refused and creates nothing, and a FIFO in place of its pack is refused without waiting."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from common import assert_same_file
from hub_util import Hub
from test_mirror import mirror_of, publish, served_by_xet


@pytest.mark.backends("sqlite", "s3")
def test_export_then_import_and_download_offline(server, hub_py, tmp_path):
    upstream = server()
    owner = Hub(hub_py, tmp_path / "owner", upstream, upstream.token("alice", write=True))
    published = publish(owner, tmp_path)

    # A repository the exporting server holds itself, every branch and tag of it.
    model_bundle = tmp_path / "model.bundle"
    got = upstream.cli("export", "alice/model", str(model_bundle), "--json")
    report = json.loads(got.stdout.strip().splitlines()[-1])
    assert report["repo"] == "alice/model" and report["large_files"] == 2, report
    assert (model_bundle / "manifest").read_text().startswith("cairn-bundle 1\n")
    # A mirrored one, from a mirror that fetched it.
    mirror = mirror_of(server, upstream)
    mirror.cli("mirror", "prefetch", "datasets/alice/data@main")
    data_bundle = tmp_path / "data.bundle"
    got = mirror.cli("export", "datasets/alice/data@main", str(data_bundle), "--json")
    assert json.loads(got.stdout.strip().splitlines()[-1])["large_files"] == 1
    upstream.stop()
    mirror.stop()

    # The air-gapped site: a mirror that asks no upstream.
    site = server(env={"CAIRN_MIRROR_UPSTREAM": "http://127.0.0.1:9", "CAIRN_MIRROR_OFFLINE": "true"})
    got = site.cli("import", str(model_bundle), "--json")
    report = json.loads(got.stdout.strip().splitlines()[-1])
    assert report["repo"] == "alice/model" and not report["mirrored"], report
    assert report["new_xorbs"] == report["xorbs"] > 0, report
    got = site.cli("import", str(data_bundle), "--json")
    assert json.loads(got.stdout.strip().splitlines()[-1])["mirrored"] is True
    imports = [json.loads(line) for line in site.cli("audit", "--json").stdout.splitlines() if line.strip()]
    assert {(e["action"], e["target"]) for e in imports if e["actor"].startswith("cli:")} >= {
        ("bundle.import", "alice/model"), ("bundle.import", "datasets/alice/data")}, imports

    reader = Hub(hub_py, tmp_path / "reader", site, None)
    out = reader.run(f"""
        snapshot_download("alice/model", local_dir={str(tmp_path / "got")!r})
        hf_hub_download("alice/data", "train.parquet", repo_type="dataset", local_dir={str(tmp_path / "got-data")!r})
        result = {{"sha": api.repo_info("alice/model").sha,
                  "commits": [c.commit_id for c in api.list_repo_commits("alice/model")],
                  "data": api.dataset_info("alice/data").sha}}
    """)
    assert out == {"sha": published["model"], "commits": published["commits"], "data": published["data"]}, out
    for rel in ("config.json", "weights.bin", "sub/shard.bin"):
        assert_same_file(Path(published["model_dir"]) / rel, tmp_path / "got" / rel)
    assert_same_file(Path(published["data_dir"]) / "train.parquet", tmp_path / "got-data" / "train.parquet")
    assert served_by_xet(site) >= 3, site.requests_table()  # from the site's own CAS

    # Once: the same repository again is refused (exit 2), under another name it is not.
    again = site.cli("import", str(model_bundle), expect_ok=False)
    assert again.returncode == 2 and "already" in again.stderr, again.stderr
    # A flipped byte in a xorb: refused (exit 1), and nothing is created under the name asked for.
    tampered = tmp_path / "tampered.bundle"
    shutil.copytree(model_bundle, tampered)
    xorb = max((p for p in (tampered / "objects" / "xorbs").rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    body = bytearray(xorb.read_bytes())
    body[len(body) // 2] ^= 1
    xorb.write_bytes(bytes(body))
    plain = server()  # a server that holds nothing and mirrors nothing: a name it lacks answers 404
    other = Hub(hub_py, tmp_path / "plain-reader", plain, None)
    refused = plain.cli("import", str(tampered), expect_ok=False)
    assert refused.returncode == 1 and "xorb" in refused.stderr, refused.stderr
    assert other.fails("""api.repo_info("alice/model")""").status == 404
    # A FIFO in place of the pack (no writer ever comes): refused at once, not waited on (cli's timeout).
    fifo = tmp_path / "fifo.bundle"
    shutil.copytree(model_bundle, fifo)
    (fifo / "history.pack").unlink()
    os.mkfifo(fifo / "history.pack")
    refused = plain.cli("import", str(fifo), expect_ok=False)
    assert refused.returncode == 1 and "not a regular file" in refused.stderr, refused.stderr
    plain.cli("import", str(model_bundle), "--as", "bob/copy")
    assert other.run("""result = api.repo_info("bob/copy").sha""") == published["model"]

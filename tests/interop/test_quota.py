"""Storage quotas per namespace against the stock client (huggingface_hub and hf_xet as pinned): a commit that
would pass the quota is refused whole with the 403 and message huggingface_hub prints, nothing of it shows,
what fits still goes in, a used-up namespace is refused before any byte moves, deletions go on, and the usage
the API and the metrics give is the distinct chunks of what the namespace committed, on SQLite and on
PostgreSQL + S3, and through two nodes sharing one index (docs/operations.md "Quotas")."""

from __future__ import annotations

import json

import pytest

from common import MiB, assert_same_file, http, write_random
from hub_util import Hub, hub_python

QUOTA_MESSAGE = "Storage quota of namespace 'alice' reached"


def usage(srv, tok: str, measure: bool = False) -> dict:
    query = "?measure=true" if measure else ""
    r = http("GET", f"{srv.url}/api/quotas/alice{query}", headers={"Authorization": f"Bearer {tok}"})
    assert r.status == 200, f"GET /api/quotas/alice: {r.status} {r.body[:300]!r}"
    return json.loads(r.body)


def upload(hub: Hub, path, name: str) -> None:
    hub.run(f'api.upload_file(path_or_fileobj={str(path)!r}, path_in_repo={name!r}, repo_id="alice/m")')


@pytest.mark.backends("sqlite", "s3")
def test_a_full_quota_stops_an_upload_with_the_message_users_know(server, tmp_path, backend):
    srv = server()
    tok = srv.token("alice", write=True)
    hub = Hub(hub_python(), tmp_path / "alice", srv, tok)
    a = write_random(tmp_path / "a.bin", 3 * MiB + 1, seed=91)
    hub.run('api.create_repo("alice/m")')
    upload(hub, a, "a.bin")
    srv.cli("quota", "set", "alice", "8MiB")
    assert "quota.set" in srv.cli("audit", "--ns", "alice").stdout
    before = usage(srv, tok, measure=True)
    assert before["limit"] == 8 * MiB and before["exact"], before
    assert usage(srv, tok) == {k: before[k] for k in ("namespace", "used", "exact", "measuredAt", "limit")}
    assert before["chunkBytes"] == a.stat().st_size, before

    # A folder of two 3 MiB files would pass the quota mid-upload: the commit is refused whole.
    folder = tmp_path / "folder"
    folder.mkdir()
    write_random(folder / "b.bin", 3 * MiB, seed=92)
    write_random(folder / "c.bin", 3 * MiB, seed=93)
    err = hub.fails(f'api.upload_folder(folder_path={str(folder)!r}, repo_id="alice/m")')
    assert err.status == 403, err
    assert "403 Forbidden" in err.message and QUOTA_MESSAGE in err.message, err.message
    assert sorted(hub.run('result = api.list_repo_files("alice/m")')) == [".gitattributes", "a.bin"]
    assert usage(srv, tok)["used"] == before["used"]

    # What fits goes in: a 2 MiB file, and a.bin again under another name (it adds no chunk).
    d = write_random(tmp_path / "d.bin", 2 * MiB, seed=94)
    upload(hub, d, "d.bin")
    upload(hub, a, "copy-of-a.bin")
    after = usage(srv, tok, measure=True)
    assert after["exact"] and after["chunkBytes"] == a.stat().st_size + d.stat().st_size, after
    measured = json.loads(srv.cli("quota", "show", "alice", "--json").stdout.strip().splitlines()[-1])
    assert measured["chunk_bytes"] == a.stat().st_size + d.stat().st_size, measured
    assert measured["files"] == 2, measured

    # Used up: refused before any byte moves; reads and deletions go on.
    srv.cli("quota", "set", "alice", "1MiB")
    xorbs = srv.requests_count("POST", "xorb")
    e = write_random(tmp_path / "e.bin", 2 * MiB, seed=95)
    err = hub.fails(f'api.upload_file(path_or_fileobj={str(e)!r}, path_in_repo="e.bin", repo_id="alice/m")')
    assert err.status == 403 and QUOTA_MESSAGE in err.message, err
    assert srv.requests_count("POST", "xorb") == xorbs
    got = hub.run(f'result = hf_hub_download("alice/m", "d.bin", cache_dir={str(tmp_path / "dl")!r})')
    assert_same_file(got, d)
    hub.run('api.delete_file("copy-of-a.bin", repo_id="alice/m")')
    metrics = {(name, labels.get("namespace")): value for name, labels, value in srv.metrics()}
    assert metrics[("cairn_quota_limit_bytes", "alice")] == 1 * MiB, metrics
    assert metrics[("cairn_quota_used_bytes", "alice")] >= measured["used"]


@pytest.mark.backends("s3")
def test_two_nodes_share_one_quota(server, tmp_path, backend):
    a = server()
    b = server(data_dir=a.data_dir)  # the same database and bucket
    tok = a.token("alice", write=True)
    via_a = Hub(hub_python(), tmp_path / "a", a, tok)
    via_b = Hub(hub_python(), tmp_path / "b", b, tok)
    via_a.run('api.create_repo("alice/m")')
    a.cli("quota", "set", "alice", "8MiB")
    files = [write_random(tmp_path / f"{i}.bin", 3 * MiB, seed=100 + i) for i in range(3)]
    upload(via_a, files[0], "0.bin")
    upload(via_b, files[1], "1.bin")
    err = via_a.fails(f'''api.upload_file(path_or_fileobj={str(files[2])!r}, path_in_repo="2.bin",
                                           repo_id="alice/m")''')
    assert err.status == 403 and QUOTA_MESSAGE in err.message, err
    from_a, from_b = usage(a, tok), usage(b, tok)
    assert from_a["used"] == from_b["used"], (from_a, from_b)
    shown = json.loads(b.cli("quota", "show", "alice", "--json").stdout.strip().splitlines()[-1])
    assert shown["chunk_bytes"] == 6 * MiB and shown["files"] == 2, shown

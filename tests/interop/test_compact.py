"""Compaction with the stock client (docs/operations.md, "Compaction").

hf_xet packs the small files of one upload into one xorb; deleting most of them leaves a xorb that stays live
for the few that remain. `cairn compact` rewrites it with the live chunks and moves the remaining files; the
collector then frees the old xorb past its grace. Meanwhile a client that planned a download from the old
xorb finishes it from the old xorb, and the stock client downloads every remaining file byte-exact.
"""

from __future__ import annotations

import json

import pytest

from common import KiB, assert_same_file, http, write_random
from test_gc import delete, fsck, past_the_grace, run_json

SCOPE = "compact"


def compact(srv, *args: str) -> dict:
    return run_json(srv, "compact", *args)


def reconstruction(srv, tok: str, file_hash: str) -> dict:
    r = http("GET", f"{srv.url}/v1/reconstructions/{file_hash}", headers={"Authorization": f"Bearer {tok}"})
    assert r.status == 200, f"reconstruction of {file_hash}: {r.status} {r.body[:300]!r}"
    return json.loads(r.body)


def read_planned(answer: dict) -> bytes:
    """The file as a client reads it from a reconstruction it holds: each term's chunks fetched from its
    transfer URL and unpacked (random data is stored uncompressed, scheme 0: header then raw bytes)."""
    out = bytearray()
    for term in answer["terms"]:
        want = term["range"]
        fetch = next(f for f in answer["fetch_info"][term["hash"]]
                     if f["range"]["start"] <= want["start"] and want["end"] <= f["range"]["end"])
        ur = fetch["url_range"]
        r = http("GET", fetch["url"], headers={"Range": f"bytes={ur['start']}-{ur['end']}"})
        assert r.status in (200, 206), f"transfer {fetch['url']}: {r.status} {r.body[:200]!r}"
        data, at, index = r.body, 0, fetch["range"]["start"]
        while at < len(data):
            size = int.from_bytes(data[at + 1:at + 4], "little")
            scheme = data[at + 4]
            assert scheme == 0, f"chunk {index} compressed with scheme {scheme}: not expected of random data"
            if want["start"] <= index < want["end"]:
                out += data[at + 8:at + 8 + size]
            at += 8 + size
            index += 1
    return bytes(out[answer.get("offset_into_first_range", 0):])


def every_kept_file_downloads_and_fsck_is_clean(srv, hfx, tok, kept, tmp_path, tag: str) -> None:
    for i, (f, m) in enumerate(kept):
        dest = tmp_path / f"{tag}-{i}.bin"
        run = hfx.download(srv.url, tok, [(m["hash"], m["size"], dest)])
        assert run.ok, run.describe()
        assert_same_file(dest, f, m["sha256"])
    report = fsck(srv, "--deep")
    assert not report["damaged"] and report["findings"] == [], report


@pytest.mark.backends("sqlite", "s3")
def test_compaction_rewrites_a_thinned_out_upload_and_a_held_plan_still_reads(server, hfx, tmp_path, backend):
    srv = server()
    tok = srv.token(SCOPE, write=True)
    files = [write_random(tmp_path / f"f{i:02}.bin", 20 * KiB + i, seed=300 + i) for i in range(40)]
    up = hfx.upload(srv.url, tok, files)
    assert up.ok, up.describe()
    metas = up.result["files"]
    kept = [(f, m) for i, (f, m) in enumerate(zip(files, metas)) if i % 5 == 0]
    for i, m in enumerate(metas):
        if i % 5 != 0:
            delete(srv, tok, m["hash"])
    rep = past_the_grace(srv, backend)
    assert rep["swept_files"] == len(files) - len(kept) and rep["swept_xorbs"] == 0, rep
    xorbs_before = fsck(srv)["stored_xorbs"]

    # A client planned a download before the compaction: it holds the old xorb's transfer URLs.
    held = reconstruction(srv, tok, kept[0][1]["hash"])
    old_xorbs = set(held["fetch_info"])

    dry = compact(srv, "--dry-run")
    assert dry["dry_run"] and dry["compacted_xorbs"] >= 1 and dry["freed_bytes"] > 0, dry
    rep = compact(srv)
    assert rep["compacted_xorbs"] == dry["compacted_xorbs"] and rep["new_xorbs"] >= 1, rep
    assert rep["files_moved"] == len(kept) and rep["freed_bytes"] == dry["freed_bytes"], rep
    assert compact(srv)["candidates"] == 0  # nothing left to do
    # Each run that changed something is in the audit log (the dry run is not): the two real ones here.
    runs = [line for line in srv.cli("audit", "--json").stdout.splitlines() if '"compact.run"' in line]
    assert len(runs) == 2, runs

    # New plans name the new xorb; the held plan still reads, from the old one, byte-exact.
    now = reconstruction(srv, tok, kept[0][1]["hash"])
    assert not old_xorbs & set(now["fetch_info"]), now
    assert read_planned(held) == kept[0][0].read_bytes()
    every_kept_file_downloads_and_fsck_is_clean(srv, hfx, tok, kept, tmp_path, "kept")
    # Until a collector runs past the grace, the old xorbs stay stored beside the new ones.
    assert fsck(srv)["stored_xorbs"] == xorbs_before + rep["new_xorbs"]

    # Past the grace the collector frees exactly what compaction reported.
    swept = past_the_grace(srv, backend)
    assert swept["swept_xorbs"] == rep["compacted_xorbs"], swept
    assert swept["reclaimed_bytes"] == rep["replaced_bytes"], (swept, rep)
    assert fsck(srv)["stored_xorbs"] == xorbs_before - rep["compacted_xorbs"] + rep["new_xorbs"]
    every_kept_file_downloads_and_fsck_is_clean(srv, hfx, tok, kept, tmp_path, "after")

"""A full disk for real: `cairn serve` with its data directory (blobs and the SQLite index) on a tmpfs of a few
MiB, mounted by the test (root, inside scripts/isolated.sh's private mount namespace), filled by hf_xet uploads
until the kernel answers ENOSPC. What was acknowledged before stays served byte-exact, the upload that did not fit
fails with an error and serves nothing, the server stays up and restarts on the full disk, `cairn fsck --deep`
finds no damage, and once there is room again the same upload succeeds."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from common import MiB, assert_same_file, http, sha256_file, write_random
from test_fsck import cairn

SCOPE = "full"


@pytest.fixture
def small_disk(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI and scripts/isolated.sh run as root)")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40m,mode=0700", "tmpfs", str(mnt)], check=True)
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def _free_mib(path) -> float:
    return shutil.disk_usage(path).free / MiB


@pytest.mark.backends("sqlite")
def test_a_full_disk_refuses_what_does_not_fit_and_loses_nothing(server, hfx, small_disk, tmp_path):
    data = small_disk / "cairn"
    srv = server(data_dir=data)
    tok = srv.token(SCOPE, write=True)
    src = tmp_path / "src"
    src.mkdir()

    small = write_random(src / "small.bin", 3 * MiB, seed=1)
    up = hfx.upload(srv.url, tok, [small])
    small_meta = up.result["files"][0]

    # 60 MiB of random bytes cannot fit in what is left of 40 MiB: the store's writes fail with ENOSPC.
    big = write_random(src / "big.bin", 60 * MiB, seed=2)
    failed = hfx.upload(srv.url, tok, [big], expect_ok=False)
    assert not failed.ok, failed.describe()
    log = srv.log()
    assert "No space left on device" in log, log[-4000:]
    assert http("GET", f"{srv.url}/healthz").status == 200
    # The half-written xorb was never named: no temporary file is left taking the space.
    leftovers = [p for p in (data / "blobs").rglob("*") if ".tmp" in p.name]
    assert leftovers == [], leftovers

    # What was acknowledged before is served, byte-exact; what did not fit is not served at all.
    out = tmp_path / "out"
    out.mkdir()
    hfx.download(srv.url, tok, [(small_meta["hash"], small_meta["size"], out / "small.bin")])
    assert_same_file(out / "small.bin", small, sha256_file(small))
    big_hash = subprocess.run([srv.bin, "hash", str(big)], capture_output=True, text=True, check=True).stdout.split()[0]
    r = http("GET", f"{srv.url}/v1/reconstructions/{big_hash}", headers={"Authorization": f"Bearer {tok}"})
    assert r.status == 404, (r.status, r.body[:200])

    # A restart on the full disk, then fsck: no damage (xorbs of the failed upload may be stored and indexed,
    # unreferenced; that is not damage).
    srv.restart()
    srv.stop()
    rc, report, err = cairn(srv, "fsck", "--deep")
    assert rc == 0 and all(f["kind"] == "unindexed" for f in report["findings"]), (report, err)

    # Room again (the tmpfs grown in place): the same upload succeeds and downloads byte-exact.
    subprocess.run(["mount", "-o", "remount,size=200m", str(small_disk)], check=True)
    assert _free_mib(small_disk) > 100
    srv.start()
    again = hfx.upload(srv.url, tok, [big])
    big_meta = again.result["files"][0]
    hfx.download(srv.url, tok, [(big_meta["hash"], big_meta["size"], out / "big.bin"),
                                (small_meta["hash"], small_meta["size"], out / "small-again.bin")])
    assert_same_file(out / "big.bin", big, sha256_file(big))
    assert_same_file(out / "small-again.bin", small, sha256_file(small))

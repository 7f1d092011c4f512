"""cairn's xorb and shard readers vs what the stock hf_xet client writes to a file-backed CAS.

For each compression policy, hf_xet 1.8.0 (subprocess, one per policy) uploads a set of files to
`local://<tmp>/<policy>`. hf_xet's local CAS layout (see README.md here):
  <root>/xet/xorbs/xorbs/default.<xorb-hex>        xorb, chunk region + V1 footer (+ .tagset sidecar)
  <root>/xet/xorbs/shards/<shard-hex>.mdb          shard with 200-byte footer, no lookup tables (+ .tagset)
  <root>/xet/shard-cache/<shard-hex>.mdb           same content re-serialized with lookup tables
  <root>/xet/xorbs/global_dedup_lookup.redb        hf_xet's own index (ignored)
Then every xorb goes through `$CAIRN_BIN xorb verify --json --hash HEX FILE` and every shard through
`$CAIRN_BIN shard verify --json --xorb-dir <root>/xet/xorbs/xorbs SHARD`, and the output is compared
with the stock client's own bookkeeping (xorb footers, shard sections, reported file hashes, SHA-256).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import shutil
from array import array
from dataclasses import dataclass
from pathlib import Path

import pytest

import oracle_xetfmt as xf
from oracle_util import ORACLE_DIR, hf_xet_env, json_one, run, text_lines

MiB = 1024 * 1024
POLICIES = ["none", "lz4", "bg4-lz4", "auto"]
UPLOADER = str(ORACLE_DIR / "hf_xet_upload.py")

XORB_SUBDIR = Path("xet/xorbs/xorbs")
SHARD_SUBDIRS = [Path("xet/xorbs/shards"), Path("xet/shard-cache")]
XORB_NAME = re.compile(r"^default\.([0-9a-f]{64})$")
SHARD_NAME = re.compile(r"^([0-9a-f]{64})\.mdb$")
# Everything else hf_xet 1.8.0 is known to leave in the local CAS directory.
KNOWN_OTHER = [re.compile(r"^default\.[0-9a-f]{64}\.tagset$"), re.compile(r"^[0-9a-f]{64}\.mdb\.tagset$"),
               re.compile(r"^global_dedup_lookup\.redb$")]

XORB_KEYS = {"hash", "num_chunks", "chunks", "footer", "compression"}
SHARD_KEYS = {"files", "xorbs", "footer"}


# ------------------------------------------------------------------------------------------ inputs


def _counters(start: int, n: int) -> bytes:
    """Little-endian u32 counters: compresses well with byte grouping (BG4)."""
    return array("I", range(start, start + n // 4)).tobytes()[:n]


def _mixed(n_mib: int) -> bytes:
    """~n MiB cycling 1 MiB blocks of random / text / counters: > 64 MiB gives several xorbs."""
    r = random.Random(1234)
    parts = []
    for k in range(n_mib):
        kind = k % 3
        if kind == 0:
            parts.append(r.randbytes(MiB))
        elif kind == 1:
            parts.append(text_lines(k, MiB))
        else:
            parts.append(_counters(k * MiB, MiB))
    return b"".join(parts) + b"tail"


def _dup() -> bytes:
    x = random.Random(77).randbytes(2 * MiB)
    return x + x  # second copy dedups against the first: repeated terms within one file


INPUTS = {
    "empty.bin": lambda: b"",
    "one.bin": lambda: b"\x01",
    "k7.bin": lambda: random.Random(7).randbytes(7 * 1024),
    "r3m.bin": lambda: random.Random(3).randbytes(3 * MiB),
    "t3m.txt": lambda: text_lines(3, 3 * MiB),
    "ints2m.bin": lambda: _counters(0, 2 * MiB),
    "dup4m.bin": _dup,
    "big70m.bin": lambda: _mixed(70),
}


@dataclass
class Input:
    path: str
    size: int
    sha256: str


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Input]:
    d = tmp_path_factory.mktemp("hfxet_inputs")
    out = {}
    for name, gen in INPUTS.items():
        data = gen()
        p = d / name
        p.write_bytes(data)
        out[name] = Input(str(p), len(data), hashlib.sha256(data).hexdigest())
    yield out
    shutil.rmtree(d, ignore_errors=True)


# ------------------------------------------------------------------------------------------ upload


@dataclass
class Upload:
    policy: str
    root: Path
    reported: dict[str, dict]  # input name -> {"hash", "size", "sha256"} as hf_xet reports it
    xorb_dir: Path
    xorbs: dict[str, Path]  # xorb hex -> file
    shards: list[Path]


@pytest.fixture(scope="module", params=POLICIES)
def upload(request, hf_xet_python, inputs, tmp_path_factory) -> Upload:
    policy = request.param
    work = tmp_path_factory.mktemp(f"hfxet_{policy}")
    root = work / "cas"
    # A local:// CAS, no server: the client's direct xorb path writes the files these checks read (upload
    # grants are a server exchange, tested against cairn in tests/interop).
    env = hf_xet_env(work, CLIENT_LEGACY_DIRECT_XORB_UPLOAD="1", XORB_COMPRESSION_POLICY=policy)
    names = list(inputs)
    r = run([hf_xet_python, UPLOADER, f"local://{root}", *[inputs[n].path for n in names]], env=env, timeout=180)
    reported = dict(zip(names, json.loads(r.stdout)))

    xorb_dir = root / XORB_SUBDIR
    assert xorb_dir.is_dir(), f"hf_xet did not create {xorb_dir}; layout changed? tree: {_tree(root)}"
    xorbs = {}
    for p in xorb_dir.iterdir():
        m = XORB_NAME.match(p.name)
        if m:
            xorbs[m.group(1)] = p
    shards = sorted(p for sub in SHARD_SUBDIRS if (root / sub).is_dir()
                    for p in (root / sub).iterdir() if SHARD_NAME.match(p.name))
    yield Upload(policy, root, reported, xorb_dir, xorbs, shards)
    shutil.rmtree(work, ignore_errors=True)


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


# ------------------------------------------------------------------------------------------ cairn calls


def _xorb_verify(cairn_bin: str, path: Path, hash_hex: str, check: bool = True):
    r = run([cairn_bin, "xorb", "verify", "--json", "--hash", hash_hex, str(path)], timeout=60, check=check)
    return r if not check else json_one(r.stdout, f"cairn xorb verify {path.name}")


def _shard_verify(cairn_bin: str, shard: Path, xorb_dir: Path, check: bool = True):
    r = run([cairn_bin, "shard", "verify", "--json", "--xorb-dir", str(xorb_dir), str(shard)], timeout=60,
            check=check)
    return r if not check else json_one(r.stdout, f"cairn shard verify {shard.name}")


# ------------------------------------------------------------------------------------------ stock-side sanity


def test_local_layout(upload, inputs):
    """hf_xet 1.8.0 writes exactly the layout the other tests (and cairn's --xorb-dir) rely on."""
    files = _tree(upload.root)
    for rel in files:
        name = Path(rel).name
        known = XORB_NAME.match(name) or SHARD_NAME.match(name) or any(p.match(name) for p in KNOWN_OTHER)
        assert known, f"unexpected file {rel} in hf_xet's local CAS (layout changed?)"
    assert len(upload.xorbs) >= 2, f"expected several xorbs for a 70 MiB file, got {files}"
    assert any(p.parent.name == "shards" for p in upload.shards), f"no shard in xet/xorbs/shards: {files}"
    for name, inp in inputs.items():
        rep = upload.reported[name]
        assert rep["size"] == inp.size
        assert xf.is_hex64(rep["hash"])
        if inp.size:
            assert rep["sha256"] == inp.sha256, f"{name}: hf_xet's sha256"
        else:
            assert rep["hash"] == xf.ZERO_HASH


def test_policy_took_effect(upload):
    """The forced policy shows in the stored chunk headers (else the policy checks below prove nothing)."""
    total = {"none": 0, "lz4": 0, "bg4_lz4": 0}
    for p in upload.xorbs.values():
        for k, v in xf.parse_xorb(p.read_bytes()).scheme_counts.items():
            total[k] += v
    if upload.policy == "none":
        assert total["lz4"] == total["bg4_lz4"] == 0, total
    elif upload.policy == "lz4":
        assert total["lz4"] > 0 and total["bg4_lz4"] == 0, total
    elif upload.policy == "bg4-lz4":
        assert total["bg4_lz4"] > 0 and total["lz4"] == 0, total
    else:
        assert total["lz4"] + total["bg4_lz4"] > 0, total


# ------------------------------------------------------------------------------------------ xorbs


def _check_xorb_report(rep: dict, name_hex: str, x: xf.Xorb, policy: str | None, want_footer: str):
    assert set(rep) == XORB_KEYS, f"keys {sorted(rep)}"
    assert rep["hash"] == name_hex, "hash must equal the file-name hash"
    n = len(x.chunks)
    assert rep["num_chunks"] == n
    chunks = rep["chunks"]
    assert isinstance(chunks, list) and len(chunks) == n
    for i, (c, hc) in enumerate(zip(chunks, x.chunks)):
        assert set(c) == {"hash", "size", "end"}, f"chunk {i} keys {sorted(c)}"
        assert c["size"] == hc.uncompressed_len, f"chunk {i} size"
        assert c["end"] == hc.end, f"chunk {i} end (compressed boundary incl. headers)"
    if x.footer is not None:  # the stock client's footer lists the chunk hashes
        assert [c["hash"] for c in chunks] == x.footer.chunk_hashes, "chunk hashes vs stored footer"
        assert [c["end"] for c in chunks] == x.footer.boundaries
    assert rep["footer"] == want_footer
    comp = rep["compression"]
    assert set(comp) == {"none", "lz4", "bg4_lz4"}, f"compression keys {sorted(comp)}"
    assert comp == x.scheme_counts, "compression counts vs chunk headers"
    assert sum(comp.values()) == n
    if policy == "none":
        assert comp["lz4"] == comp["bg4_lz4"] == 0
    elif policy == "lz4":
        assert comp["bg4_lz4"] == 0
    elif policy == "bg4-lz4":
        assert comp["lz4"] == 0


def test_xorbs_verify(upload, cairn_bin):
    for hex_name, path in sorted(upload.xorbs.items()):
        x = xf.parse_xorb(path.read_bytes())
        assert x.footer is not None and x.footer.version == 1, f"{path.name}: hf_xet stores V1 footers"
        assert x.footer.xorb_hash == hex_name
        rep = _xorb_verify(cairn_bin, path, hex_name)
        try:
            _check_xorb_report(rep, hex_name, x, upload.policy, "v1")
        except AssertionError as e:
            raise AssertionError(f"{upload.policy} {path.name}: {e}") from e


def test_xorb_verify_footerless_and_corrupt(upload, cairn_bin, tmp_path):
    """What a client uploads (chunk region only) verifies too; damaged or misnamed xorbs must not."""
    parsed = {h: (p, p.read_bytes()) for h, p in upload.xorbs.items()}
    multi = [(len(d), h) for h, (p, d) in parsed.items() if len(xf.parse_xorb(d).chunks) >= 2]
    assert multi, "want a multi-chunk xorb for this test"
    hex_name = min(multi)[1]
    path, data = parsed[hex_name]
    x = xf.parse_xorb(data)

    bare = tmp_path / "bare"
    bare.write_bytes(data[: x.region_len])
    rep = _xorb_verify(cairn_bin, bare, hex_name)
    _check_xorb_report(rep, hex_name, xf.parse_xorb(bare.read_bytes()), upload.policy, "none")
    assert [c["hash"] for c in rep["chunks"]] == x.footer.chunk_hashes

    wrong = hex_name[:-1] + ("0" if hex_name[-1] != "0" else "1")
    r = _xorb_verify(cairn_bin, path, wrong, check=False)
    assert r.returncode != 0, "xorb verify accepted a wrong --hash"

    flipped = bytearray(data)
    first = x.chunks[0]
    flipped[8 + first.compressed_len // 2] ^= 0x55  # inside chunk 0's payload
    bad = tmp_path / "flipped"
    bad.write_bytes(bytes(flipped))
    r = _xorb_verify(cairn_bin, bad, hex_name, check=False)
    assert r.returncode != 0, "xorb verify accepted a xorb with a corrupted chunk"

    cut = tmp_path / "truncated"
    cut.write_bytes(data[: x.chunks[1].end - 3])  # ends inside chunk 1, no footer
    r = _xorb_verify(cairn_bin, cut, hex_name, check=False)
    assert r.returncode != 0, "xorb verify accepted a truncated xorb"
    for f in (bare, bad, cut):  # several MiB each; kept only when a check above failed
        f.unlink()


# ------------------------------------------------------------------------------------------ shards


def _expected_shard_report(s: xf.Shard) -> dict:
    return {
        "files": [{"hash": f.hash, "size": f.size, "sha256": f.sha256, "num_terms": len(f.terms)} for f in s.files],
        "xorbs": [{"hash": x.hash, "num_chunks": x.num_chunks} for x in s.xorbs],
        "footer": s.footer_size != 0,
    }


@pytest.fixture(scope="module")
def shard_reports(upload, cairn_bin) -> dict[Path, dict]:
    assert upload.shards, "hf_xet wrote no shard"
    return {shard: _shard_verify(cairn_bin, shard, upload.xorb_dir) for shard in upload.shards}


def test_shards_verify(upload, shard_reports):
    for shard, rep in shard_reports.items():
        s = xf.parse_shard(shard.read_bytes())
        assert set(rep) == SHARD_KEYS, f"{shard.name}: keys {sorted(rep)}"
        want = _expected_shard_report(s)
        for i, f in enumerate(rep["files"]):
            assert isinstance(f, dict) and set(f) == {"hash", "size", "sha256", "num_terms"}, f"file {i}: {f}"
        assert rep == want, f"{upload.policy} {shard.parent.name}/{shard.name}"


def test_uploaded_files_in_shards(upload, inputs, shard_reports):
    """Every non-empty file hf_xet reports is described by some shard, with the right size and SHA-256."""
    seen: dict[str, dict] = {}
    for rep in shard_reports.values():
        for f in rep["files"]:
            seen.setdefault(f["hash"], f)
    for name, inp in inputs.items():
        if inp.size == 0:
            continue
        h = upload.reported[name]["hash"]
        assert h in seen, f"{name}: file hash {h} not in any shard"
        assert seen[h]["size"] == inp.size, f"{name}: size"
        assert seen[h]["sha256"] == inp.sha256, f"{name}: sha256 in shard vs hashlib"
        assert seen[h]["num_terms"] >= 1


def test_shard_verify_rejects_bad_input(upload, cairn_bin, tmp_path):
    """Missing xorbs, a wrong range hash and a wrong file hash must each fail verification."""
    shard = next(p for p in upload.shards if p.parent.name == "shards")
    data = shard.read_bytes()
    s = xf.parse_shard(data)
    target = next(f for f in s.files if f.terms)  # a non-empty file

    empty_dir = tmp_path / "no_xorbs"
    empty_dir.mkdir()
    r = _shard_verify(cairn_bin, shard, empty_dir, check=False)
    assert r.returncode != 0, "shard verify passed although no xorb is present"

    # locate the target file's header and its first verification entry (file section starts at 48)
    off = 48
    for f in s.files:
        if f is target:
            break
        off += 48 * (1 + len(f.terms) * (2 if f.range_hashes is not None else 1) + (1 if f.sha256 is not None else 0))
    assert xf.hash_hex(data[off:off + 32]) == target.hash

    bad_file_hash = bytearray(data)
    bad_file_hash[off] ^= 0x01
    p = tmp_path / "bad_file_hash.mdb"
    p.write_bytes(bytes(bad_file_hash))
    r = _shard_verify(cairn_bin, p, upload.xorb_dir, check=False)
    assert r.returncode != 0, "shard verify accepted a wrong file hash"

    assert target.range_hashes is not None, "hf_xet always writes verification entries"
    ver_off = off + 48 * (1 + len(target.terms))
    assert xf.hash_hex(data[ver_off:ver_off + 32]) == target.range_hashes[0]
    bad_range = bytearray(data)
    bad_range[ver_off + 5] ^= 0x80
    p = tmp_path / "bad_range_hash.mdb"
    p.write_bytes(bytes(bad_range))
    r = _shard_verify(cairn_bin, p, upload.xorb_dir, check=False)
    assert r.returncode != 0, "shard verify accepted a wrong range (verification) hash"

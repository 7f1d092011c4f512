"""tests/vectors/xet-vectors.json (what cairn's unit tests check against) vs the stock implementations.

The JS packages recompute every derived value (tests/vectors/generate.mjs); the stock Rust client, hf_xet 1.8.0,
then checks what only it can: its own file hashes, the chunks and hashes it writes into xorbs and shards for the
same inputs, and the xorb layout of the footer example. A vector that disagrees with either fails here, so the
unit tests never run against a value nobody checked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import oracle_xetfmt as xf
from oracle_util import REPO_ROOT, hf_xet_env, run, splitmix64

VECTORS_DIR = REPO_ROOT / "tests" / "vectors"
UPLOADER = str(Path(__file__).resolve().parent / "hf_xet_upload.py")


@pytest.fixture(scope="module")
def vectors() -> dict:
    return json.loads((VECTORS_DIR / "xet-vectors.json").read_text())


def _upload(hf_xet_python: str, work: Path, files: list[Path]) -> tuple[list[dict], dict[str, bytes], list[xf.Shard]]:
    """hf_xet uploads `files` to a local CAS (no compression); returns its report, the xorbs and the shards."""
    root = work / "cas"
    # A local:// CAS, no server: the client's direct xorb path writes the files these checks read (upload
    # grants are a server exchange, tested against cairn in tests/interop).
    env = hf_xet_env(work, CLIENT_LEGACY_DIRECT_XORB_UPLOAD="1", XORB_COMPRESSION_POLICY="none")
    r = run([hf_xet_python, UPLOADER, f"local://{root}", *map(str, files)], env=env, timeout=180)
    xorb_dir = root / "xet" / "xorbs" / "xorbs"
    xorbs = {p.name.split(".", 1)[1]: p.read_bytes() for p in xorb_dir.iterdir() if p.name.count(".") == 1}
    shards = [xf.parse_shard(p.read_bytes()) for p in (root / "xet" / "xorbs" / "shards").glob("*.mdb")]
    assert xorbs and shards, f"hf_xet wrote no xorb or shard under {root}"
    return json.loads(r.stdout), xorbs, shards


def _file_chunks(shards: list[xf.Shard], file_hash: str) -> tuple[list[str], list[int], list[str] | None]:
    """A file's chunk hashes and sizes, in order, from the shard hf_xet wrote (terms → xorb chunk lists)."""
    xorbs = {x.hash: x for s in shards for x in s.xorbs}
    f = next((f for s in shards for f in s.files if f.hash == file_hash), None)
    assert f is not None, f"no shard describes file {file_hash}"
    hashes, sizes = [], []
    for t in f.terms:
        x = xorbs[t.xorb_hash]
        hashes += x.chunk_hashes[t.chunk_start:t.chunk_end]
        sizes += x.chunk_sizes[t.chunk_start:t.chunk_end]
    return hashes, sizes, f.range_hashes


def _ends(sizes: list[int]) -> list[int]:
    out, acc = [], 0
    for s in sizes:
        acc += s
        out.append(acc)
    return out


def test_vectors_agree_with_stock_js_packages(node_bin):
    """Every derived value, recomputed by @huggingface/xetchunk-wasm and friends (tests/vectors/generate.mjs)."""
    run([node_bin, str(VECTORS_DIR / "generate.mjs")], timeout=120)


def test_generator_catches_a_wrong_value(node_bin, vectors, tmp_path):
    """The check above can fail: one changed chunk hash is reported."""
    bad = json.loads(json.dumps(vectors))
    bad["splitmix64_seed0_1e6"]["chunk_hashes"][5] = "0" * 64
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(bad, indent=1))
    r = run([node_bin, str(VECTORS_DIR / "generate.mjs"), str(p)], timeout=120, check=False)
    assert r.returncode != 0 and "chunk_hashes.5" in r.stderr, r.stderr


def test_vectors_agree_with_hf_xet(hf_xet_python, vectors, tmp_path):
    """hf_xet's own chunks, xorb hash, file hash, range hashes and SHA-256 for the vector inputs."""
    sm, c59 = vectors["splitmix64_seed0_1e6"], vectors["constant_59_1e6"]
    inputs = {"splitmix": splitmix64(0, sm["n"]), "const59": bytes([c59["byte"]]) * c59["n"],
              "hello": b"hello world"}
    files = []
    for name, data in inputs.items():
        files.append(tmp_path / name)
        files[-1].write_bytes(data)
    report, xorbs, shards = _upload(hf_xet_python, tmp_path / "up", files)
    got = dict(zip(inputs, report))

    s = got["splitmix"]
    assert (s["hash"], s["size"], s["sha256"]) == (sm["file_hash_zero_salt"], sm["n"], sm["sha256"])
    hashes, sizes, range_hashes = _file_chunks(shards, s["hash"])
    assert hashes == sm["chunk_hashes"]
    assert _ends(sizes) == sm["chunk_ends"]
    # (The xorb here holds the other inputs' chunks too; xorb_hash_all is checked below with a xorb of its own.)
    assert range_hashes == [sm["range_hash_all"]], "hf_xet's verification entry for the whole file"

    _, sizes, _ = _file_chunks(shards, got["const59"]["hash"])
    assert _ends(sizes) == c59["chunk_ends"]

    hashes, sizes, _ = _file_chunks(shards, got["hello"]["hash"])
    assert (hashes, sizes) == ([vectors["chunk_hash"]["hello world"]], [11])


def test_xorb_hash_and_footer_example_agree_with_hf_xet(hf_xet_python, vectors, tmp_path):
    """A xorb hf_xet writes for the footer example's three 100-byte chunks has exactly its layout; the xorb
    holding only the SplitMix64 file's chunks has the vector's xorb hash."""
    ex = vectors["xorb_footer_example"]
    files = []
    for i in range(3):  # three distinct one-chunk files end up in one xorb, in some order
        files.append(tmp_path / f"small{i}")
        files[-1].write_bytes(bytes([i + 1]) * 100)
    _, xorbs, _ = _upload(hf_xet_python, tmp_path / "small", files)
    assert len(xorbs) == 1, "want the three chunks in one xorb"
    data = next(iter(xorbs.values()))
    x = xf.parse_xorb(data)
    assert [c.end for c in x.chunks] == ex["chunk_boundary_offsets"]
    assert x.footer is not None and x.footer.boundaries == ex["chunk_boundary_offsets"]
    assert x.footer.unpacked == ex["unpacked_chunk_offsets"]
    assert len(data) - x.region_len - 4 == ex["footer_length"]
    assert len(data) == ex["object_length"]

    sm = vectors["splitmix64_seed0_1e6"]
    f = tmp_path / "splitmix"
    f.write_bytes(splitmix64(0, sm["n"]))
    _, xorbs, _ = _upload(hf_xet_python, tmp_path / "splitmix_only", [f])
    assert list(xorbs) == [sm["xorb_hash_all"]], "the xorb of the SplitMix64 file alone is named by its hash"

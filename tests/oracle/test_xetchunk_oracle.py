"""cairn's chunker and hashes vs the stock @huggingface/xetchunk-wasm package (node oracle).

`node xetchunk_oracle.mjs FILE...` and `$CAIRN_BIN hash --json FILE...` must print, one JSON object per
line per file and in argument order, exactly the same objects:
  {"path", "size", "chunks": [{"hash", "size"}], "xorb_hash", "file_hash", "verification_hash",
   "verification_hash_first3"}
The oracle itself is checked first: against the test vectors (tests/vectors/xet-vectors.json), for
block-size independence, and against hf_xet's own (Rust) hash_files on every input. That last check
matters: xetchunk-wasm 0.2.0 is a JavaScript reimplementation, and its own chunker cuts below the 8 KiB
minimum (see README.md here), so the oracle drives the stock gear hash
itself and uses the package for all hashing.
"""

from __future__ import annotations

import json
import os
import random
import shutil

import pytest

from oracle_util import ORACLE_DIR, REPO_ROOT, hf_xet_env, json_lines, run, splitmix64, text_lines

MiB = 1024 * 1024
ORACLE = str(ORACLE_DIR / "xetchunk_oracle.mjs")
KEYS = {"path", "size", "chunks", "xorb_hash", "file_hash", "verification_hash", "verification_hash_first3"}
ZERO = "0" * 64


def _rand(seed: int, n: int) -> bytes:
    return random.Random(seed).randbytes(n)


def _text_repeated(n: int) -> bytes:
    para = (b"The quick brown fox jumps over the lazy dog. Xet stores content-defined chunks in xorbs; "
            b"shards map files to chunk ranges.\n")
    return (para * (n // len(para) + 1))[:n]


def _periodic_random(n: int, period: int = 5000) -> bytes:
    block = _rand(11, period)
    return (block * (n // period + 1))[:n]


# name -> generator; sizes per the test plan (0, 1, 8191, 8192, 131072, 131073, 3 MiB, 9 MiB,
# compressible and incompressible multi-MiB) plus the published vectors.
INPUTS = {
    "empty": lambda: b"",
    "one_byte": lambda: b"A",
    "hello_world": lambda: b"hello world",
    "rand_8191": lambda: _rand(1, 8191),
    "rand_8192": lambda: _rand(2, 8192),
    "rand_131072": lambda: _rand(3, 131072),
    "rand_131073": lambda: _rand(4, 131073),
    "rand_262144": lambda: _rand(5, 262144),
    "splitmix0_1000000": lambda: splitmix64(0, 1_000_000),
    "const59_1000000": lambda: bytes([59]) * 1_000_000,
    "rand_3MiB": lambda: _rand(6, 3 * MiB),
    "rand_9MiB": lambda: _rand(8, 9 * MiB),
    "rand_6MiB_plus_13": lambda: _rand(9, 6 * MiB + 13),
    "zeros_4MiB": lambda: bytes(4 * MiB),
    "text_repeated_5MiB": lambda: _text_repeated(5 * MiB),
    "text_varied_5MiB": lambda: text_lines(7, 5 * MiB),
    "periodic_random_5MiB": lambda: _periodic_random(5 * MiB),
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("xetchunk")
    paths = {}
    for name, gen in INPUTS.items():
        p = d / f"{name}.bin"
        p.write_bytes(gen())
        paths[name] = str(p)
    yield paths
    shutil.rmtree(d, ignore_errors=True)


def _oracle(node_bin: str, files: list[str], block: int | None = None) -> list[dict]:
    env = dict(os.environ)
    if block:
        env["XETCHUNK_ORACLE_BLOCK"] = str(block)
    r = run([node_bin, ORACLE, *files], env=env, timeout=120, cwd=ORACLE_DIR)
    objs = json_lines(r.stdout, "xetchunk oracle")
    assert len(objs) == len(files), f"oracle printed {len(objs)} objects for {len(files)} files"
    return objs


@pytest.fixture(scope="module")
def oracle_out(node_bin, inputs) -> dict[str, dict]:
    objs = _oracle(node_bin, list(inputs.values()))
    return {name: obj for name, obj in zip(inputs, objs)}


@pytest.fixture(scope="module")
def cairn_out(cairn_bin, inputs) -> dict[str, dict]:
    files = list(inputs.values())
    r = run([cairn_bin, "hash", "--json", *files], timeout=120)
    objs = json_lines(r.stdout, "cairn hash --json")
    assert len(objs) == len(files), (
        f"cairn hash --json printed {len(objs)} JSON objects for {len(files)} files (want one line per file)")
    return {name: obj for name, obj in zip(inputs, objs)}


# ------------------------------------------------------------------------------------------ oracle sanity


def test_oracle_published_vectors(oracle_out):
    """The oracle reproduces the SplitMix64 and constant-byte vectors of tests/vectors/xet-vectors.json."""
    v = json.loads((REPO_ROOT / "tests" / "vectors" / "xet-vectors.json").read_text())
    sm, want = oracle_out["splitmix0_1000000"], v["splitmix64_seed0_1e6"]
    ends, acc = [], 0
    for c in sm["chunks"]:
        acc += c["size"]
        ends.append(acc)
    assert ends == want["chunk_ends"]
    assert [c["hash"] for c in sm["chunks"]] == want["chunk_hashes"]
    assert sm["xorb_hash"] == want["xorb_hash_all"]
    assert sm["file_hash"] == want["file_hash_zero_salt"]
    assert sm["verification_hash"] == want["range_hash_all"]
    assert sm["verification_hash_first3"] == want["range_hash_0_3"]

    c59, ends, acc = oracle_out["const59_1000000"], [], 0
    for c in c59["chunks"]:
        acc += c["size"]
        ends.append(acc)
    assert ends == v["constant_59_1e6"]["chunk_ends"]

    hw = oracle_out["hello_world"]
    assert hw["chunks"] == [{"hash": v["chunk_hash"]["hello world"], "size": 11}]
    assert hw["xorb_hash"] == hw["chunks"][0]["hash"]  # single leaf passes through

    e = oracle_out["empty"]
    assert e["size"] == 0 and e["chunks"] == []
    assert e["xorb_hash"] == ZERO and e["file_hash"] == ZERO
    assert e["verification_hash_first3"] is None
    # keyed BLAKE3 (VERIFICATION_KEY) of the empty message, not zeros
    assert e["verification_hash"] == "b81ce0cc7ce434c719c5f31801bc0825ead2a9ebae7419605afc00726961e5d9"


def test_oracle_block_size_independent(node_bin, inputs, oracle_out):
    """Feeding the chunker 1 MiB or 255-byte blocks gives the same result as 37 KiB blocks."""
    names = list(inputs)
    big = _oracle(node_bin, [inputs[n] for n in names], block=MiB)
    small_names = [n for n in names if os.path.getsize(inputs[n]) <= 1_000_000]
    small = _oracle(node_bin, [inputs[n] for n in small_names], block=255)
    for n, obj in zip(names, big):
        assert obj == oracle_out[n], f"{n}: 1 MiB blocks differ from 37 KiB blocks"
    for n, obj in zip(small_names, small):
        assert obj == oracle_out[n], f"{n}: 255-byte blocks differ from 37 KiB blocks"


def test_oracle_agrees_with_hf_xet(hf_xet_python, inputs, oracle_out, tmp_path):
    """File hashes from the JS oracle equal those of the stock Rust client (hf_xet.hash_files)."""
    prog = ("import sys, json, warnings, hf_xet\n"
            "warnings.simplefilter('ignore')\n"
            "print(json.dumps([[i.hash, i.file_size] for i in hf_xet.hash_files(sys.argv[1:])]))\n")
    names = list(inputs)
    r = run([hf_xet_python, "-c", prog, *[inputs[n] for n in names]], env=hf_xet_env(tmp_path), timeout=120)
    got = json.loads(r.stdout)
    for n, (h, size) in zip(names, got):
        assert (oracle_out[n]["file_hash"], oracle_out[n]["size"]) == (h, size), f"{n}: oracle vs hf_xet.hash_files"


# ------------------------------------------------------------------------------------------ cairn vs oracle


def test_cairn_output_shape(cairn_out, inputs):
    for name, obj in cairn_out.items():
        assert isinstance(obj, dict), f"{name}: not a JSON object"
        assert set(obj) == KEYS, f"{name}: keys {sorted(obj)} != {sorted(KEYS)}"
        assert obj["path"] == inputs[name], (
            f"objects must come in argument order with path as given: got {obj['path']!r} for {inputs[name]!r}")
        for c in obj["chunks"]:
            assert isinstance(c, dict) and set(c) == {"hash", "size"}, f"{name}: bad chunk entry {c!r}"


@pytest.mark.parametrize("name", list(INPUTS))
def test_cairn_matches_oracle(name, cairn_out, oracle_out):
    want, got = oracle_out[name], cairn_out[name]
    assert got.get("path") == want["path"]
    assert got.get("size") == want["size"], "size"
    wc, gc = want["chunks"], got.get("chunks")
    assert isinstance(gc, list), "chunks must be a list"
    for i, (w, g) in enumerate(zip(wc, gc)):
        if w != g:
            off = sum(c["size"] for c in wc[:i])
            pytest.fail(f"{name}: first differing chunk #{i} (offset {off}): cairn {g} oracle {w}; "
                        f"cairn has {len(gc)} chunks, oracle {len(wc)}", pytrace=False)
    assert len(gc) == len(wc), f"{name}: cairn has {len(gc)} chunks, oracle {len(wc)}"
    for key in ("xorb_hash", "file_hash", "verification_hash", "verification_hash_first3"):
        assert got.get(key) == want[key], f"{name}: {key}"
    assert got == want  # anything else (extra keys, types)

"""Minimal, independent readers for the Xet on-disk formats, used to cross-check cairn's
`xorb verify` / `shard verify` output against what the stock client wrote.

Written from the Xet format description (docs/formats.md and xet-core's); no hashing, no decompression
(that is cairn's job, these readers only decode the stock client's own bookkeeping).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

HEX64 = frozenset("0123456789abcdef")
ZERO_HASH = "0" * 64


def is_hex64(s: object) -> bool:
    return isinstance(s, str) and len(s) == 64 and set(s) <= HEX64


def hash_hex(raw: bytes) -> str:
    """32 raw hash bytes -> Xet hex (each 8-byte group byte-reversed, then hex)."""
    assert len(raw) == 32
    return "".join(raw[i : i + 8][::-1].hex() for i in range(0, 32, 8))


# ---------------------------------------------------------------------------- xorbs

SCHEME_NAMES = {0: "none", 1: "lz4", 2: "bg4_lz4"}


@dataclass
class XorbChunk:
    compressed_len: int  # bytes after the 8-byte header
    scheme: int
    uncompressed_len: int
    end: int  # end offset in the chunk region, headers included


@dataclass
class XorbFooter:
    version: int
    xorb_hash: str
    chunk_hashes: list[str]
    boundaries: list[int]  # chunk_boundary_offsets (compressed, with headers)
    unpacked: list[int]  # cumulative uncompressed ends (v1 only, [] for v0)


@dataclass
class Xorb:
    chunks: list[XorbChunk]
    region_len: int
    footer: XorbFooter | None
    scheme_counts: dict[str, int] = field(default_factory=dict)


def parse_xorb(data: bytes) -> Xorb:
    off = 0
    chunks: list[XorbChunk] = []
    while off < len(data):
        if data[off : off + 7] == b"XETBLOB":
            break
        if off + 8 > len(data):
            raise ValueError(f"truncated chunk header at {off}")
        ver = data[off]
        clen = int.from_bytes(data[off + 1 : off + 4], "little")
        scheme = data[off + 4]
        ulen = int.from_bytes(data[off + 5 : off + 8], "little")
        if ver != 0 or scheme not in SCHEME_NAMES:
            raise ValueError(f"bad chunk header at {off}: version {ver} scheme {scheme}")
        off += 8 + clen
        if off > len(data):
            raise ValueError("chunk runs past end of xorb")
        chunks.append(XorbChunk(clen, scheme, ulen, off))
    region_len = off
    footer = None
    if off < len(data):
        footer = _parse_xorb_footer(data, off)
    counts = {name: 0 for name in SCHEME_NAMES.values()}
    for c in chunks:
        counts[SCHEME_NAMES[c.scheme]] += 1
    return Xorb(chunks, region_len, footer, counts)


def _parse_xorb_footer(data: bytes, start: int) -> XorbFooter:
    (info_len,) = struct.unpack_from("<I", data, len(data) - 4)
    f = data[start : len(data) - 4]
    if len(f) != info_len:
        raise ValueError(f"footer length {len(f)} != info_length {info_len}")
    if f[:7] != b"XETBLOB":
        raise ValueError("bad footer ident")
    version = f[7]
    xhash = hash_hex(f[8:40])
    if version == 1:
        if f[40:47] != b"XBLBHSH":
            raise ValueError("bad hash-section ident")
        (n,) = struct.unpack_from("<I", f, 48)
        p = 52
        hashes = [hash_hex(f[p + 32 * i : p + 32 * i + 32]) for i in range(n)]
        p += 32 * n
        if f[p : p + 7] != b"XBLBBND":
            raise ValueError("bad boundary-section ident")
        (n2,) = struct.unpack_from("<I", f, p + 8)
        p += 12
        bounds = list(struct.unpack_from(f"<{n}I", f, p))
        p += 4 * n
        unpacked = list(struct.unpack_from(f"<{n}I", f, p))
        p += 4 * n
        (n3,) = struct.unpack_from("<I", f, p)
        if not n == n2 == n3:
            raise ValueError("num_chunks mismatch in footer")
        return XorbFooter(1, xhash, hashes, bounds, unpacked)
    if version == 0:
        (n,) = struct.unpack_from("<I", f, 40)
        bounds = list(struct.unpack_from(f"<{n}I", f, 44))
        p = 44 + 4 * n
        hashes = [hash_hex(f[p + 32 * i : p + 32 * i + 32]) for i in range(n)]
        return XorbFooter(0, xhash, hashes, bounds, [])
    raise ValueError(f"unknown footer version {version}")


# ---------------------------------------------------------------------------- shards

SHARD_TAG = b"HFRepoMetaData\x00" + bytes([85, 105, 103, 69, 106, 123, 129, 87, 131, 165, 189, 217, 92, 205, 209, 74, 169])
BOOKEND = b"\xff" * 32 + b"\x00" * 16
FLAG_VERIFICATION = 0x80000000
FLAG_METADATA_EXT = 0x40000000


@dataclass
class ShardTerm:
    xorb_hash: str
    unpacked_bytes: int
    chunk_start: int
    chunk_end: int


@dataclass
class ShardFile:
    hash: str
    flags: int
    terms: list[ShardTerm]
    range_hashes: list[str] | None
    sha256: str | None

    @property
    def size(self) -> int:
        return sum(t.unpacked_bytes for t in self.terms)


@dataclass
class ShardXorb:
    hash: str
    num_chunks: int
    num_bytes: int
    chunk_hashes: list[str]
    chunk_sizes: list[int]


@dataclass
class Shard:
    version: int
    footer_size: int
    files: list[ShardFile]
    xorbs: list[ShardXorb]
    sections_end: int
    footer: dict | None


def parse_shard(data: bytes) -> Shard:
    if data[:32] != SHARD_TAG:
        raise ValueError("bad shard header tag")
    version, footer_size = struct.unpack_from("<QQ", data, 32)
    off = 48
    files: list[ShardFile] = []
    while True:
        h = data[off : off + 48]
        off += 48
        if h == BOOKEND:
            break
        flags, n = struct.unpack_from("<II", h, 32)
        terms = []
        for _ in range(n):
            e = data[off : off + 48]
            off += 48
            _xflags, ub, cs, ce = struct.unpack_from("<IIII", e, 32)
            terms.append(ShardTerm(hash_hex(e[:32]), ub, cs, ce))
        rh = None
        if flags & FLAG_VERIFICATION:
            rh = [hash_hex(data[off + 48 * i : off + 48 * i + 32]) for i in range(n)]
            off += 48 * n
        sha = None
        if flags & FLAG_METADATA_EXT:
            sha = hash_hex(data[off : off + 32])
            off += 48
        files.append(ShardFile(hash_hex(h[:32]), flags, terms, rh, sha))
    xorbs: list[ShardXorb] = []
    while True:
        h = data[off : off + 48]
        off += 48
        if h == BOOKEND:
            break
        _fl, n, nbytes, _ondisk = struct.unpack_from("<IIII", h, 32)
        hashes, sizes = [], []
        for _ in range(n):
            e = data[off : off + 48]
            off += 48
            hashes.append(hash_hex(e[:32]))
            sizes.append(struct.unpack_from("<I", e, 36)[0])
        xorbs.append(ShardXorb(hash_hex(h[:32]), n, nbytes, hashes, sizes))
    footer = None
    if footer_size:
        f = data[len(data) - 200 :]
        names = ["version", "file_info_offset", "xorb_info_offset", "file_lookup_offset", "file_lookup_num_entry",
                 "xorb_lookup_offset", "xorb_lookup_num_entry", "chunk_lookup_offset", "chunk_lookup_num_entry"]
        footer = dict(zip(names, struct.unpack_from("<9Q", f, 0)))
        footer["footer_offset"] = struct.unpack_from("<Q", f, 192)[0]
    return Shard(version, footer_size, files, xorbs, off, footer)

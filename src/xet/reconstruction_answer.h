// A reconstruction answer as a client reads it (protocol §5.2, v1 and v2 forms): the terms of a file, and
// the xorb ranges they are fetched from. `cairn get` (client/) downloads with it; the mirror (mirror/relay.h)
// relays upstream's with it.
//
// Parsing is bounded by the answer's bytes and checks what the protocol promises (each term's chunks lie in
// one fetch of its xorb); decoding checks each chunk's header and sizes. Failures: kMalformed for an answer
// that is not what the protocol says, kInconsistent for fetched bytes that do not decode as promised.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"
#include "xet/hash.h"

namespace cairn::xet {

struct ParsedReconstruction {
  struct Term {
    std::string xorb;  // 64 hex digits, as the answer gives it
    uint32_t cs = 0, ce = 0;
    uint64_t length = 0;  // unpacked_length
    size_t fetch = 0;     // index into fetches: the one holding its chunks
  };
  struct Fetch {
    std::string xorb;
    std::string url;
    uint32_t cs = 0, ce = 0;
    uint64_t first = 0, last = 0;  // bytes, inclusive
  };
  uint64_t offset_into_first = 0;
  std::vector<Term> terms;
  std::vector<Fetch> fetches;
};

Result<ParsedReconstruction> ParseReconstruction(const std::string& body, bool v2);

// A fetch's chunks, decoded and checked, with their hashes.
struct DecodedFetch {
  std::vector<uint8_t> bytes;     // the decoded chunks, back to back
  std::vector<uint64_t> ends;     // each chunk's end in `bytes`
  std::vector<ChunkHash> hashes;  // each chunk's hash
};

// Decodes `body`, the bytes of fetch `f` (exactly its byte range).
Result<DecodedFetch> DecodeFetch(const ParsedReconstruction::Fetch& f, std::span<const uint8_t> body);

}  // namespace cairn::xet

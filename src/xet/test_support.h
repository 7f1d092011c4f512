// Helpers shared by the protocol tests and benchmarks.
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace cairn::xet::testing {

// The SplitMix64 byte stream of protocol §1.4: each output appended as 8 little-endian bytes, truncated to n.
std::vector<uint8_t> SplitMix64Bytes(uint64_t seed, size_t n);

// Text-like bytes (words from a small vocabulary with punctuation), deterministic from `seed`: compresses
// with LZ4 roughly as source code or JSON does.
std::vector<uint8_t> TextLikeBytes(uint64_t seed, size_t n);

// Path of a file in ../shared (the reference material beside the repository).
std::string SharedPath(const std::string& name);

// Whole file contents; aborts the test binary if unreadable.
std::string ReadFileOrDie(const std::string& path);

// ../shared/xet-vectors.json, parsed.
const boost::json::value& Vectors();

}  // namespace cairn::xet::testing

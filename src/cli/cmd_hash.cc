#include <openssl/sha.h>

#include <boost/json.hpp>
#include <fstream>
#include <iostream>

#include "cli/commands.h"
#include "xet/chunker.h"
#include "xet/hashing.h"

namespace cairn::cli {
namespace {

// Chunks and hashes one file while streaming it in 1 MiB reads.
int HashOne(const std::string& path, bool json) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << "cairn hash: cannot open " << path << "\n";
    return 1;
  }
  std::vector<xet::HashedChunk> chunks;
  std::vector<uint8_t> carry;  // bytes of the chunk in progress
  std::vector<uint8_t> buf(1 << 20);
  xet::Chunker chunker;
  uint64_t size = 0;
  while (in) {
    in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
    std::span<const uint8_t> block(buf.data(), static_cast<size_t>(in.gcount()));
    size += block.size();
    while (!block.empty()) {
      bool boundary = false;
      const size_t used = chunker.Consume(block, &boundary);
      carry.insert(carry.end(), block.begin(), block.begin() + static_cast<std::ptrdiff_t>(used));
      block = block.subspan(used);
      if (boundary) {
        chunks.push_back({xet::ChunkHashOf(carry), carry.size()});
        carry.clear();
      }
    }
  }
  if (!carry.empty()) chunks.push_back({xet::ChunkHashOf(carry), carry.size()});

  const xet::FileHash file_hash = xet::FileHashOf(chunks);
  if (!json) {
    std::cout << file_hash.hex() << "  " << size << "  " << path << "\n";
    return 0;
  }
  boost::json::array list;
  for (const auto& c : chunks) list.push_back({{"hash", c.hash.hex()}, {"size", c.size}});
  boost::json::value first3 = nullptr;
  if (!chunks.empty())
    first3 = xet::RangeHashOf(std::span(chunks).first(std::min<size_t>(3, chunks.size()))).hex();
  boost::json::object o{{"path", path},
                        {"size", size},
                        {"chunks", std::move(list)},
                        {"xorb_hash", xet::XorbHashOf(chunks).hex()},
                        {"file_hash", file_hash.hex()},
                        {"verification_hash", xet::RangeHashOf(chunks).hex()},
                        {"verification_hash_first3", first3}};
  std::cout << boost::json::serialize(o) << "\n";
  return 0;
}

}  // namespace

int RunHash(const HashOptions& opts) {
  int rc = 0;
  for (const auto& f : opts.files) rc |= HashOne(f, opts.json);
  return rc;
}

}  // namespace cairn::cli

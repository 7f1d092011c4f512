// What a shard says of the files and xorbs an upload made, in exactly the stock client's form: the SHA-256 in
// its byte order, a file's terms and verification hashes from where its chunks were placed, a xorb's chunk
// listing, and the shard's upload form. Pure functions of their arguments, safe from any thread; Sha256 is
// one digest in progress (one thread at a time).
#pragma once

#include <openssl/evp.h>

#include <cstdint>
#include <span>
#include <vector>

#include "xet/hash.h"
#include "xet/hashing.h"
#include "xet/shard.h"

namespace cairn::ingest {

// A SHA-256 digest as shards store it (the stock client's order: each 8-byte group reversed).
xet::Hash ShardSha256(const uint8_t (&digest)[32]);

// A SHA-256 over data given in pieces, finished in shard order.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Update(std::span<const uint8_t> data);
  xet::Hash Final();  // once

 private:
  EVP_MD_CTX* ctx_;
};

// The SHA-256 of `data` in shard order.
xet::Hash ShardSha256Of(std::span<const uint8_t> data);

// A file's chunk as an upload places it: its hash and size, and the xorb and index it is stored at.
struct PlacedChunk {
  xet::ChunkHash hash;
  uint64_t size = 0;
  xet::XorbHash xorb;
  uint32_t chunk = 0;
};

// The shard's record of a file made of `chunks`, in order: terms of consecutive chunks of one xorb with their
// verification hashes, and the file hash. The SHA-256 is left for the caller.
xet::FileRecord FileRecordOf(std::span<const PlacedChunk> chunks);

// The shard's listing of xorb `hash` made of `chunks` in order: offsets, sizes and, with `mark_global_dedup`,
// the global-dedup flag on every chunk whose hash is 0 modulo xet::kGlobalDedupModulus (as the stock client
// marks the chunks the server may answer dedup queries with).
xet::XorbRecord XorbRecordOf(const xet::XorbHash& hash, std::span<const xet::HashedChunk> chunks,
                             bool mark_global_dedup);

// The stock client's form of a shard upload: SerializeShard's output cut before the lookup tables, with the
// header's footer size set to 0.
std::vector<uint8_t> ShardUploadForm(const xet::Shard& shard);

}  // namespace cairn::ingest

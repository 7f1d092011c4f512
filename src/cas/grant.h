// Grants: the record, kept in the blob store beside the shards, that a write token of some scope registered a
// shard. The index holds the same fact (each file's scopes); grants exist so that `cairn index rebuild` can
// recover which scopes see which files from the store alone.
//
// A grant is a small text blob an operator can read:
//     cairn-grant 1\n
//     shard <64 hex digits>\n
//     scope <its length in bytes, decimal>\n<the scope's bytes>
// named, like shards, by xet::ChunkHashOf of its bytes (so one (shard, scope) pair has one name, and a store
// copy verifies grants as it verifies shards). Written before the index commits the shard: a crash between
// the two leaves a grant for a shard the index lacks, which fsck reports as unindexed and a rebuild applies.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "store/blob_store.h"
#include "xet/hash.h"
#include "xet/result.h"

namespace cairn::cas {

struct Grant {
  xet::Hash shard;
  std::string scope;  // non-empty
};

inline constexpr size_t kMaxGrantSize = 4096;

std::vector<uint8_t> EncodeGrant(const Grant& grant);
// kMalformed for anything EncodeGrant did not produce (bounded by `bytes`; at most kMaxGrantSize).
xet::Result<Grant> ParseGrant(std::span<const uint8_t> bytes);

// The grant's name in the store: xet::ChunkHashOf(EncodeGrant(grant)).
xet::Hash GrantName(const Grant& grant);

// Makes `grant` durable in `store`, also when it is stored already (thread-safe).
xet::Status RecordGrant(store::BlobStore& store, const Grant& grant);

}  // namespace cairn::cas

// Grants: the record, kept in the blob store beside the shards, that a write token of some scope registered a
// shard. Revocations: the record that a scope removed one of its files since (DELETE /v1/files). The index
// holds the same facts (each file's scopes, its `revocations`); these exist so that `cairn index rebuild` can
// recover which scopes see which files from the store alone: every file of a granted shard, less the revoked.
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

#include "common/error.h"
#include "index/index.h"
#include "store/blob_store.h"
#include "xet/hash.h"

namespace cairn::cas {

// The store names of a scope's grants and revocations are their bytes' xet::ChunkHashOf; at most this long.
inline constexpr size_t kMaxScopeRecordSize = 4096;

struct Grant {
  xet::Hash shard;
  std::string scope;  // non-empty
};

inline constexpr size_t kMaxGrantSize = kMaxScopeRecordSize;

std::vector<uint8_t> EncodeGrant(const Grant& grant);
// kMalformed for anything EncodeGrant did not produce (bounded by `bytes`; at most kMaxGrantSize).
Result<Grant> ParseGrant(std::span<const uint8_t> bytes);

// The grant's name in the store: xet::ChunkHashOf(EncodeGrant(grant)).
xet::Hash GrantName(const Grant& grant);

// Makes `grant` durable in `store`, also when it is stored already (thread-safe).
Status RecordGrant(store::BlobStore& store, const Grant& grant);

// A revocation, as text:
//     cairn-revocation 1\n
//     file <64 hex digits>\n
//     scope <its length in bytes, decimal>\n<the scope's bytes>
// Written once the index has taken the file out of the scope (and recorded the revocation), deleted once a
// registration gave it back (the index marks the revocation cleared in the same transaction: CommitOutcome).
struct Revocation {
  xet::FileHash file;
  std::string scope;  // non-empty
};

std::vector<uint8_t> EncodeRevocation(const Revocation& revocation);
// kMalformed for anything EncodeRevocation did not produce (bounded by `bytes`).
Result<Revocation> ParseRevocation(std::span<const uint8_t> bytes);
xet::Hash RevocationName(const Revocation& revocation);
// Makes `revocation` durable in `store`, also when it is stored already (thread-safe).
Status RecordRevocation(store::BlobStore& store, const Revocation& revocation);

// Deletes the blobs of these cleared revocations, then their records (index::CasIndex::ForgetRevocations).
Status ForgetClearedRevocations(index::CasIndex& index, store::BlobStore& store,
                                std::span<const index::RevocationKey> cleared);
// The same for every cleared revocation of the index: what a crash or a failed delete left after the
// registration that cleared it (the collector runs it; so does fsck's repair). Returns how many went.
Result<size_t> FinishClearedRevocations(index::CasIndex& index, store::BlobStore& store);

}  // namespace cairn::cas

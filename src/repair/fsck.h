// Consistency checks between the index and the blob store (`cairn fsck`), the repairs that are provably
// safe, and rebuilding a lost index from the store alone (`cairn index rebuild`).
//
// What is checked:
//  - every xorb and shard the index names is in the store (else kMissingObject: damage);
//  - every xorb, shard and grant in the store is indexed (else kUnindexed: not damage by itself; an upload
//    interrupted between its store write and its index commit leaves one, and it was never acknowledged);
//  - deep: every stored xorb re-validates (every chunk decoded and hashed, the hash its name, cairn's footer,
//    the layout the index holds), every stored shard parses and hashes to its name, every grant parses and
//    hashes to its name (else kCorrupt: damage); every indexed file's terms name indexed xorbs, chunk ranges
//    inside them and the byte counts those chunks have (else kBadTerm: damage).
//
// Repairs (`repair`), each from an object's own verified bytes: an unindexed xorb that validates is indexed;
// an unindexed shard with grants is registered for each granted scope through CasService::PutShard (which
// verifies it against the indexed xorbs as an upload would). A shard some of whose xorbs the garbage
// collector freed (with every file that used them) registers what it still describes whole, as a new shard:
// its live files come back, the freed ones do not. Nothing is ever deleted or rewritten: a missing or corrupt
// object stays reported until a client uploads it again (the store replaces a corrupt blob).
//
// Revocations (a scope's removal of a file, cas/grant.h) are checked against the index's: one the index
// records and the store lacks is reported missing (a rebuild would give the file back; repair stores it); a
// stored one the index does not record, for a file the scope sees, is reported (the index says the scope
// sees it: a registration after the revocation, or an index restored from before it); the blobs of cleared
// ones are deleted by repair.
//
// Rebuilding is the same repair on an empty index (refused otherwise), with `default_scope` for shards that
// have no grant (stored before cairn kept grants); then each stored revocation takes its file out of its
// scope again, as DELETE /v1/files did.
//
// Thread-safety: each call runs on its own threads (`threads`); the index and store may serve other callers
// meanwhile (objects written during the walk may or may not be seen). Failures: an error value when the
// index or the store cannot be listed; problems with single objects are findings, not errors.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cas/service.h"
#include "common/error.h"
#include "index/index.h"
#include "store/blob_store.h"
#include "xet/hash.h"

namespace cairn::repair {

enum class FindingKind {
  kMissingObject,  // the index names it, the store lacks it
  kUnindexed,      // stored, not indexed
  kCorrupt,        // stored bytes that do not verify
  kBadTerm,        // a file term the indexed xorbs cannot serve
};
std::string_view FindingKindName(FindingKind kind);  // "missing", "unindexed", "corrupt", "bad-term"

struct Finding {
  FindingKind kind;
  std::string what;  // "xorb", "shard", "grant" or "file"
  xet::Hash hash;
  std::string detail;
  bool repaired = false;
};

struct FsckOptions {
  bool deep = false;
  bool repair = false;
  size_t threads = 4;
  std::string default_scope;  // repair only: registers shards that have no grant under this scope
  std::function<void(const std::string&)> progress;  // a line now and then
  // Xorbs and shards a sweep has claimed (gc::BeingSwept): indexed, and their blobs may be gone already,
  // which is the collector's unfinished work, not damage.
  std::vector<xet::Hash> being_swept;
  // Read again once the store is listed (a sweep may claim and delete meanwhile), when given.
  std::function<Result<std::vector<xet::Hash>>()> read_being_swept;
  // Repair only (RebuildIndex sets it): stored revocations the index lacks are applied.
  bool apply_revocations = false;
};

struct FsckReport {
  uint64_t indexed_xorbs = 0, stored_xorbs = 0;
  uint64_t indexed_shards = 0, stored_shards = 0, stored_grants = 0;
  uint64_t indexed_revocations = 0, stored_revocations = 0;
  uint64_t checked_files = 0, checked_terms = 0;
  uint64_t verified_bytes = 0;  // read and verified (deep)
  uint64_t repaired = 0;
  std::vector<Finding> findings;  // in the order found
  // Whether anything unrepaired is damage (missing, corrupt, bad term); unindexed objects are not.
  bool damaged() const;
  bool clean() const { return findings.empty(); }
};

// `cas` registers repaired shards; it must use `index` and `store`.
Result<FsckReport> Fsck(cas::CasService& cas, index::CasIndex& index, store::BlobStore& store,
                        const FsckOptions& options);

// Fsck with repair into an empty `index` (kInconsistent when it holds any xorb, file or shard).
Result<FsckReport> RebuildIndex(cas::CasService& cas, index::CasIndex& index, store::BlobStore& store,
                                FsckOptions options);

// Whether stored bytes are what their name says: a xorb validates against its hash with cairn's footer; a
// shard or a grant hashes to its name (xet::ChunkHashOf). Shared with `cairn store copy`.
bool VerifyStoredBlob(store::BlobKind kind, const xet::Hash& hash, std::span<const uint8_t> bytes);

}  // namespace cairn::repair

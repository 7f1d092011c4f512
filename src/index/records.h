// The index's values: packed, immutable records of xorb layouts and file terms, and what a shard commit
// registers. Packed forms are little-endian and fixed-size per element so they can be stored as one BLOB,
// cached as one allocation and searched in place.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"
#include "xet/hash.h"
#include "xet/shard.h"
#include "xet/verify.h"
#include "xet/xorb.h"

namespace cairn::index {

using xet::ChunkHash;
using xet::FileHash;
using xet::Hash;
using xet::XorbHash;

// Per chunk: 32-byte hash, u32 unpacked size, u32 end offset in the chunk region.
inline constexpr size_t kPackedChunkSize = 40;
// Per term: 32-byte xorb hash, u32 chunk_start, u32 chunk_end, u32 unpacked bytes, u64 end byte offset of
// the term in the file (cumulative), so a byte range maps to terms by binary search.
inline constexpr size_t kPackedTermSize = 52;

// A lease's name and holder (MirrorIndex): 1 to 256 bytes each, on both backends; kMalformed otherwise.
inline Status CheckLeaseNames(std::string_view name, std::string_view holder) {
  if (name.empty() || name.size() > 256 || holder.empty() || holder.size() > 256) {
    return Malformed("a lease's name and holder are 1 to 256 bytes");
  }
  return Ok{};
}
inline Status CheckLeaseName(std::string_view name) {
  return CheckLeaseNames(name, name);
}

// A row of the secrets table (the signing keys, config/secrets.h).
struct SecretRecord {
  std::string name;
  std::string value;
  int64_t created_at = 0;  // unix seconds
};

// A stored xorb's layout. Immutable.
struct XorbEntry {
  XorbHash hash;
  std::vector<uint8_t> packed;  // chunk_count * kPackedChunkSize
  uint32_t chunk_count = 0;
  uint32_t region_size = 0;  // bytes of the chunk region (end offset of the last chunk)
  uint64_t unpacked_size = 0;
  int64_t stored_at = 0;  // unix seconds

  xet::XorbChunk chunk(size_t i) const;
  xet::XorbLayout ToLayout() const;
  size_t memory_size() const { return sizeof(*this) + packed.size(); }
};

std::vector<uint8_t> PackLayout(const xet::XorbLayout& layout);
// An entry read back from a database row; kIo when the packed bytes disagree with the count (a corrupt row
// must not crash a reader).
Result<std::shared_ptr<const XorbEntry>> XorbEntryFromRow(const XorbHash& hash,
                                                          std::span<const uint8_t> packed,
                                                          int64_t chunk_count, int64_t region_size,
                                                          int64_t unpacked_size, int64_t stored_at);
// Builds the entry for `layout` (stored_at left 0).
XorbEntry MakeXorbEntry(const XorbHash& hash, const xet::XorbLayout& layout);

struct Term {
  XorbHash xorb;
  uint32_t chunk_start = 0;
  uint32_t chunk_end = 0;  // exclusive
  uint32_t unpacked_bytes = 0;
  uint64_t end_offset = 0;  // end of this term's bytes in the file
  uint64_t begin_offset() const { return end_offset - unpacked_bytes; }
};

// Per term: u32 start and u32 end (exclusive) of the term's chunks in its xorb's chunk region, in bytes:
// what a reconstruction answer's URL range for the term is, without the xorb's layout.
inline constexpr size_t kPackedRangeSize = 8;

struct TermRange {
  uint32_t start = 0;
  uint32_t end = 0;  // exclusive
};

// A file's reconstruction. Immutable.
struct FileEntry {
  FileHash hash;
  std::vector<uint8_t> packed_terms;  // term_count * kPackedTermSize
  uint32_t term_count = 0;
  uint64_t size = 0;
  std::optional<Hash> sha256;  // as the client sent it (see xet::FileRecord::sha256)
  // term_count * kPackedRangeSize; empty for files registered before cairn recorded them (schema < 5).
  std::vector<uint8_t> packed_ranges;
  // When this record was written (unix seconds): which record of the file this is. A file's terms never
  // change while its record lives, but the collector may sweep the record and a later upload register the
  // file again with other xorbs: caches of terms compare this with the record the index holds now.
  int64_t created_at = 0;

  Term term(size_t i) const;
  bool has_ranges() const { return !packed_ranges.empty(); }
  TermRange range(size_t i) const;  // only when has_ranges()
  // The term holding byte `offset` of the file, by binary search; term_count when offset >= size.
  size_t FindTerm(uint64_t offset) const;
  size_t memory_size() const { return sizeof(*this) + packed_terms.size() + packed_ranges.size(); }
};

std::vector<uint8_t> PackTerms(std::span<const xet::FileTerm> terms);
// The xorbs that packed terms name, each once, in hash order (a trailing partial term is ignored).
std::vector<XorbHash> DistinctTermXorbs(std::span<const uint8_t> packed_terms);
// The byte ranges of `terms` in their xorbs, from the xorbs' layouts (kNotFound for a missing layout,
// kInconsistent for a term outside its xorb).
Result<std::vector<uint8_t>> PackTermRanges(std::span<const xet::FileTerm> terms,
                                            const xet::LayoutLookup& layouts);
// The same for a file's row (sha256 as stored: absent, or 32 bytes; ranges empty when not recorded).
Result<std::shared_ptr<const FileEntry>> FileEntryFromRow(
    const FileHash& hash, std::span<const uint8_t> packed_terms, int64_t term_count, int64_t size,
    std::optional<Hash> sha256, std::span<const uint8_t> packed_ranges, int64_t created_at = 0);

// One file of a shard commit. Build it with MakeFileCommit so the packed terms and the size agree.
struct FileCommit {
  FileHash hash;
  std::vector<uint8_t> packed_terms;
  uint32_t term_count = 0;
  uint64_t size = 0;
  std::optional<Hash> sha256;
  std::vector<uint8_t> packed_ranges;  // PackTermRanges, or empty when the layouts are not at hand
};
// `layouts`, when given, also records each term's byte range (the service always gives them).
Result<FileCommit> MakeFileCommit(const xet::FileRecord& file, const xet::LayoutLookup& layouts);
FileCommit MakeFileCommit(const xet::FileRecord& file);

// A global-dedup entry: `chunk` can be found in `xorb`, described by the shard being committed.
struct DedupEntry {
  ChunkHash chunk;
  XorbHash xorb;
};

// The xorbs one shard brought together: the neighbourhood a dedup answer offers for a hit in that shard
// (a client that re-uploads data asks about one chunk in ~1,024, so it learns of a xorb only through
// its neighbours). Immutable.
struct ShardXorbs {
  std::vector<XorbHash> listed;      // the shard's xorb section, in upload order
  std::vector<XorbHash> referenced;  // xorbs its files use but it does not list, in first-use order
  size_t memory_size() const {
    return sizeof(*this) + (listed.size() + referenced.size()) * sizeof(XorbHash);
  }
};

// Everything one accepted shard registers, in one atomic step.
struct ShardCommit {
  Hash shard;
  uint64_t shard_size = 0;
  std::vector<FileCommit> files;
  std::vector<DedupEntry> dedup;
  std::string scope;  // the scope of the write token that uploaded the shard
  ShardXorbs xorbs;   // every xorb must be registered; no xorb twice
};

// What every backend checks of a commit before storing it: each file's packed terms agree with its term count
// and size, and its ranges (if any) with its term count (kMalformed otherwise).
Status CheckShardCommit(const ShardCommit& commit);

struct CommitOutcome {
  bool already_existed = false;  // the shard was registered before (its files now also belong to `scope`)
  bool new_scope = false;        // the scope had not registered the shard before (a new shard: always)
  // Files the scope had removed (revoked) and sees again: their revocations are cleared, for the caller to
  // delete their blobs and then ForgetRevocations.
  std::vector<FileHash> cleared_revocations;
};

// A scope's removal of a file (CasIndex::UnregisterFile), recorded so that a rebuild from the store does not
// give the file back (cas/grant.h). `cleared`: a registration gave the file back since, and the revocation's
// blob is to be deleted.
struct RevocationKey {
  FileHash file;
  std::string scope;
  bool operator==(const RevocationKey&) const = default;
  bool operator<(const RevocationKey& o) const {
    return file < o.file || (file == o.file && scope < o.scope);
  }
};
struct RevocationRecord {
  RevocationKey key;
  bool cleared = false;
};
// The keys of a page of records (ListClearedRevocations from a listing's rows).
Result<std::vector<RevocationKey>> KeysOf(Result<std::vector<RevocationRecord>> page);

enum class Unregistered {
  kRemoved,        // the scope saw the file; it no longer does, and the revocation is recorded
  kRemovedBefore,  // the scope had removed it already; its revocation is recorded, not cleared
  kNotVisible,     // the scope never saw it (or saw it again and had its revocation cleared): nothing changed
};

struct DedupHit {
  XorbHash xorb;
  Hash shard;  // the shard that registered the entry: the body of a dedup answer
};

struct ShardInfo {
  uint64_t size = 0;
  int64_t registered_at = 0;  // unix seconds
};

// One file of a scope's listing.
struct ListedFile {
  FileHash hash;
  uint64_t size = 0;
  std::optional<Hash> sha256;  // as stored (see FileEntry::sha256)
  int64_t created_at = 0;      // unix seconds, when the index first registered it
};

// What one scope's files add up to (each distinct file once).
struct ScopeTotals {
  uint64_t files = 0;
  uint64_t bytes = 0;
};

// ---- Garbage collection (index.h's GcIndex; docs/operations.md)

// What the collector quarantines and sweeps. Stored as its number: never renumber.
// A shard is quarantined claimed, by the claim that takes the last xorb it named: nothing it describes can be
// read any more, so it goes with its grants.
enum class GcKind : uint8_t { kXorb = 0, kFile = 1, kShard = 2 };

// An object a mark found unreferenced: since when (unix seconds, the first mark that found it so), whether a
// sweep has claimed it (the unix second of the claim; 0: not claimed) and the bytes it holds (a xorb's chunk
// region; a file's size).
struct Quarantined {
  Hash hash;
  int64_t since = 0;
  int64_t claimed_at = 0;
  uint64_t bytes = 0;
};

// A registered file and the distinct xorbs its terms use (what a mark reads of every file). `registered`:
// live by registration, i.e. visible to a plain CAS scope (no repository's), or named by a bucket's current
// file. What a repository committed is live by reachability from its refs, which the collector walks itself.
struct FileXorbs {
  FileHash hash;
  uint64_t size = 0;
  std::vector<XorbHash> xorbs;
  bool registered = false;
};

// Whether a xorb may be named to a client now: not registered, registered (and no longer quarantined, if it
// was: naming it revives it), or claimed by a sweep that is deleting it (ask again once the sweep is over).
// Superseded: registered, but a compaction moved its live chunks to another xorb (GcIndex::Repoint): what
// names it still reads it until the collector sweeps it, and a dedup answer no longer offers it (nor does
// asking revive it).
enum class XorbUse : uint8_t { kAbsent, kStored, kBeingSwept, kSuperseded };

// ---- Compaction (index.h's GcIndex::Repoint; src/compact/)

// A file whose terms a compaction moves: the record it read (FileEntry::created_at) and the new terms, the
// same chunks as before in as many terms, some now in the new xorb (ranges: PackTermRanges of them).
struct RepointedFile {
  FileHash hash;
  int64_t record = 0;
  std::vector<uint8_t> packed_terms;
  std::vector<uint8_t> packed_ranges;
};

// One compaction step: `into` (registered already) holds the live chunks of `replaced`; every file using one
// of those moves to it; `shards` (one per scope that sees any of the files, each describing the files that
// scope sees and listing `into`) are what a rebuild from the store and the dedup answers go by from then on.
struct Repointing {
  XorbHash into;
  std::vector<XorbHash> replaced;
  std::vector<RepointedFile> files;
  std::vector<ShardCommit> shards;
};
// What every backend checks of a repointing before storing it (kMalformed otherwise): its shards as
// CheckShardCommit, each file's terms and ranges of whole elements and agreeing, no xorb replaced twice,
// `into` not replaced.
Status CheckRepointing(const Repointing& repointing);

// What a sweep step removed.
struct SweptTotals {
  uint64_t objects = 0;
  uint64_t bytes = 0;
};

// A scope a shard was registered for (the name of its grant in the store, cas/grant.h).
struct ShardScope {
  Hash shard;
  std::string scope;
};

// ---- Quotas (index.h's QuotaIndex; src/quota/)

// A namespace's storage quota and what the quota service last measured of it. `used` is exact as of
// `measured_at`; `reserved` is what commits were admitted for and have not published yet, `pending` what they
// published since the measure (each bounds from above what they add); `stale` says something may have left
// since (a deletion, a sweep, a repository moved), so `used` may be too high.
struct QuotaRecord {
  std::string ns;
  std::optional<uint64_t> limit;  // bytes; none: usage is measured, nothing refused
  uint64_t used = 0;
  uint64_t pending = 0;
  uint64_t reserved = 0;
  int64_t reserved_at = 0;  // unix seconds of the last reservation
  int64_t measured_at = 0;  // unix seconds; 0: never measured
  int64_t generation = 0;   // changes with every measure recorded and every mark as stale
  bool stale = true;
  // Bytes the namespace may hold at most now: never less than what it holds.
  uint64_t charged() const { return used + pending + reserved; }
  // Whether `used` is what the namespace holds (as of measured_at).
  bool exact() const { return measured_at != 0 && pending == 0 && reserved == 0 && !stale; }
};

// A change to a namespace's quota made in the same transaction as the write that carries it (ShareFiles,
// PutRepoObjects), so that what a write makes visible is charged at the same moment: `publish` bytes become
// pending, `reserve` bytes are reserved (for files a later write publishes), `settle` bytes move from
// reserved to pending (the reservation's files are published by this write). With `check`, the write fails
// with kQuota, changing nothing, when used + pending + reserved + publish + reserve would pass the limit. A
// namespace without a record is not charged.
struct QuotaCharge {
  std::string ns;
  uint64_t publish = 0;
  uint64_t reserve = 0;
  uint64_t settle = 0;
  bool check = true;
};

// A measure of a namespace, with what it read of the record before it began (QuotaIndex::RecordQuotaMeasure).
struct QuotaMeasure {
  uint64_t used = 0;
  uint64_t pending_seen = 0;
  int64_t generation_seen = 0;
  int64_t at = 0;  // unix seconds
};

struct IndexStats {
  uint64_t xorbs = 0;
  uint64_t files = 0;
  uint64_t chunks = 0;        // Σ chunks of stored xorbs
  uint64_t stored_bytes = 0;  // Σ xorb chunk regions + Σ shard sizes
  uint64_t shards = 0;
  uint64_t unpacked_bytes = 0;  // Σ unpacked sizes of stored xorbs
  uint64_t file_bytes = 0;      // Σ sizes of registered files (each distinct file once)

  // Logical bytes per stored unpacked byte: how much the chunk-level dedup saves (0 before any xorb).
  double dedup_ratio() const {
    return unpacked_bytes == 0 ? 0.0 : static_cast<double>(file_bytes) / static_cast<double>(unpacked_bytes);
  }
};

}  // namespace cairn::index

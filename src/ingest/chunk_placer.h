// Where each chunk of an upload goes, decided as the stock client decides it: a chunk placed earlier in the
// same upload, or named by a dedup answer (a shard as GET /v1/chunks serves it), is referenced where it lies;
// any other is appended to the xorb being filled, which is sealed — handed to `on_seal` with its bytes — once
// the next chunk would not fit. Dedup answers are asked for a file's first chunk and for every chunk the
// stock client marks (hash ≡ 0 mod xet::kGlobalDedupModulus), as hf_xet does. At the end a file's placements
// become its shard record and the sealed xorbs their listings.
//
// Used by `cairn put` (which asks a server over HTTP and sends sealed xorbs) and by the server itself when
// bytes arrive without Xet (git-lfs uploads), which asks its own CAS. Thread-safety: none; the callbacks run
// on the caller's thread. Memory: the xorb being filled (at most xet::kMaxXorbUnpacked) and ~80 bytes per
// chunk.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/error.h"
#include "xet/hashing.h"
#include "xet/shard.h"
#include "xet/xorb.h"

namespace cairn::ingest {

// A xorb the placer filled: raw chunk bytes back to back (or, `encoded`, the chunks' records as a xorb holds
// them: header and payload), where each ends, and each chunk's hash and size.
struct SealedXorb {
  xet::XorbHash hash;
  std::vector<uint8_t> data;
  std::vector<uint32_t> ends;
  std::vector<xet::HashedChunk> chunks;
  bool encoded = false;
  // Raw chunks: as spans into `data`, with their hashes (what xet::EncodeXorb takes).
  std::vector<std::span<const uint8_t>> Spans() const;
  std::vector<xet::ChunkHash> Hashes() const;
  // Encoded: each chunk's payload offset in `data` and hash (what CasService::PutHashedXorb takes).
  std::vector<xet::PrehashedChunk> Prehashed() const;
};

class ChunkPlacer {
 public:
  // A dedup answer for a chunk: the shard bytes, or nullopt for none (a failed query is a miss, as in
  // hf_xet).
  using Ask = std::function<std::optional<std::vector<uint8_t>>(const xet::ChunkHash&)>;
  // Takes a sealed xorb (store it, send it, queue it); an error stops the upload.
  using OnSeal = std::function<Status(SealedXorb&&)>;
  // A buffer for the next xorb's bytes (one a sent xorb gave back, say); empty: a fresh one.
  using NewBuffer = std::function<std::vector<uint8_t>()>;

  struct Options {
    Ask ask;  // null: no global dedup (chunks repeated within the upload are still placed once)
    OnSeal on_seal;
    NewBuffer new_buffer;
    uint64_t max_xorb_bytes = xet::kMaxXorbUnpacked;
  };

  // One file's chunks in order, as placed.
  class File {
   public:
    uint64_t size() const { return size_; }
    size_t chunks() const { return chunks_.size(); }

   private:
    friend class ChunkPlacer;
    struct Placement {
      bool remote = false;
      uint32_t xorb = 0;  // index into the placer's sealed or remote xorbs
      uint32_t chunk = 0;
    };
    std::vector<Placement> at_;
    std::vector<xet::HashedChunk> chunks_;
    uint64_t size_ = 0;
  };

  struct Stats {
    uint64_t chunks = 0;
    uint64_t chunks_deduped = 0;  // referenced where they already were
    uint64_t dedup_queries = 0;
    uint64_t xorbs_sealed = 0;
    uint64_t new_bytes = 0;  // raw chunk bytes put into sealed xorbs
  };

  explicit ChunkPlacer(Options options);

  // Places the next chunk of `file` (hashing it).
  Status Place(File& file, std::span<const uint8_t> chunk);
  // Places the next chunk of `file` as it lies in another xorb, already checked: its hash, its decoded size
  // and its record (header and payload), which a new xorb takes as it is (never decoded or compressed
  // again). `whole`: the xorb it comes from, when that xorb arrived whole — its chunks are kept in xorbs of
  // their own (chunks of anything else are not packed with them), so that a xorb none of whose chunks the
  // site holds is stored as the same xorb. Raw and encoded chunks are never packed together.
  Status PlaceEncoded(File& file, const xet::ChunkHash& hash, uint32_t size, std::span<const uint8_t> record,
                      const std::optional<xet::XorbHash>& whole);
  // Seals the xorb being filled, if it holds any chunk. Call before RecordOf and Listings.
  Status Flush();
  // The shard's record of `file` (terms, verification hashes, file hash); the SHA-256 is left to the caller.
  // Every xorb it uses must be sealed (Flush).
  xet::FileRecord RecordOf(const File& file) const;
  // The listings of the xorbs sealed so far, in order, their global-dedup chunks marked.
  std::vector<xet::XorbRecord> Listings() const;
  const Stats& stats() const { return stats_; }

 private:
  using Placement = File::Placement;
  std::optional<Placement> RemoteMatch(const xet::ChunkHash& h) const;
  // Where a chunk already is (placed in this upload, or named by a dedup answer, asked when the stock
  // client would), after counting it in `file`; nullopt for a new chunk.
  std::optional<Placement> Known(File& file, const xet::ChunkHash& h, uint64_t size);
  // Appends a new chunk (its bytes as `current_` holds them) to the xorb being filled.
  void Append(File& file, const xet::ChunkHash& h, uint64_t size, std::span<const uint8_t> bytes);
  void Learn(std::span<const uint8_t> answer);
  Status Seal();

  Options o_;
  Stats stats_;
  SealedXorb current_;
  uint64_t current_unpacked_ = 0;               // the raw bytes of current_'s chunks
  std::optional<xet::XorbHash> current_whole_;  // encoded: the whole xorb current_'s chunks come from
  std::vector<std::pair<xet::XorbHash, std::vector<xet::HashedChunk>>> sealed_;  // hash and chunk listing
  std::unordered_map<xet::ChunkHash, Placement, xet::HashHasher> placed_;        // this upload's chunks
  std::vector<xet::XorbHash> remote_;                                            // xorbs dedup answers named
  // Per HMAC key of the answers: keyed chunk hash -> where it lies.
  std::vector<std::pair<xet::HmacKey, std::unordered_map<xet::ChunkHash, Placement, xet::HashHasher>>> keyed_;
};

}  // namespace cairn::ingest

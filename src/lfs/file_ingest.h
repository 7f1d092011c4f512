// One file made a Xet file on the server, from its bytes or from another server's Xet chunks:
//   - Feed: bytes arriving without Xet (a git-lfs upload, a file fetched by its SHA-256), fed in blocks of
//     any size, are cut by the stock client's chunker, and new chunks packed into xorbs as hf_xet packs them
//     (compressed as xet::CompressionPolicy::kAutoSampled: a group of chunks whose first does not shrink is
//     not tried further) and stored through CasService::PutXorb (validated like any upload);
//   - FeedChunk: chunks of a file another Xet server stored (a mirror's upstream), decoded and hashed once by
//     the caller, are placed with their hashes and new ones packed as the records they arrived as (never
//     compressed or hashed again), a xorb that arrived whole kept as the same xorb (ChunkPlacer::
//     PlaceEncoded), and stored through CasService::PutHashedXorb — from the put the caller filled with it
//     as it arrived, when there is one (TakeFilledFrom): then its bytes are not written again.
// Either way each chunk is deduplicated against the file itself and against what the CAS already holds in
// every scope (the CAS's own dedup answers, as an hf_xet client would receive them, but across scopes: no
// client sees them), and at the end — once the size and the SHA-256 match what was announced — a shard
// describing the file (with its SHA-256) is registered for the scope through CasService::PutShard. So the
// file then has a Xet hash (for chunks fed, the one their server gave it), a later hf_xet upload of the same
// bytes dedups against it chunk for chunk, and a commit naming the SHA-256 finds it.
//
// Failures: kMalformed for more or fewer bytes than announced, kHashMismatch for another SHA-256,
// kInconsistent for a file fed both ways; the CAS's errors as they come. Nothing is registered then; xorbs
// already stored are referenced by nothing and left to the collector (as a client's abandoned upload).
// Thread-safety: none (one ingest, one thread at a time); several ingests may run at once. Each ingest stores
// sealed xorbs on threads of its own (the encoding, validation and durable write of two xorbs at once overlap
// the chunking of the next), and Feed runs the SHA-256 on another (the digest of a block runs while the block
// is chunked; FeedChunk's chunks are digested on the caller's thread). Memory: at most four xorbs (64 MiB
// each: one filling, one waiting, two being stored), 16 MiB of bytes waiting for the digest, and ~100 bytes
// per chunk.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "cas/filled_xorb.h"
#include "cas/service.h"
#include "common/error.h"
#include "ingest/chunk_placer.h"
#include "ingest/chunk_stream.h"
#include "ingest/shard_records.h"
#include "xet/hash.h"

namespace cairn::lfs {

struct Ingested {
  xet::FileHash file;
  uint64_t size = 0;
  uint64_t chunks = 0;
  uint64_t chunks_deduped = 0;
  uint64_t new_bytes = 0;   // chunk bytes stored in new xorbs
  uint64_t xorbs = 0;       // new xorbs
  bool registered = false;  // false: the same shard was registered before
};

class FileIngest {
 public:
  // `sha256` in the hex form git-lfs names objects by; `cas` must outlive the ingest.
  static Result<std::unique_ptr<FileIngest>> Begin(cas::CasService& cas, std::string scope,
                                                   std::string_view sha256, uint64_t size);

  ~FileIngest();
  FileIngest(const FileIngest&) = delete;
  FileIngest& operator=(const FileIngest&) = delete;

  Status Feed(std::span<const uint8_t> block);
  // The next chunk of the file as another Xet server stored it (see above): its hash, its decoded bytes and
  // its record (header and payload), checked by the caller; `whole`, the xorb it comes from when that xorb
  // arrived whole.
  Status FeedChunk(const xet::ChunkHash& hash, std::span<const uint8_t> decoded,
                   std::span<const uint8_t> record, const std::optional<xet::XorbHash>& whole);
  // Where a xorb sealed as the same xorb that arrived whole may already be written (a put filled with it as
  // it arrived, CasService::BeginFilledXorb): asked by the storing threads, concurrently, once per such xorb;
  // null for none. Set before the first chunk is fed; it must outlive the ingest's Finish (or destruction).
  using TakeFilled = std::function<std::unique_ptr<cas::FilledXorb>(const xet::XorbHash&)>;
  void TakeFilledFrom(TakeFilled take) { take_filled_ = std::move(take); }
  Result<Ingested> Finish();  // once
  uint64_t received() const { return received_; }

 private:
  FileIngest(cas::CasService& cas, std::string scope, const xet::Hash& sha256, uint64_t size);
  // Hands a sealed xorb to the storing thread (waiting while one is queued already).
  Status Queue(ingest::SealedXorb&& xorb);
  void StoreLoop();
  // Waits until every queued xorb is stored; the first storing error, if any.
  Status Drain();
  std::vector<uint8_t> TakeBuffer();
  void HashLoop();
  xet::Hash FinishDigest();

  cas::CasService& cas_;
  const std::string scope_;
  const xet::Hash expected_sha256_;  // in shard order
  const uint64_t size_;
  ingest::ChunkStream chunks_;
  uint64_t received_ = 0;
  enum class Fed { kNothing, kBytes, kChunks } fed_ = Fed::kNothing;
  Status failed_ = Ok{};
  // Whether `n` more bytes fit in the size announced, fed the way `how` (failed_ set otherwise).
  bool Admit(uint64_t n, Fed how);

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<ingest::SealedXorb> queue_;     // guarded by mu_
  int storing_ = 0;                          // guarded by mu_: xorbs the threads hold
  bool closed_ = false;                      // guarded by mu_
  Status store_error_ = Ok{};                // guarded by mu_
  std::vector<std::vector<uint8_t>> spare_;  // guarded by mu_: buffers of stored xorbs, for the next ones
  std::vector<std::thread> storers_;
  TakeFilled take_filled_;

  // The SHA-256, on its own thread: Feed hands it the block in place and waits for it before returning.
  ingest::Sha256 sha_;
  std::mutex hash_mu_;
  std::condition_variable hash_cv_;
  std::span<const uint8_t> to_hash_;  // guarded by hash_mu_: the block being hashed, until empty again
  bool hashing_ = false;              // guarded by hash_mu_
  bool hash_closed_ = false;          // guarded by hash_mu_
  bool digest_taken_ = false;
  std::thread hasher_;

  ingest::ChunkPlacer placer_;  // after what its callbacks use
  ingest::ChunkPlacer::File file_;
};

}  // namespace cairn::lfs

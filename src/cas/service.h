// The CAS service: everything the HTTP routes do, without HTTP. It verifies what it is given before anything
// is stored, stores before it indexes, and indexes before it answers, so an acknowledged write survives a
// crash and nothing half-written is ever served.
//
// Thread-safety: every method may be called concurrently. CPU-heavy steps (xorb validation) run on the worker
// pool passed in; the caller's thread takes part.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "cas/filled_xorb.h"
#include "cas/reconstruction.h"
#include "cas/transfer_url.h"
#include "cas/xorb_upload.h"
#include "common/buffer_pool.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/lru_cache.h"
#include "common/worker_pool.h"
#include "index/index.h"
#include "store/blob_store.h"

namespace cairn::cas {

struct ServiceOptions {
  std::string public_url = "http://127.0.0.1:8080";
  // Sign transfer URLs (the current key) and check them (every key); the current one derives dedup HMAC keys.
  UrlKeys url_keys = UrlKeys::Single(xet::Hash{});
  uint64_t transfer_url_ttl_seconds = 3600;
  uint64_t dedup_key_expiry_seconds = 7 * 86400;  // how long clients may reuse a dedup answer
  bool dedup_across_scopes = false;               // dedup answers only reveal chunks of the asker's scope
  // A dedup answer lists xorbs until its serialized size would pass this (~64 bytes per chunk listed).
  size_t dedup_answer_max_bytes = 16ULL << 20;
  const Clock* clock = &Clock::System();  // expiries; tests move a TestClock (outlives the service)
  size_t upload_buffers_kept = 2;         // 64 MiB xorb upload buffers kept mapped for reuse (see BufferPool)
  // Set: reconstruction answers send clients straight to the store (transfer_mode = presigned).
  Presigner presigner;
};

// Progress of a shard registration, for the NDJSON stream of /v2/shards.
struct ShardProgress {
  enum class Stage { kValidating, kStoring, kCommitting } stage = Stage::kValidating;
  uint64_t verified = 0;
  uint64_t total = 0;
};

struct ShardOutcome {
  bool registered = false;  // false: the shard was registered before (result 0)
  size_t files = 0;
};

// A verified transfer request: what to send.
struct TransferPlan {
  xet::XorbHash xorb;
  store::OpenBlob blob;           // the stored xorb (no descriptor where the store has no files: ReadXorb)
  std::vector<ByteRange> ranges;  // inside the chunk region, as requested
};

class CasService {
 public:
  CasService(index::CasIndex& index, store::BlobStore& store, WorkerPool& workers, ServiceOptions options);

  // POST /v1/xorbs: validates the body (one decode-and-hash pass, on the worker pool), stores the chunk
  // region with a regenerated footer durably, then indexes it. Returns whether it was new. Idempotent.
  Result<bool> PutXorb(const xet::XorbHash& hash, std::span<const uint8_t> body);
  // The same for a body that arrives in pieces (see XorbUpload).
  Result<std::unique_ptr<XorbUpload>> BeginXorb(const xet::XorbHash& hash);
  // The same for the server's own xorbs (a mirror storing upstream's chunks as they arrived), whose chunks
  // the caller decoded and hashed from these very bytes: `hashes` gives every chunk's (payload offset and
  // hash). The chunk headers, limits and the xorb hash are checked as for any upload; the chunks are not
  // decoded or hashed again, and `chunks` (the chunk region alone) is written from the caller's memory —
  // unless `filled` (BeginFilledXorb's, for this xorb) already holds exactly those bytes (as many): then it
  // is committed as it is, and nothing is written again.
  Result<bool> PutHashedXorb(const xet::XorbHash& hash, std::span<const uint8_t> chunks,
                             std::span<const xet::PrehashedChunk> hashes,
                             std::unique_ptr<FilledXorb> filled = nullptr);
  // A xorb for the server to fill with its chunk region as it arrives (filled_xorb.h). Null where the store
  // keeps no readable file for a put (S3): the caller keeps the bytes itself.
  Result<std::unique_ptr<FilledXorb>> BeginFilledXorb(const xet::XorbHash& hash);

  // POST /v1/shards and /v2/shards: all or nothing. Every file is verified against stored xorbs (ranges,
  // sizes, verification hashes, the file hash), every listed xorb against its stored layout; then the shard
  // is stored and its files, scope and dedup entries committed in one durable transaction.
  Result<ShardOutcome> PutShard(std::span<const uint8_t> body, const std::string& scope,
                                const std::function<void(const ShardProgress&)>& progress = nullptr);
  // PutShard's checks alone: what registering the shard for `scope` would commit, once every file and listed
  // xorb verified against the stored xorbs. Nothing is stored or indexed.
  Result<index::ShardCommit> VerifyShard(std::span<const uint8_t> body, const std::string& scope,
                                         const std::function<void(const ShardProgress&)>& progress = nullptr);
  // Makes a verified shard's blob and its scope's grant durable (what the index will then register: a
  // compaction's shards, registered by index::GcIndex::Repoint).
  Status StoreShard(const index::ShardCommit& commit, std::span<const uint8_t> body);

  // DELETE /v1/files: takes the file out of `scope`'s view (index::CasIndex::UnregisterFile), then stores the
  // revocation (grant.h) before answering, so that a rebuild from the store does not give the file back.
  // False when `scope` did not see it. A registration racing it (the file given back meanwhile) is checked
  // for once the revocation is stored, and the revocation deleted again.
  Result<bool> Unregister(const xet::FileHash& file, const std::string& scope);

  // GET /v{1,2}/reconstructions/{file}: kNotFound when the file is unknown or not visible to `scope`. The
  // transfer URLs expire after transfer_url_ttl_seconds, and never after `not_after` (unix seconds: the
  // expiry of the token that asked, which mints nothing that outlives it).
  Result<ReconstructionAnswer> Reconstruct(const xet::FileHash& file, const std::string& scope,
                                           std::optional<ByteRange> range, ApiVersion version,
                                           uint64_t not_after = UINT64_MAX);
  // The answer a relay's plan describes (relay.h): its xorbs signed for this server's transfer route (never
  // presigned store URLs: the store does not hold them), expiring after transfer_url_ttl_seconds and never
  // after `not_after`.
  ReconstructionAnswer AnswerRelayed(ReconstructionPlan plan, ApiVersion version,
                                     uint64_t not_after = UINT64_MAX);
  // GET /v1/reconstructions?file_id=...: files not visible are kNotFound as a whole.
  Result<ReconstructionAnswer> ReconstructBatch(std::span<const xet::FileHash> files,
                                                const std::string& scope, uint64_t not_after = UINT64_MAX);

  // GET /v1/chunks/{prefix}/{chunk}: a complete shard listing the xorbs that hold the chunk and their
  // neighbourhood (the other xorbs of the shards that registered them: listed ones in upload order, then
  // the ones their files use), up to dedup_answer_max_bytes; chunk hashes keyed with a rotating HMAC key.
  // kNotFound when the chunk is not indexed for the scope. `any_scope`: every scope's chunks whatever
  // dedup_across_scopes says — for the server's own ingest (lfs::FileIngest), whose answers no client sees.
  Result<std::vector<uint8_t>> DedupShard(const xet::ChunkHash& chunk, const std::string& scope,
                                          bool any_scope = false);

  // GET /v1/transfer/{xorb}?...: checks the URL's signature and expiry and that `range_header` lies inside
  // the granted ranges (no header: all granted ranges). Errors: kMalformed, kDenied for expired or
  // tampered URLs and for ranges outside the grant, kUnsatisfiable for a Range header outside the xorb,
  // kNotFound for a xorb the store does not hold.
  // `granted`, when given, receives what the URL grants once its signature checks, also when the store does
  // not hold the xorb (a relayed one: the caller goes on without checking the signature again).
  Result<TransferPlan> Transfer(std::string_view xorb_hex, std::string_view query,
                                std::optional<std::string_view> range_header,
                                TransferGrant* granted = nullptr);

  // Bytes of a stored xorb (what a transfer sends where the store gives no descriptor). Blocking.
  Status ReadXorb(const xet::XorbHash& xorb, uint64_t offset, std::span<uint8_t> out);
  // The same, read in order from [offset, offset + length): one request to a remote store for the range.
  std::unique_ptr<store::BlobReader> OpenXorbRange(const xet::XorbHash& xorb, uint64_t offset,
                                                   uint64_t length);
  // Whether transfers are served from local files (sendfile, on the network thread) rather than read from a
  // remote store (on a request thread).
  bool local_store() const { return store_.local(); }

  // Signs from now on with keys.current() and accepts URLs of every key in `keys` only (a rotation; URLs of
  // a key left out are refused from now on). Answers planned with other keys are not reused.
  void SetUrlKeys(const UrlKeys& keys);
  // A transfer URL for `ranges` of `xorb` as answers carry them now (benchmarks fetch through it).
  std::string TransferUrl(const xet::XorbHash& xorb, const std::vector<ByteRange>& ranges,
                          uint64_t expiry_unix) const {
    return Signing()->signer.Url(xorb, ranges, expiry_unix);
  }

  // Unpacked layouts and file terms, cached by size in front of the index. Layouts are immutable; a file's
  // terms are while its record lives (the collector may sweep it and an upload register the file again
  // with other xorbs), so every use of cached terms checks the record the index holds now.
  Result<std::shared_ptr<const xet::XorbLayout>> Layout(const xet::XorbHash& hash);
  // The terms of a file visible to `scope` (kNotFound otherwise, as for an unknown file): visibility, with
  // which record of the file the index holds, asked of the index every time (a scope can lose a file: a
  // repository gone private or deleted, on any node; another node's collector may have swept the record and
  // an upload registered the file again), the terms from the cache when it holds that record's. `record`
  // (optional) receives the record's FileEntry::created_at.
  Result<std::shared_ptr<const std::vector<FileTermRef>>> VisibleTerms(const xet::FileHash& hash,
                                                                       const std::string& scope,
                                                                       int64_t* record = nullptr);
  // Reads into the layout cache, in as few index calls as the index allows, the layouts of `xorbs` that the
  // cache lacks (a reader of whole files needs every one of them, to verify chunks).
  Status PrefetchXorbLayouts(std::vector<xet::XorbHash> xorbs);

 private:
  // The signature check alone: what the URL grants (kMalformed, kDenied as Transfer says).
  Result<TransferGrant> VerifyTransfer(std::string_view xorb_hex, std::string_view query) const;
  friend class XorbUpload;
  // Validates the body of `upload` and makes the xorb durable and indexed (XorbUpload::Finish).
  Result<bool> FinishXorb(XorbUpload& upload);
  // Whether the xorb is stored (revived: a shard is about to name it); kUnavailable while a sweep deletes it.
  Result<bool> Revive(const xet::XorbHash& hash);
  // Appends the footer of a validated xorb to the chunk region `writer` holds, commits it and indexes it.
  Result<bool> CommitXorb(store::BlobWriter& writer, const xet::XorbHash& hash,
                          const xet::ValidatedXorb& validated);
  uint64_t Now() const;
  // Reads into the cache, in one index call, the layouts that planning `range` of a file will look up and
  // the cache lacks: those of the terms the range cuts, and of terms without recorded byte ranges.
  Status PrefetchLayouts(std::span<const FileTermRef> terms, std::optional<ByteRange> range);
  // Looks layouts up through the cache and keeps each one found alive in `held` (the cache may evict it
  // while an answer still points into it). A plain vector: an answer looks each xorb up once.
  xet::LayoutLookup HoldingLookup(std::vector<std::shared_ptr<const xet::XorbLayout>>& held);
  // The URL keys' signer and verifier, replaced whole by SetUrlKeys.
  struct UrlSigning {
    TransferUrlSigner signer;
    TransferUrlSigner relay_signer;  // the same key, never presigned: URLs of this server's transfer route
    TransferUrlVerifier verifier;
    xet::Hash dedup_root;  // the current key: dedup HMAC keys derive from it
    uint64_t generation = 0;
  };
  std::shared_ptr<const UrlSigning> Signing() const;
  xet::HmacKey DedupKey(const UrlSigning& signing, uint64_t window) const;
  // Names a dedup answer holding the whole neighbourhood of `shards` in key window `window`.
  xet::Hash DedupAnswerKey(uint64_t window, std::span<const xet::Hash> shards) const;
  // Whether each xorb may be named to a client now (index::CasIndex::ReviveXorbs: stored, and revived).
  Result<std::vector<bool>> Usable(std::span<const xet::XorbHash> xorbs);
  // The steps of DedupShard, over what they choose.
  struct DedupChoice;
  // The answer kept under `key`, while every xorb it names is still usable (nullopt otherwise).
  Result<std::optional<std::vector<uint8_t>>> CachedDedupAnswer(const xet::Hash& key);
  // Adds `xorb` (each once, if stored) while the answer stays under the cap.
  void OfferToDedupAnswer(DedupChoice& choice, const xet::XorbHash& xorb);
  // Offers the hit xorbs, then each hit shard's neighbours, and records the shards' upload order.
  Status ChooseDedupXorbs(const std::vector<index::DedupHit>& hits, const std::vector<xet::Hash>& shards,
                          DedupChoice& choice);
  Status KeepUsableXorbs(DedupChoice& choice);

  index::CasIndex& index_;
  store::BlobStore& store_;
  WorkerPool& workers_;
  ServiceOptions options_;
  mutable std::mutex signing_mu_;
  std::shared_ptr<const UrlSigning> signing_;  // guarded by signing_mu_
  BufferPool upload_buffers_;
  LruCache<xet::XorbHash, xet::XorbLayout, xet::HashHasher> layouts_{256ULL << 20};
  struct CachedTerms {
    int64_t record = 0;  // FileEntry::created_at of the record they came from
    std::vector<FileTermRef> terms;
  };
  LruCache<xet::FileHash, CachedTerms, xet::HashHasher> terms_{256ULL << 20};
  // Grants (by name) this service's own RecordGrant calls made durable: a re-registration skips its grant's
  // put. Only this process's puts count, never what it finds in the store (a process that died may have
  // named a grant without syncing its directory).
  LruCache<xet::Hash, bool, xet::HashHasher> granted_{4ULL << 20};
  // Whole-file answers' plans (immutable, as files and layouts are): ~2 MB for a 100,000-term file.
  LruCache<xet::FileHash, ReconstructionPlan, xet::HashHasher> plans_{128ULL << 20};
  // Whole-neighbourhood dedup answers of the current key window (~1 MB per GiB of upload behind them), with
  // the xorbs each names (checked against the index at every use: the collector may delete one).
  struct DedupAnswer {
    std::vector<uint8_t> shard;
    std::vector<xet::XorbHash> xorbs;
  };
  LruCache<xet::Hash, DedupAnswer, xet::HashHasher> dedup_answers_{64ULL << 20};
};

}  // namespace cairn::cas

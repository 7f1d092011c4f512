#include "cas/service.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "cas/grant.h"
#include "xet/hashing.h"
#include "xet/shard.h"
#include "xet/verify.h"
#include "xet/xorb.h"

namespace cairn::cas {
namespace {

size_t LayoutCharge(const xet::XorbLayout& l) {
  return sizeof(l) + l.chunks.size() * sizeof(xet::XorbChunk);
}

}  // namespace

CasService::CasService(index::CasIndex& index, store::BlobStore& store, WorkerPool& workers,
                       ServiceOptions options)
    : index_(index),
      store_(store),
      workers_(workers),
      options_(std::move(options)),
      upload_buffers_(xet::kMaxXorbUploadBytes, options_.upload_buffers_kept) {
  SetUrlKeys(options_.url_keys);
}

void CasService::SetUrlKeys(const UrlKeys& keys) {
  std::lock_guard lock(signing_mu_);
  const uint64_t generation = signing_ ? signing_->generation + 1 : 0;
  auto next = std::make_shared<const UrlSigning>(
      UrlSigning{TransferUrlSigner(options_.public_url, keys.current(), options_.presigner),
                 TransferUrlSigner(options_.public_url, keys.current()), TransferUrlVerifier(keys),
                 keys.current().material, generation});
  signing_ = std::move(next);
}

std::shared_ptr<const CasService::UrlSigning> CasService::Signing() const {
  std::lock_guard lock(signing_mu_);
  return signing_;
}

uint64_t CasService::Now() const {
  return static_cast<uint64_t>(options_.clock->UnixSeconds());
}

Result<std::shared_ptr<const xet::XorbLayout>> CasService::Layout(const xet::XorbHash& hash) {
  if (auto cached = layouts_.Get(hash)) return cached;
  auto entry = index_.GetXorb(hash);
  if (!entry) return entry.error();
  auto layout = std::make_shared<const xet::XorbLayout>((*entry)->ToLayout());
  layouts_.Put(hash, layout, LayoutCharge(*layout));
  return layout;
}

Status CasService::PrefetchLayouts(std::span<const FileTermRef> terms, std::optional<ByteRange> range) {
  if (terms.empty()) return Ok{};
  const uint64_t size = terms.back().end_offset;
  uint64_t start = 0;
  uint64_t end = size;
  if (range) {
    if (range->start >= size) return Ok{};  // 416: nothing to plan
    start = range->start;
    end = std::min(range->end, size - 1) + 1;
  }
  const auto first = std::upper_bound(terms.begin(), terms.end(), start,
                                      [](uint64_t s, const FileTermRef& t) { return s < t.end_offset; });
  const auto last = std::upper_bound(first, terms.end(), end - 1,
                                     [](uint64_t s, const FileTermRef& t) { return s < t.end_offset; });
  std::vector<xet::XorbHash> wanted;
  const auto want = [&](const FileTermRef& t) { wanted.push_back(t.xorb); };
  if (first == last) return Ok{};
  if (first->range_end != 0) {  // ranges recorded (for every term of the file): only the ends can be cut
    const FileTermRef& back = *(last - 1);
    if (first->end_offset - first->bytes < start || first->end_offset > end) want(*first);
    if (&back != &*first && back.end_offset > end) want(back);
  } else {
    for (auto it = first; it != last; ++it) want(*it);
  }
  return PrefetchXorbLayouts(std::move(wanted));
}

Status CasService::PrefetchXorbLayouts(std::vector<xet::XorbHash> xorbs) {
  std::sort(xorbs.begin(), xorbs.end());
  xorbs.erase(std::unique(xorbs.begin(), xorbs.end()), xorbs.end());
  std::vector<xet::XorbHash> wanted;
  for (const auto& x : xorbs)
    if (layouts_.Get(x) == nullptr) wanted.push_back(x);
  for (size_t from = 0; from < wanted.size(); from += index::Index::kMaxXorbsPerRead) {
    const size_t n = std::min(index::Index::kMaxXorbsPerRead, wanted.size() - from);
    auto entries = index_.GetXorbs(std::span<const xet::XorbHash>(wanted).subspan(from, n));
    if (!entries) return entries.error();
    for (const auto& e : *entries) {
      if (e == nullptr) continue;  // the planner reports the missing layout
      auto layout = std::make_shared<const xet::XorbLayout>(e->ToLayout());
      layouts_.Put(e->hash, layout, LayoutCharge(*layout));
    }
  }
  return Ok{};
}

xet::LayoutLookup CasService::HoldingLookup(std::vector<std::shared_ptr<const xet::XorbLayout>>& held) {
  return [this, &held](const xet::XorbHash& h) -> const xet::XorbLayout* {
    auto l = Layout(h);
    if (!l) return nullptr;
    held.push_back(std::move(*l));
    return held.back().get();
  };
}

namespace {

// The value of a cache of facts (granted_), and what one entry costs besides its key: the list and map
// nodes.
const std::shared_ptr<const bool>& Yes() {
  static const auto yes = std::make_shared<const bool>(true);
  return yes;
}
constexpr size_t kEntryOverhead = 96;

}  // namespace

Result<std::shared_ptr<const std::vector<FileTermRef>>> CasService::VisibleTerms(const xet::FileHash& hash,
                                                                                 const std::string& scope,
                                                                                 int64_t* record) {
  if (auto cached = terms_.Get(hash)) {
    auto now = index_.VisibleFileRecord(hash, scope);  // one read: visibility and which record
    if (!now) return now.error();
    if (!*now) return NotFound("file " + hash.hex() + " is unknown");
    if (**now == cached->record) {
      if (record != nullptr) *record = cached->record;
      return std::shared_ptr<const std::vector<FileTermRef>>(cached, &cached->terms);
    }
    // Another record than the cached terms': read it anew.
  }
  auto entry = index_.GetVisibleFile(hash, scope);
  if (!entry) {
    if (entry.error().code == ErrorCode::kNotFound) return NotFound("file " + hash.hex() + " is unknown");
    return entry.error();
  }
  auto cached = std::make_shared<CachedTerms>();
  cached->record = (*entry)->created_at;
  auto& terms = cached->terms;
  terms.reserve((*entry)->term_count);
  const bool ranged = (*entry)->has_ranges();
  for (size_t i = 0; i < (*entry)->term_count; ++i) {
    const index::Term t = (*entry)->term(i);
    const index::TermRange r = ranged ? (*entry)->range(i) : index::TermRange{};
    terms.push_back({t.xorb, t.chunk_start, t.chunk_end, t.unpacked_bytes, t.end_offset, r.start, r.end});
  }
  const size_t charge = sizeof(CachedTerms) + terms.size() * sizeof(FileTermRef);
  std::shared_ptr<const CachedTerms> shared = std::move(cached);
  terms_.Put(hash, shared, charge);
  if (record != nullptr) *record = shared->record;
  return std::shared_ptr<const std::vector<FileTermRef>>(shared, &shared->terms);
}

// ---------------------------------------------------------------------------------------------------------------
// Xorbs

Result<bool> CasService::Revive(const xet::XorbHash& hash) {
  // Asked of the database, not a cache: another node's collector may have deleted it. Stored, it is revived
  // (the client is about to name it in a shard); claimed by a sweep, its bytes are going: the client retries
  // once they are gone, and then uploads them again.
  auto use = index_.ReviveXorbs(std::span(&hash, 1));
  if (!use) return use.error();
  if ((*use)[0] == index::XorbUse::kBeingSwept) {
    return Unavailable("xorb " + hash.hex() + " is being deleted by the garbage collector; retry");
  }
  return (*use)[0] == index::XorbUse::kStored || (*use)[0] == index::XorbUse::kSuperseded;
}

Result<std::unique_ptr<XorbUpload>> CasService::BeginXorb(const xet::XorbHash& hash) {
  auto held = Revive(hash);
  if (!held) return held.error();
  if (*held) return std::unique_ptr<XorbUpload>(new XorbUpload(*this, hash, nullptr, nullptr));  // a retry
  auto body = upload_buffers_.Take();
  if (body == nullptr) return IoError("cannot map memory for a xorb upload");
  auto writer = store_.BeginPut(store::BlobKind::kXorb, hash);
  if (!writer) return writer.error();
  return std::unique_ptr<XorbUpload>(new XorbUpload(*this, hash, std::move(*writer), std::move(body)));
}

Result<bool> CasService::PutXorb(const xet::XorbHash& hash, std::span<const uint8_t> body) {
  auto upload = BeginXorb(hash);
  if (!upload) return upload.error();
  if (auto st = (*upload)->Append(body); !st) return st.error();
  return (*upload)->Finish();
}

Result<bool> CasService::FinishXorb(XorbUpload& upload) {
  // Stock clients send the chunk region alone: the bytes on disk are the body followed by the footer computed
  // by the validation pass, which runs while the write thread writes and flushes the rest of the body. The
  // blob only becomes visible on Commit, after validation succeeded.
  upload.finishing_ = true;
  {
    std::lock_guard lock(upload.mu_);
    upload.ended_ = true;
  }
  upload.cv_.notify_all();
  upload.hash_thread_.join();  // its hashes are final now
  const std::span<const uint8_t> body(upload.body_->data(), upload.size_);
  const xet::ParallelFor parallel = [this](size_t n, const std::function<void(size_t)>& task) {
    workers_.ParallelFor(n, task);
  };
  xet::ValidateOptions vo;
  vo.expected_hash = &upload.hash_;
  vo.parallel = &parallel;
  vo.prehashed = upload.prehasher_.hashes();
  auto validated = xet::ValidateXorb(body, vo);
  upload.write_thread_.join();
  if (upload.flush_thread_.joinable()) upload.flush_thread_.join();
  if (!validated) return validated.error();  // the writer's destructor discards the bytes
  if (!upload.write_status_) return upload.write_status_.error();
  if (!upload.flush_status_) return upload.flush_status_.error();

  auto& writer = upload.writer_;
  if (validated->chunk_region_size != body.size()) {
    // The client sent a footer of its own: store the chunk region only, followed by ours.
    auto again = store_.BeginPut(store::BlobKind::kXorb, upload.hash_);
    if (!again) return again.error();
    writer = std::move(*again);
    if (auto s = writer->AppendStable(body.first(validated->chunk_region_size)); !s) return s.error();
  }
  return CommitXorb(*writer, upload.hash_, *validated);
}

Result<bool> CasService::CommitXorb(store::BlobWriter& writer, const xet::XorbHash& hash,
                                    const xet::ValidatedXorb& validated) {
  std::vector<uint8_t> footer;
  xet::AppendFooterV1(footer, validated.hash, validated.layout);
  if (auto s = writer.Append(footer); !s) return s.error();
  store::PutOptions put;
  // An object already under this name counts only if it is a valid xorb of this hash.
  put.verify_existing = [&hash](std::span<const uint8_t> existing) {
    xet::ValidateOptions check;
    check.expected_hash = &hash;
    auto v = xet::ValidateXorb(existing, check);
    return v.ok() && v->footer == xet::FooterVersion::kV1;
  };
  if (auto committed = writer.Commit(put); !committed) return committed.error();
  return index_.PutXorb(hash, validated.layout);
}

Result<std::unique_ptr<FilledXorb>> CasService::BeginFilledXorb(const xet::XorbHash& hash) {
  auto writer = store_.BeginPut(store::BlobKind::kXorb, hash);
  if (!writer) return writer.error();
  if ((*writer)->ReadableFd() < 0) return std::unique_ptr<FilledXorb>();
  return std::make_unique<FilledXorb>(std::move(*writer));
}

Result<bool> CasService::PutHashedXorb(const xet::XorbHash& hash, std::span<const uint8_t> chunks,
                                       std::span<const xet::PrehashedChunk> hashes,
                                       std::unique_ptr<FilledXorb> filled) {
  auto held = Revive(hash);
  if (!held) return held.error();
  if (*held) return false;
  xet::ValidateOptions vo;
  vo.expected_hash = &hash;
  vo.prehashed = hashes;
  auto validated = xet::ValidateXorb(chunks, vo);
  if (!validated) return validated.error();
  if (validated->chunk_region_size != chunks.size() || validated->layout.chunks.size() != hashes.size())
    return Malformed("a xorb stored by the server holds its chunks alone, each hashed by the caller");
  if (filled != nullptr && filled->size() == chunks.size())
    return CommitXorb(*filled->put_, hash, *validated);
  auto writer = store_.BeginPut(store::BlobKind::kXorb, hash);
  if (!writer) return writer.error();
  if (auto s = (*writer)->AppendStable(chunks); !s) return s.error();
  return CommitXorb(**writer, hash, *validated);
}

// ---------------------------------------------------------------------------------------------------------------
// Shards

Result<index::ShardCommit> CasService::VerifyShard(
    std::span<const uint8_t> body, const std::string& scope,
    const std::function<void(const ShardProgress&)>& progress) {
  auto shard = xet::ParseShard(body);
  if (!shard) return shard.error();
  const auto report = [&](ShardProgress p) {
    if (progress) progress(p);
  };

  // Layouts of every xorb the shard names, each fetched once. The index failing is not the xorb being
  // unknown: that answer is a 500 or 503 the client retries, where an unknown xorb is a 400 that ends its
  // upload.
  std::map<xet::XorbHash, std::shared_ptr<const xet::XorbLayout>> layouts;
  std::optional<Error> index_failed;
  const xet::LayoutLookup lookup = [&](const xet::XorbHash& h) -> const xet::XorbLayout* {
    auto it = layouts.find(h);
    if (it == layouts.end()) {
      auto l = Layout(h);
      if (!l) {
        if (l.error().code != ErrorCode::kNotFound && !index_failed) index_failed = l.error();
        return nullptr;
      }
      it = layouts.emplace(h, *l).first;
    }
    return it->second.get();
  };

  const uint64_t total = shard->files.size() + shard->xorbs.size();
  uint64_t verified = 0;
  report({ShardProgress::Stage::kValidating, 0, total});
  index::ShardCommit commit;
  commit.scope = scope;
  std::map<xet::FileHash, bool> seen;
  for (const auto& file : shard->files) {
    if (auto ok = xet::VerifyFile(file, lookup); !ok) return index_failed ? *index_failed : ok.error();
    report({ShardProgress::Stage::kValidating, ++verified, total});
    if (!seen.emplace(file.hash, true).second) continue;  // a repeated file: the first one wins
    // With each term's byte range in its xorb, from the layouts just checked.
    auto made = index::MakeFileCommit(file, lookup);
    if (!made) return made.error();
    commit.files.push_back(std::move(*made));
    // Global dedup: the first chunk of every file.
    if (!file.terms.empty()) {
      const auto& t = file.terms.front();
      commit.dedup.push_back({lookup(t.xorb)->chunks[t.chunk_start].hash, t.xorb});
    }
  }
  for (const auto& listing : shard->xorbs) {
    const xet::XorbLayout* layout = lookup(listing.hash);
    if (layout == nullptr) {
      if (index_failed) return *index_failed;
      return UnknownReference("xorb " + listing.hash.hex() + " is listed but not stored");
    }
    if (auto ok = xet::VerifyXorbListing(listing, *layout); !ok) return ok.error();
    report({ShardProgress::Stage::kValidating, ++verified, total});
    // Global dedup: chunks with hash % 1024 == 0, and chunks the client flagged.
    for (const auto& c : listing.chunks) {
      if (c.hash.mod(xet::kGlobalDedupModulus) == 0 || (c.flags & xet::kChunkFlagGlobalDedup)) {
        commit.dedup.push_back({c.hash, listing.hash});
      }
    }
  }

  // The neighbourhood a dedup hit in this shard will offer: its listed xorbs, then those its files use.
  std::unordered_set<xet::XorbHash, xet::HashHasher> named;
  for (const auto& listing : shard->xorbs) {
    if (named.insert(listing.hash).second) commit.xorbs.listed.push_back(listing.hash);
  }
  for (const auto& file : shard->files) {
    for (const auto& t : file.terms) {
      if (named.insert(t.xorb).second) commit.xorbs.referenced.push_back(t.xorb);
    }
  }

  report({ShardProgress::Stage::kStoring, verified, total});
  commit.shard = xet::ChunkHashOf(body);
  commit.shard_size = body.size();
  return commit;
}

Status CasService::StoreShard(const index::ShardCommit& commit, std::span<const uint8_t> body) {
  if (auto stored = store_.Put(store::BlobKind::kShard, commit.shard, body); !stored) return stored.error();
  return RecordGrant(store_, Grant{commit.shard, commit.scope});
}

Result<ShardOutcome> CasService::PutShard(std::span<const uint8_t> body, const std::string& scope,
                                          const std::function<void(const ShardProgress&)>& progress) {
  uint64_t total = 0;
  auto verified = VerifyShard(body, scope, [&](const ShardProgress& p) {
    total = p.total;
    if (progress) progress(p);
  });
  if (!verified) return verified.error();
  const index::ShardCommit& commit = *verified;
  if (auto stored = store_.Put(store::BlobKind::kShard, commit.shard, body); !stored) return stored.error();
  // The grant durable before the index commits the shard (grant.h). A re-registration (every retry, every
  // upload of a shard the scope had) whose grant this service made durable already skips the put: half the
  // store's syncs of a re-registration (cas_bench BM_PutShard, BENCHMARKS.md).
  const Grant grant{commit.shard, scope};
  const xet::Hash grant_name = GrantName(grant);
  const bool grant_cached = granted_.Get(grant_name) != nullptr;
  if (!grant_cached) {
    if (auto granted = RecordGrant(store_, grant); !granted) return granted.error();
    granted_.Put(grant_name, Yes(), sizeof(xet::Hash) + kEntryOverhead);
  }
  if (progress) progress({ShardProgress::Stage::kCommitting, total, total});
  auto outcome = index_.CommitShard(commit);
  if (!outcome) return outcome.error();
  if (!outcome->already_existed) {
    // Registered anew: a collector finishing the sweep of an earlier registration of these bytes (a shard all
    // of whose xorbs it freed, uploaded again with its xorbs) may have deleted the blob or the grant after
    // they were written or found here. Both are checked once the index holds the shard, and written again
    // (the grant below).
    auto st = store_.Stat(store::BlobKind::kShard, commit.shard);
    if (!st) return st.error();
    if (!st->exists) {
      if (auto again = store_.Put(store::BlobKind::kShard, commit.shard, body); !again) return again.error();
    }
  }
  // The grant too, when the cache vouched for it and the index had no such registration: the collector may
  // have dropped the shard with its grants since this node wrote it (a shard made anew, then registered by a
  // scope that had registered it before the drop).
  if (!outcome->already_existed || (grant_cached && outcome->new_scope)) {
    auto gst = store_.Stat(store::BlobKind::kGrant, grant_name);
    if (!gst) return gst.error();
    if (!gst->exists) {
      if (auto granted = RecordGrant(store_, grant); !granted) return granted.error();
    }
  }
  if (!outcome->cleared_revocations.empty()) {
    std::vector<index::RevocationKey> cleared;
    for (const auto& f : outcome->cleared_revocations) cleared.push_back({f, scope});
    if (auto st = ForgetClearedRevocations(index_, store_, cleared); !st) return st.error();
  }
  return ShardOutcome{!outcome->already_existed, commit.files.size()};
}

// ---------------------------------------------------------------------------------------------------------------
// Revocations

Result<bool> CasService::Unregister(const xet::FileHash& file, const std::string& scope) {
  auto removed = index_.UnregisterFile(file, scope);
  if (!removed) return removed.error();
  if (*removed == index::Unregistered::kNotVisible) return false;
  // Also when removed before: that call may have died before its revocation was durable.
  const Revocation revocation{file, scope};
  if (auto st = RecordRevocation(store_, revocation); !st) return st.error();
  // A registration that gave the file back after the index recorded the revocation, and deleted the blob
  // before it was stored here, left it behind: the registration's commit precedes this read.
  auto visible = index_.FileVisibleTo(file, scope);
  if (!visible) return visible.error();
  if (*visible) {
    if (auto del = store_.Delete(store::BlobKind::kRevocation, RevocationName(revocation)); !del)
      return del.error();
  }
  return *removed == index::Unregistered::kRemoved;
}

// ---------------------------------------------------------------------------------------------------------------
// Reconstructions

Result<ReconstructionAnswer> CasService::Reconstruct(const xet::FileHash& file, const std::string& scope,
                                                     std::optional<ByteRange> range, ApiVersion version,
                                                     uint64_t max_ttl_seconds) {
  const uint64_t expiry = Now() + std::min(options_.transfer_url_ttl_seconds, max_ttl_seconds);
  const auto signing = Signing();
  const TransferUrlSigner& signer = signing->signer;
  std::shared_ptr<const std::vector<FileTermRef>> terms;
  int64_t record = 0;
  if (file.is_zero()) {
    terms = std::make_shared<const std::vector<FileTermRef>>();  // the empty file exists for everyone
  } else {
    if (auto plan = range ? nullptr : plans_.Get(file); plan && plan->key_generation == signing->generation) {
      auto now = index_.VisibleFileRecord(file, scope);  // one read: visibility and which record
      if (!now) return now.error();
      if (!*now) return NotFound("file " + file.hex() + " is unknown");
      if (**now == plan->file_record) return WriteReconstruction(*plan, version, expiry, signer, &workers_);
    }
    auto t = VisibleTerms(file, scope, &record);
    if (!t) return t.error();
    terms = *t;
    if (auto st = PrefetchLayouts(*terms, range); !st) return st.error();
  }
  std::vector<std::shared_ptr<const xet::XorbLayout>> held;
  auto plan =
      std::make_shared<ReconstructionPlan>(PlanReconstruction(*terms, HoldingLookup(held), range, signer));
  if (!range && !file.is_zero() && plan->status == ReconstructionStatus::kOk) {
    plan->holds = std::move(held);
    plan->key_generation = signing->generation;
    plan->file_record = record;
    plans_.Put(file, plan, plan->MemoryBytes());
  }
  return WriteReconstruction(*plan, version, expiry, signer, &workers_);
}

ReconstructionAnswer CasService::AnswerRelayed(ReconstructionPlan plan, ApiVersion version,
                                               uint64_t max_ttl_seconds) {
  const uint64_t expiry = Now() + std::min(options_.transfer_url_ttl_seconds, max_ttl_seconds);
  const auto signing = Signing();
  for (auto& x : plan.xorbs) {
    char hex[64];
    x.hash.write_hex(hex);
    signing->relay_signer.PrepareXorb(hex, &x.signing);
  }
  return WriteReconstruction(plan, version, expiry, signing->relay_signer, &workers_);
}

Result<ReconstructionAnswer> CasService::ReconstructBatch(std::span<const xet::FileHash> files,
                                                          const std::string& scope,
                                                          uint64_t max_ttl_seconds) {
  std::vector<std::shared_ptr<const std::vector<FileTermRef>>> held_terms;
  std::vector<BatchFile> batch;
  for (const auto& f : files) {
    if (f.is_zero()) {
      batch.push_back({f, {}});
      continue;
    }
    auto t = VisibleTerms(f, scope);
    if (!t) return t.error();
    if (auto st = PrefetchLayouts(**t, std::nullopt); !st) return st.error();
    held_terms.push_back(*t);
    batch.push_back({f, *held_terms.back()});
  }
  std::vector<std::shared_ptr<const xet::XorbLayout>> held;
  const xet::LayoutLookup lookup = HoldingLookup(held);
  return AnswerBatchReconstruction(batch, lookup,
                                   Now() + std::min(options_.transfer_url_ttl_seconds, max_ttl_seconds),
                                   Signing()->signer, &workers_);
}

// ---------------------------------------------------------------------------------------------------------------
// Global dedup

xet::HmacKey CasService::DedupKey(const UrlSigning& signing, uint64_t window) const {
  const std::string label = "cairn dedup hmac key " + std::to_string(window);
  return xet::KeyedHash(signing.dedup_root, {reinterpret_cast<const uint8_t*>(label.data()), label.size()});
}

namespace {

// The order in which a hit's neighbours join a capped answer: the shard's listed xorbs after the hit (a
// client re-uploading a file reads on from where it asked), then those before it, nearest first, then the
// xorbs its files use from elsewhere.
std::vector<xet::XorbHash> NeighboursByPriority(const index::ShardXorbs& shard, const xet::XorbHash& hit) {
  const auto& listed = shard.listed;
  std::vector<xet::XorbHash> out;
  out.reserve(listed.size() + shard.referenced.size());
  const size_t at = static_cast<size_t>(std::find(listed.begin(), listed.end(), hit) - listed.begin());
  for (size_t i = at == listed.size() ? 0 : at + 1; i < listed.size(); ++i) out.push_back(listed[i]);
  for (size_t i = std::min(at, listed.size()); i-- > 0;) out.push_back(listed[i]);
  out.insert(out.end(), shard.referenced.begin(), shard.referenced.end());
  return out;
}

// The shards that registered the hits, each once, in the order of the hits.
std::vector<xet::Hash> ShardsOf(const std::vector<index::DedupHit>& hits) {
  std::vector<xet::Hash> shards;
  for (const auto& hit : hits) {
    if (std::find(shards.begin(), shards.end(), hit.shard) == shards.end()) shards.push_back(hit.shard);
  }
  return shards;
}

using ChosenXorbs = std::vector<std::pair<xet::XorbHash, const xet::XorbLayout*>>;
using UploadOrder = std::unordered_map<xet::XorbHash, size_t, xet::HashHasher>;

// Listed in upload order (a hit xorb that no shard names goes first).
void SortByUploadOrder(ChosenXorbs& chosen, const UploadOrder& upload_order) {
  const auto rank = [&](const xet::XorbHash& x) -> size_t {
    auto it = upload_order.find(x);
    return it == upload_order.end() ? 0 : it->second + 1;
  };
  std::stable_sort(chosen.begin(), chosen.end(),
                   [&](const auto& a, const auto& b) { return rank(a.first) < rank(b.first); });
}

// The answer's listing: every chosen xorb with all its chunks, flagged where they are global dedup chunks.
xet::Shard DedupListing(const ChosenXorbs& chosen) {
  xet::Shard answer;
  answer.xorbs.reserve(chosen.size());
  for (const auto& [hash, layout] : chosen) {
    xet::XorbRecord record{
        hash, 0, static_cast<uint32_t>(layout->unpacked_size()), layout->chunk_region_size(), {}};
    record.chunks.reserve(layout->chunks.size());
    uint32_t offset = 0;
    for (const auto& c : layout->chunks) {
      const uint32_t flags = c.hash.mod(xet::kGlobalDedupModulus) == 0 ? xet::kChunkFlagGlobalDedup : 0;
      record.chunks.push_back({c.hash, offset, c.unpacked_size, flags});
      offset += c.unpacked_size;
    }
    answer.xorbs.push_back(std::move(record));
  }
  return answer;
}

}  // namespace

// The xorbs a dedup answer lists, chosen under its size cap, and what tells whether it holds the whole
// neighbourhood of its hit shards (only such an answer is kept).
struct CasService::DedupChoice {
  std::vector<std::shared_ptr<const xet::XorbLayout>> held;  // keeps the layouts `chosen` points into
  ChosenXorbs chosen;
  std::unordered_set<xet::XorbHash, xet::HashHasher> seen;
  UploadOrder upload_order;  // across the hit shards
  size_t bytes = xet::kEmptyShardBytes;
  bool full = false;       // a xorb was left out for the cap
  bool all_usable = true;  // no chosen xorb was dropped as unusable
};

Result<std::optional<std::vector<uint8_t>>> CasService::CachedDedupAnswer(const xet::Hash& key) {
  auto cached = dedup_answers_.Get(key);
  if (!cached) return std::optional<std::vector<uint8_t>>();
  // Still whole only while every xorb it names is stored (the collector may have claimed one since).
  auto usable = Usable(cached->xorbs);
  if (!usable) return usable.error();
  if (!std::all_of(usable->begin(), usable->end(), [](bool u) { return u; }))
    return std::optional<std::vector<uint8_t>>();
  return std::optional<std::vector<uint8_t>>(cached->shard);
}

void CasService::OfferToDedupAnswer(DedupChoice& choice, const xet::XorbHash& xorb) {
  if (choice.full || !choice.seen.insert(xorb).second) return;
  auto layout = Layout(xorb);
  if (!layout) return;  // a listing without a stored xorb is useless to the client
  const size_t size = xet::XorbListingBytes((*layout)->chunks.size());
  if (!choice.chosen.empty() && choice.bytes + size > options_.dedup_answer_max_bytes) {
    choice.full = true;
    return;
  }
  choice.bytes += size;
  choice.held.push_back(*layout);
  choice.chosen.emplace_back(xorb, choice.held.back().get());
}

Status CasService::ChooseDedupXorbs(const std::vector<index::DedupHit>& hits,
                                    const std::vector<xet::Hash>& shards, DedupChoice& choice) {
  for (const auto& hit : hits) OfferToDedupAnswer(choice, hit.xorb);
  for (const auto& shard : shards) {
    if (choice.full) break;
    auto neighbours = index_.GetShardXorbs(shard);
    if (!neighbours) {
      if (neighbours.error().code == ErrorCode::kNotFound) continue;
      return neighbours.error();
    }
    for (const auto* list : {&(*neighbours)->listed, &(*neighbours)->referenced}) {
      for (const auto& x : *list) choice.upload_order.emplace(x, choice.upload_order.size());
    }
    const auto& hit =
        *std::find_if(hits.begin(), hits.end(), [&](const auto& h) { return h.shard == shard; });
    for (const auto& x : NeighboursByPriority(**neighbours, hit.xorb)) OfferToDedupAnswer(choice, x);
  }
  return Ok{};
}

// Only xorbs the database holds now and no sweep has claimed (naming them revives them): a dedup answer
// must never name a xorb the collector deletes.
Status CasService::KeepUsableXorbs(DedupChoice& choice) {
  std::vector<xet::XorbHash> named;
  named.reserve(choice.chosen.size());
  for (const auto& c : choice.chosen) named.push_back(c.first);
  auto usable = Usable(named);
  if (!usable) return usable.error();
  size_t i = 0;
  std::erase_if(choice.chosen, [&](const auto&) { return !(*usable)[i++]; });
  choice.all_usable = choice.chosen.size() == named.size();
  return Ok{};
}

Result<std::vector<uint8_t>> CasService::DedupShard(const xet::ChunkHash& chunk, const std::string& scope,
                                                    bool any_scope) {
  auto hits = index_.LookupDedup(chunk, options_.dedup_across_scopes || any_scope
                                            ? std::nullopt
                                            : std::optional<std::string_view>(scope));
  if (!hits) return hits.error();
  if (hits->empty()) return NotFound("chunk " + chunk.hex() + " is not indexed");

  // The key rotates with the expiry window, so an answer's key and expiry always agree. An answer that
  // holds the hit shards' whole neighbourhood depends only on those shards and the window: it is kept, and
  // every chunk of those shards asked about in the window gets it again (many files of one upload, or a
  // client asking about several chunks of one file before the first answer reached it).
  const uint64_t now = Now();
  const uint64_t window = now / options_.dedup_key_expiry_seconds;
  const std::vector<xet::Hash> shards = ShardsOf(*hits);
  const xet::Hash cache_key = DedupAnswerKey(window, shards);
  auto cached = CachedDedupAnswer(cache_key);
  if (!cached) return cached.error();
  if (*cached) return std::move(**cached);

  // Choose: the xorbs that hold the chunk, then each hit shard's neighbourhood, while the answer stays
  // under the cap (the first xorb always goes in: an answer without it would be useless).
  DedupChoice choice;
  if (auto st = ChooseDedupXorbs(*hits, shards, choice); !st) return st.error();
  if (auto st = KeepUsableXorbs(choice); !st) return st.error();
  if (choice.chosen.empty()) return NotFound("chunk " + chunk.hex() + " is not indexed");
  SortByUploadOrder(choice.chosen, choice.upload_order);

  xet::ShardWriteOptions w;
  w.hmac_key = DedupKey(*Signing(), window);
  w.creation_timestamp = now;
  w.key_expiry = (window + 1) * options_.dedup_key_expiry_seconds;
  auto out = std::make_shared<DedupAnswer>();
  out->shard = xet::SerializeShard(DedupListing(choice.chosen), w);
  for (const auto& c : choice.chosen) out->xorbs.push_back(c.first);
  const bool whole = !choice.full && choice.all_usable &&
                     std::all_of(hits->begin(), hits->end(),
                                 [&](const auto& h) { return choice.upload_order.contains(h.xorb); });
  if (whole) {
    const size_t charge = out->shard.size() + out->xorbs.size() * sizeof(xet::XorbHash);
    dedup_answers_.Put(cache_key, std::shared_ptr<const DedupAnswer>(out), charge);
  }
  return out->shard;
}

Result<std::vector<bool>> CasService::Usable(std::span<const xet::XorbHash> xorbs) {
  std::vector<bool> out;
  out.reserve(xorbs.size());
  for (size_t at = 0; at < xorbs.size(); at += index::CasIndex::kMaxXorbsPerRead) {
    auto uses =
        index_.ReviveXorbs(xorbs.subspan(at, std::min(index::CasIndex::kMaxXorbsPerRead, xorbs.size() - at)));
    if (!uses) return uses.error();
    // A superseded xorb is stored but never offered (compaction moved its live chunks elsewhere).
    for (auto u : *uses) out.push_back(u == index::XorbUse::kStored);
  }
  return out;
}

xet::Hash CasService::DedupAnswerKey(uint64_t window, std::span<const xet::Hash> shards) const {
  std::vector<uint8_t> key(8 + 8 + 32 * shards.size());
  std::memcpy(key.data(), &window, 8);
  const uint64_t cap = options_.dedup_answer_max_bytes;
  std::memcpy(key.data() + 8, &cap, 8);
  for (size_t i = 0; i < shards.size(); ++i)
    std::memcpy(key.data() + 16 + 32 * i, shards[i].bytes.data(), 32);
  return xet::ChunkHashOf(key);
}

// ---------------------------------------------------------------------------------------------------------------
// Transfers

Result<TransferGrant> CasService::VerifyTransfer(std::string_view xorb_hex, std::string_view query) const {
  TransferGrant grant;
  TransferError refused;
  if (!Signing()->verifier.Verify(xorb_hex, query, Now(), &grant, &refused)) {
    if (refused.reason == TransferRefusal::kMalformed) return Malformed(refused.message);
    return Denied(refused.message);
  }
  return grant;
}

Result<TransferPlan> CasService::Transfer(std::string_view xorb_hex, std::string_view query,
                                          std::optional<std::string_view> range_header,
                                          TransferGrant* granted) {
  auto verified = VerifyTransfer(xorb_hex, query);
  if (!verified) return verified.error();
  const TransferGrant& grant = *verified;
  if (granted != nullptr) *granted = grant;
  TransferPlan plan;
  plan.xorb = grant.xorb;
  auto blob = store_.OpenForRead(store::BlobKind::kXorb, grant.xorb);
  if (!blob) return blob.error();
  plan.blob = std::move(*blob);
  if (range_header) {
    if (!ParseRangeHeader(*range_header, plan.blob.size, &plan.ranges)) {
      return Unsatisfiable("unsatisfiable Range header");
    }
    if (!RangesGranted(plan.ranges, grant.ranges)) return Denied("range outside the signed ranges");
  } else {
    plan.ranges = grant.ranges;
  }
  for (const auto& r : plan.ranges) {
    if (r.end >= plan.blob.size) return Unsatisfiable("range outside the stored xorb");
  }
  return plan;
}

Status CasService::ReadXorb(const xet::XorbHash& xorb, uint64_t offset, std::span<uint8_t> out) {
  return store_.ReadRange(store::BlobKind::kXorb, xorb, offset, out);
}

std::unique_ptr<store::BlobReader> CasService::OpenXorbRange(const xet::XorbHash& xorb, uint64_t offset,
                                                             uint64_t length) {
  return store_.OpenRange(store::BlobKind::kXorb, xorb, offset, length);
}

}  // namespace cairn::cas

#include "repair/fsck.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <unordered_set>
#include <utility>

#include "cas/grant.h"
#include "common/worker_pool.h"
#include "ingest/shard_records.h"
#include "xet/hashing.h"
#include "xet/shard.h"
#include "xet/xorb.h"

namespace cairn::repair {

using index::CasIndex;
using store::BlobKind;
using xet::Hash;

std::string_view FindingKindName(FindingKind kind) {
  switch (kind) {
    case FindingKind::kMissingObject:
      return "missing";
    case FindingKind::kUnindexed:
      return "unindexed";
    case FindingKind::kCorrupt:
      return "corrupt";
    case FindingKind::kBadTerm:
      return "bad-term";
  }
  return "finding";
}

bool FsckReport::damaged() const {
  return std::any_of(findings.begin(), findings.end(),
                     [](const Finding& f) { return !f.repaired && f.kind != FindingKind::kUnindexed; });
}

bool VerifyStoredBlob(BlobKind kind, const Hash& hash, std::span<const uint8_t> bytes) {
  if (kind != BlobKind::kXorb) return xet::ChunkHashOf(bytes) == hash;
  xet::ValidateOptions vo;
  vo.expected_hash = &hash;
  auto v = xet::ValidateXorb(bytes, vo);
  return v.ok() && v->footer == xet::FooterVersion::kV1;
}

namespace {

using HashSet = std::unordered_set<Hash, xet::HashHasher>;

Result<std::vector<Hash>> ScanAll(CasIndex& index, CasIndex::Scanned what) {
  std::vector<Hash> out;
  std::optional<Hash> after;
  for (;;) {
    auto page = index.Scan(what, after, CasIndex::kMaxScanned);
    if (!page.ok()) return page.error();
    out.insert(out.end(), page->begin(), page->end());
    if (page->size() < CasIndex::kMaxScanned) return out;
    after = page->back();
  }
}

Result<std::vector<Hash>> ListAll(store::BlobStore& store, BlobKind kind) {
  std::vector<Hash> out;
  if (auto st = store.List(kind, [&](const Hash& h) { out.push_back(h); }); !st.ok()) {
    return Error{st.error().code, "listing the " + std::string(BlobKindName(kind)) + "s of " +
                                      store.Describe() + ": " + st.error().message};
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// Why an indexed xorb's stored bytes are not the xorb the index describes; empty when they are.
std::string XorbProblem(std::span<const uint8_t> bytes, const Hash& hash, const index::XorbEntry* entry) {
  xet::ValidateOptions vo;
  vo.expected_hash = &hash;
  auto v = xet::ValidateXorb(bytes, vo);
  if (!v.ok()) return v.error().message;
  if (v->footer != xet::FooterVersion::kV1) return "stored without cairn's footer";
  if (entry == nullptr) return {};
  if (entry->chunk_count != v->layout.chunks.size()) return "the index lists another number of chunks";
  for (size_t i = 0; i < v->layout.chunks.size(); ++i) {
    const xet::XorbChunk a = entry->chunk(i), b = v->layout.chunks[i];
    if (a.hash != b.hash || a.unpacked_size != b.unpacked_size || a.end_offset != b.end_offset)
      return "chunk " + std::to_string(i) + " differs from the index's layout";
  }
  return {};
}

class Checker {
 public:
  Checker(cas::CasService& cas, CasIndex& index, store::BlobStore& store, const FsckOptions& options)
      : cas_(cas),
        index_(index),
        store_(store),
        options_(options),
        pool_(options.threads > 1 ? options.threads - 1 : 0) {}

  Result<FsckReport> Run() {
    auto indexed_xorbs = ScanAll(index_, CasIndex::Scanned::kXorbs);
    if (!indexed_xorbs.ok()) return indexed_xorbs.error();
    auto indexed_shards = ScanAll(index_, CasIndex::Scanned::kShards);
    if (!indexed_shards.ok()) return indexed_shards.error();
    auto stored_xorbs = ListAll(store_, BlobKind::kXorb);
    if (!stored_xorbs.ok()) return stored_xorbs.error();
    auto stored_shards = ListAll(store_, BlobKind::kShard);
    if (!stored_shards.ok()) return stored_shards.error();
    auto stored_grants = ListAll(store_, BlobKind::kGrant);
    if (!stored_grants.ok()) return stored_grants.error();
    report_.indexed_xorbs = indexed_xorbs->size();
    report_.stored_xorbs = stored_xorbs->size();
    report_.indexed_shards = indexed_shards->size();
    report_.stored_shards = stored_shards->size();
    report_.stored_grants = stored_grants->size();
    Say("index: " + std::to_string(indexed_xorbs->size()) + " xorbs, " +
        std::to_string(indexed_shards->size()) + " shards; store: " + std::to_string(stored_xorbs->size()) +
        " xorbs, " + std::to_string(stored_shards->size()) + " shards, " +
        std::to_string(stored_grants->size()) + " grants");

    const HashSet xorbs_in_store(stored_xorbs->begin(), stored_xorbs->end());
    const HashSet shards_in_store(stored_shards->begin(), stored_shards->end());
    const HashSet xorbs_in_index(indexed_xorbs->begin(), indexed_xorbs->end());
    const HashSet shards_in_index(indexed_shards->begin(), indexed_shards->end());
    HashSet being_swept(options_.being_swept.begin(), options_.being_swept.end());
    if (options_.read_being_swept) {
      auto again = options_.read_being_swept();
      if (!again.ok()) return again.error();
      being_swept.insert(again->begin(), again->end());
    }
    for (const Hash& h : *indexed_xorbs)
      if (!xorbs_in_store.contains(h) && !being_swept.contains(h))
        Add({FindingKind::kMissingObject, "xorb", h, "indexed, not stored"});
    for (const Hash& h : *indexed_shards)
      if (!shards_in_store.contains(h) && !being_swept.contains(h))
        Add({FindingKind::kMissingObject, "shard", h, "indexed, not stored"});

    std::vector<Hash> unindexed_xorbs, unindexed_shards;
    for (const Hash& h : *stored_xorbs)
      if (!xorbs_in_index.contains(h)) unindexed_xorbs.push_back(h);
    for (const Hash& h : *stored_shards)
      if (!shards_in_index.contains(h)) unindexed_shards.push_back(h);

    if (options_.deep) CheckIndexedXorbs(*indexed_xorbs, xorbs_in_store);
    CheckUnindexedXorbs(unindexed_xorbs);
    const auto grants = ReadGrants(*stored_grants, shards_in_store, shards_in_index);
    if (options_.deep) CheckIndexedShards(*indexed_shards, shards_in_store);
    CheckUnindexedShards(unindexed_shards, grants);
    // After the shards: a rebuild applies revocations to what they registered.
    if (auto st = CheckRevocations(); !st.ok()) return st.error();
    if (options_.deep) {
      if (auto st = CheckFiles(); !st.ok()) return st.error();
    }
    return std::move(report_);
  }

 private:
  void Add(Finding f) {
    std::lock_guard lock(mu_);
    if (f.repaired) ++report_.repaired;
    report_.findings.push_back(std::move(f));
  }
  void Say(const std::string& line) {
    if (options_.progress) options_.progress(line);
  }
  void CountVerified(uint64_t bytes) {
    std::lock_guard lock(mu_);
    report_.verified_bytes += bytes;
  }

  void CheckIndexedXorbs(const std::vector<Hash>& indexed, const HashSet& stored) {
    Say("re-hashing " + std::to_string(indexed.size()) + " stored xorbs");
    pool_.ParallelFor(indexed.size(), [&](size_t i) {
      const Hash& h = indexed[i];
      if (!stored.contains(h)) return;  // reported as missing
      auto bytes = store_.ReadWhole(BlobKind::kXorb, h);
      if (!bytes.ok()) return Add({FindingKind::kCorrupt, "xorb", h, "unreadable: " + bytes.error().message});
      CountVerified(bytes->size());
      auto entry = index_.GetXorb(h);
      if (!entry.ok()) return Add({FindingKind::kCorrupt, "xorb", h, "index: " + entry.error().message});
      if (auto problem = XorbProblem(*bytes, h, entry->get()); !problem.empty())
        Add({FindingKind::kCorrupt, "xorb", h, problem});
    });
  }

  // Stored xorbs the index lacks: with repair, each one that validates is indexed from its own bytes.
  void CheckUnindexedXorbs(const std::vector<Hash>& unindexed) {
    if (!options_.repair && !options_.deep) {
      for (const Hash& h : unindexed) Add({FindingKind::kUnindexed, "xorb", h, "stored, not indexed"});
      return;
    }
    if (!unindexed.empty()) Say("validating " + std::to_string(unindexed.size()) + " unindexed xorbs");
    pool_.ParallelFor(unindexed.size(), [&](size_t i) {
      const Hash& h = unindexed[i];
      auto bytes = store_.ReadWhole(BlobKind::kXorb, h);
      if (!bytes.ok()) return Add({FindingKind::kCorrupt, "xorb", h, "unreadable: " + bytes.error().message});
      CountVerified(bytes->size());
      xet::ValidateOptions vo;
      vo.expected_hash = &h;
      auto v = xet::ValidateXorb(*bytes, vo);
      if (!v.ok() || v->footer != xet::FooterVersion::kV1)
        return Add({FindingKind::kCorrupt, "xorb", h,
                    "stored, not indexed, and invalid: " +
                        (v.ok() ? std::string("no cairn footer") : v.error().message)});
      Finding f{FindingKind::kUnindexed, "xorb", h, "stored, not indexed"};
      if (options_.repair) {
        auto put = index_.PutXorb(h, v->layout);
        f.repaired = put.ok();
        f.detail = put.ok() ? "indexed from its own bytes" : "indexing failed: " + put.error().message;
      }
      Add(std::move(f));
    });
  }

  // Every grant, read and checked: shard → the scopes granted it.
  std::map<Hash, std::set<std::string>> ReadGrants(const std::vector<Hash>& names, const HashSet& shards,
                                                   const HashSet& indexed) {
    std::map<Hash, std::set<std::string>> out;
    std::mutex mu;
    pool_.ParallelFor(names.size(), [&](size_t i) {
      const Hash& name = names[i];
      auto bytes = store_.ReadWhole(BlobKind::kGrant, name);
      if (!bytes.ok())
        return Add({FindingKind::kCorrupt, "grant", name, "unreadable: " + bytes.error().message});
      auto grant = cas::ParseGrant(*bytes);
      if (!grant.ok() || xet::ChunkHashOf(*bytes) != name)
        return Add({FindingKind::kCorrupt, "grant", name,
                    grant.ok() ? "does not hash to its name" : grant.error().message});
      if (!shards.contains(grant->shard) && indexed.contains(grant->shard))
        return Add({FindingKind::kMissingObject, "shard", grant->shard,
                    "granted to scope '" + grant->scope + "', not stored"});
      // Neither stored nor indexed: the grant registers nothing. The collector deletes a shard's grants with
      // it; one it could not find (a store listing that lagged, for a shard older than schema 12) stays.
      if (!shards.contains(grant->shard))
        return Add({FindingKind::kUnindexed, "grant", name,
                    "of shard " + grant->shard.hex() +
                        ", which is neither stored nor indexed: registers nothing (left by the garbage "
                        "collector, or "
                        "its shard was lost with the index)"});
      std::lock_guard lock(mu);
      out[grant->shard].insert(grant->scope);
    });
    return out;
  }

  void CheckIndexedShards(const std::vector<Hash>& indexed, const HashSet& stored) {
    Say("re-hashing " + std::to_string(indexed.size()) + " stored shards");
    pool_.ParallelFor(indexed.size(), [&](size_t i) {
      const Hash& h = indexed[i];
      if (!stored.contains(h)) return;
      auto bytes = store_.ReadWhole(BlobKind::kShard, h);
      if (!bytes.ok())
        return Add({FindingKind::kCorrupt, "shard", h, "unreadable: " + bytes.error().message});
      CountVerified(bytes->size());
      if (xet::ChunkHashOf(*bytes) != h)
        return Add({FindingKind::kCorrupt, "shard", h, "does not hash to its name"});
      if (auto parsed = xet::ParseShard(*bytes); !parsed.ok())
        Add({FindingKind::kCorrupt, "shard", h, parsed.error().message});
    });
  }

  // Stored shards the index lacks: with repair, registered for each scope a grant names (or the default
  // scope), verified against the indexed xorbs as an upload would be.
  void CheckUnindexedShards(const std::vector<Hash>& unindexed,
                            const std::map<Hash, std::set<std::string>>& grants) {
    if (!options_.repair) {
      for (const Hash& h : unindexed) Add({FindingKind::kUnindexed, "shard", h, "stored, not indexed"});
      return;
    }
    if (!unindexed.empty()) Say("registering " + std::to_string(unindexed.size()) + " unindexed shards");
    pool_.ParallelFor(unindexed.size(), [&](size_t i) {
      const Hash& h = unindexed[i];
      Finding f{FindingKind::kUnindexed, "shard", h, "stored, not indexed"};
      std::set<std::string> scopes;
      if (auto it = grants.find(h); it != grants.end()) scopes = it->second;
      if (scopes.empty() && !options_.default_scope.empty()) scopes.insert(options_.default_scope);
      if (scopes.empty()) {
        f.detail += "; no grant names a scope for it (a default scope would register it)";
        return Add(std::move(f));
      }
      auto bytes = store_.ReadWhole(BlobKind::kShard, h);
      if (!bytes.ok())
        return Add({FindingKind::kCorrupt, "shard", h, "unreadable: " + bytes.error().message});
      if (xet::ChunkHashOf(*bytes) != h)
        return Add({FindingKind::kCorrupt, "shard", h, "does not hash to its name"});
      std::string failed;
      bool partly = false;
      for (const std::string& scope : scopes) {
        auto put = cas_.PutShard(*bytes, scope);
        if (!put.ok() && put.error().code == ErrorCode::kUnknownReference) {
          put = RegisterSurvivors(*bytes, scope);
          partly = partly || put.ok();
        }
        if (!put.ok()) failed = put.error().message;
      }
      f.repaired = failed.empty();
      f.detail = !failed.empty() ? "registration failed: " + failed
                 : partly        ? "registered for " + std::to_string(scopes.size()) +
                                " scope(s), without the files and xorbs the garbage collector freed"
                          : "registered for " + std::to_string(scopes.size()) + " scope(s)";
      Add(std::move(f));
    });
  }

  // The store's revocations against the index's (fsck.h).
  Status CheckRevocations() {
    // The index first: DELETE /v1/files records a revocation there before it stores its blob.
    std::map<index::RevocationKey, bool> indexed;  // → cleared
    std::optional<index::RevocationKey> after;
    for (;;) {
      auto page = index_.ListRevocations(after, CasIndex::kMaxListedFiles);
      if (!page.ok()) return page.error();
      for (auto& r : *page) indexed.emplace(r.key, r.cleared);
      if (page->size() < CasIndex::kMaxListedFiles) break;
      after = page->back().key;
    }
    auto names = ListAll(store_, BlobKind::kRevocation);
    if (!names.ok()) return names.error();
    report_.stored_revocations = names->size();
    report_.indexed_revocations = indexed.size();
    std::set<index::RevocationKey> stored;
    std::mutex mu;
    pool_.ParallelFor(names->size(), [&](size_t i) {
      const Hash& name = (*names)[i];
      auto bytes = store_.ReadWhole(BlobKind::kRevocation, name);
      if (!bytes.ok())
        return Add({FindingKind::kCorrupt, "revocation", name, "unreadable: " + bytes.error().message});
      auto r = cas::ParseRevocation(*bytes);
      if (!r.ok() || xet::ChunkHashOf(*bytes) != name)
        return Add({FindingKind::kCorrupt, "revocation", name,
                    r.ok() ? "does not hash to its name" : r.error().message});
      index::RevocationKey key{r->file, r->scope};
      {
        std::lock_guard lock(mu);
        stored.insert(key);
      }
      if (auto it = indexed.find(key); it != indexed.end()) {
        if (it->second && !options_.repair)
          Add({FindingKind::kUnindexed, "revocation", name,
               "of file " + r->file.hex() + ", which its scope sees again: left to delete"});
        return;  // cleared ones are deleted below when repairing
      }
      if (options_.repair && options_.apply_revocations) {
        auto removed = index_.UnregisterFile(r->file, r->scope);
        Finding f{FindingKind::kUnindexed, "revocation", name, "stored, not indexed"};
        f.repaired = removed.ok();
        f.detail =
            !removed.ok() ? "applying it failed: " + removed.error().message
            : *removed == index::Unregistered::kRemoved
                ? "applied: scope '" + r->scope + "' no longer sees file " + r->file.hex()
                : "applied: its file " + r->file.hex() + " is not registered for scope '" + r->scope + "'";
        return Add(std::move(f));
      }
      auto visible = index_.FileVisibleTo(r->file, r->scope);
      if (!visible.ok())
        return Add({FindingKind::kUnindexed, "revocation", name, "index: " + visible.error().message});
      Add({FindingKind::kUnindexed, "revocation", name,
           *visible ? "stored, not indexed, and scope '" + r->scope + "' sees file " + r->file.hex() +
                          ": the index says otherwise (a registration after it, or an index restored from "
                          "before it); `cairn rm` removes the file again"
                    : "stored, not indexed: file " + r->file.hex() + " is not registered for its scope"});
    });
    for (const auto& [key, cleared] : indexed) {
      if (cleared || stored.contains(key)) continue;
      Finding f{FindingKind::kMissingObject, "revocation", cas::RevocationName({key.file, key.scope}),
                "of file " + key.file.hex() + " by scope '" + key.scope +
                    "': recorded, not stored (a rebuild would give the file back)"};
      if (options_.repair) {
        auto st = cas::RecordRevocation(store_, {key.file, key.scope});
        f.repaired = st.ok();
        f.detail += st.ok() ? "; stored from the index's record" : "; storing failed: " + st.error().message;
      }
      Add(std::move(f));
    }
    if (options_.repair) {
      auto finished = cas::FinishClearedRevocations(index_, store_);
      if (!finished.ok()) return finished.error();
      report_.repaired += *finished;
    }
    return Ok{};
  }

  // A shard some of whose xorbs the garbage collector freed (with every file that used them): what it still
  // describes whole, the files whose every xorb is indexed and the listings of indexed xorbs, registered as a
  // shard of its own, so that the live files it held are not lost with the deleted ones.
  Result<cas::ShardOutcome> RegisterSurvivors(std::span<const uint8_t> bytes, const std::string& scope) {
    auto shard = xet::ParseShard(bytes);
    if (!shard.ok()) return shard.error();
    std::map<Hash, bool> stored;
    const auto has = [&](const Hash& x) -> Result<bool> {
      if (auto it = stored.find(x); it != stored.end()) return it->second;
      auto h = index_.HasXorb(x);
      if (!h.ok()) return h.error();
      return stored[x] = *h;
    };
    xet::Shard kept;
    for (auto& listing : shard->xorbs) {
      auto h = has(listing.hash);
      if (!h.ok()) return h.error();
      if (*h) kept.xorbs.push_back(std::move(listing));
    }
    for (auto& file : shard->files) {
      bool whole = true;
      for (const auto& t : file.terms) {
        auto h = has(t.xorb);
        if (!h.ok()) return h.error();
        whole = whole && *h;
      }
      if (whole) kept.files.push_back(std::move(file));
    }
    if (kept.files.empty()) return UnknownReference("none of its files is whole any more");
    return cas_.PutShard(ingest::ShardUploadForm(kept), scope);
  }

  // Every indexed file's terms against the indexed xorbs.
  Status CheckFiles() {
    auto files = ScanAll(index_, CasIndex::Scanned::kFiles);
    if (!files.ok()) return files.error();
    Say("checking the terms of " + std::to_string(files->size()) + " files");
    std::atomic<uint64_t> terms{0};
    pool_.ParallelFor(files->size(), [&](size_t i) {
      const Hash& h = (*files)[i];
      auto file = index_.GetFile(h);
      if (!file.ok()) return Add({FindingKind::kBadTerm, "file", h, "unreadable: " + file.error().message});
      for (size_t t = 0; t < (*file)->term_count; ++t) {
        const index::Term term = (*file)->term(t);
        terms++;
        if (auto problem = TermProblem(term); !problem.empty())
          return Add({FindingKind::kBadTerm, "file", h, "term " + std::to_string(t) + ": " + problem});
      }
    });
    report_.checked_files = files->size();
    report_.checked_terms = terms;
    return Ok{};
  }

  std::string TermProblem(const index::Term& term) {
    auto xorb = index_.GetXorb(term.xorb);
    if (!xorb.ok()) return "xorb " + term.xorb.hex() + " is not indexed";
    if (term.chunk_start >= term.chunk_end || term.chunk_end > (*xorb)->chunk_count)
      return "chunks [" + std::to_string(term.chunk_start) + ", " + std::to_string(term.chunk_end) +
             ") are not in xorb " + term.xorb.hex() + " of " + std::to_string((*xorb)->chunk_count);
    uint64_t bytes = 0;
    for (uint32_t c = term.chunk_start; c < term.chunk_end; ++c) bytes += (*xorb)->chunk(c).unpacked_size;
    if (bytes != term.unpacked_bytes)
      return "its chunks hold " + std::to_string(bytes) + " bytes, not " +
             std::to_string(term.unpacked_bytes);
    return {};
  }

  cas::CasService& cas_;
  CasIndex& index_;
  store::BlobStore& store_;
  const FsckOptions& options_;
  // options_.threads in all, counting the calling thread (it works too): the tasks wait on the store (round
  // trips to S3), so not the CPU-sized pool the CAS service validates on.
  WorkerPool pool_;
  std::mutex mu_;
  FsckReport report_;
};

}  // namespace

Result<FsckReport> Fsck(cas::CasService& cas, CasIndex& index, store::BlobStore& store,
                        const FsckOptions& options) {
  return Checker(cas, index, store, options).Run();
}

Result<FsckReport> RebuildIndex(cas::CasService& cas, CasIndex& index, store::BlobStore& store,
                                FsckOptions options) {
  auto stats = index.Stats();
  if (!stats.ok()) return stats.error();
  if (stats->xorbs != 0 || stats->files != 0 || stats->shards != 0)
    return Inconsistent("the index to rebuild into is not empty (" + std::to_string(stats->xorbs) +
                        " xorbs, " + std::to_string(stats->shards) + " shards): use a new one");
  options.repair = true;
  options.apply_revocations = true;
  return Fsck(cas, index, store, options);
}

}  // namespace cairn::repair

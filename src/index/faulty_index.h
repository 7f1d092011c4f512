// Test support: the fault seam for index reads and writes. An index that passes everything through
// (forwarding_index.h) but asks a test's hook first, so a test can fail chosen calls (or all of them) with
// the errors a database gives (kIo, kUnavailable) and prove that callers report an index failure as one:
// never taken for "not found", never a half-made change. The backends' own write seam
// (SqliteOptions::fault_before_commit) fails a COMMIT after the statements ran.
//
// Thread-safety: as the inner index; set `fault` before the calls it should see.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "index/forwarding_index.h"

namespace cairn::index::testing {

class FaultyIndex final : public ForwardingIndex {
 public:
  using ForwardingIndex::ForwardingIndex;

  // Asked before every call that can fail, with the method's name and, for GetRepoObjects, the keys: an
  // error is answered instead of the call. Null (the default): every call goes through.
  using Fault = std::function<xet::Status(std::string_view call, std::span<const std::vector<uint8_t>> keys)>;
  Fault fault;

  // How many calls were made so far.
  size_t calls() const { return calls_; }

  using Index::ShareFile;
  xet::Result<std::shared_ptr<const XorbEntry>> GetXorb(const XorbHash& hash) override {
    if (auto st = Check("GetXorb"); !st.ok()) return st.error();
    return ForwardingIndex::GetXorb(hash);
  }
  xet::Result<std::vector<std::shared_ptr<const XorbEntry>>> GetXorbs(
      std::span<const XorbHash> hashes) override {
    if (auto st = Check("GetXorbs"); !st.ok()) return st.error();
    return ForwardingIndex::GetXorbs(hashes);
  }
  xet::Result<bool> HasXorb(const XorbHash& hash) override {
    if (auto st = Check("HasXorb"); !st.ok()) return st.error();
    return ForwardingIndex::HasXorb(hash);
  }
  xet::Result<std::shared_ptr<const ShardXorbs>> GetShardXorbs(const Hash& shard) override {
    if (auto st = Check("GetShardXorbs"); !st.ok()) return st.error();
    return ForwardingIndex::GetShardXorbs(shard);
  }
  xet::Result<bool> PutXorb(const XorbHash& hash, const xet::XorbLayout& layout) override {
    if (auto st = Check("PutXorb"); !st.ok()) return st.error();
    return ForwardingIndex::PutXorb(hash, layout);
  }
  xet::Result<std::shared_ptr<const FileEntry>> GetFile(const FileHash& hash) override {
    if (auto st = Check("GetFile"); !st.ok()) return st.error();
    return ForwardingIndex::GetFile(hash);
  }
  xet::Result<std::vector<std::shared_ptr<const FileEntry>>> GetFiles(
      std::span<const FileHash> hashes) override {
    if (auto st = Check("GetFiles"); !st.ok()) return st.error();
    return ForwardingIndex::GetFiles(hashes);
  }
  xet::Result<bool> FileVisibleTo(const FileHash& hash, std::string_view scope) override {
    if (auto st = Check("FileVisibleTo"); !st.ok()) return st.error();
    return ForwardingIndex::FileVisibleTo(hash, scope);
  }
  xet::Result<std::optional<int64_t>> VisibleFileRecord(const FileHash& hash,
                                                        std::string_view scope) override {
    if (auto st = Check("VisibleFileRecord"); !st.ok()) return st.error();
    return ForwardingIndex::VisibleFileRecord(hash, scope);
  }
  xet::Result<std::shared_ptr<const FileEntry>> GetVisibleFile(const FileHash& hash,
                                                               std::string_view scope) override {
    if (auto st = Check("GetVisibleFile"); !st.ok()) return st.error();
    return ForwardingIndex::GetVisibleFile(hash, scope);
  }
  xet::Result<std::optional<FileHash>> FileBySha256(const Hash& sha256,
                                                    std::optional<std::string_view> scope) override {
    if (auto st = Check("FileBySha256"); !st.ok()) return st.error();
    return ForwardingIndex::FileBySha256(sha256, scope);
  }
  xet::Result<std::vector<ListedFile>> ListFiles(std::string_view scope, std::optional<FileHash> after,
                                                 size_t limit) override {
    if (auto st = Check("ListFiles"); !st.ok()) return st.error();
    return ForwardingIndex::ListFiles(scope, after, limit);
  }
  xet::Result<ScopeTotals> ScopeStats(std::string_view scope) override {
    if (auto st = Check("ScopeStats"); !st.ok()) return st.error();
    return ForwardingIndex::ScopeStats(scope);
  }
  using CasIndex::ShareFiles;
  xet::Status ShareFiles(std::span<const FileHash> hashes, std::string_view scope,
                         const QuotaCharge* charge) override {
    if (auto st = Check("ShareFiles"); !st.ok()) return st.error();
    return ForwardingIndex::ShareFiles(hashes, scope, charge);
  }
  xet::Result<Unregistered> UnregisterFile(const FileHash& hash, std::string_view scope) override {
    if (auto st = Check("UnregisterFile"); !st.ok()) return st.error();
    return ForwardingIndex::UnregisterFile(hash, scope);
  }
  xet::Result<std::vector<RevocationRecord>> ListRevocations(std::optional<RevocationKey> after,
                                                             size_t limit) override {
    if (auto st = Check("ListRevocations"); !st.ok()) return st.error();
    return ForwardingIndex::ListRevocations(std::move(after), limit);
  }
  xet::Result<std::vector<RevocationKey>> ListClearedRevocations(std::optional<RevocationKey> after,
                                                                 size_t limit) override {
    if (auto st = Check("ListClearedRevocations"); !st.ok()) return st.error();
    return ForwardingIndex::ListClearedRevocations(std::move(after), limit);
  }
  xet::Status ForgetRevocations(std::span<const RevocationKey> revocations) override {
    if (auto st = Check("ForgetRevocations"); !st.ok()) return st;
    return ForwardingIndex::ForgetRevocations(revocations);
  }
  xet::Result<CommitOutcome> CommitShard(const ShardCommit& commit) override {
    if (auto st = Check("CommitShard"); !st.ok()) return st.error();
    return ForwardingIndex::CommitShard(commit);
  }
  xet::Result<std::optional<ShardInfo>> GetShard(const Hash& shard) override {
    if (auto st = Check("GetShard"); !st.ok()) return st.error();
    return ForwardingIndex::GetShard(shard);
  }
  xet::Result<std::vector<DedupHit>> LookupDedup(const ChunkHash& chunk,
                                                 std::optional<std::string_view> scope) override {
    if (auto st = Check("LookupDedup"); !st.ok()) return st.error();
    return ForwardingIndex::LookupDedup(chunk, scope);
  }
  xet::Result<std::vector<XorbUse>> ReviveXorbs(std::span<const XorbHash> xorbs) override {
    if (auto st = Check("ReviveXorbs"); !st.ok()) return st.error();
    return ForwardingIndex::ReviveXorbs(xorbs);
  }
  xet::Result<IndexStats> Stats() override {
    if (auto st = Check("Stats"); !st.ok()) return st.error();
    return ForwardingIndex::Stats();
  }
  xet::Result<std::vector<Hash>> Scan(Scanned what, std::optional<Hash> after, size_t limit) override {
    if (auto st = Check("Scan"); !st.ok()) return st.error();
    return ForwardingIndex::Scan(what, after, limit);
  }
  xet::Result<RepoRecord> CreateRepo(const NewRepo& repo) override {
    if (auto st = Check("CreateRepo"); !st.ok()) return st.error();
    return ForwardingIndex::CreateRepo(repo);
  }
  xet::Result<RepoRecord> FindRepo(RepoType type, std::string_view ns, std::string_view name) override {
    if (auto st = Check("FindRepo"); !st.ok()) return st.error();
    return ForwardingIndex::FindRepo(type, ns, name);
  }
  xet::Result<RepoRecord> FindRepoByScope(std::string_view scope) override {
    if (auto st = Check("FindRepoByScope"); !st.ok()) return st.error();
    return ForwardingIndex::FindRepoByScope(scope);
  }
  xet::Result<std::vector<RepoRecord>> ListRepos(RepoType type, std::optional<std::string_view> ns,
                                                 std::optional<std::pair<std::string, std::string>> after,
                                                 size_t limit) override {
    if (auto st = Check("ListRepos"); !st.ok()) return st.error();
    return ForwardingIndex::ListRepos(type, ns, std::move(after), limit);
  }
  xet::Status UpdateRepo(int64_t id, const RepoChange& change) override {
    if (auto st = Check("UpdateRepo"); !st.ok()) return st.error();
    return ForwardingIndex::UpdateRepo(id, change);
  }
  xet::Status DeleteRepo(int64_t id) override {
    if (auto st = Check("DeleteRepo"); !st.ok()) return st.error();
    return ForwardingIndex::DeleteRepo(id);
  }
  using RepoIndex::PutRepoObjects;
  xet::Status PutRepoObjects(int64_t repo, const std::vector<RepoObject>& objects,
                             const QuotaCharge* charge) override {
    if (auto st = Check("PutRepoObjects"); !st.ok()) return st.error();
    return ForwardingIndex::PutRepoObjects(repo, objects, charge);
  }
  xet::Result<std::vector<std::optional<RepoObject>>> GetRepoObjects(
      int64_t repo, const std::vector<std::vector<uint8_t>>& keys) override {
    if (auto st = Check("GetRepoObjects", keys); !st.ok()) return st.error();
    return ForwardingIndex::GetRepoObjects(repo, keys);
  }
  xet::Result<std::optional<RepoObjectHead>> GetRepoObjectHead(int64_t repo, std::span<const uint8_t> key,
                                                               size_t max_bytes) override {
    if (auto st = Check("GetRepoObjectHead"); !st.ok()) return st.error();
    return ForwardingIndex::GetRepoObjectHead(repo, key, max_bytes);
  }
  xet::Result<std::vector<ObjectRevival>> ReviveRepoObjects(
      int64_t repo, const std::vector<std::vector<uint8_t>>& keys) override {
    if (auto st = Check("ReviveRepoObjects", keys); !st.ok()) return st.error();
    return ForwardingIndex::ReviveRepoObjects(repo, keys);
  }
  xet::Result<size_t> DeleteRepoObjects(int64_t repo,
                                        const std::vector<std::vector<uint8_t>>& keys) override {
    if (auto st = Check("DeleteRepoObjects", keys); !st.ok()) return st.error();
    return ForwardingIndex::DeleteRepoObjects(repo, keys);
  }
  xet::Result<std::vector<RepoObject>> ListRepoObjects(int64_t repo, uint8_t kind,
                                                       const std::optional<std::vector<uint8_t>>& after,
                                                       size_t limit) override {
    if (auto st = Check("ListRepoObjects"); !st.ok()) return st.error();
    return ForwardingIndex::ListRepoObjects(repo, kind, after, limit);
  }
  xet::Result<std::vector<std::optional<RepoObjectHead>>> GetRepoObjectHeads(
      int64_t repo, const std::vector<std::vector<uint8_t>>& keys, size_t max_bytes) override {
    if (auto st = Check("GetRepoObjectHeads", keys); !st.ok()) return st.error();
    return ForwardingIndex::GetRepoObjectHeads(repo, keys, max_bytes);
  }
  xet::Result<std::vector<Ref>> ListRefs(int64_t repo) override {
    if (auto st = Check("ListRefs"); !st.ok()) return st.error();
    return ForwardingIndex::ListRefs(repo);
  }
  xet::Status UpdateRef(int64_t repo, const RefUpdate& update) override {
    if (auto st = Check("UpdateRef"); !st.ok()) return st.error();
    return ForwardingIndex::UpdateRef(repo, update);
  }
  xet::Status ChangeBucket(int64_t repo, const std::vector<BucketChange>& changes) override {
    if (auto st = Check("ChangeBucket"); !st.ok()) return st.error();
    return ForwardingIndex::ChangeBucket(repo, changes);
  }
  xet::Result<std::vector<BucketFile>> ListBucket(int64_t repo, std::string_view prefix,
                                                  std::optional<std::string_view> from,
                                                  size_t limit) override {
    if (auto st = Check("ListBucket"); !st.ok()) return st.error();
    return ForwardingIndex::ListBucket(repo, prefix, from, limit);
  }
  xet::Result<std::vector<std::optional<BucketFile>>> GetBucketFiles(
      int64_t repo, const std::vector<std::string>& paths) override {
    if (auto st = Check("GetBucketFiles"); !st.ok()) return st.error();
    return ForwardingIndex::GetBucketFiles(repo, paths);
  }
  xet::Result<BucketTotals> GetBucketTotals(int64_t repo) override {
    if (auto st = Check("GetBucketTotals"); !st.ok()) return st.error();
    return ForwardingIndex::GetBucketTotals(repo);
  }
  xet::Result<std::string> SharedSecret(std::string_view name, std::string_view candidate) override {
    if (auto st = Check("SharedSecret"); !st.ok()) return st.error();
    return ForwardingIndex::SharedSecret(name, candidate);
  }
  xet::Result<std::vector<SecretRecord>> ListSecrets() override {
    if (auto st = Check("ListSecrets"); !st.ok()) return st.error();
    return ForwardingIndex::ListSecrets();
  }
  xet::Result<bool> AddSecret(std::string_view name, std::string_view value) override {
    if (auto st = Check("AddSecret"); !st.ok()) return st.error();
    return ForwardingIndex::AddSecret(name, value);
  }
  xet::Result<bool> DeleteSecret(std::string_view name) override {
    if (auto st = Check("DeleteSecret"); !st.ok()) return st.error();
    return ForwardingIndex::DeleteSecret(name);
  }
  xet::Result<std::optional<QuotaRecord>> GetQuota(std::string_view ns) override {
    if (auto st = Check("GetQuota"); !st.ok()) return st.error();
    return ForwardingIndex::GetQuota(ns);
  }
  xet::Result<std::vector<QuotaRecord>> ListQuotas(std::optional<std::string_view> after,
                                                   size_t limit) override {
    if (auto st = Check("ListQuotas"); !st.ok()) return st.error();
    return ForwardingIndex::ListQuotas(after, limit);
  }
  xet::Status SetQuotaLimit(std::string_view ns, std::optional<uint64_t> limit) override {
    if (auto st = Check("SetQuotaLimit"); !st.ok()) return st.error();
    return ForwardingIndex::SetQuotaLimit(ns, limit);
  }
  xet::Result<bool> DeleteQuota(std::string_view ns) override {
    if (auto st = Check("DeleteQuota"); !st.ok()) return st.error();
    return ForwardingIndex::DeleteQuota(ns);
  }
  xet::Status SettleQuota(std::string_view ns, uint64_t bytes, bool published) override {
    if (auto st = Check("SettleQuota"); !st.ok()) return st;
    return ForwardingIndex::SettleQuota(ns, bytes, published);
  }
  xet::Result<bool> RecordQuotaMeasure(std::string_view ns, const QuotaMeasure& measure,
                                       uint64_t charge) override {
    if (auto st = Check("RecordQuotaMeasure"); !st.ok()) return st.error();
    return ForwardingIndex::RecordQuotaMeasure(ns, measure, charge);
  }
  xet::Status MarkQuotaStale(std::optional<std::string_view> ns) override {
    if (auto st = Check("MarkQuotaStale"); !st.ok()) return st.error();
    return ForwardingIndex::MarkQuotaStale(ns);
  }
  xet::Result<std::vector<FileXorbs>> ScanFileXorbs(std::optional<FileHash> after, size_t limit) override {
    if (auto st = Check("ScanFileXorbs"); !st.ok()) return st.error();
    return ForwardingIndex::ScanFileXorbs(after, limit);
  }
  xet::Result<std::vector<Quarantined>> ScanQuarantine(GcKind kind, std::optional<Hash> after,
                                                       size_t limit) override {
    if (auto st = Check("ScanQuarantine"); !st.ok()) return st.error();
    return ForwardingIndex::ScanQuarantine(kind, after, limit);
  }
  xet::Status Quarantine(GcKind kind, std::span<const Hash> hashes, int64_t since) override {
    if (auto st = Check("Quarantine"); !st.ok()) return st.error();
    return ForwardingIndex::Quarantine(kind, hashes, since);
  }
  xet::Status Release(GcKind kind, std::span<const Hash> hashes) override {
    if (auto st = Check("Release"); !st.ok()) return st.error();
    return ForwardingIndex::Release(kind, hashes);
  }
  xet::Result<SweptTotals> SweepFiles(std::span<const Quarantined> files) override {
    if (auto st = Check("SweepFiles"); !st.ok()) return st.error();
    return ForwardingIndex::SweepFiles(files);
  }
  xet::Result<std::vector<XorbHash>> ClaimXorbs(std::span<const Quarantined> xorbs, int64_t now) override {
    if (auto st = Check("ClaimXorbs"); !st.ok()) return st.error();
    return ForwardingIndex::ClaimXorbs(xorbs, now);
  }
  xet::Result<SweptTotals> DropXorbs(std::span<const XorbHash> xorbs) override {
    if (auto st = Check("DropXorbs"); !st.ok()) return st.error();
    return ForwardingIndex::DropXorbs(xorbs);
  }
  xet::Result<std::vector<std::vector<std::string>>> FileScopes(std::span<const FileHash> files) override {
    if (auto st = Check("FileScopes"); !st.ok()) return st.error();
    return ForwardingIndex::FileScopes(files);
  }
  xet::Status Repoint(const Repointing& repointing) override {
    if (auto st = Check("Repoint"); !st.ok()) return st.error();
    return ForwardingIndex::Repoint(repointing);
  }
  xet::Result<std::vector<ShardScope>> ShardScopes(std::span<const Hash> shards) override {
    if (auto st = Check("ShardScopes"); !st.ok()) return st.error();
    return ForwardingIndex::ShardScopes(shards);
  }
  xet::Result<SweptTotals> DropShards(std::span<const Hash> shards) override {
    if (auto st = Check("DropShards"); !st.ok()) return st.error();
    return ForwardingIndex::DropShards(shards);
  }
  xet::Result<std::vector<RepoObjectMark>> ScanRepoObjects(int64_t repo,
                                                           const std::optional<std::vector<uint8_t>>& after,
                                                           size_t limit) override {
    if (auto st = Check("ScanRepoObjects"); !st.ok()) return st.error();
    return ForwardingIndex::ScanRepoObjects(repo, after, limit);
  }
  xet::Status QuarantineRepoObjects(int64_t repo, const std::vector<std::vector<uint8_t>>& keys,
                                    int64_t since) override {
    if (auto st = Check("QuarantineRepoObjects", keys); !st.ok()) return st.error();
    return ForwardingIndex::QuarantineRepoObjects(repo, keys, since);
  }
  xet::Status ReleaseRepoObjects(int64_t repo, const std::vector<std::vector<uint8_t>>& keys) override {
    if (auto st = Check("ReleaseRepoObjects", keys); !st.ok()) return st.error();
    return ForwardingIndex::ReleaseRepoObjects(repo, keys);
  }
  xet::Result<SweptTotals> SweepRepoObjects(int64_t repo, std::span<const RepoObjectMark> objects) override {
    if (auto st = Check("SweepRepoObjects"); !st.ok()) return st.error();
    return ForwardingIndex::SweepRepoObjects(repo, objects);
  }
  xet::Result<std::string> ScrubDeleted(bool vacuum) override {
    if (auto st = Check("ScrubDeleted"); !st.ok()) return st.error();
    return ForwardingIndex::ScrubDeleted(vacuum);
  }
  xet::Result<std::unique_ptr<GcLock>> LockGc() override {
    if (auto st = Check("LockGc"); !st.ok()) return st.error();
    return ForwardingIndex::LockGc();
  }
  xet::Result<std::unique_ptr<GcLock>> HoldDeletions(DeletionHold mode, bool wait) override {
    if (auto st = Check("HoldDeletions"); !st.ok()) return st.error();
    return ForwardingIndex::HoldDeletions(mode, wait);
  }
  xet::Status Ping() override {
    if (auto st = Check("Ping"); !st.ok()) return st.error();
    return ForwardingIndex::Ping();
  }

 private:
  xet::Status Check(std::string_view call, std::span<const std::vector<uint8_t>> keys = {}) {
    ++calls_;
    return fault ? fault(call, keys) : xet::Status(xet::Ok{});
  }
  std::atomic<size_t> calls_{0};
};

}  // namespace cairn::index::testing

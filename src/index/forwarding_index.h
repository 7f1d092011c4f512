// An Index that passes every call to another: the base of the decorators applied around a backend (the
// record caches, cached_index.h; the fault seam of tests, testing/faulty_index.h), each overriding only what
// it changes.
//
// Contract: index.h's, as the inner index keeps it. Ownership: owns the inner index when given a unique_ptr,
// borrows it (it must outlive this one) when given a reference. Thread-safety: as the inner index.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "index/index.h"

namespace cairn::index {

class ForwardingIndex : public Index {
 public:
  explicit ForwardingIndex(std::unique_ptr<Index> inner) : owned_(std::move(inner)), inner_(*owned_) {}
  explicit ForwardingIndex(Index& inner) : inner_(inner) {}

  Result<std::shared_ptr<const XorbEntry>> GetXorb(const XorbHash& hash) override {
    if (auto st = Before("GetXorb", {}); !st.ok()) return st.error();
    return inner_.GetXorb(hash);
  }
  Result<std::vector<std::shared_ptr<const XorbEntry>>> GetXorbs(std::span<const XorbHash> hashes) override {
    if (auto st = Before("GetXorbs", {}); !st.ok()) return st.error();
    return inner_.GetXorbs(hashes);
  }
  Result<bool> HasXorb(const XorbHash& hash) override {
    if (auto st = Before("HasXorb", {}); !st.ok()) return st.error();
    return inner_.HasXorb(hash);
  }
  Result<std::shared_ptr<const ShardXorbs>> GetShardXorbs(const Hash& shard) override {
    if (auto st = Before("GetShardXorbs", {}); !st.ok()) return st.error();
    return inner_.GetShardXorbs(shard);
  }
  Result<bool> PutXorb(const XorbHash& hash, const xet::XorbLayout& layout) override {
    if (auto st = Before("PutXorb", {}); !st.ok()) return st.error();
    return inner_.PutXorb(hash, layout);
  }
  Result<std::shared_ptr<const FileEntry>> GetFile(const FileHash& hash) override {
    if (auto st = Before("GetFile", {}); !st.ok()) return st.error();
    return inner_.GetFile(hash);
  }
  Result<std::vector<std::shared_ptr<const FileEntry>>> GetFiles(std::span<const FileHash> hashes) override {
    if (auto st = Before("GetFiles", {}); !st.ok()) return st.error();
    return inner_.GetFiles(hashes);
  }
  Result<bool> FileVisibleTo(const FileHash& hash, std::string_view scope) override {
    if (auto st = Before("FileVisibleTo", {}); !st.ok()) return st.error();
    return inner_.FileVisibleTo(hash, scope);
  }
  Result<std::optional<int64_t>> VisibleFileRecord(const FileHash& hash, std::string_view scope) override {
    if (auto st = Before("VisibleFileRecord", {}); !st.ok()) return st.error();
    return inner_.VisibleFileRecord(hash, scope);
  }
  Result<std::shared_ptr<const FileEntry>> GetVisibleFile(const FileHash& hash,
                                                          std::string_view scope) override {
    if (auto st = Before("GetVisibleFile", {}); !st.ok()) return st.error();
    return inner_.GetVisibleFile(hash, scope);
  }
  Result<std::optional<FileHash>> FileBySha256(const Hash& sha256,
                                               std::optional<std::string_view> scope) override {
    if (auto st = Before("FileBySha256", {}); !st.ok()) return st.error();
    return inner_.FileBySha256(sha256, scope);
  }
  Result<std::vector<ListedFile>> ListFiles(std::string_view scope, std::optional<FileHash> after,
                                            size_t limit) override {
    if (auto st = Before("ListFiles", {}); !st.ok()) return st.error();
    return inner_.ListFiles(scope, after, limit);
  }
  Result<ScopeTotals> ScopeStats(std::string_view scope) override {
    if (auto st = Before("ScopeStats", {}); !st.ok()) return st.error();
    return inner_.ScopeStats(scope);
  }
  using CasIndex::ShareFiles;
  Status ShareFiles(std::span<const FileHash> hashes, std::string_view scope,
                    const QuotaCharge* charge) override {
    if (auto st = Before("ShareFiles", {}); !st.ok()) return st.error();
    return inner_.ShareFiles(hashes, scope, charge);
  }
  using Index::ShareFile;
  Result<Unregistered> UnregisterFile(const FileHash& hash, std::string_view scope) override {
    if (auto st = Before("UnregisterFile", {}); !st.ok()) return st.error();
    return inner_.UnregisterFile(hash, scope);
  }
  Result<std::vector<RevocationRecord>> ListRevocations(std::optional<RevocationKey> after,
                                                        size_t limit) override {
    if (auto st = Before("ListRevocations", {}); !st.ok()) return st.error();
    return inner_.ListRevocations(std::move(after), limit);
  }
  Result<std::vector<RevocationKey>> ListClearedRevocations(std::optional<RevocationKey> after,
                                                            size_t limit) override {
    if (auto st = Before("ListClearedRevocations", {}); !st.ok()) return st.error();
    return inner_.ListClearedRevocations(std::move(after), limit);
  }
  Status ForgetRevocations(std::span<const RevocationKey> revocations) override {
    if (auto st = Before("ForgetRevocations", {}); !st.ok()) return st.error();
    return inner_.ForgetRevocations(revocations);
  }
  Result<CommitOutcome> CommitShard(const ShardCommit& commit) override {
    if (auto st = Before("CommitShard", {}); !st.ok()) return st.error();
    return inner_.CommitShard(commit);
  }
  Result<std::optional<ShardInfo>> GetShard(const Hash& shard) override {
    if (auto st = Before("GetShard", {}); !st.ok()) return st.error();
    return inner_.GetShard(shard);
  }
  Result<std::vector<DedupHit>> LookupDedup(const ChunkHash& chunk,
                                            std::optional<std::string_view> scope) override {
    if (auto st = Before("LookupDedup", {}); !st.ok()) return st.error();
    return inner_.LookupDedup(chunk, scope);
  }
  Result<std::vector<XorbUse>> ReviveXorbs(std::span<const XorbHash> xorbs) override {
    if (auto st = Before("ReviveXorbs", {}); !st.ok()) return st.error();
    return inner_.ReviveXorbs(xorbs);
  }
  Result<IndexStats> Stats() override {
    if (auto st = Before("Stats", {}); !st.ok()) return st.error();
    return inner_.Stats();
  }
  Result<std::vector<Hash>> Scan(Scanned what, std::optional<Hash> after, size_t limit) override {
    if (auto st = Before("Scan", {}); !st.ok()) return st.error();
    return inner_.Scan(what, after, limit);
  }

  Result<RepoRecord> CreateRepo(const NewRepo& repo) override {
    if (auto st = Before("CreateRepo", {}); !st.ok()) return st.error();
    return inner_.CreateRepo(repo);
  }
  Result<RepoRecord> FindRepo(RepoType type, std::string_view ns, std::string_view name) override {
    if (auto st = Before("FindRepo", {}); !st.ok()) return st.error();
    return inner_.FindRepo(type, ns, name);
  }
  Result<RepoRecord> FindRepoByScope(std::string_view scope) override {
    if (auto st = Before("FindRepoByScope", {}); !st.ok()) return st.error();
    return inner_.FindRepoByScope(scope);
  }
  Result<std::vector<RepoRecord>> ListRepos(RepoType type, std::optional<std::string_view> ns,
                                            std::optional<std::pair<std::string, std::string>> after,
                                            size_t limit) override {
    if (auto st = Before("ListRepos", {}); !st.ok()) return st.error();
    return inner_.ListRepos(type, ns, std::move(after), limit);
  }
  Result<uint64_t> CountRepos(RepoType type, std::string_view ns) override {
    if (auto st = Before("CountRepos", {}); !st.ok()) return st.error();
    return inner_.CountRepos(type, ns);
  }
  Status UpdateRepo(int64_t id, const RepoChange& change) override {
    if (auto st = Before("UpdateRepo", {}); !st.ok()) return st.error();
    return inner_.UpdateRepo(id, change);
  }
  Status DeleteRepo(int64_t id, const AuditEvent* audit) override {
    if (auto st = Before("DeleteRepo", {}); !st.ok()) return st.error();
    return inner_.DeleteRepo(id, audit);
  }
  using RepoIndex::PutRepoObjects;
  Status PutRepoObjects(int64_t repo, const std::vector<RepoObject>& objects,
                        const QuotaCharge* charge) override {
    if (auto st = Before("PutRepoObjects", {}); !st.ok()) return st.error();
    return inner_.PutRepoObjects(repo, objects, charge);
  }
  Result<std::vector<std::optional<RepoObject>>> GetRepoObjects(
      int64_t repo, const std::vector<std::vector<uint8_t>>& keys) override {
    if (auto st = Before("GetRepoObjects", keys); !st.ok()) return st.error();
    return inner_.GetRepoObjects(repo, keys);
  }
  Result<std::optional<RepoObjectHead>> GetRepoObjectHead(int64_t repo, std::span<const uint8_t> key,
                                                          size_t max_bytes) override {
    if (auto st = Before("GetRepoObjectHead", {}); !st.ok()) return st.error();
    return inner_.GetRepoObjectHead(repo, key, max_bytes);
  }
  Result<std::vector<ObjectRevival>> ReviveRepoObjects(
      int64_t repo, const std::vector<std::vector<uint8_t>>& keys) override {
    if (auto st = Before("ReviveRepoObjects", keys); !st.ok()) return st.error();
    return inner_.ReviveRepoObjects(repo, keys);
  }
  Result<size_t> DeleteRepoObjects(int64_t repo, const std::vector<std::vector<uint8_t>>& keys) override {
    if (auto st = Before("DeleteRepoObjects", keys); !st.ok()) return st.error();
    return inner_.DeleteRepoObjects(repo, keys);
  }
  Result<std::vector<RepoObject>> ListRepoObjects(int64_t repo, uint8_t kind,
                                                  const std::optional<std::vector<uint8_t>>& after,
                                                  size_t limit) override {
    if (auto st = Before("ListRepoObjects", {}); !st.ok()) return st.error();
    return inner_.ListRepoObjects(repo, kind, after, limit);
  }
  Result<std::vector<std::optional<RepoObjectHead>>> GetRepoObjectHeads(
      int64_t repo, const std::vector<std::vector<uint8_t>>& keys, size_t max_bytes) override {
    if (auto st = Before("GetRepoObjectHeads", keys); !st.ok()) return st.error();
    return inner_.GetRepoObjectHeads(repo, keys, max_bytes);
  }
  Result<std::vector<Ref>> ListRefs(int64_t repo) override {
    if (auto st = Before("ListRefs", {}); !st.ok()) return st.error();
    return inner_.ListRefs(repo);
  }
  Status UpdateRef(int64_t repo, const RefUpdate& update) override {
    if (auto st = Before("UpdateRef", {}); !st.ok()) return st.error();
    return inner_.UpdateRef(repo, update);
  }
  Status ChangeBucket(int64_t repo, const std::vector<BucketChange>& changes,
                      const AuditEvent* audit) override {
    if (auto st = Before("ChangeBucket", {}); !st.ok()) return st.error();
    return inner_.ChangeBucket(repo, changes, audit);
  }
  Result<std::vector<BucketFile>> ListBucket(int64_t repo, std::string_view prefix,
                                             std::optional<std::string_view> from, size_t limit) override {
    if (auto st = Before("ListBucket", {}); !st.ok()) return st.error();
    return inner_.ListBucket(repo, prefix, from, limit);
  }
  Result<std::vector<std::optional<BucketFile>>> GetBucketFiles(
      int64_t repo, const std::vector<std::string>& paths) override {
    if (auto st = Before("GetBucketFiles", {}); !st.ok()) return st.error();
    return inner_.GetBucketFiles(repo, paths);
  }
  Result<BucketTotals> GetBucketTotals(int64_t repo) override {
    if (auto st = Before("GetBucketTotals", {}); !st.ok()) return st.error();
    return inner_.GetBucketTotals(repo);
  }

  Result<std::string> SharedSecret(std::string_view name, std::string_view candidate) override {
    if (auto st = Before("SharedSecret", {}); !st.ok()) return st.error();
    return inner_.SharedSecret(name, candidate);
  }
  Result<std::vector<SecretRecord>> ListSecrets() override {
    if (auto st = Before("ListSecrets", {}); !st.ok()) return st.error();
    return inner_.ListSecrets();
  }
  Result<bool> AddSecret(std::string_view name, std::string_view value) override {
    if (auto st = Before("AddSecret", {}); !st.ok()) return st.error();
    return inner_.AddSecret(name, value);
  }
  Result<bool> DeleteSecret(std::string_view name) override {
    if (auto st = Before("DeleteSecret", {}); !st.ok()) return st.error();
    return inner_.DeleteSecret(name);
  }

  Result<bool> TakeLease(std::string_view name, std::string_view holder, int64_t now,
                         int64_t expires) override {
    if (auto st = Before("TakeLease", {}); !st.ok()) return st.error();
    return inner_.TakeLease(name, holder, now, expires);
  }
  Status DropLease(std::string_view name, std::string_view holder) override {
    if (auto st = Before("DropLease", {}); !st.ok()) return st.error();
    return inner_.DropLease(name, holder);
  }
  Result<std::optional<std::string>> LeaseHolder(std::string_view name, int64_t now) override {
    if (auto st = Before("LeaseHolder", {}); !st.ok()) return st.error();
    return inner_.LeaseHolder(name, now);
  }
  Status NoteMirrorRead(int64_t repo, int64_t at) override {
    if (auto st = Before("NoteMirrorRead", {}); !st.ok()) return st.error();
    return inner_.NoteMirrorRead(repo, at);
  }
  Result<std::vector<MirrorRead>> ListMirrorReads() override {
    if (auto st = Before("ListMirrorReads", {}); !st.ok()) return st.error();
    return inner_.ListMirrorReads();
  }
  Result<AccountRecord> CreateAccount(const NewAccount& account) override {
    if (auto st = Before("CreateAccount", {}); !st.ok()) return st.error();
    return inner_.CreateAccount(account);
  }
  Result<AccountRecord> FindAccount(std::string_view name) override {
    if (auto st = Before("FindAccount", {}); !st.ok()) return st.error();
    return inner_.FindAccount(name);
  }
  Result<std::vector<AccountRecord>> ListAccounts(std::optional<AccountKind> kind,
                                                  std::optional<std::string_view> after,
                                                  size_t limit) override {
    if (auto st = Before("ListAccounts", {}); !st.ok()) return st.error();
    return inner_.ListAccounts(kind, after, limit);
  }
  Status UpdateAccount(int64_t id, const AccountChange& change) override {
    if (auto st = Before("UpdateAccount", {}); !st.ok()) return st.error();
    return inner_.UpdateAccount(id, change);
  }
  Result<std::vector<AccountRecord>> GetAccounts(std::span<const int64_t> ids) override {
    if (auto st = Before("GetAccounts", {}); !st.ok()) return st.error();
    return inner_.GetAccounts(ids);
  }
  Status SetMember(int64_t org, int64_t user, std::optional<OrgRole> role, const AuditEvent* audit) override {
    if (auto st = Before("SetMember", {}); !st.ok()) return st.error();
    return inner_.SetMember(org, user, role, audit);
  }
  Result<std::vector<MemberRecord>> ListMembers(AccountKind of, int64_t id) override {
    if (auto st = Before("ListMembers", {}); !st.ok()) return st.error();
    return inner_.ListMembers(of, id);
  }
  Status CreateToken(const TokenRecord& token, const AuditEvent* audit) override {
    if (auto st = Before("CreateToken", {}); !st.ok()) return st.error();
    return inner_.CreateToken(token, audit);
  }
  Result<TokenRecord> FindToken(std::string_view id) override {
    if (auto st = Before("FindToken", {}); !st.ok()) return st.error();
    return inner_.FindToken(id);
  }
  Result<std::vector<TokenRecord>> ListTokens(std::optional<int64_t> owner,
                                              std::optional<std::string_view> after, size_t limit) override {
    if (auto st = Before("ListTokens", {}); !st.ok()) return st.error();
    return inner_.ListTokens(owner, after, limit);
  }
  Result<bool> RevokeToken(std::string_view id, int64_t at, const AuditEvent* audit) override {
    if (auto st = Before("RevokeToken", {}); !st.ok()) return st.error();
    return inner_.RevokeToken(id, at, audit);
  }
  Status NoteTokenUses(const std::vector<std::pair<std::string, int64_t>>& uses) override {
    if (auto st = Before("NoteTokenUses", {}); !st.ok()) return st.error();
    return inner_.NoteTokenUses(uses);
  }
  Status CreatePublisher(const PublisherRecord& policy, const AuditEvent* audit) override {
    if (auto st = Before("CreatePublisher", {}); !st.ok()) return st.error();
    return inner_.CreatePublisher(policy, audit);
  }
  Result<PublisherRecord> FindPublisher(std::string_view id) override {
    if (auto st = Before("FindPublisher", {}); !st.ok()) return st.error();
    return inner_.FindPublisher(id);
  }
  Result<std::vector<PublisherRecord>> ListPublishers(std::optional<int64_t> owner) override {
    if (auto st = Before("ListPublishers", {}); !st.ok()) return st.error();
    return inner_.ListPublishers(owner);
  }
  Result<bool> RevokePublisher(std::string_view id, int64_t at, const AuditEvent* audit) override {
    if (auto st = Before("RevokePublisher", {}); !st.ok()) return st.error();
    return inner_.RevokePublisher(id, at, audit);
  }
  Result<PeopleChanges> PeopleChangedSince(int64_t generation) override {
    if (auto st = Before("PeopleChangedSince", {}); !st.ok()) return st.error();
    return inner_.PeopleChangedSince(generation);
  }

  // ---- SignInIndex
  Result<std::optional<std::string>> GetPassword(int64_t id) override {
    if (auto st = Before("GetPassword", {}); !st.ok()) return st.error();
    return inner_.GetPassword(id);
  }
  Status SetPassword(int64_t id, std::optional<std::string> hash, const AuditEvent* audit) override {
    if (auto st = Before("SetPassword", {}); !st.ok()) return st.error();
    return inner_.SetPassword(id, std::move(hash), audit);
  }
  Status CreateSession(const SessionRecord& session, const AuditEvent* audit) override {
    if (auto st = Before("CreateSession", {}); !st.ok()) return st.error();
    return inner_.CreateSession(session, audit);
  }
  Result<std::optional<SessionRecord>> FindSession(std::string_view id) override {
    if (auto st = Before("FindSession", {}); !st.ok()) return st.error();
    return inner_.FindSession(id);
  }
  Result<bool> DeleteSession(std::string_view id, const AuditEvent* audit) override {
    if (auto st = Before("DeleteSession", {}); !st.ok()) return st.error();
    return inner_.DeleteSession(id, audit);
  }
  Result<uint64_t> DeleteSessionsOf(int64_t id, const AuditEvent* audit) override {
    if (auto st = Before("DeleteSessionsOf", {}); !st.ok()) return st.error();
    return inner_.DeleteSessionsOf(id, audit);
  }
  Result<uint64_t> PruneSessions(int64_t now) override {
    if (auto st = Before("PruneSessions", {}); !st.ok()) return st.error();
    return inner_.PruneSessions(now);
  }
  Status CreateDeviceGrant(const DeviceGrantRecord& grant) override {
    if (auto st = Before("CreateDeviceGrant", {}); !st.ok()) return st.error();
    return inner_.CreateDeviceGrant(grant);
  }
  Result<std::optional<DeviceGrantRecord>> FindDeviceGrant(std::string_view user_code) override {
    if (auto st = Before("FindDeviceGrant", {}); !st.ok()) return st.error();
    return inner_.FindDeviceGrant(user_code);
  }
  Result<bool> DecideDeviceGrant(std::string_view user_code, int64_t user, bool approve, int64_t now,
                                 const AuditEvent* audit) override {
    if (auto st = Before("DecideDeviceGrant", {}); !st.ok()) return st.error();
    return inner_.DecideDeviceGrant(user_code, user, approve, now, audit);
  }
  Result<std::optional<DeviceGrantRecord>> PollDeviceGrant(std::span<const uint8_t> device_hash,
                                                           int64_t now) override {
    if (auto st = Before("PollDeviceGrant", {}); !st.ok()) return st.error();
    return inner_.PollDeviceGrant(device_hash, now);
  }
  Result<bool> IssueDeviceGrant(std::span<const uint8_t> device_hash) override {
    if (auto st = Before("IssueDeviceGrant", {}); !st.ok()) return st.error();
    return inner_.IssueDeviceGrant(device_hash);
  }
  Result<std::optional<int64_t>> FindIdentity(std::string_view issuer, std::string_view subject) override {
    if (auto st = Before("FindIdentity", {}); !st.ok()) return st.error();
    return inner_.FindIdentity(issuer, subject);
  }
  Status LinkIdentity(const IdentityRecord& identity, const AuditEvent* audit) override {
    if (auto st = Before("LinkIdentity", {}); !st.ok()) return st.error();
    return inner_.LinkIdentity(identity, audit);
  }
  Result<bool> UnlinkIdentity(std::string_view issuer, std::string_view subject,
                              const AuditEvent* audit) override {
    if (auto st = Before("UnlinkIdentity", {}); !st.ok()) return st.error();
    return inner_.UnlinkIdentity(issuer, subject, audit);
  }
  Result<std::vector<IdentityRecord>> IdentitiesOf(int64_t id) override {
    if (auto st = Before("IdentitiesOf", {}); !st.ok()) return st.error();
    return inner_.IdentitiesOf(id);
  }

  // ---- AuditIndex
  Status AppendAudit(const AuditEvent& event) override {
    if (auto st = Before("AppendAudit", {}); !st.ok()) return st.error();
    return inner_.AppendAudit(event);
  }
  Result<std::vector<AuditEvent>> ListAudit(const AuditFilter& filter, std::optional<int64_t> before,
                                            size_t limit) override {
    if (auto st = Before("ListAudit", {}); !st.ok()) return st.error();
    return inner_.ListAudit(filter, before, limit);
  }
  Result<uint64_t> PruneAudit(int64_t before) override {
    if (auto st = Before("PruneAudit", {}); !st.ok()) return st.error();
    return inner_.PruneAudit(before);
  }
  Result<std::optional<QuotaRecord>> GetQuota(std::string_view ns) override {
    if (auto st = Before("GetQuota", {}); !st.ok()) return st.error();
    return inner_.GetQuota(ns);
  }
  Result<std::vector<QuotaRecord>> ListQuotas(std::optional<std::string_view> after, size_t limit) override {
    if (auto st = Before("ListQuotas", {}); !st.ok()) return st.error();
    return inner_.ListQuotas(after, limit);
  }
  Status SetQuotaLimit(std::string_view ns, std::optional<uint64_t> limit, const AuditEvent* audit) override {
    if (auto st = Before("SetQuotaLimit", {}); !st.ok()) return st.error();
    return inner_.SetQuotaLimit(ns, limit, audit);
  }
  Result<bool> DeleteQuota(std::string_view ns, const AuditEvent* audit) override {
    if (auto st = Before("DeleteQuota", {}); !st.ok()) return st.error();
    return inner_.DeleteQuota(ns, audit);
  }
  Status SettleQuota(std::string_view ns, uint64_t bytes, bool published) override {
    if (auto st = Before("SettleQuota", {}); !st.ok()) return st.error();
    return inner_.SettleQuota(ns, bytes, published);
  }
  Result<bool> RecordQuotaMeasure(std::string_view ns, const QuotaMeasure& measure,
                                  uint64_t charge) override {
    if (auto st = Before("RecordQuotaMeasure", {}); !st.ok()) return st.error();
    return inner_.RecordQuotaMeasure(ns, measure, charge);
  }
  Status MarkQuotaStale(std::optional<std::string_view> ns) override {
    if (auto st = Before("MarkQuotaStale", {}); !st.ok()) return st.error();
    return inner_.MarkQuotaStale(ns);
  }

  Result<std::vector<FileXorbs>> ScanFileXorbs(std::optional<FileHash> after, size_t limit) override {
    if (auto st = Before("ScanFileXorbs", {}); !st.ok()) return st.error();
    return inner_.ScanFileXorbs(after, limit);
  }
  Result<std::vector<Quarantined>> ScanQuarantine(GcKind kind, std::optional<Hash> after,
                                                  size_t limit) override {
    if (auto st = Before("ScanQuarantine", {}); !st.ok()) return st.error();
    return inner_.ScanQuarantine(kind, after, limit);
  }
  Status Quarantine(GcKind kind, std::span<const Hash> hashes, int64_t since) override {
    if (auto st = Before("Quarantine", {}); !st.ok()) return st.error();
    return inner_.Quarantine(kind, hashes, since);
  }
  Status Release(GcKind kind, std::span<const Hash> hashes) override {
    if (auto st = Before("Release", {}); !st.ok()) return st.error();
    return inner_.Release(kind, hashes);
  }
  Result<SweptTotals> SweepFiles(std::span<const Quarantined> files) override {
    if (auto st = Before("SweepFiles", {}); !st.ok()) return st.error();
    return inner_.SweepFiles(files);
  }
  Result<std::vector<XorbHash>> ClaimXorbs(std::span<const Quarantined> xorbs, int64_t now) override {
    if (auto st = Before("ClaimXorbs", {}); !st.ok()) return st.error();
    return inner_.ClaimXorbs(xorbs, now);
  }
  Result<SweptTotals> DropXorbs(std::span<const XorbHash> xorbs) override {
    if (auto st = Before("DropXorbs", {}); !st.ok()) return st.error();
    return inner_.DropXorbs(xorbs);
  }
  Result<std::vector<std::vector<std::string>>> FileScopes(std::span<const FileHash> files) override {
    if (auto st = Before("FileScopes", {}); !st.ok()) return st.error();
    return inner_.FileScopes(files);
  }
  Status Repoint(const Repointing& repointing) override {
    if (auto st = Before("Repoint", {}); !st.ok()) return st.error();
    return inner_.Repoint(repointing);
  }
  Result<std::vector<ShardScope>> ShardScopes(std::span<const Hash> shards) override {
    if (auto st = Before("ShardScopes", {}); !st.ok()) return st.error();
    return inner_.ShardScopes(shards);
  }
  Result<SweptTotals> DropShards(std::span<const Hash> shards) override {
    if (auto st = Before("DropShards", {}); !st.ok()) return st.error();
    return inner_.DropShards(shards);
  }
  Result<std::vector<RepoObjectMark>> ScanRepoObjects(int64_t repo,
                                                      const std::optional<std::vector<uint8_t>>& after,
                                                      size_t limit) override {
    if (auto st = Before("ScanRepoObjects", {}); !st.ok()) return st.error();
    return inner_.ScanRepoObjects(repo, after, limit);
  }
  Status QuarantineRepoObjects(int64_t repo, const std::vector<std::vector<uint8_t>>& keys,
                               int64_t since) override {
    if (auto st = Before("QuarantineRepoObjects", keys); !st.ok()) return st.error();
    return inner_.QuarantineRepoObjects(repo, keys, since);
  }
  Status ReleaseRepoObjects(int64_t repo, const std::vector<std::vector<uint8_t>>& keys) override {
    if (auto st = Before("ReleaseRepoObjects", keys); !st.ok()) return st.error();
    return inner_.ReleaseRepoObjects(repo, keys);
  }
  Result<SweptTotals> SweepRepoObjects(int64_t repo, std::span<const RepoObjectMark> objects) override {
    if (auto st = Before("SweepRepoObjects", {}); !st.ok()) return st.error();
    return inner_.SweepRepoObjects(repo, objects);
  }
  Result<std::string> ScrubDeleted(bool vacuum) override {
    if (auto st = Before("ScrubDeleted", {}); !st.ok()) return st.error();
    return inner_.ScrubDeleted(vacuum);
  }
  Result<std::unique_ptr<GcLock>> LockGc() override {
    if (auto st = Before("LockGc", {}); !st.ok()) return st.error();
    return inner_.LockGc();
  }
  Result<std::unique_ptr<GcLock>> HoldDeletions(DeletionHold mode, bool wait) override {
    if (auto st = Before("HoldDeletions", {}); !st.ok()) return st.error();
    return inner_.HoldDeletions(mode, wait);
  }

  Status Ping() override {
    if (auto st = Before("Ping", {}); !st.ok()) return st.error();
    return inner_.Ping();
  }
  WriteStats write_stats() const override { return inner_.write_stats(); }
  std::string description() const override { return inner_.description(); }

 protected:
  Index& inner() { return inner_; }

  // Asked before every call that can fail, with the method's name and, for the calls given repository object
  // keys, those keys: an error is answered instead of the call. The default lets every call through; a
  // decorator that fails or counts calls (the tests' fault seam) overrides this alone.
  virtual Status Before(std::string_view /*call*/, std::span<const std::vector<uint8_t>> /*keys*/) {
    return Ok{};
  }

 private:
  std::unique_ptr<Index> owned_;  // null when borrowed
  Index& inner_;
};

}  // namespace cairn::index

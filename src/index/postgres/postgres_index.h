// The Index on a PostgreSQL server, shared by any number of cairn nodes. See index.h for the contract.
//
// Writes: PutXorb and CommitShard are each ONE statement (a shard's files, scopes, dedup entries and xorbs
// travel as arrays and are inserted with unnest; the counters move in the same statement). Callers block
// while writer threads (write_queue.h, one connection each) send everything queued as one pipelined
// transaction: BEGIN, the statements, COMMIT, in one round trip and one WAL flush. A request that fails is
// taken out and the rest run again, so it fails alone; a deadlock or serialization failure between nodes
// reruns the batch. Every insert is `ON CONFLICT DO NOTHING` on a primary key, so the same record sent by
// two nodes at once gives one row and two successes, and the counters move only by rows really inserted.
// Transactions run at READ COMMITTED: each statement sees rows committed before it started, and the unique
// indexes decide conflicts between concurrent transactions (docs/deployment.md).
//
// Reads: a pool of connections (prepared statements, binary parameters and results). Records are cached
// above the backend (cached_index.h, applied by OpenIndex).
//
// Connections: a connection that breaks (PostgreSQL restarted, network lost) is dropped; a request that hit
// it is tried once more on a fresh connection, and fails with kUnavailable (HTTP 503) while the server stays
// unreachable. Nothing is cached about the server but the statements it prepared.
//
// Schema: versioned migrations in table cairn_schema, applied at Open under an advisory lock so that nodes
// starting together migrate once; a schema newer than this cairn's is refused.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "index/index.h"
#include "index/postgres/pg.h"
#include "index/write_queue.h"

namespace cairn::index {

// The audited statements' last common table expression, `au`: inserts the event in parameters
// $first..$first+7 (AuditParams' order; $first NULL: no event) once for each row of `rows`, the CTE (or
// subquery) that made the change, so the event exists exactly when the change does. Statements are built
// with it where they are defined, so every audited statement writes the event alike.
std::string AuditCte(int first, std::string_view rows);

struct PostgresOptions {
  std::string uri;                  // postgres://USER[:PASS]@HOST[:PORT]/DB[?...] (libpq)
  size_t pool_size = 8;             // connections for reads
  size_t writers = 1;               // writer threads, one connection each
  int acquire_timeout_ms = 10'000;  // waiting for a pooled connection, then kUnavailable
  // Tests: called on a writer thread with each batch's size, before its transaction begins.
  std::function<void(size_t)> before_batch;
  // Stamps what is stored with a time (xorbs, shards, secrets); must outlive the index.
  const Clock* clock = &Clock::System();
};

class PostgresIndex final : public Index {
 public:
  static constexpr int kSchemaVersion = 23;

  // Connects, migrates and checks the schema. kUnavailable when the server cannot be reached.
  static Result<std::unique_ptr<PostgresIndex>> Open(PostgresOptions options);
  // Applies the missing migrations only; returns the versions before and after.
  static Result<std::pair<int, int>> Migrate(const std::string& uri);
  ~PostgresIndex() override;

  Result<std::shared_ptr<const XorbEntry>> GetXorb(const XorbHash& hash) override;
  Result<std::vector<std::shared_ptr<const XorbEntry>>> GetXorbs(std::span<const XorbHash> hashes) override;
  Result<bool> HasXorb(const XorbHash& hash) override;
  Result<bool> PutXorb(const XorbHash& hash, const xet::XorbLayout& layout) override;
  Result<std::shared_ptr<const FileEntry>> GetFile(const FileHash& hash) override;
  Result<std::vector<std::shared_ptr<const FileEntry>>> GetFiles(std::span<const FileHash> hashes) override;
  Result<bool> FileVisibleTo(const FileHash& hash, std::string_view scope) override;
  Result<std::optional<int64_t>> VisibleFileRecord(const FileHash& hash, std::string_view scope) override;
  Result<std::shared_ptr<const FileEntry>> GetVisibleFile(const FileHash& hash,
                                                          std::string_view scope) override;
  Result<std::optional<FileHash>> FileBySha256(const Hash& sha256,
                                               std::optional<std::string_view> scope) override;
  Result<std::vector<ListedFile>> ListFiles(std::string_view scope, std::optional<FileHash> after,
                                            size_t limit) override;
  Result<ScopeTotals> ScopeStats(std::string_view scope) override;
  Result<std::vector<Hash>> Scan(Scanned what, std::optional<Hash> after, size_t limit) override;
  using CasIndex::ShareFiles;
  Status ShareFiles(std::span<const FileHash> hashes, std::string_view scope,
                    const QuotaCharge* charge) override;
  using Index::ShareFile;
  Result<Unregistered> UnregisterFile(const FileHash& hash, std::string_view scope) override;
  Result<std::vector<RevocationRecord>> ListRevocations(std::optional<RevocationKey> after,
                                                        size_t limit) override;
  Result<std::vector<RevocationKey>> ListClearedRevocations(std::optional<RevocationKey> after,
                                                            size_t limit) override;
  Status ForgetRevocations(std::span<const RevocationKey> revocations) override;
  Result<CommitOutcome> CommitShard(const ShardCommit& commit) override;
  Result<std::optional<ShardInfo>> GetShard(const Hash& shard) override;
  Result<std::shared_ptr<const ShardXorbs>> GetShardXorbs(const Hash& shard) override;
  Result<std::vector<DedupHit>> LookupDedup(const ChunkHash& chunk,
                                            std::optional<std::string_view> scope) override;
  Result<IndexStats> Stats() override;
  Result<std::string> SharedSecret(std::string_view name, std::string_view candidate) override;
  Result<std::vector<SecretRecord>> ListSecrets() override;
  Result<bool> AddSecret(std::string_view name, std::string_view value) override;
  Result<bool> DeleteSecret(std::string_view name) override;

  // ---- The mirror's leases and reads (postgres_mirror.cc)
  Result<bool> TakeLease(std::string_view name, std::string_view holder, int64_t now,
                         int64_t expires) override;
  Status DropLease(std::string_view name, std::string_view holder) override;
  Status NoteMirrorRead(int64_t repo, int64_t at) override;
  Result<std::optional<std::string>> LeaseHolder(std::string_view name, int64_t now) override;
  Result<std::vector<MirrorRead>> ListMirrorReads() override;

  // ---- People (postgres_people.cc)
  Result<AccountRecord> CreateAccount(const NewAccount& account) override;
  Result<AccountRecord> FindAccount(std::string_view name) override;
  Result<std::vector<AccountRecord>> ListAccounts(std::optional<AccountKind> kind,
                                                  std::optional<std::string_view> after,
                                                  size_t limit) override;
  Status UpdateAccount(int64_t id, const AccountChange& change) override;
  Result<std::vector<AccountRecord>> GetAccounts(std::span<const int64_t> ids) override;
  Status SetMember(int64_t org, int64_t user, std::optional<OrgRole> role, const AuditEvent* audit) override;
  Result<std::vector<MemberRecord>> ListMembers(AccountKind of, int64_t id) override;
  Status CreateToken(const TokenRecord& token, const AuditEvent* audit) override;
  Result<TokenRecord> FindToken(std::string_view id) override;
  Result<std::vector<TokenRecord>> ListTokens(std::optional<int64_t> owner,
                                              std::optional<std::string_view> after, size_t limit) override;
  Result<bool> RevokeToken(std::string_view id, int64_t at, const AuditEvent* audit) override;
  Status NoteTokenUses(const std::vector<std::pair<std::string, int64_t>>& uses) override;
  Status CreatePublisher(const PublisherRecord& policy, const AuditEvent* audit) override;
  Result<PublisherRecord> FindPublisher(std::string_view id) override;
  Result<std::vector<PublisherRecord>> ListPublishers(std::optional<int64_t> owner) override;
  Result<bool> RevokePublisher(std::string_view id, int64_t at, const AuditEvent* audit) override;
  Result<PeopleChanges> PeopleChangedSince(int64_t generation) override;

  // ---- Sign-in (postgres_signin.cc)
  Result<std::optional<std::string>> GetPassword(int64_t id) override;
  Status SetPassword(int64_t id, std::optional<std::string> hash, const AuditEvent* audit) override;
  Status CreateSession(const SessionRecord& session, const AuditEvent* audit) override;
  Result<std::optional<SessionRecord>> FindSession(std::string_view id) override;
  Result<bool> DeleteSession(std::string_view id, const AuditEvent* audit) override;
  Result<uint64_t> DeleteSessionsOf(int64_t id, const AuditEvent* audit) override;
  Result<uint64_t> PruneSessions(int64_t now) override;
  Status CreateDeviceGrant(const DeviceGrantRecord& grant) override;
  Result<std::optional<DeviceGrantRecord>> FindDeviceGrant(std::string_view user_code) override;
  Result<bool> DecideDeviceGrant(std::string_view user_code, int64_t user, bool approve, int64_t now,
                                 const AuditEvent* audit) override;
  Result<std::optional<DeviceGrantRecord>> PollDeviceGrant(std::span<const uint8_t> device_hash,
                                                           int64_t now) override;
  Result<bool> IssueDeviceGrant(std::span<const uint8_t> device_hash) override;
  Result<std::optional<int64_t>> FindIdentity(std::string_view issuer, std::string_view subject) override;
  Status LinkIdentity(const IdentityRecord& identity, const AuditEvent* audit) override;
  Result<bool> UnlinkIdentity(std::string_view issuer, std::string_view subject,
                              const AuditEvent* audit) override;
  Result<std::vector<IdentityRecord>> IdentitiesOf(int64_t id) override;

  // AuditIndex (*_audit.cc).
  Status AppendAudit(const AuditEvent& event) override;
  Result<std::vector<AuditEvent>> ListAudit(const AuditFilter& filter, std::optional<int64_t> before,
                                            size_t limit) override;
  Result<uint64_t> PruneAudit(int64_t before) override;

  // ---- Quotas
  Result<std::optional<QuotaRecord>> GetQuota(std::string_view ns) override;
  Result<std::vector<QuotaRecord>> ListQuotas(std::optional<std::string_view> after, size_t limit) override;
  Status SetQuotaLimit(std::string_view ns, std::optional<uint64_t> limit, const AuditEvent* audit) override;
  Result<bool> DeleteQuota(std::string_view ns, const AuditEvent* audit) override;
  Status SettleQuota(std::string_view ns, uint64_t bytes, bool published) override;
  Result<bool> RecordQuotaMeasure(std::string_view ns, const QuotaMeasure& measure, uint64_t charge) override;
  Status MarkQuotaStale(std::optional<std::string_view> ns) override;
  Result<RepoRecord> CreateRepo(const NewRepo& repo) override;
  Result<RepoRecord> FindRepo(RepoType type, std::string_view ns, std::string_view name) override;
  Result<RepoRecord> FindRepoByScope(std::string_view scope) override;
  Result<std::vector<RepoRecord>> ListRepos(RepoType type, std::optional<std::string_view> ns,
                                            std::optional<std::pair<std::string, std::string>> after,
                                            size_t limit) override;
  Result<uint64_t> CountRepos(RepoType type, std::string_view ns) override;
  Status UpdateRepo(int64_t id, const RepoChange& change) override;
  Status DeleteRepo(int64_t id, const AuditEvent* audit) override;
  using RepoIndex::PutRepoObjects;
  Status PutRepoObjects(int64_t repo, const std::vector<RepoObject>& objects,
                        const QuotaCharge* charge) override;
  Result<std::vector<std::optional<RepoObject>>> GetRepoObjects(
      int64_t repo, const std::vector<std::vector<uint8_t>>& keys) override;
  Result<std::vector<std::optional<RepoObjectHead>>> GetRepoObjectHeads(
      int64_t repo, const std::vector<std::vector<uint8_t>>& keys, size_t max_bytes) override;
  Result<std::optional<RepoObjectHead>> GetRepoObjectHead(int64_t repo, std::span<const uint8_t> key,
                                                          size_t max_bytes) override;
  Result<std::vector<ObjectRevival>> ReviveRepoObjects(
      int64_t repo, const std::vector<std::vector<uint8_t>>& keys) override;
  Result<size_t> DeleteRepoObjects(int64_t repo, const std::vector<std::vector<uint8_t>>& keys) override;
  Result<std::vector<RepoObject>> ListRepoObjects(int64_t repo, uint8_t kind,
                                                  const std::optional<std::vector<uint8_t>>& after,
                                                  size_t limit) override;
  Result<std::vector<Ref>> ListRefs(int64_t repo) override;
  Status UpdateRef(int64_t repo, const RefUpdate& update) override;
  Status ChangeBucket(int64_t repo, const std::vector<BucketChange>& changes,
                      const AuditEvent* audit) override;
  Result<std::vector<BucketFile>> ListBucket(int64_t repo, std::string_view prefix,
                                             std::optional<std::string_view> from, size_t limit) override;
  Result<std::vector<std::optional<BucketFile>>> GetBucketFiles(
      int64_t repo, const std::vector<std::string>& paths) override;
  Result<BucketTotals> GetBucketTotals(int64_t repo) override;
  Result<std::vector<XorbUse>> ReviveXorbs(std::span<const XorbHash> xorbs) override;
  Result<std::vector<FileXorbs>> ScanFileXorbs(std::optional<FileHash> after, size_t limit) override;
  Result<std::vector<Quarantined>> ScanQuarantine(GcKind kind, std::optional<Hash> after,
                                                  size_t limit) override;
  Status Quarantine(GcKind kind, std::span<const Hash> hashes, int64_t since) override;
  Status Release(GcKind kind, std::span<const Hash> hashes) override;
  Result<SweptTotals> SweepFiles(std::span<const Quarantined> files) override;
  Result<std::vector<XorbHash>> ClaimXorbs(std::span<const Quarantined> xorbs, int64_t now) override;
  Result<SweptTotals> DropXorbs(std::span<const XorbHash> xorbs) override;
  Result<std::vector<std::vector<std::string>>> FileScopes(std::span<const FileHash> files) override;
  Status Repoint(const Repointing& repointing) override;
  Result<std::vector<ShardScope>> ShardScopes(std::span<const Hash> shards) override;
  Result<SweptTotals> DropShards(std::span<const Hash> shards) override;
  Result<std::vector<RepoObjectMark>> ScanRepoObjects(int64_t repo,
                                                      const std::optional<std::vector<uint8_t>>& after,
                                                      size_t limit) override;
  Status QuarantineRepoObjects(int64_t repo, const std::vector<std::vector<uint8_t>>& keys,
                               int64_t since) override;
  Status ReleaseRepoObjects(int64_t repo, const std::vector<std::vector<uint8_t>>& keys) override;
  Result<SweptTotals> SweepRepoObjects(int64_t repo, std::span<const RepoObjectMark> objects) override;
  Result<std::string> ScrubDeleted(bool vacuum) override;
  Result<std::unique_ptr<GcLock>> LockGc() override;
  Result<std::unique_ptr<GcLock>> HoldDeletions(DeletionHold mode, bool wait) override;
  Status Ping() override;
  WriteStats write_stats() const override { return writes_->stats(); }
  std::string description() const override;

 private:
  // One write: a statement, its parameters, and what to make of its single row.
  struct WriteRequest {
    const pg::Statement* statement;
    pg::Params params;
    std::function<void(const pg::Rows&)> on_done;
  };
  class Lease;
  // Runs a write whose one row's first column is a count (rows it deleted), and answers it.
  Result<uint64_t> CountingWrite(const pg::Statement& statement, pg::Params params);
  // GetFile, or GetVisibleFile when a scope is given.
  Result<std::shared_ptr<const FileEntry>> ReadFile(const FileHash& hash,
                                                    std::optional<std::string_view> scope);

  explicit PostgresIndex(PostgresOptions options);
  // Runs a revoke statement (kRevokeToken, kRevokePublisher: answering whether the row exists and whether
  // this revoked it) with its audit event; `not_indexed(id)` when there is no such row.
  Result<bool> Revoke(const pg::Statement& statement, std::string_view id, int64_t at,
                      const AuditEvent* audit, Error (*not_indexed)(std::string_view));
  std::vector<Status> RunBatch(size_t writer, std::span<WriteRequest* const> batch);
  Result<Lease> Acquire();
  void Release(std::unique_ptr<pg::Conn> conn);
  // Runs the statements in one transaction on a pooled connection, all or nothing (retried a few times
  // after a deadlock or on a fresh connection).
  Status RunTransaction(std::span<const pg::Conn::BatchItem> items);
  // The same, with each statement's rows.
  Result<std::vector<pg::Rows>> RunTransactionRows(std::span<const pg::Conn::BatchItem> items);
  // Runs one statement on a pooled connection (retrying on a fresh one once).
  Result<pg::Rows> Query(const pg::Statement& s, const pg::Params& p);
  // kCommitShard's parameters for `commit`, registered at `now` (CommitShard, Repoint).
  pg::Params CommitShardParams(const ShardCommit& commit, int64_t now) const;
  // Appends an audit event's eight parameters (null: eight NULLs, and the statement's audit CTE writes
  // nothing) to a write's (postgres_audit.cc): at, actor, token_id, client, action, ns, target, detail.
  static void AuditParams(pg::Params& params, const AuditEvent* event);
  // Appends a quota charge's six parameters (QuotaCharge; null: none) to a write's (postgres_quota.cc).
  Status QuotaChargeParams(pg::Params& params, const QuotaCharge* charge) const;
  // A page of revocations through `statement` (ListRevocations, ListClearedRevocations).
  Result<std::vector<RevocationRecord>> RevocationPage(const pg::Statement& statement,
                                                       const std::optional<RevocationKey>& after,
                                                       size_t limit);

  const PostgresOptions options_;
  const int64_t counter_slot_;  // this process's first row of the counters (spreads row locks over nodes)

  std::mutex pool_mu_;
  std::condition_variable pool_cv_;
  std::vector<std::unique_ptr<pg::Conn>> idle_;
  size_t open_ = 0;  // connections lent or idle

  std::vector<std::unique_ptr<pg::Conn>> writer_conns_;  // slot i used only by writer thread i
  std::unique_ptr<WriteQueue<WriteRequest>> writes_;
};

}  // namespace cairn::index

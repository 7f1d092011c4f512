// The Index on an embedded SQLite database (the single-node default). See index.h for the contract.
//
// Writes: one writer thread owns the only write connection (write_queue.h). PutXorb and CommitShard enqueue
// a request and block until it is durable; the writer drains everything queued into ONE transaction (each
// request in its own SAVEPOINT, so a failing request is rolled back alone) and one durable COMMIT (WAL,
// synchronous=FULL), then wakes all the callers. Concurrent registrations thus share one fsync.
//
// Reads: a pool of read-only connections (WAL readers never wait for the writer). No record is cached here:
// OpenIndex puts the index behind CachedIndex (cached_index.h), and the CAS service keeps file rows.
//
// Schema changes are ordered migrations recorded in PRAGMA user_version; Open applies the missing ones in
// one transaction and refuses a database written by a newer cairn.
//
// One process per database file: the writer thread assumes it is the only writer.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "index/index.h"
#include "index/write_queue.h"

struct sqlite3;

namespace cairn::index {

struct SqliteOptions {
  std::string path;              // the database file (created if missing)
  size_t max_idle_readers = 16;  // read connections kept open between reads
  int busy_timeout_ms = 10'000;
  // Tests: called on the writer thread with each batch's size, before its transaction begins.
  std::function<void(size_t)> before_batch;
  // Stamps what is stored with a time (xorbs, shards, secrets); must outlive the index.
  const Clock* clock = &Clock::System();
  // Tests (the fault seam): called on the writer thread before each COMMIT; a failure fails the batch as a
  // failed COMMIT would (rolled back, every request in it answered with the error).
  std::function<Status()> fault_before_commit;
};

class SqliteIndex final : public Index {
 public:
  static constexpr int kSchemaVersion = 23;

  static Result<std::unique_ptr<SqliteIndex>> Open(SqliteOptions options);
  // Applies the missing migrations only (what Open does first); returns the versions before and after.
  static Result<std::pair<int, int>> Migrate(const std::string& path);
  ~SqliteIndex() override;  // finishes queued writes, then stops the writer

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

  // ---- The mirror's leases and reads (sqlite_mirror.cc)
  Result<bool> TakeLease(std::string_view name, std::string_view holder, int64_t now,
                         int64_t expires) override;
  Status DropLease(std::string_view name, std::string_view holder) override;
  Status NoteMirrorRead(int64_t repo, int64_t at) override;
  Result<std::optional<std::string>> LeaseHolder(std::string_view name, int64_t now) override;
  Result<std::vector<MirrorRead>> ListMirrorReads() override;

  // ---- People (sqlite_people.cc)
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

  // ---- Sign-in (sqlite_signin.cc)
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
  Result<std::vector<Ref>> ListRefs(int64_t repo) override;
  Status UpdateRef(int64_t repo, const RefUpdate& update) override;
  Status ChangeBucket(int64_t repo, const std::vector<BucketChange>& changes,
                      const AuditEvent* audit) override;
  Result<std::vector<BucketFile>> ListBucket(int64_t repo, std::string_view prefix,
                                             std::optional<std::string_view> from, size_t limit) override;
  Result<std::vector<std::optional<BucketFile>>> GetBucketFiles(
      int64_t repo, const std::vector<std::string>& paths) override;
  Result<BucketTotals> GetBucketTotals(int64_t repo) override;
  Result<std::vector<ObjectRevival>> ReviveRepoObjects(
      int64_t repo, const std::vector<std::vector<uint8_t>>& keys) override;
  Result<size_t> DeleteRepoObjects(int64_t repo, const std::vector<std::vector<uint8_t>>& keys) override;
  Result<std::vector<RepoObject>> ListRepoObjects(int64_t repo, uint8_t kind,
                                                  const std::optional<std::vector<uint8_t>>& after,
                                                  size_t limit) override;
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
  Result<std::vector<XorbUse>> ReviveXorbs(std::span<const XorbHash> xorbs) override;
  Result<std::vector<FileXorbs>> ScanFileXorbs(std::optional<FileHash> after, size_t limit) override;
  Result<std::vector<Quarantined>> ScanQuarantine(GcKind kind, std::optional<Hash> after,
                                                  size_t limit) override;
  Status Quarantine(GcKind kind, std::span<const Hash> hashes, int64_t since) override;
  Status Release(GcKind kind, std::span<const Hash> hashes) override;
  Result<SweptTotals> SweepFiles(std::span<const Quarantined> files) override;
  Result<std::vector<XorbHash>> ClaimXorbs(std::span<const Quarantined> xorbs, int64_t now) override;
  Result<SweptTotals> DropXorbs(std::span<const XorbHash> xorbs) override;
  Result<std::unique_ptr<GcLock>> LockGc() override;
  Result<std::unique_ptr<GcLock>> HoldDeletions(DeletionHold mode, bool wait) override;
  Status Ping() override;
  WriteStats write_stats() const override;
  std::string description() const override { return "sqlite:" + options_.path; }

 private:
  class Conn;
  class ReaderLease;
  struct WriteRequest {
    std::function<Status(Conn&)> apply;
  };

  explicit SqliteIndex(SqliteOptions options);
  // GetFile, or GetVisibleFile when a scope is given.
  Result<std::shared_ptr<const FileEntry>> ReadFile(const FileHash& hash,
                                                    std::optional<std::string_view> scope);
  Status Init();
  // Switches the file to write-ahead logging (retrying while another opener holds it).
  Status UseWal(Conn& c);
  // In a write: removes the quarantine of `xorbs` and `files` (a write that names them wants them again);
  // kUnavailable, and nothing may go on, when a sweep has claimed one of the xorbs (sqlite_gc.cc).
  Status Revive(Conn& c, std::span<const XorbHash> xorbs, std::span<const FileHash> files);
  // In a write (sqlite_people.cc): the next people generation; the account `id` (nullopt: none).
  static Result<int64_t> NextPeopleGeneration(Conn& c);
  // In a write: whether `user`'s new role in `org` leaves it an admin (or it had none: nothing to keep).
  static Result<bool> KeepsAdmin(Conn& c, int64_t org, int64_t user, std::optional<OrgRole> role);
  // A revocation of a token or a trust policy: whether the row exists, then its revocation stamped with the
  // next people generation and written with its audit event only when it changed something.
  struct RevokeSql {
    const char* exists;  // ?1 id: a row when it exists
    const char* revoke;  // ?1 id, ?2 at, ?3 generation: changes the row unless revoked already
    Error (*not_indexed)(std::string_view id);
    const char* what;
  };
  Result<bool> Revoke(const RevokeSql& sql, std::string_view id, int64_t at, const AuditEvent* audit);
  static Result<std::optional<AccountRecord>> AccountIn(Conn& c, int64_t id);
  // The device grant `sql` reads by ?1: `hash` when given, else `user_code`.
  static Result<std::optional<DeviceGrantRecord>> DeviceGrantIn(Conn& c, const char* sql,
                                                                std::span<const uint8_t> hash,
                                                                std::string_view user_code);
  // In a write: whether account `id` is a user.
  static Result<bool> IsUserIn(Conn& c, int64_t id);
  // Deletes the sessions `sql` names by ?1 = `key`, with `audit` when any went; how many.
  template <typename Key>
  Result<uint64_t> DeleteSessions(const char* sql, Key key, const AuditEvent* audit);
  // In a write (sqlite_audit.cc): writes `event` (null: nothing) in the change's transaction.
  static Status WriteAudit(Conn& c, const AuditEvent* event);
  // The lowest id an event at or after `since` can have (sqlite_audit.cc: the log has no index by time).
  static Result<int64_t> FirstAuditIdSince(Conn& c, int64_t since);
  // Revive's work once the quarantine is known not to be empty.
  Status ReleaseNamed(Conn& c, std::span<const XorbHash> xorbs, std::span<const FileHash> files);
  // Whether anything is quarantined (one read: revivals skip their lookups when nothing is).
  static Result<bool> AnyQuarantined(Conn& c);
  // A page of revocations through `sql` (ListRevocations, ListClearedRevocations: the same cursor and row).
  Result<std::vector<RevocationRecord>> RevocationPage(const char* sql,
                                                       const std::optional<RevocationKey>& after,
                                                       size_t limit);
  // The same for `files` and every xorb their terms use.
  Status ReviveFilesAndTheirXorbs(Conn& c, std::span<const FileHash> files);
  // Clears `scope`'s revocation of a file it sees again; whether there was one.
  static Result<bool> ClearRevocation(Conn& c, const FileHash& file, std::string_view scope);
  // In a write: CommitShard's work (the shard's row, scope, neighbourhood, files and dedup entries).
  Status RegisterShard(Conn& c, const ShardCommit& commit, int64_t now, CommitOutcome& outcome);
  // RegisterShard's steps: what the shard names is there and not being deleted; the shard's own rows; its
  // files and their scope (the bytes and count new to the index in `added`); its dedup entries.
  static Status CheckShardNames(Conn& c, const ShardCommit& commit, std::span<const XorbHash> named);
  static Status PutShardRows(Conn& c, const ShardCommit& commit, int64_t now, CommitOutcome& outcome);
  struct AddedFiles {
    int64_t files = 0;
    int64_t bytes = 0;
  };
  static Status PutShardFiles(Conn& c, const ShardCommit& commit, int64_t now, CommitOutcome& outcome,
                              AddedFiles& added);
  static Status PutShardDedup(Conn& c, const ShardCommit& commit);
  // The use of one xorb as `c` sees it now; sets *quarantined when it is quarantined and unclaimed.
  static Result<XorbUse> UseOf(Conn& c, const XorbHash& xorb, bool* quarantined);
  // In a write: applies a quota charge (records.h QuotaCharge); kQuota when it does not fit
  // (sqlite_quota.cc).
  Status ApplyQuotaCharge(Conn& c, const QuotaCharge& charge);
  // Takes what a sweep removed off the counters.
  static Status Uncount(Conn& c, const SweptTotals& xorbs, int64_t chunks, int64_t unpacked,
                        const SweptTotals& files);
  Status Write(std::function<Status(Conn&)> apply);
  std::vector<Status> RunBatch(std::span<WriteRequest* const> batch);
  Result<ReaderLease> AcquireReader();
  void ReleaseReader(std::unique_ptr<Conn> conn);

  const SqliteOptions options_;
  int schema_before_ = 0;              // the version Init found
  std::unique_ptr<Conn> writer_conn_;  // used only by the writer thread (and by Init before it starts)
  std::unique_ptr<WriteQueue<WriteRequest>> writes_;

  std::mutex readers_mu_;
  std::vector<std::unique_ptr<Conn>> idle_readers_;
};

}  // namespace cairn::index

// The metadata index, in seven slices by who uses it: CasIndex (which xorbs exist and their layouts, how
// files are rebuilt, which scopes see which files, where global-dedup chunks live, which shards were
// accepted: the CAS, plain files, fsck), RepoIndex (the Hub's repositories, objects, refs and buckets),
// SecretIndex (the secrets every node signs with), GcIndex (what the garbage collector marks and sweeps),
// QuotaIndex (the namespaces' storage quotas), MirrorIndex (the pull-through mirror's leases and reads) and
// PeopleIndex (users, organizations, their members and the tokens users hold). Index is all seven, plus the
// operations of the database itself. A service takes the slice it uses. SQLite implements Index for one node
// (sqlite_index.h), PostgreSQL for several sharing one database (postgres_index.h); open either from a URL
// with OpenIndex (open_index.h).
//
// Contract, for every implementation:
//  - Thread-safety: every method may be called concurrently from any thread.
//  - Durability: a write returns success only once it is durable. A write that fails changed nothing.
//  - Records are immutable once written: the first write of a hash wins, later writes of the same hash are
//    accepted as no-ops (idempotent retries), apart from adding scopes and dedup entries. Which scopes see a
//    file changes (UnregisterFile, a repository's read scope replaced or deleted); the file's record does
//    not.
//  - The index trusts its caller: the service verifies xorbs and shards before registering them. The index
//    checks only what keeps it consistent (packed sizes, dedup entries naming registered xorbs).
//  - Returned records are shared and immutable; the caller may keep them as long as it likes.
//  - Failures are values: kNotFound for an unknown record (Get*), kMalformed for a request that cannot be
//    stored as given, kUnknownReference when a request names a record the index does not hold (a file's
//    xorb), kIo when the database fails, kUnavailable when it cannot be reached now (a retry may succeed).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.h"
#include "index/people_records.h"
#include "index/records.h"
#include "index/repo_records.h"

namespace cairn::index {

// Write requests, the durable transactions that carried them, and the requests waiting now.
struct WriteStats {
  uint64_t requests = 0;
  uint64_t transactions = 0;
  size_t queued = 0;
};

// The CAS's records: xorbs, files and their visibility to scopes, shards, global dedup, whole-index scans and
// counts. Used by the CAS service, the file service (which the Hub reaches files through) and fsck.
class CasIndex {
 public:
  virtual ~CasIndex() = default;
  CasIndex(const CasIndex&) = delete;
  CasIndex& operator=(const CasIndex&) = delete;

  // ---- Xorbs
  virtual Result<std::shared_ptr<const XorbEntry>> GetXorb(const XorbHash& hash) = 0;
  // Several xorbs in one read (one round trip on PostgreSQL): entry i for hashes[i], null where the index has
  // none. At most kMaxXorbsPerRead hashes (kMalformed past that).
  static constexpr size_t kMaxXorbsPerRead = 4096;
  virtual Result<std::vector<std::shared_ptr<const XorbEntry>>> GetXorbs(
      std::span<const XorbHash> hashes) = 0;
  virtual Result<bool> HasXorb(const XorbHash& hash) = 0;
  // Registers a stored xorb. Returns whether it was new.
  virtual Result<bool> PutXorb(const XorbHash& hash, const xet::XorbLayout& layout) = 0;

  // ---- Files
  virtual Result<std::shared_ptr<const FileEntry>> GetFile(const FileHash& hash) = 0;
  // Several files in one read (one round trip on PostgreSQL): entry i for hashes[i], null where the index has
  // none. At most kMaxFilesPerRead hashes (kMalformed past that): a file's terms may run to megabytes.
  static constexpr size_t kMaxFilesPerRead = 128;
  virtual Result<std::vector<std::shared_ptr<const FileEntry>>> GetFiles(
      std::span<const FileHash> hashes) = 0;
  // Whether a write token of `scope` registered the file.
  virtual Result<bool> FileVisibleTo(const FileHash& hash, std::string_view scope) = 0;
  // When `scope` sees the file, the created_at of its record (FileEntry::created_at), in one read; else
  // nullopt. Caches of a file's terms compare it with the record they hold (the collector may have swept
  // that one and an upload registered the file again).
  virtual Result<std::optional<int64_t>> VisibleFileRecord(const FileHash& hash, std::string_view scope) = 0;
  // The file, if a write token of `scope` registered it, in one read: kNotFound alike when it is unknown and
  // when it is not visible to `scope` (a scope cannot learn of other scopes' files).
  virtual Result<std::shared_ptr<const FileEntry>> GetVisibleFile(const FileHash& hash,
                                                                  std::string_view scope) = 0;
  // A file with this SHA-256 (as stored in shards), visible to `scope` when one is given.
  virtual Result<std::optional<FileHash>> FileBySha256(const Hash& sha256,
                                                       std::optional<std::string_view> scope) = 0;

  // The files visible to `scope`, in hash order, starting after `after` when given: at most `limit` of
  // them (at most kMaxListedFiles; kMalformed past that). One indexed range scan whatever the scope's size.
  static constexpr size_t kMaxListedFiles = 10000;
  virtual Result<std::vector<ListedFile>> ListFiles(std::string_view scope, std::optional<FileHash> after,
                                                    size_t limit) = 0;
  virtual Result<ScopeTotals> ScopeStats(std::string_view scope) = 0;
  // Makes registered files visible to `scope` as well (a copy between repositories, whose scopes differ; a
  // commit publishing files to its repository's read scope), all or nothing, in one transaction; each
  // counted in the scope's totals once; the scope's revocations of them are cleared (their blobs go with the
  // next collection: cas::CasService::FinishRevocations). kNotFound (nothing changed) when one of them is
  // unknown. At most kMaxSharedFiles at once (kMalformed past that).
  // With `charge`, the namespace's quota is charged in the same transaction (QuotaCharge; kQuota changes
  // nothing).
  static constexpr size_t kMaxSharedFiles = 25000;
  virtual Status ShareFiles(std::span<const FileHash> hashes, std::string_view scope,
                            const QuotaCharge* charge) = 0;
  Status ShareFiles(std::span<const FileHash> hashes, std::string_view scope) {
    return ShareFiles(hashes, scope, nullptr);
  }
  Status ShareFile(const FileHash& hash, std::string_view scope) {
    return ShareFiles(std::span(&hash, 1), scope, nullptr);
  }
  // Takes the file out of `scope`'s view: its visibility to `scope` and its share of the scope's totals go,
  // and its revocation (RevocationRecord) is recorded, in one transaction. Only that reference goes: the
  // file's record, other scopes' views of it and its xorbs stay (a garbage collector frees what nothing
  // references). kRemovedBefore when an earlier call removed it (its caller may have died before storing the
  // revocation's blob: this one stores it again).
  virtual Result<Unregistered> UnregisterFile(const FileHash& hash, std::string_view scope) = 0;
  // Revocations in (file, scope) order after `after`, at most `limit` (at most kMaxListedFiles).
  virtual Result<std::vector<RevocationRecord>> ListRevocations(std::optional<RevocationKey> after,
                                                                size_t limit) = 0;
  // The cleared ones alone, in the same order (what a collector run finishes; an index keeps them apart, so a
  // run does not read every revocation).
  virtual Result<std::vector<RevocationKey>> ListClearedRevocations(std::optional<RevocationKey> after,
                                                                    size_t limit) = 0;
  // Deletes each given revocation that is still cleared (its blob is gone); one recorded again since stays.
  virtual Status ForgetRevocations(std::span<const RevocationKey> revocations) = 0;

  // ---- Shards
  // Registers a verified shard: the shard, its files (visible to commit.scope) and its dedup entries, all
  // or nothing; the scope's revocations of files it sees again are cleared (CommitOutcome). Committing a
  // shard again is not an error (already_existed) and adds commit.scope.
  virtual Result<CommitOutcome> CommitShard(const ShardCommit& commit) = 0;
  virtual Result<std::optional<ShardInfo>> GetShard(const Hash& shard) = 0;
  // The xorbs a registered shard brought together (kNotFound for an unknown shard). Shards registered
  // before cairn recorded this (schema < 3) list the xorbs of their dedup entries, in no particular order.
  virtual Result<std::shared_ptr<const ShardXorbs>> GetShardXorbs(const Hash& shard) = 0;

  // ---- Global dedup
  // Where `chunk` can be found: entries registered by `scope`, or by any scope when scope is nullopt; at
  // most kMaxDedupHits of them (a chunk common to many uploads must not make the answer unbounded).
  static constexpr size_t kMaxDedupHits = 32;
  virtual Result<std::vector<DedupHit>> LookupDedup(const ChunkHash& chunk,
                                                    std::optional<std::string_view> scope) = 0;

  // ---- Naming xorbs to clients while a collector may run (docs/operations.md)
  // Use i for xorbs[i]: kStored when it is registered, reviving it if a mark had quarantined it (a dedup
  // answer or an upload that names it makes it wanted again); kBeingSwept when a sweep has claimed it;
  // kAbsent when there is none. Always asks the database (never a cache: another node may have swept it).
  // At most kMaxXorbsPerRead xorbs.
  virtual Result<std::vector<XorbUse>> ReviveXorbs(std::span<const XorbHash> xorbs) = 0;

  virtual Result<IndexStats> Stats() = 0;

  // ---- Whole-index scans (fsck, rebuild): the hashes of one kind of record in hash order, after `after`
  // (nullopt: from the first), at most `limit` of them (at most kMaxScanned; kMalformed past that). Records
  // written during a scan may or may not be reported.
  enum class Scanned { kXorbs, kFiles, kShards };
  static constexpr size_t kMaxScanned = 10000;
  virtual Result<std::vector<Hash>> Scan(Scanned what, std::optional<Hash> after, size_t limit) = 0;

 protected:
  CasIndex() = default;
};

// The Hub's records (repo_records.h): repositories, their git objects and refs, and bucket files. Used by the
// Hub and bucket services and the Hub's check, and by the file routes to tell a repository's scope from a
// plain one; files come in through the file service, never this slice.
class RepoIndex {
 public:
  virtual ~RepoIndex() = default;
  RepoIndex(const RepoIndex&) = delete;
  RepoIndex& operator=(const RepoIndex&) = delete;

  // ---- Repositories (the Hub's metadata, repo_records.h)
  // Creates a repository with its first objects and refs in one transaction. kConflict when a repository
  // of that type and name exists; kMalformed without both scopes.
  virtual Result<RepoRecord> CreateRepo(const NewRepo& repo) = 0;
  // kNotFound when there is none. Names compare exactly (case matters).
  virtual Result<RepoRecord> FindRepo(RepoType type, std::string_view ns, std::string_view name) = 0;
  // The repository whose write or read scope (RepoRecord::scope, read_scope) `scope` is; kNotFound when it is
  // no repository's.
  virtual Result<RepoRecord> FindRepoByScope(std::string_view scope) = 0;
  // Repositories of `type` (in namespace `ns` when given) ordered by (namespace, name), after the given
  // pair when `after` is set; at most `limit` (at most kMaxListedRepos; kMalformed past that).
  static constexpr size_t kMaxListedRepos = 1000;
  virtual Result<std::vector<RepoRecord>> ListRepos(RepoType type, std::optional<std::string_view> ns,
                                                    std::optional<std::pair<std::string, std::string>> after,
                                                    size_t limit) = 0;
  // How many repositories of `type` namespace `ns` holds (a namespace's share of a site's repositories).
  virtual Result<uint64_t> CountRepos(RepoType type, std::string_view ns) = 0;
  // kNotFound for an unknown id, kConflict when the new name is taken (nothing changed then).
  virtual Status UpdateRepo(int64_t id, const RepoChange& change) = 0;
  // The repository, its refs, its objects and its bucket files, and every file's visibility to its two
  // scopes (RepoRecord::scope and read_scope) with their totals, so that no token of the repository reads
  // anything from then on; kNotFound for an unknown id.
  virtual Status DeleteRepo(int64_t id, const AuditEvent* audit) = 0;
  // Stores objects of repository `repo` (keys already present keep their value). Every key given is wanted:
  // its quarantine, if a mark had put it there, goes in the same transaction (GcIndex). With `charge`, the
  // namespace's quota is charged in the same transaction (QuotaCharge; kQuota changes nothing).
  virtual Status PutRepoObjects(int64_t repo, const std::vector<RepoObject>& objects,
                                const QuotaCharge* charge) = 0;
  Status PutRepoObjects(int64_t repo, const std::vector<RepoObject>& objects) {
    return PutRepoObjects(repo, objects, nullptr);
  }
  // Result i for keys[i]: whether the object exists, releasing it from the quarantine when a mark had put it
  // there (a ref about to name it again: the collector never deletes what this revived). At most
  // kMaxObjectsPerRead keys.
  virtual Result<std::vector<ObjectRevival>> ReviveRepoObjects(
      int64_t repo, const std::vector<std::vector<uint8_t>>& keys) = 0;
  // Deletes these objects of the repository (the links a purge removes) with their quarantine; returns how
  // many existed. At most kMaxObjectsPerRead keys.
  virtual Result<size_t> DeleteRepoObjects(int64_t repo, const std::vector<std::vector<uint8_t>>& keys) = 0;
  // The repository's objects of one kind in key order (bytewise), after `after` when given; at most `limit`
  // (at most kMaxObjectsPerRead).
  virtual Result<std::vector<RepoObject>> ListRepoObjects(int64_t repo, uint8_t kind,
                                                          const std::optional<std::vector<uint8_t>>& after,
                                                          size_t limit) = 0;
  // Object i for keys[i], or nullopt where there is none; at most kMaxObjectsPerRead keys.
  static constexpr size_t kMaxObjectsPerRead = 1000;
  virtual Result<std::vector<std::optional<RepoObject>>> GetRepoObjects(
      int64_t repo, const std::vector<std::vector<uint8_t>>& keys) = 0;
  // The first `max_bytes` of one object and its size, or nullopt where there is none: never more memory than
  // the bound, whatever the object's size (a commit message an older cairn stored without a limit).
  virtual Result<std::optional<RepoObjectHead>> GetRepoObjectHead(int64_t repo, std::span<const uint8_t> key,
                                                                  size_t max_bytes) = 0;
  // GetRepoObjectHead for several keys in one read (one round trip on PostgreSQL): head i for keys[i],
  // nullopt where there is none; at most kMaxObjectsPerRead keys.
  virtual Result<std::vector<std::optional<RepoObjectHead>>> GetRepoObjectHeads(
      int64_t repo, const std::vector<std::vector<uint8_t>>& keys, size_t max_bytes) = 0;
  // Every ref of the repository, branches first, each kind by name.
  virtual Result<std::vector<Ref>> ListRefs(int64_t repo) = 0;
  // Applies `update` if the ref's current target is `update.expected` (compare and swap): kConflict when
  // it is not, so concurrent writers cannot lose each other's changes; kNotFound for an unknown repo;
  // kUnknownReference when the new target is no object of the repository (a collector swept it).
  virtual Status UpdateRef(int64_t repo, const RefUpdate& update) = 0;

  // ---- Buckets (repositories of type kBucket)
  // Applies every change in one transaction, with `audit` (null: none); kNotFound for an unknown repo.
  virtual Status ChangeBucket(int64_t repo, const std::vector<BucketChange>& changes,
                              const AuditEvent* audit) = 0;
  // The files whose path starts with `prefix` ("" for all), in path order (bytewise), from `from` on
  // (inclusive) when given; at most `limit` (at most kMaxListedFiles).
  virtual Result<std::vector<BucketFile>> ListBucket(int64_t repo, std::string_view prefix,
                                                     std::optional<std::string_view> from, size_t limit) = 0;
  // File i for paths[i], or nullopt; at most kMaxObjectsPerRead paths.
  virtual Result<std::vector<std::optional<BucketFile>>> GetBucketFiles(
      int64_t repo, const std::vector<std::string>& paths) = 0;
  // How many files a bucket holds and their bytes (a sum over its files).
  virtual Result<BucketTotals> GetBucketTotals(int64_t repo) = 0;

 protected:
  RepoIndex() = default;
};

// Held by the one collector running against an index: released when destroyed (or when its process dies).
class GcLock {
 public:
  virtual ~GcLock() = default;
  GcLock(const GcLock&) = delete;
  GcLock& operator=(const GcLock&) = delete;
  // Ok while the lock is still held; an error once it was lost (PostgreSQL: the connection holding it broke),
  // and then the holder must stop before its next deletion.
  virtual Status Check() = 0;

 protected:
  GcLock() = default;
};

// What the garbage collector (src/gc/) reads and changes: every file's xorbs and whether it is registered
// live, the quarantine, and the steps of a sweep. Revival is the other side's part: CommitShard, ShareFiles
// and ReviveXorbs remove the quarantine of what they name (and refuse, kUnavailable, what a sweep has
// claimed), so a sweep that compares a quarantine record with the one it read never deletes what became
// wanted after its mark.
//
// Contract as index.h's; besides:
//  - Scans return hashes in order after `after` (nullopt: from the first), at most `limit` (at most
//    kMaxScanned; kMalformed past that); records written during a scan may or may not be reported.
//  - The sweep steps are compare-and-delete: each acts on a record only if it is still the one given (same
//    `since`, not revived meanwhile) and reports what it really removed.
class GcIndex {
 public:
  virtual ~GcIndex() = default;
  GcIndex(const GcIndex&) = delete;
  GcIndex& operator=(const GcIndex&) = delete;

  // Every registered file with the distinct xorbs of its terms, and whether it is live by registration
  // (FileXorbs::registered).
  virtual Result<std::vector<FileXorbs>> ScanFileXorbs(std::optional<FileHash> after, size_t limit) = 0;
  // The quarantined objects of one kind, with their bytes.
  virtual Result<std::vector<Quarantined>> ScanQuarantine(GcKind kind, std::optional<Hash> after,
                                                          size_t limit) = 0;
  // Quarantines the objects not quarantined yet, since `since`; those quarantined keep their time.
  virtual Status Quarantine(GcKind kind, std::span<const Hash> hashes, int64_t since) = 0;
  // Releases the objects a mark found wanted again (a claimed one stays claimed: its sweep goes on).
  virtual Status Release(GcKind kind, std::span<const Hash> hashes) = 0;
  // Deletes each file still quarantined as given and unclaimed (its record, its scopes and their totals),
  // in one transaction.
  virtual Result<SweptTotals> SweepFiles(std::span<const Quarantined> files) = 0;
  // Claims each xorb still quarantined as given and unclaimed, at `now`, and in the same transaction deletes
  // the dedup entries and shard neighbourhoods that name it (a dedup answer never names it from then on);
  // a shard left with no xorb is quarantined as claimed (GcKind::kShard; CommitShard refuses it,
  // kUnavailable, until DropShards). Returns the xorbs claimed. A claimed xorb cannot be revived: its bytes
  // go next (the caller), then DropXorbs.
  virtual Result<std::vector<XorbHash>> ClaimXorbs(std::span<const Quarantined> xorbs, int64_t now) = 0;
  // Deletes the records of claimed xorbs (their bytes are gone) and their quarantine; unclaimed ones are
  // left alone.
  virtual Result<SweptTotals> DropXorbs(std::span<const XorbHash> xorbs) = 0;
  // The scopes each of these shards was registered for (recorded since schema 12; older shards have none).
  virtual Result<std::vector<ShardScope>> ShardScopes(std::span<const Hash> shards) = 0;
  // Deletes the records of claimed shards (their blobs and grants are gone) with their scopes and quarantine;
  // unclaimed ones are left alone.
  virtual Result<SweptTotals> DropShards(std::span<const Hash> shards) = 0;

  // ---- Compaction (src/compact/): rewriting xorbs that are mostly dead with their live chunks only
  // The scopes that see each file, result i for files[i] (empty for an unknown file); at most
  // CasIndex::kMaxFilesPerRead files (kMalformed past that).
  virtual Result<std::vector<std::vector<std::string>>> FileScopes(std::span<const FileHash> files) = 0;
  // In one transaction: registers each shard (as CommitShard does: its row, scope, neighbourhood and dedup
  // entries; its files are registered already and keep their scopes), gives each file its new terms and a
  // new record (created_at := max(now, record + 1), so that caches of the old terms notice), deletes the
  // dedup entries naming a replaced xorb and marks each replaced xorb superseded (XorbUse::kSuperseded).
  // A replaced xorb stays registered and stored: the collector sweeps it, past its grace, once nothing uses
  // it. kConflict (nothing changed) when a file is unknown or its record is no longer the one given (swept
  // and registered again since it was read); kUnavailable when a xorb named is claimed by a sweep;
  // kUnknownReference when `into` is not registered.
  virtual Status Repoint(const Repointing& repointing) = 0;

  // ---- Repository objects: a mark walks each repository's refs (hub/) and quarantines what they do not
  // reach The repository's objects in key order after `after`, with sizes and quarantine times (never their
  // data).
  virtual Result<std::vector<RepoObjectMark>> ScanRepoObjects(
      int64_t repo, const std::optional<std::vector<uint8_t>>& after, size_t limit) = 0;
  // As Quarantine and Release, for objects of one repository (at most kMaxScanned keys).
  virtual Status QuarantineRepoObjects(int64_t repo, const std::vector<std::vector<uint8_t>>& keys,
                                       int64_t since) = 0;
  virtual Status ReleaseRepoObjects(int64_t repo, const std::vector<std::vector<uint8_t>>& keys) = 0;
  // Deletes each object still quarantined with the `since` given (not revived since the mark read it), in
  // one transaction; returns what went.
  virtual Result<SweptTotals> SweepRepoObjects(int64_t repo, std::span<const RepoObjectMark> objects) = 0;
  // Makes the bytes of deleted rows leave the database's files, and says what it did. SQLite zeroes deleted
  // content as it deletes (secure_delete); this truncates the write-ahead log, and with `vacuum` rewrites the
  // database first. PostgreSQL: VACUUM of the tables that hold repository objects; with `vacuum`, VACUUM FULL
  // (a new file for each table: it locks them while it runs) and a checkpoint.
  virtual Result<std::string> ScrubDeleted(bool vacuum) = 0;

  // Waits until this process is the only collector of this index, then holds it (SQLite: a lock on a file
  // beside the database; PostgreSQL: an advisory lock on a connection of its own).
  virtual Result<std::unique_ptr<GcLock>> LockGc() = 0;

  // Holds the deletion of stored bytes off while a backup copies them (backup/backup.h). Backups hold it
  // shared, each for its whole run; a collector holds it exclusively from its first claim or deletion of a
  // xorb, shard, grant or revocation blob to the end of its run. With `wait` false, nullptr (no error) when
  // the other side holds it now. Released when destroyed or when the process dies (SQLite: a lock on a file
  // beside the database; PostgreSQL: an advisory lock on a connection of its own).
  enum class DeletionHold { kShared, kExclusive };
  virtual Result<std::unique_ptr<GcLock>> HoldDeletions(DeletionHold mode, bool wait) = 0;

 protected:
  GcIndex() = default;
};

// The signing keys every node shares (config/secrets.h).
class SecretIndex {
 public:
  virtual ~SecretIndex() = default;
  SecretIndex(const SecretIndex&) = delete;
  SecretIndex& operator=(const SecretIndex&) = delete;

  // ---- Secrets
  // The secret named `name`, shared by every process on this index; when there is none yet, `candidate` is
  // stored and returned (atomically: of several processes starting at once, one value wins for all).
  virtual Result<std::string> SharedSecret(std::string_view name, std::string_view candidate) = 0;
  // Every stored secret, by name (a handful: the signing keys, config/secrets.h).
  virtual Result<std::vector<SecretRecord>> ListSecrets() = 0;
  // Stores a new secret stamped with the current time; false (nothing changed) when `name` exists.
  virtual Result<bool> AddSecret(std::string_view name, std::string_view value) = 0;
  // Deletes the secret; false when there was none.
  virtual Result<bool> DeleteSecret(std::string_view name) = 0;

 protected:
  SecretIndex() = default;
};

// Storage quotas per namespace (src/quota/ measures and enforces them; this keeps the numbers). Charges and
// measures are compare-and-set, so that nodes admitting commits at once never take more than the limit
// between them.
class QuotaIndex {
 public:
  virtual ~QuotaIndex() = default;
  QuotaIndex(const QuotaIndex&) = delete;
  QuotaIndex& operator=(const QuotaIndex&) = delete;

  // The namespace's record; nullopt when it has none (no quota).
  virtual Result<std::optional<QuotaRecord>> GetQuota(std::string_view ns) = 0;
  // Records in namespace order after `after`, at most `limit` (at most kMaxListedQuotas).
  static constexpr size_t kMaxListedQuotas = 1000;
  virtual Result<std::vector<QuotaRecord>> ListQuotas(std::optional<std::string_view> after,
                                                      size_t limit) = 0;
  // Sets the namespace's limit (nullopt: none), creating its record (stale, never measured) when needed;
  // with `audit` (null: none) in its transaction.
  virtual Status SetQuotaLimit(std::string_view ns, std::optional<uint64_t> limit,
                               const AuditEvent* audit) = 0;
  // Deletes the record, with `audit` (null: none) when there was one; false when there was none.
  virtual Result<bool> DeleteQuota(std::string_view ns, const AuditEvent* audit) = 0;
  // Ends a reservation (QuotaCharge::reserve) outside a write: with `published` its bytes move to pending,
  // without it they are dropped (the commit failed before it published anything).
  virtual Status SettleQuota(std::string_view ns, uint64_t bytes, bool published) = 0;
  // Stores a measure if the record's generation is still measure.generation_seen: used := measure.used,
  // pending := max(pending - pending_seen, 0) (what was published after the measure began stays), reserved
  // += charge (reservations older than kQuotaReservationLife, of commits that died before settling, are
  // dropped first), stale := false, a new generation; with a charge, only when the total stays within the
  // limit. Says whether it did (false: the generation moved, the charge did not fit, or there is no record).
  static constexpr int64_t kQuotaReservationLife = 3600;
  virtual Result<bool> RecordQuotaMeasure(std::string_view ns, const QuotaMeasure& measure,
                                          uint64_t charge) = 0;
  // Marks the namespace's record stale (nullopt: every record), with a new generation.
  virtual Status MarkQuotaStale(std::optional<std::string_view> ns) = 0;

 protected:
  QuotaIndex() = default;
};

// A mirrored repository's last read (MirrorIndex).
struct MirrorRead {
  int64_t repo = 0;
  int64_t last_read = 0;  // unix seconds
};

// What the pull-through mirror shares across the nodes of an index, beside the repositories it copies:
// - short leases on names: the mirror takes one per file it fetches from its upstream, so that nodes sharing
//   the index fetch each file once. A lease lasts until its expiry; its holder renews it before then, and a
//   lease that lapsed (a holder that died) may be taken by anyone;
// - when each mirrored repository was last read, for its least-recently-used eviction (a row goes with its
//   repository).
class MirrorIndex {
 public:
  virtual ~MirrorIndex() = default;
  MirrorIndex(const MirrorIndex&) = delete;
  MirrorIndex& operator=(const MirrorIndex&) = delete;

  // Takes `name` for `holder` until `expires` (unix seconds) when no one holds it, when its lease lapsed
  // (an expiry at or before `now`), or when `holder` holds it already (a renewal). Whether `holder` holds it
  // now. Names and holders are at most 256 bytes.
  virtual Result<bool> TakeLease(std::string_view name, std::string_view holder, int64_t now,
                                 int64_t expires) = 0;
  // Gives `name` up if `holder` holds it (nothing otherwise).
  virtual Status DropLease(std::string_view name, std::string_view holder) = 0;
  // Who holds `name` at `now` (a lease that lapsed at or before it is no one's).
  virtual Result<std::optional<std::string>> LeaseHolder(std::string_view name, int64_t now) = 0;

  // Records a read of repository `repo` at `at` (unix seconds): the later of it and the recorded one stays.
  // kNotFound when there is no such repository.
  virtual Status NoteMirrorRead(int64_t repo, int64_t at) = 0;
  // Every repository with a recorded read, least recently read first.
  virtual Result<std::vector<MirrorRead>> ListMirrorReads() = 0;

 protected:
  MirrorIndex() = default;
};

// People (src/people/ decides what they may do): users and organizations, which share one space of names
// (compared without case: "Alice" is "alice"), members of organizations with their roles, and users' tokens.
// Every change takes the next people generation, stamped on the rows it changed, in its own transaction: a
// node keeps what it read and asks only for what changed after (PeopleChangedSince), so revoking a token or
// disabling a user reaches every node at its next refresh. Changes are serialized, so generations are
// committed in order.
class PeopleIndex {
 public:
  virtual ~PeopleIndex() = default;
  PeopleIndex(const PeopleIndex&) = delete;
  PeopleIndex& operator=(const PeopleIndex&) = delete;

  // ---- Accounts
  // A new account; kConflict when a user or organization has the name (case aside).
  virtual Result<AccountRecord> CreateAccount(const NewAccount& account) = 0;
  // The account of that name (case aside); kNotFound when none.
  virtual Result<AccountRecord> FindAccount(std::string_view name) = 0;
  // Accounts of `kind` (nullopt: both) in name order after `after`, at most `limit` (at most kMaxListed).
  static constexpr size_t kMaxListed = 1000;
  virtual Result<std::vector<AccountRecord>> ListAccounts(std::optional<AccountKind> kind,
                                                          std::optional<std::string_view> after,
                                                          size_t limit) = 0;
  // Changes the fields `change` gives; kNotFound when there is no account `id`. Disabling a user ends their
  // browser sessions (SignInIndex) in the same transaction: enabling them again revives none.
  virtual Status UpdateAccount(int64_t id, const AccountChange& change) = 0;
  // The accounts among `ids` that exist (at most kMaxListed ids), in no particular order: naming the members
  // of an organization without reading every account.
  virtual Result<std::vector<AccountRecord>> GetAccounts(std::span<const int64_t> ids) = 0;

  // ---- Members
  // Makes user `user` a member of organization `org` with `role`, or no member (nullopt: a no-op when it was
  // none). kNotFound when `org` is no organization or `user` no user; kConflict (LastAdmin) when `user` is
  // the organization's only admin and would be no more: decided in the change's transaction, so two admins
  // demoting each other at once cannot both succeed.
  virtual Status SetMember(int64_t org, int64_t user, std::optional<OrgRole> role,
                           const AuditEvent* audit) = 0;
  // The members of an organization, or the memberships of a user (`of` is its kind), removed ones left out.
  virtual Result<std::vector<MemberRecord>> ListMembers(AccountKind of, int64_t id) = 0;

  // ---- Tokens
  // Stores a new token (its `changed` is set here); kConflict when the id exists, kNotFound when `owner` is
  // no user.
  virtual Status CreateToken(const TokenRecord& token, const AuditEvent* audit) = 0;
  // The token with that id, revoked or not; kNotFound when none.
  virtual Result<TokenRecord> FindToken(std::string_view id) = 0;
  // The tokens `owner` holds (nullopt: everybody's), revoked ones included, in id order after `after`, at
  // most `limit` (at most kMaxListed).
  virtual Result<std::vector<TokenRecord>> ListTokens(std::optional<int64_t> owner,
                                                      std::optional<std::string_view> after,
                                                      size_t limit) = 0;
  // Revokes the token at `at`; false when it was revoked already (nothing changes), kNotFound when none.
  virtual Result<bool> RevokeToken(std::string_view id, int64_t at, const AuditEvent* audit) = 0;
  // Records uses: each token's last use becomes the later of it and the one given. Not a change of the
  // token (no new generation): nodes do not need it. Unknown ids are skipped.
  virtual Status NoteTokenUses(const std::vector<std::pair<std::string, int64_t>>& uses) = 0;

  // ---- Trust policies (trusted publishers)
  // Stores a new policy (its `changed` is set here); kConflict when the id exists, kNotFound when `owner` is
  // no account.
  virtual Status CreatePublisher(const PublisherRecord& policy, const AuditEvent* audit) = 0;
  // The policy with that id, revoked or not; kNotFound when none.
  virtual Result<PublisherRecord> FindPublisher(std::string_view id) = 0;
  // The policies of `owner` (nullopt: every account's), revoked ones included, in id order.
  virtual Result<std::vector<PublisherRecord>> ListPublishers(std::optional<int64_t> owner) = 0;
  // Revokes the policy at `at`; false when it was revoked already (nothing changes), kNotFound when none.
  virtual Result<bool> RevokePublisher(std::string_view id, int64_t at, const AuditEvent* audit) = 0;

  // ---- Refresh
  // Every account, membership (removed ones included), token and trust policy changed after `generation` (0:
  // all), and the generation they bring the reader to.
  virtual Result<PeopleChanges> PeopleChangedSince(int64_t generation) = 0;

 protected:
  PeopleIndex() = default;
};

// Signing in through the pages: users' passwords (the memory-hard hash people/ makes, stored as its text)
// and browser sessions. Not part of the people generations: a node reads a session when a request shows
// it, so a sign-out or a password change is seen by every node at once.
class SignInIndex {
 public:
  virtual ~SignInIndex() = default;
  SignInIndex(const SignInIndex&) = delete;
  SignInIndex& operator=(const SignInIndex&) = delete;

  // The password hash of account `id`; nullopt when it has none.
  virtual Result<std::optional<std::string>> GetPassword(int64_t id) = 0;
  // Sets the password hash of user `id` (nullopt: removes it) and ends every session of theirs, in one
  // transaction; kNotFound when `id` is no user.
  virtual Status SetPassword(int64_t id, std::optional<std::string> hash, const AuditEvent* audit) = 0;
  // Stores a new session; kConflict when the id exists, kNotFound when its user is no user.
  virtual Status CreateSession(const SessionRecord& session, const AuditEvent* audit) = 0;
  // The session with that id (expired ones too: the caller checks); nullopt when none.
  virtual Result<std::optional<SessionRecord>> FindSession(std::string_view id) = 0;
  // Ends session `id` (a sign-out); false when there was none.
  virtual Result<bool> DeleteSession(std::string_view id, const AuditEvent* audit) = 0;
  // Ends every session of user `id`; how many there were.
  virtual Result<uint64_t> DeleteSessionsOf(int64_t id, const AuditEvent* audit) = 0;
  // Deletes the sessions and device grants expired before `now`; how many.
  virtual Result<uint64_t> PruneSessions(int64_t now) = 0;

  // Stores a new device grant; kConflict when its user code or device code is taken.
  virtual Status CreateDeviceGrant(const DeviceGrantRecord& grant) = 0;
  // The grant of that user code; nullopt when none.
  virtual Result<std::optional<DeviceGrantRecord>> FindDeviceGrant(std::string_view user_code) = 0;
  // Approves (or denies) the grant of `user_code` as user `user`, when it is pending and unexpired at `now`;
  // false otherwise (nothing changes).
  virtual Result<bool> DecideDeviceGrant(std::string_view user_code, int64_t user, bool approve, int64_t now,
                                         const AuditEvent* audit) = 0;
  // The grant of a device code's hash as it was, its poll time then set to `now`; nullopt when none.
  virtual Result<std::optional<DeviceGrantRecord>> PollDeviceGrant(std::span<const uint8_t> device_hash,
                                                                   int64_t now) = 0;
  // Moves the approved grant to issued: true exactly once (a token is issued for it once).
  virtual Result<bool> IssueDeviceGrant(std::span<const uint8_t> device_hash) = 0;

  // The user a provider's subject is linked to; nullopt when none.
  virtual Result<std::optional<int64_t>> FindIdentity(std::string_view issuer, std::string_view subject) = 0;
  // Links a provider's subject to a user; kConflict when the subject is linked already, kNotFound when the
  // user is no user.
  virtual Status LinkIdentity(const IdentityRecord& identity, const AuditEvent* audit) = 0;
  // Unlinks it; false when it was not linked.
  virtual Result<bool> UnlinkIdentity(std::string_view issuer, std::string_view subject,
                                      const AuditEvent* audit) = 0;
  // The subjects linked to user `id`, in issuer and subject order.
  virtual Result<std::vector<IdentityRecord>> IdentitiesOf(int64_t id) = 0;

 protected:
  SignInIndex() = default;
};

// The audit log (audit_records.h): every change a person or an operator made, newest last. The changes that
// are audited carry their event — NewRepo, RepoChange, RefUpdate, NewAccount and AccountChange in their
// `audit` field; DeleteRepo, SetMember, CreateToken and RevokeToken in their `audit` argument (null: none) —
// and the index writes it in the change's own transaction, only when the change is made (a refused compare-
// and-swap, a name taken, a token revoked already: no event). AppendAudit writes an event alone, for what
// happens outside one transaction (a refused attempt, a collection, a backup).
class AuditIndex {
 public:
  virtual ~AuditIndex() = default;
  AuditIndex(const AuditIndex&) = delete;
  AuditIndex& operator=(const AuditIndex&) = delete;

  static constexpr size_t kMaxListed = 1000;
  virtual Status AppendAudit(const AuditEvent& event) = 0;
  // The events `filter` matches, newest first, older than event `before` (nullopt: from the newest), at most
  // `limit` (at most kMaxListed).
  virtual Result<std::vector<AuditEvent>> ListAudit(const AuditFilter& filter, std::optional<int64_t> before,
                                                    size_t limit) = 0;
  // Deletes the events older than `before` (unix seconds): the retention; how many went.
  virtual Result<uint64_t> PruneAudit(int64_t before) = 0;

 protected:
  AuditIndex() = default;
};

// The whole index: the nine slices and the database's own operations (health, write counters, where it is).
class Index : public CasIndex,
              public RepoIndex,
              public SecretIndex,
              public GcIndex,
              public QuotaIndex,
              public MirrorIndex,
              public PeopleIndex,
              public SignInIndex,
              public AuditIndex {
 public:
  ~Index() override = default;
  Index(const Index&) = delete;
  Index& operator=(const Index&) = delete;

  // ---- Operations
  // Whether the database answers now (a round trip; /readyz).
  virtual Status Ping() = 0;
  virtual WriteStats write_stats() const = 0;
  // The backend and where it is, for messages: "sqlite:PATH", or the PostgreSQL URI without its password.
  virtual std::string description() const = 0;

 protected:
  Index() = default;
};

}  // namespace cairn::index

// The Hub: repositories (models, datasets, spaces), their branches, tags and commits, and the files in them,
// as huggingface_hub and the `hf` CLI expect them (docs/hub.md). Histories are git objects (git_object.h)
// kept in the index (index.h, "Repositories"), so any node serves any request. A large file in a tree is a
// Git LFS pointer; the repository keeps a link from its SHA-256 to the Xet file that the upload for this
// repository registered (the CAS scope of a repository is its own: RepoRecord::scope). Small files are
// blobs in the index.
//
// Access: a caller is a token's scope and permission, or nobody. A scope names a namespace ("alice": every
// repository of alice) or one repository ("alice/model", "datasets/alice/data", "spaces/alice/app").
// Public repositories are readable by anyone; a private one only by a scope that covers it. A repository
// the caller may not read is reported as missing (kNotFound), never as forbidden, so names do not leak.
//
// Thread-safety: every method may be called concurrently. Commits to one branch are serialized by the
// index's compare and swap of the branch: of two commits made from the same parent one wins, the other
// fails with kConflict and changes nothing.
// Ownership: the service borrows the index and the file service, which must outlive it.
// Failures: common/error.h's codes; kStale for a parent commit that is not the branch's head, and a reason
// (X-Error-Code) where huggingface_hub tells failures apart by it (RepoNotFound, RevisionNotFound, ...).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "common/access.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/lru_cache.h"
#include "files/file_service.h"
#include "hub/git_object.h"
#include "index/index.h"
#include "people/names.h"
#include "quota/quota_service.h"

namespace cairn::hub {

using index::RepoType;

// The failures huggingface_hub tells apart by their reason (X-Error-Code), beside their status.
inline Error RepoNotFound(std::string m) {
  return {ErrorCode::kNotFound, std::move(m), "RepoNotFound"};
}
inline Error RevisionNotFound(std::string m) {
  return {ErrorCode::kNotFound, std::move(m), "RevisionNotFound"};
}
inline Error EntryNotFound(std::string m) {
  return {ErrorCode::kNotFound, std::move(m), "EntryNotFound"};
}
inline Error RepoExists(std::string m) {
  return {ErrorCode::kConflict, std::move(m), "RepoExists"};
}

// Who asks. An empty scope: nobody (no token).
struct Caller {
  std::string scope;
  bool write = false;     // may write somewhere: a scope token's whole say, a person's most
  int64_t expires = 0;    // the token's expiry (unix seconds); what it mints expires no later
  std::string user = {};  // a person's token: the user (whose namespace `scope` is); empty for scope tokens
  // A person's token: what it reaches (people/reach.h), the whole of what it may do. A scope token has none:
  // it reaches its scope, as an admin when it writes (as it always has) and as a reader otherwise.
  std::vector<ScopeAccess> reach = {};
  std::string token_id = {};  // a person's token's id, for the record of what it did
  std::string client = {};    // the client's address as the server saw it, for the same record
  bool anonymous() const { return scope.empty(); }
  bool person() const { return !user.empty(); }
  // The name a commit or record is made in: the user, or the namespace a scope token speaks for.
  std::string Who() const;
  // Who the audit log says made a change: the user and their token, or "scope:<scope>" for a scope token.
  index::AuditActor Actor() const;
};

struct RepoId {
  RepoType type = RepoType::kModel;
  std::string ns;
  std::string name;
  std::string str() const { return ns + "/" + name; }  // "alice/model"
};

// "models", "datasets", "spaces" (the /api/{type}s/ segment) and back.
std::optional<RepoType> TypeFromPlural(std::string_view plural);
std::string_view Plural(RepoType type);
// The path of a repository's pages and git URL: "alice/model", "datasets/alice/data", "spaces/alice/app".
std::string RepoPath(const RepoId& id);
// A namespace or repository name the Hub accepts (people/names.h).
using people::ValidName;
// A file path in a repository: segments separated by '/', each a ValidSegment, at most 4096 bytes.
bool ValidPath(std::string_view path);
// The namespace a scope speaks for ("alice" for "alice", "alice/model" and "datasets/alice/data").
std::string NamespaceOf(std::string_view scope);

// An index failure as the Hub reports it: what the index holds disagreeing with itself (a hash, a size) is
// the server's fault (kDamaged), and a range outside it a malformed request; other codes are kept.
Error FromIndex(const Error& e);

// How far the caller reaches into the repository: by its reach (a person), or by its scope, which covers a
// namespace's repositories or the one repository it names.
Access AccessTo(const Caller& caller, const index::RepoRecord& repo);
// How far the caller reaches into namespace `ns` itself (its quota, its listing, an organization's members):
// a person by the reach entry of the namespace; a scope token of the namespace or of one of its repositories
// as a reader, or as an admin when it writes.
Access AccessToNamespace(const Caller& caller, std::string_view ns);
// A record for a repository that does not exist yet, to ask AccessTo about.
index::RepoRecord ProspectiveRecord(const RepoId& id);

// A repository as a caller sees it.
struct Repo {
  index::RepoRecord record;
  RepoId id() const { return {record.type, record.ns, record.name}; }
};

// A file or folder at a revision.
struct PathInfo {
  std::string path;
  bool is_dir = false;
  ObjectId oid;  // the blob's or tree's git id
  uint64_t size = 0;
  std::optional<LfsPointer> lfs;     // a large file
  std::optional<xet::FileHash> xet;  // its Xet file, when it is large
};

// One change of a commit.
struct AddInline {
  std::string path;
  std::vector<uint8_t> content;
};
struct AddLfs {
  std::string path;
  LfsPointer pointer;
  bool size_given = true;  // a copy names the file by its SHA-256 alone: the size is the uploaded file's
};
struct DeletePath {
  std::string path;
  bool folder = false;
};
struct CopyPath {
  std::string from;
  std::string to;
  std::optional<std::string> from_revision;  // the branch's head when absent
};
using Operation = std::variant<AddInline, AddLfs, DeletePath, CopyPath>;

struct CommitRequest {
  std::string branch = "main";
  std::string summary;
  std::string description;
  std::optional<ObjectId> parent;  // when given, the commit is refused (kStale) unless it is the head
  std::vector<Operation> operations;
  bool create_branch = false;  // when the branch does not exist yet, start it from the default branch
};

struct CommitInfo {
  ObjectId oid;
  Commit commit;
};

struct RefInfo {
  index::RefKind kind;
  std::string name;
  ObjectId target;
};

// The ref's name as git spells it: "refs/heads/main", "refs/tags/v1".
inline std::string FullRefName(const RefInfo& ref) {
  return (ref.kind == index::RefKind::kBranch ? "refs/heads/" : "refs/tags/") + ref.name;
}

// The bounds of the text a repository stores, so that no answer echoing it grows with what a client sent
// (docs/hub.md, "Limits"). A commit's summary is one line; its description may hold lines (\n, \r, \t) but
// no other control character; both are valid UTF-8.
inline constexpr size_t kMaxSummaryBytes = 1000;
inline constexpr size_t kMaxDescriptionBytes = 64 << 10;
// A commit object is read no further than this: a message an older cairn stored without a bound is cut
// there (at a character boundary) when it is served.
inline constexpr size_t kMaxCommitObjectBytes = 128 << 10;

// Whether `text` is one of the above: valid UTF-8, no C0 or C1 control character but those `allowed`.
bool ValidText(std::string_view text, std::string_view allowed);

struct HubOptions {
  int64_t max_inline_bytes = 1 << 20;  // a small file's bytes, kept in the index
  size_t max_operations = 25000;       // changes in one commit
  size_t cache_bytes = 64ULL << 20;    // parsed trees and commits
  // A pushed blob that is not an LFS pointer, at most (the Hub's limit: larger files go through git-lfs).
  uint64_t max_push_blob_bytes = 10ULL << 20;
  std::string default_branch = "main";
  const Clock* clock =
      &Clock::System();  // commit and creation times; tests inject one (outlives the service)
  // Storage quotas: commits are admitted by it, deletions and moves tell it; null: no quotas. Outlives the
  // service.
  quota::QuotaService* quota = nullptr;
};

class HubService {
 public:
  HubService(index::Index& index, files::FileService& files, HubOptions options);
  HubService(const HubService&) = delete;
  HubService& operator=(const HubService&) = delete;

  // ---- Repositories
  // Also buckets (RepoType::kBucket), which start empty; a repository starts with an initial commit.
  Result<Repo> CreateRepo(const Caller& caller, const RepoId& id, bool is_private);
  // The repository, if the caller may read it (or write it, when `write`). A private repository the caller
  // cannot read is not found (404), as if it did not exist; one it reads but may not write, kDenied.
  Result<Repo> Open(const Caller& caller, const RepoId& id, bool write);
  // The same for a level of access: deleting, moving and changing the settings take kAdmin.
  Result<Repo> OpenAs(const Caller& caller, const RepoId& id, Access need);
  Status DeleteRepo(const Caller& caller, const RepoId& id);
  Status UpdateSettings(const Caller& caller, const RepoId& id, std::optional<bool> is_private);
  Status MoveRepo(const Caller& caller, const RepoId& from, const RepoId& to);
  // Repositories of `type` the caller may read, by namespace then name, after `after` ("ns/name").
  Result<std::vector<Repo>> ListRepos(const Caller& caller, RepoType type,
                                      const std::optional<std::string>& author,
                                      const std::optional<std::string>& after, size_t limit);
  // What a repository stores (its committed large files' bytes, each file once: the Hub's storage; small
  // files in git are not counted) and when it last changed (its default branch's head; a bucket's creation).
  struct Storage {
    uint64_t bytes = 0;
    int64_t updated_at = 0;
  };
  Result<Storage> StorageOf(const Repo& repo);

  // ---- Revisions
  // A branch or tag name (or "refs/heads/…", "refs/tags/…") or a 40-digit commit id of the repository.
  Result<ObjectId> Resolve(const Repo& repo, std::string_view revision);
  Result<Commit> ReadCommit(const Repo& repo, const ObjectId& oid);
  Result<std::vector<RefInfo>> ListRefs(const Repo& repo);
  Status CreateRef(const Caller& caller, const Repo& repo, index::RefKind kind, const std::string& name,
                   std::optional<std::string_view> revision, bool exist_ok);
  Status DeleteRef(const Caller& caller, const Repo& repo, index::RefKind kind, const std::string& name);
  // The audit log's record of a change of repository `id` by `caller`, now.
  index::AuditEvent Event(const Caller& caller, const RepoId& id, std::string action,
                          std::string detail = {});
  // Commits reachable from `head` along first parents, newest first: `skip` of them skipped, at most `limit`,
  // and no more once their messages hold `max_message_bytes` (one commit at least), so a page's memory is
  // bounded whatever the messages; `more` when commits follow.
  struct CommitPage {
    std::vector<CommitInfo> commits;
    bool more = false;
  };
  Result<CommitPage> ListCommits(const Repo& repo, const ObjectId& head, size_t skip, size_t limit,
                                 size_t max_message_bytes = SIZE_MAX);

  // ---- Files
  // The file or folder at `path` ("" is the root folder); kNotFound (EntryNotFound) when there is none.
  Result<PathInfo> Stat(const Repo& repo, const ObjectId& commit, std::string_view path);
  // The entries of the folder at `path`, with every subfolder's when `recursive`, in tree order.
  Result<std::vector<PathInfo>> List(const Repo& repo, const ObjectId& commit, std::string_view path,
                                     bool recursive);
  // The entries [offset, offset + limit) of the folder at `path` (its own, in tree order) and how many it
  // holds: a page of a large folder costs the page, not the folder (the web pages' folders).
  struct FolderPage {
    std::vector<PathInfo> entries;
    size_t total = 0;
  };
  Result<FolderPage> ListPage(const Repo& repo, const ObjectId& commit, std::string_view path, size_t offset,
                              size_t limit);
  // A small file's bytes (the blob); kBadRequest for a large one.
  Result<std::vector<uint8_t>> ReadBlob(const Repo& repo, const ObjectId& blob);
  // A large file's stored Xet file, as the file service serves it.
  Result<files::StoredFile> OpenLarge(const Repo& repo, const xet::FileHash& file);
  // The stored Xet file of the repository's large file whose bytes have this SHA-256 (its LFS oid, 64
  // lowercase hex digits): what git-lfs asks for. kNotFound when the repository links none (never did, or a
  // purge removed the link).
  Result<files::StoredFile> OpenLargeBySha256(const Repo& repo, std::string_view sha256);

  // Makes a large file of `source` (which the caller may read) part of `target`'s scope as well, so that a
  // commit or batch of `target` may name it: a copy between repositories and buckets, without moving bytes.
  // The file must be visible to the source's scope (an upload for it), with `sha256` when given.
  Status ShareLarge(const Caller& caller, const RepoId& source, const xet::FileHash& file,
                    const std::optional<std::string>& sha256, const Repo& target);

  // ---- Commits
  // kForbidden (the quota's message) when the repository's namespace has no room for what it adds.
  Result<CommitInfo> CreateCommit(const Caller& caller, const Repo& repo, const CommitRequest& request);
  // kForbidden when the repository's namespace has used up its storage quota (nothing more can be
  // uploaded for it): asked before an upload starts (preupload, a write token).
  Status CheckRoom(const Repo& repo);
  // ---- Purge (hub/purge.cc): history and large files a user wants gone; the next collection past the
  // grace frees what nothing reaches any more (docs/operations.md).
  // Replaces the branch's history by one commit holding its head's files, parented by nothing.
  // kBadRequest for a tag, kNotFound (RevisionNotFound) for no such branch, kStale when it moved meanwhile.
  Result<CommitInfo> SuperSquash(const Caller& caller, const Repo& repo, const std::string& branch,
                                 const std::string& message);
  // The repository's large files: every link from an LFS SHA-256 to a Xet file it holds (in SHA-256 order,
  // after `after`, at most `limit`), with a path and the time of a commit that names it when its refs reach
  // it.
  struct LfsFile {
    std::string sha256;
    xet::FileHash xet;
    uint64_t size = 0;
    std::string filename;  // "" when no ref reaches it any more
    int64_t pushed_at = 0;
  };
  struct LfsPage {
    std::vector<LfsFile> files;
    std::optional<std::string> next;  // the cursor of the next page, when there may be one
  };
  Result<LfsPage> ListLfsFiles(const Repo& repo, const std::optional<std::string>& after, size_t limit);
  // Removes the links of these large files (at most index::Index::kMaxObjectsPerRead), and with
  // `rewrite_history` every path that names one from every commit of every ref first (new commit ids, as git
  // filter-branch makes them; kStale when a ref moved meanwhile: nothing of that ref changed, run it again).
  // The files go from the repository's scopes at once (no token of it reads them after; SECURITY.md), their
  // bytes at the collector's next runs. In the audit log: each ref rewritten (history.rewrite, with its
  // move), then the purge (files.purge) once the links are gone.
  Status DeleteLfsFiles(const Caller& caller, const Repo& repo, const std::vector<std::string>& sha256s,
                        bool rewrite_history);

  // ---- git push (hub/push.cc)
  // One ref a push moves: created (no old id), moved, or deleted (no new id).
  struct PushedRef {
    std::string name;  // "refs/heads/…" or "refs/tags/…"
    std::optional<ObjectId> old_id;
    std::optional<ObjectId> new_id;
  };
  // Stores a push's objects and moves its refs, all checked first: every object well-formed (commits in UTF-8
  // within kMaxCommitObjectBytes, tree names ValidSegment and each once, no submodule), no path longer than
  // kMaxPathBytes through pushed and stored trees (tree_paths.h), every object they name pushed or stored
  // already, a large file's pointer naming a file the repository holds with that file's size, no other blob
  // over max_push_blob_bytes; branches only fast-forward, tags only created, the default branch never
  // deleted, each ref's old id its current one. Any refusal refuses the whole push and changes nothing: the
  // answer is why for each ref (nullopt for the ones that would have gone). kForbidden without write access;
  // errors of the index as usual. Refs are moved one by one (compare and swap each): a concurrent writer
  // between two of them leaves the earlier moved and the later reported.
  Result<std::vector<std::optional<std::string>>> ApplyPush(const Caller& caller, const Repo& repo,
                                                            std::vector<RawObject> objects,
                                                            const std::vector<PushedRef>& refs);

  // Whether a file of `size` whose first bytes are `sample` goes to the index (regular) or the CAS (lfs).
  bool Inline(uint64_t size, std::span<const uint8_t> sample) const;

  const HubOptions& options() const { return options_; }

 private:
  // One commit's changes on the way in: one small method per operation kind (hub_service.cc).
  class CommitBuilder;
  // A git push's checks and writes, one step each (push.cc).
  class PushJob;

  int64_t Now() const;
  // Something of namespace `ns` went (a repository deleted or moved): its quota measures it again.
  Status QuotaChanged(const std::string& ns);
  // Before a ref names `commit` (one given by its id): everything it reaches is revived from the collector's
  // quarantine, its large files with it, the commit itself last, so that no sweep takes what the ref is about
  // to name; kNotFound when a sweep has taken part of it already.
  Status ReviveHistory(const Repo& repo, const ObjectId& commit);
  // The changes to the trees of a history rewrite (purge.cc): a tree without the entries `drop` says to drop,
  // nullopt when nothing is left of it; new trees go into `objects`.
  class Rewriter;
  // Takes the files the links under `keys` name out of the repository's scopes (a purge, purge.cc).
  Status UnregisterLinked(const Repo& repo, const std::vector<std::vector<uint8_t>>& keys);
  // A tree as parsed, with the positions of the entries it serves: names an older cairn stored before
  // today's rules (a spelling of .git, a control character) are not served, a client would write them into a
  // checkout (fsck reports them). Checked once, when the tree is read, not on every listing.
  struct ParsedTree {
    std::vector<TreeEntry> entries;
    std::vector<uint32_t> served;  // indices into entries, in order
  };
  Result<std::shared_ptr<const ParsedTree>> ReadParsedTree(const Repo& repo, const ObjectId& oid);
  Result<std::shared_ptr<const std::vector<TreeEntry>>> ReadTree(const Repo& repo, const ObjectId& oid);
  // The size of the Xet file a repository's LFS link names; nullopt when that file is not visible to it.
  Result<std::optional<uint64_t>> LinkedSize(const Repo& repo, const index::RepoObject& link);
  // A push's paths within the API's bound (tree_paths.h), through its trees and the stored ones they name:
  // kLimit saying which path is too long, or the index's error.
  Status CheckPushedPaths(const Repo& repo, const std::vector<RawObject>& objects,
                          const std::unordered_map<ObjectId, size_t, ObjectIdHash>& pushed);
  Result<index::RepoObject> ReadObject(const Repo& repo, const std::vector<uint8_t>& key);
  // Puts an object read from the index into the cache; Forget takes one out (this node's: purge.cc).
  std::shared_ptr<const index::RepoObject> Remember(const Repo& repo, index::RepoObject obj);
  void Forget(const Repo& repo, const std::vector<uint8_t>& key);
  // Reads the objects of `keys` not cached yet into the cache, in batches.
  Status Prefetch(const Repo& repo, const std::vector<std::vector<uint8_t>>& keys);
  // Prefetch of what describing `entries` reads: their blobs (and subtrees when `subtrees_too`), then the LFS
  // links their pointers name.
  Status PrefetchEntries(const Repo& repo, const std::vector<const TreeEntry*>& entries, bool subtrees_too);
  Result<PathInfo> Describe(const Repo& repo, std::string path, const TreeEntry& entry);
  Result<PathInfo> DescribeBlob(const Repo& repo, std::string path, const ObjectId& oid);

  index::RepoIndex& index_;
  index::AuditIndex& audit_;  // what a change spanning many transactions (a purge) is recorded in, at its end
  files::FileService& files_;
  const HubOptions options_;
  // Parsed objects by "<repo id>:<key>" (immutable: never invalidated, only evicted).
  LruCache<std::string, ParsedTree, std::hash<std::string>> trees_;
  LruCache<std::string, index::RepoObject, std::hash<std::string>> objects_;
};

// Makes `published` (registered for the repository, in any order, repeats allowed) readable through its read
// scope: what a commit or a bucket batch names, before the ref or bucket change that names them is made.
// With `charge`, the namespace's quota is charged in the same transaction (quota::Admission).
Status Publish(files::FileService& service, const Repo& repo, std::vector<xet::FileHash> published,
               const index::QuotaCharge* charge = nullptr);

// A git pack's objects as the index stores them, each checked as a push's are: commits and trees parse (no
// submodule, no name twice) and trees name only paths cairn accepts (no longer than kMaxPathBytes through
// the trees given), so that nothing is stored that the Hub's routes could
// not serve (a mirror's fetch from upstream, a bundle's import). kMalformed naming the first one refused.
Result<std::vector<index::RepoObject>> StorableObjects(std::vector<RawObject> objects);

// A new repository's scope: "hub:" and 32 random hex digits.
std::string NewRepoScope();
// A mirrored repository's scope (src/mirror/): "mirror:" and 32 random hex digits. The prefix is what marks
// a repository as a copy of an upstream Hub's: read-only here, refreshed from upstream, evictable.
std::string NewMirrorScope();
bool IsMirrored(const index::RepoRecord& record);
// Calls `fn` with every mirrored repository of the index (models, datasets, then spaces, each by name, a page
// at a time); stops at fn's first error, or the index's.
Status ForEachMirrored(index::RepoIndex& index, const std::function<Status(index::RepoRecord&&)>& fn);

}  // namespace cairn::hub

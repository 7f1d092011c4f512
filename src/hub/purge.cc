// Purge: what a user who committed a secret, or wants space back, asks for (huggingface_hub's
// super_squash_history, list_lfs_files, permanently_delete_lfs_files). Each removes references only: the
// garbage collector frees what no ref reaches any more once the grace has passed (docs/operations.md).
#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <set>

#include "common/hex.h"
#include "hub/file_link.h"
#include "hub/history.h"
#include "hub/hub_service.h"
#include "hub/stored_object.h"

namespace cairn::hub {

// ---- super_squash_history

Result<CommitInfo> HubService::SuperSquash(const Caller& caller, const Repo& repo, const std::string& branch,
                                           const std::string& message) {
  if (message.empty() || message.size() > kMaxSummaryBytes + 2 + kMaxDescriptionBytes ||
      !ValidText(message, "\t\n\r")) {
    return Malformed("a squash needs a commit message of UTF-8 text");
  }
  auto refs = ListRefs(repo);
  if (!refs.ok()) return refs.error();
  std::optional<ObjectId> head;
  bool is_tag = false;
  for (const auto& r : *refs) {
    if (r.name != branch) continue;
    if (r.kind == index::RefKind::kBranch) head = r.target;
    if (r.kind == index::RefKind::kTag) is_tag = true;
  }
  if (!head) {
    if (is_tag) return Malformed("Invalid reference for a branch: " + branch);
    return RevisionNotFound("Invalid rev id: " + branch);
  }
  auto tip = ReadCommit(repo, *head);
  if (!tip.ok()) return tip.error();
  Commit commit;
  commit.tree = tip->tree;
  const std::string who = caller.Who();
  commit.author = {who, who + "@users.noreply.cairn", Now()};
  commit.committer = commit.author;
  commit.message = message;
  ObjectId oid;
  if (auto st = index_.PutRepoObjects(
          repo.record.id, {StoredObject(ObjectKind::kCommit, BytesOf(EncodeCommit(commit)), &oid)});
      !st.ok())
    return FromIndex(st.error());
  index::RefUpdate update{index::RefKind::kBranch, branch, KeyOf(*head), KeyOf(oid)};
  update.audit = Event(caller, repo.id(), "history.squash", branch + " " + head->hex() + ".." + oid.hex());
  if (auto st = index_.UpdateRef(repo.record.id, update); !st.ok()) {
    if (st.error().code == ErrorCode::kConflict) {
      return Stale("A commit has happened since. Please refresh and try again.");
    }
    return FromIndex(st.error());
  }
  return CommitInfo{oid, std::move(commit)};
}

// ---- list_lfs_files

Result<HubService::LfsPage> HubService::ListLfsFiles(const Repo& repo,
                                                     const std::optional<std::string>& after, size_t limit) {
  std::optional<std::vector<uint8_t>> from;
  if (after) {
    if (!IsSha256Hex(*after)) return Malformed("cursor: not a SHA-256");
    from = FileLink::Key(*after);
  }
  auto links = index_.ListRepoObjects(repo.record.id, FileLink::kKind, from,
                                      std::min(limit, index::Index::kMaxObjectsPerRead));
  if (!links.ok()) return FromIndex(links.error());
  std::map<std::string, LfsFile> page;
  for (const auto& object : *links) {
    auto link = FileLink::Parse(object);
    if (!link) continue;
    LfsFile f;
    f.sha256 = std::move(link->sha256);
    f.xet = link->file;
    if (auto entry = files_.VisibleEntry(f.xet, repo.record.scope); entry.ok()) f.size = (*entry)->size;
    f.pushed_at = repo.record.created_at;
    page.emplace(f.sha256, std::move(f));
  }
  // A path and a time for each, from what the refs reach (newest commits first).
  std::set<std::string> named;
  WalkOptions walk;
  walk.on_pointer = [&](const ReachedPointer& p) {
    auto it = page.find(p.pointer.sha256);
    if (it == page.end() || !named.insert(p.pointer.sha256).second) return;
    it->second.filename = p.path;
    it->second.pushed_at = p.commit_time;
    it->second.size = p.pointer.size;
  };
  if (!page.empty()) {
    if (auto reach = ReachFromRefs(index_, repo.record.id, walk); !reach.ok())
      return FromIndex(reach.error());
  }
  LfsPage out;
  out.files.reserve(page.size());
  for (auto& [sha, f] : page) out.files.push_back(std::move(f));
  if (links->size() == std::min(limit, index::Index::kMaxObjectsPerRead) && !links->empty())
    out.next = HexEncode(links->back().key);
  return out;
}

// ---- permanently_delete_lfs_files

// Rewrites trees and commits without the paths whose blobs point at the doomed large files. Every result is
// remembered, so each tree and commit is rewritten once however many commits share it.
class HubService::Rewriter {
 public:
  Rewriter(HubService& hub, const Repo& repo, const std::set<std::string>& doomed)
      : hub_(hub), repo_(repo), doomed_(doomed) {}

  // The commit that replaces `oid` (itself when nothing in its history changes).
  Result<ObjectId> RewriteCommit(const ObjectId& tip) {
    // Parents before children, without recursion: a history may be long.
    std::vector<std::pair<ObjectId, bool>> stack{{tip, false}};
    while (!stack.empty()) {
      auto [oid, expanded] = stack.back();
      stack.pop_back();
      if (commits_.contains(oid.bytes)) continue;
      // The whole stored object (ReadCommit cuts a message past the bounds an older cairn did not keep).
      auto object = hub_.ReadObject(repo_, KeyOf(oid));
      if (!object.ok()) return object.error();
      auto c = ParseCommit(object->data);
      if (!c.ok()) return Damaged("commit " + oid.hex() + ": " + c.error().message);
      if (!expanded) {
        stack.emplace_back(oid, true);
        for (const ObjectId& p : c->parents) {
          if (!commits_.contains(p.bytes)) stack.emplace_back(p, false);
        }
        continue;
      }
      Commit next = *c;
      for (ObjectId& p : next.parents) p = commits_.at(p.bytes);
      auto tree = RewriteTree(c->tree);
      if (!tree.ok()) return tree.error();
      next.tree = tree->value_or(EmptyTree());
      if (next.tree == c->tree && next.parents == c->parents) {
        commits_[oid.bytes] = oid;
        continue;
      }
      ObjectId id;
      objects_.push_back(StoredObject(ObjectKind::kCommit, BytesOf(EncodeCommit(next)), &id));
      commits_[oid.bytes] = id;
    }
    return commits_.at(tip.bytes);
  }

  std::vector<index::RepoObject>& objects() { return objects_; }

 private:
  // nullopt: nothing is left of the tree. Subtrees before their tree, without recursion: however deep a
  // stored tree is (one pushed before paths were bounded), the walk takes no stack.
  Result<std::optional<ObjectId>> RewriteTree(const ObjectId& root) {
    // A tree with its entries once read: its subtrees are above it on the stack.
    std::vector<std::pair<ObjectId, std::shared_ptr<const std::vector<TreeEntry>>>> stack{{root, nullptr}};
    while (!stack.empty()) {
      auto [oid, read] = std::move(stack.back());
      stack.pop_back();
      if (trees_.contains(oid.bytes)) continue;
      if (read == nullptr) {
        auto entries = hub_.ReadTree(repo_, oid);
        if (!entries.ok()) return entries.error();
        stack.emplace_back(oid, *entries);
        for (const TreeEntry& e : **entries) {
          if (e.is_tree() && !trees_.contains(e.id.bytes)) stack.emplace_back(e.id, nullptr);
        }
        continue;
      }
      auto rewritten = RewriteEntries(oid, *read);
      if (!rewritten.ok()) return rewritten.error();
      trees_[oid.bytes] = *rewritten;
    }
    return trees_.at(root.bytes);
  }

  // The tree `oid` holding `entries` without the doomed, its subtrees rewritten already.
  Result<std::optional<ObjectId>> RewriteEntries(const ObjectId& oid, const std::vector<TreeEntry>& entries) {
    std::vector<TreeEntry> kept;
    bool changed = false;
    for (const TreeEntry& e : entries) {
      if (e.is_tree()) {
        const std::optional<ObjectId>& sub = trees_.at(e.id.bytes);
        if (!sub) {
          changed = true;
          continue;
        }
        changed |= *sub != e.id;
        kept.push_back({e.mode, e.name, *sub});
        continue;
      }
      auto drop = Doomed(e.id);
      if (!drop.ok()) return drop.error();
      if (*drop) {
        changed = true;
        continue;
      }
      kept.push_back(e);
    }
    if (kept.empty()) return std::optional<ObjectId>();
    if (!changed) return std::optional<ObjectId>(oid);
    ObjectId id;
    objects_.push_back(StoredObject(ObjectKind::kTree, EncodeTree(kept), &id));
    return std::optional<ObjectId>(id);
  }

  Result<bool> Doomed(const ObjectId& blob) {
    if (auto it = blobs_.find(blob.bytes); it != blobs_.end()) return it->second;
    auto head = hub_.index_.GetRepoObjectHead(repo_.record.id, KeyOf(blob), kMaxLfsPointerBytes);
    if (!head.ok()) return FromIndex(head.error());
    bool doomed = false;
    if (*head && (*head)->size <= kMaxLfsPointerBytes) {
      if (auto pointer = ParseLfsPointer((*head)->data)) doomed = doomed_.contains(pointer->sha256);
    }
    blobs_[blob.bytes] = doomed;
    return doomed;
  }

  ObjectId EmptyTree() {
    ObjectId id;
    objects_.push_back(StoredObject(ObjectKind::kTree, {}, &id));
    return id;
  }

  HubService& hub_;
  const Repo& repo_;
  const std::set<std::string>& doomed_;
  // Keyed by the ids' bytes (ObjectId's <=> trips clang-tidy 14's use-nullptr).
  using Key = std::array<uint8_t, 20>;
  std::map<Key, ObjectId> commits_;
  std::map<Key, std::optional<ObjectId>> trees_;
  std::map<Key, bool> blobs_;
  std::vector<index::RepoObject> objects_;
};

// The files these links name leave the repository's two scopes (its write scope and its read scope) before
// the links go: from then on no token of the repository, minted before or after, reads their bytes through
// the CAS (a reconstruction, /v1/files), as after `cairn rm` each removal is recorded in the store so that a
// rebuild does not give it back. A crash between the two leaves links to files nothing reads, which the
// purge run again removes; the bytes go at the collector's next runs (`cairn gc --grace 0 --force`: now).
Status HubService::UnregisterLinked(const Repo& repo, const std::vector<std::vector<uint8_t>>& keys) {
  auto links = index_.GetRepoObjects(repo.record.id, keys);
  if (!links.ok()) return FromIndex(links.error());
  for (const auto& object : *links) {
    const auto link = object ? FileLink::Parse(*object) : std::nullopt;
    if (!link) continue;  // gone already
    const xet::FileHash file = link->file;
    for (const std::string* scope : {&repo.record.scope, &repo.record.read_scope}) {
      if (scope->empty()) continue;
      if (auto removed = files_.Unregister(file, *scope); !removed.ok()) return FromIndex(removed.error());
    }
  }
  return Ok{};
}

Status HubService::DeleteLfsFiles(const Caller& caller, const Repo& repo,
                                  const std::vector<std::string>& sha256s, bool rewrite_history) {
  if (sha256s.size() > index::Index::kMaxObjectsPerRead) {
    return Malformed("at most " + std::to_string(index::Index::kMaxObjectsPerRead) + " files at once");
  }
  std::set<std::string> doomed;
  for (const auto& sha : sha256s) {
    if (!IsSha256Hex(sha)) return Malformed("not a SHA-256: " + sha.substr(0, 80));
    doomed.insert(sha);
  }
  if (doomed.empty()) return Ok{};
  if (rewrite_history) {
    auto refs = ListRefs(repo);
    if (!refs.ok()) return refs.error();
    Rewriter rewriter(*this, repo, doomed);
    std::vector<std::pair<RefInfo, ObjectId>> moves;
    for (const RefInfo& r : *refs) {
      auto next = rewriter.RewriteCommit(r.target);
      if (!next.ok()) return next.error();
      if (*next != r.target) moves.emplace_back(r, *next);
    }
    // The new objects first (durable, harmless if a ref update below loses), then each ref, compare and swap.
    auto& objects = rewriter.objects();
    for (size_t i = 0; i < objects.size(); i += index::Index::kMaxObjectsPerRead) {
      const size_t n = std::min(objects.size() - i, index::Index::kMaxObjectsPerRead);
      std::vector<index::RepoObject> batch(objects.begin() + static_cast<std::ptrdiff_t>(i),
                                           objects.begin() + static_cast<std::ptrdiff_t>(i + n));
      if (auto st = index_.PutRepoObjects(repo.record.id, batch); !st.ok()) return FromIndex(st.error());
    }
    for (const auto& [ref, next] : moves) {
      index::RefUpdate update{ref.kind, ref.name, KeyOf(ref.target), KeyOf(next)};
      update.audit =
          Event(caller, repo.id(), "history.rewrite", ref.name + " " + ref.target.hex() + ".." + next.hex());
      if (auto st = index_.UpdateRef(repo.record.id, update); !st.ok()) {
        if (st.error().code == ErrorCode::kConflict) {
          return Stale("ref " + ref.name + " moved while the history was rewritten; run it again");
        }
        return FromIndex(st.error());
      }
    }
  }
  // The links last. A commit naming one of these files again while this runs loses it: purge wins.
  std::vector<std::vector<uint8_t>> keys;
  for (const auto& sha : doomed) keys.push_back(FileLink::Key(sha));
  if (auto st = UnregisterLinked(repo, keys); !st.ok()) return st;
  if (auto deleted = index_.DeleteRepoObjects(repo.record.id, keys); !deleted.ok())
    return FromIndex(deleted.error());
  for (const auto& key : keys)
    Forget(repo, key);  // after the delete: a reader meanwhile cannot cache it again
  // After the links went (many transactions): the purge is recorded once it is done.
  if (auto st = audit_.AppendAudit(Event(
          caller, repo.id(), "files.purge",
          std::to_string(doomed.size()) + " large files" + (rewrite_history ? ", history rewritten" : "")));
      !st.ok())
    return FromIndex(st.error());
  return Ok{};
}

}  // namespace cairn::hub

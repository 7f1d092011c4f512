// HubService::ApplyPush: a git push's objects checked and stored, its refs moved (hub_service.h).
#include <deque>
#include <unordered_map>
#include <unordered_set>

#include "common/printable.h"
#include "hub/file_link.h"
#include "hub/hub_service.h"
#include "hub/stored_object.h"
#include "hub/tree_paths.h"

namespace cairn::hub {

namespace {

constexpr size_t kMaxAncestryWalk = 1000000;

bool CleanSignature(const Signature& s) {
  return ValidText(s.name, "") && ValidText(s.email, "") && s.name.size() <= 1000 && s.email.size() <= 1000;
}

}  // namespace

Status HubService::CheckPushedPaths(const Repo& repo, const std::vector<RawObject>& objects,
                                    const std::unordered_map<ObjectId, size_t, ObjectIdHash>& pushed) {
  // Every pushed tree is a root (one no pushed commit names may be named by a later one), and so is every
  // pushed commit's tree.
  std::vector<ObjectId> roots;
  for (const auto& o : objects) {
    if (o.kind == ObjectKind::kTree) roots.push_back(o.id);
    if (o.kind != ObjectKind::kCommit) continue;
    if (auto c = ParseCommit(o.body); c.ok() && !pushed.contains(c->tree)) roots.push_back(c->tree);
  }
  const TreeBodies bodies = [&](const std::vector<ObjectId>& ids,
                                const std::function<void(size_t, std::span<const uint8_t>)>& found) {
    std::vector<size_t> stored;  // positions of the ids to read from the index
    for (size_t i = 0; i < ids.size(); ++i) {
      auto it = pushed.find(ids[i]);
      if (it == pushed.end()) {
        stored.push_back(i);
      } else if (objects[it->second].kind == ObjectKind::kTree) {
        found(i, objects[it->second].body);
      }
    }
    for (size_t at = 0; at < stored.size(); at += index::Index::kMaxObjectsPerRead) {
      const size_t n = std::min(stored.size() - at, index::Index::kMaxObjectsPerRead);
      std::vector<std::vector<uint8_t>> keys;
      for (size_t k = at; k < at + n; ++k) keys.push_back(KeyOf(ids[stored[k]]));
      auto got = index_.GetRepoObjects(repo.record.id, keys);
      if (!got.ok()) return Status(got.error());
      for (size_t k = 0; k < n; ++k) {
        const auto& obj = (*got)[k];
        if (obj && obj->kind == static_cast<uint8_t>(ObjectKind::kTree)) found(stored[at + k], obj->data);
      }
    }
    return Status(Ok{});
  };
  return CheckPathLengths(roots, bodies);
}

Result<std::optional<uint64_t>> HubService::LinkedSize(const Repo& repo, const index::RepoObject& link) {
  const auto linked = FileLink::Parse(link);
  if (!linked) return std::optional<uint64_t>();
  auto entry = files_.VisibleEntry(linked->file, repo.record.scope);
  if (!entry.ok()) {
    if (entry.error().code == ErrorCode::kNotFound) return std::optional<uint64_t>();
    return FromIndex(entry.error());
  }
  return std::optional<uint64_t>((*entry)->size);
}

namespace {

// A pushed ref's kind and its name under its prefix.
struct RefName {
  bool tag = false;
  bool branch = false;
  std::string name;  // empty for a ref under neither prefix ("HEAD", "refs/x"): refused, never cut
  index::RefKind kind = index::RefKind::kBranch;
};

RefName NameOf(const HubService::PushedRef& r) {
  RefName n;
  n.tag = r.name.starts_with("refs/tags/");
  n.branch = r.name.starts_with("refs/heads/");
  n.name = n.tag ? r.name.substr(10) : n.branch ? r.name.substr(11) : std::string();
  n.kind = n.tag ? index::RefKind::kTag : index::RefKind::kBranch;
  return n;
}

}  // namespace

// One push, checked then applied (ApplyPush, after the caller's right to write is checked): its objects,
// what they name, and each ref's refusal or update, shared by the steps, which run in order.
// Ownership: borrows the service, the repository and the pushed refs, which outlive it; owns the pushed
// objects (their bodies are moved into the index when stored). Not thread-safe: one request runs it.
// Failures: a refusal is a reason per ref (the push's answer, git prints it); the index's errors are
// returned as errors. Each check step answers the reason that refuses the whole push, or nullopt to go on.
class HubService::PushJob {
 public:
  using Refusal = std::optional<std::string>;

  PushJob(HubService& hub, const Caller& caller, const Repo& repo, std::vector<RawObject> objects,
          const std::vector<PushedRef>& refs)
      : hub_(hub),
        caller_(caller),
        repo_(repo),
        objects_(std::move(objects)),
        refs_(refs),
        refused_(refs.size()) {}

  Result<std::vector<Refusal>> Run() {
    if (auto why = ScanObjects()) return RefuseAll(*why);
    auto linked = LinkLargeFiles();
    if (!linked.ok()) return linked.error();
    if (*linked) return RefuseAll(**linked);
    auto revived = ReviveNamed();
    if (!revived.ok()) return revived.error();
    if (*revived) return RefuseAll(**revived);
    // No path longer than the API takes, through pushed trees or stored ones a pushed tree puts deeper.
    if (auto st = hub_.CheckPushedPaths(repo_, objects_, pushed_); !st.ok()) {
      if (st.error().code == ErrorCode::kLimit) return RefuseAll(st.error().message);
      return FromIndex(st.error());
    }
    auto any_refused = CheckRefs();
    if (!any_refused.ok()) return any_refused.error();
    if (*any_refused) {
      // One ref refused refuses the push: the others are reported as such (git's --atomic wording).
      for (auto& r : refused_) {
        if (!r) r = "atomic push failed";
      }
      return refused_;
    }
    return Store();
  }

 private:
  // A refusal of the whole push: every ref reported with the reason (git prints it once per ref).
  std::vector<Refusal> RefuseAll(const std::string& why) {
    for (auto& r : refused_) r = why;
    return refused_;
  }

  // ---- The objects: each well-formed, and what each names pushed or stored.
  Refusal ScanObjects() {
    for (size_t i = 0; i < objects_.size(); ++i) pushed_.emplace(objects_[i].id, i);
    for (const auto& o : objects_) {
      Refusal why;
      switch (o.kind) {
        case ObjectKind::kCommit:
          why = ScanCommit(o);
          break;
        case ObjectKind::kTree:
          why = ScanTree(o);
          break;
        case ObjectKind::kBlob:
          why = ScanBlob(o);
          break;
      }
      if (why) return why;
    }
    return std::nullopt;
  }

  Refusal ScanCommit(const RawObject& o) {
    auto c = ParseCommit(o.body);
    if (!c.ok()) return "commit " + o.id.hex() + " is malformed";
    if (o.body.size() > kMaxCommitObjectBytes || !ValidText(c->message, "\n\r\t") ||
        !CleanSignature(c->author) || !CleanSignature(c->committer)) {
      return "commit " + o.id.hex() +
             ": messages and names must be UTF-8 without control "
             "characters, a commit at most 128 KiB";
    }
    if (!pushed_.contains(c->tree)) named_.insert(c->tree);
    for (const auto& p : c->parents) {
      if (!pushed_.contains(p)) named_.insert(p);
    }
    parents_of_.emplace(o.id, c->parents);
    return std::nullopt;
  }

  Refusal ScanTree(const RawObject& o) {
    auto entries = ParseTree(o.body);
    if (!entries.ok()) {
      if (entries.error().message.find("160000") != std::string::npos) {
        return "submodules are not supported: remove the submodule (git rm) and push again";
      }
      return "tree " + o.id.hex() + " is malformed: " + entries.error().message;
    }
    for (const auto& e : *entries) {
      if (!ValidSegment(e.name)) {
        return "the path segment \"" + Printable(e.name, 200) + "\" is not allowed (docs/hub.md, Limits)";
      }
      if (!pushed_.contains(e.id)) named_.insert(e.id);
    }
    return std::nullopt;
  }

  Refusal ScanBlob(const RawObject& o) {
    if (auto pointer = ParseLfsPointer(o.body)) {
      lfs_named_.emplace_back(pointer->sha256, pointer->size);
    } else if (o.body.size() > hub_.options_.max_push_blob_bytes) {
      return "Your push was rejected because it contains files larger than " +
             std::to_string(hub_.options_.max_push_blob_bytes >> 20) +
             " MiB. Please use https://git-lfs.github.com/ to store large files.";
    }
    blob_bytes_ += o.body.size();
    return std::nullopt;
  }

  // Every large file a pushed pointer names must be one the repository holds: linked by an earlier commit,
  // or uploaded to its scope (git-lfs pushes the bytes before the pack), with the pointer's size. A new one
  // is linked with the push and published to the repository's readers, as a commit's lfsFile is.
  Result<Refusal> LinkLargeFiles() {
    std::unordered_map<std::string, uint64_t> sizes;  // of each SHA-256 met: every pointer gives the same
    for (const auto& [sha, size] : lfs_named_) {
      const std::string another_size = "the LFS pointer of " + sha + " gives another size than its file's";
      if (auto [it, first] = sizes.emplace(sha, size); !first) {
        if (it->second != size) return Refusal(another_size);
        continue;
      }
      // A linked file has its size too: a second pointer to it must agree, or listings and downloads would.
      auto link = hub_.ReadObject(repo_, FileLink::Key(sha));
      if (link.ok()) {
        auto size_of = hub_.LinkedSize(repo_, *link);
        if (!size_of.ok()) return size_of.error();
        if (*size_of && **size_of != size) return Refusal(another_size);
        continue;
      }
      if (link.error().code != ErrorCode::kNotFound) return link.error();
      auto entry = hub_.files_.VisibleBySha256(*xet::Hash::FromHex(sha), repo_.record.scope);
      if (!entry.ok()) return FromIndex(entry.error());
      if (*entry == nullptr) {
        return Refusal(
            "the large file " + sha +
            " is not on this server: push it with git-lfs installed (git lfs install), or upload it "
            "with huggingface_hub");
      }
      if ((*entry)->size != size) return Refusal(another_size);
      links_.push_back(FileLink{.sha256 = sha, .file = (*entry)->hash}.ToObject());
      published_.push_back((*entry)->hash);
    }
    return Refusal();
  }

  // What the push names and does not carry must be stored already (revived if a mark had quarantined it).
  Result<Refusal> ReviveNamed() {
    std::vector<std::vector<uint8_t>> keys;
    for (const auto& id : named_) keys.push_back(KeyOf(id));
    for (const auto& r : refs_) {
      if (r.new_id && !pushed_.contains(*r.new_id)) keys.push_back(KeyOf(*r.new_id));
    }
    for (size_t i = 0; i < keys.size(); i += index::Index::kMaxObjectsPerRead) {
      const size_t n = std::min(keys.size() - i, index::Index::kMaxObjectsPerRead);
      std::vector<std::vector<uint8_t>> batch(keys.begin() + static_cast<std::ptrdiff_t>(i),
                                              keys.begin() + static_cast<std::ptrdiff_t>(i + n));
      auto got = hub_.index_.ReviveRepoObjects(repo_.record.id, batch);
      if (!got.ok()) return FromIndex(got.error());
      for (size_t j = 0; j < n; ++j) {
        if ((*got)[j] == index::ObjectRevival::kAbsent) {
          const ObjectId id = *ObjectId::FromBytes(batch[j]);
          return Refusal("missing object " + id.hex() + " (the pack is incomplete)");
        }
      }
    }
    return Refusal();
  }

  // ---- The refs: names, kinds, fast-forward. Each ref's refusal, or its update; whether any is refused.
  Result<bool> CheckRefs() {
    auto current = hub_.ListRefs(repo_);
    if (!current.ok()) return current.error();
    bool any_refused = false;
    for (size_t i = 0; i < refs_.size(); ++i) {
      const PushedRef& r = refs_[i];
      const RefName n = NameOf(r);
      auto why = CheckRef(r, n, *current);
      if (!why.ok()) return why.error();
      refused_[i] = std::move(*why);
      if (refused_[i]) {
        any_refused = true;
        continue;
      }
      index::RefUpdate u{n.kind, n.name, std::nullopt, std::nullopt};
      if (r.old_id) u.expected = KeyOf(*r.old_id);
      if (r.new_id) u.target = KeyOf(*r.new_id);
      u.audit = hub_.Event(caller_, repo_.id(), "ref.push",
                           r.name + " " + (r.old_id ? r.old_id->hex() : "none") + ".." +
                               (r.new_id ? r.new_id->hex() : "none"));
      updates_.push_back(std::move(u));
    }
    return any_refused;
  }

  Result<Refusal> CheckRef(const PushedRef& r, const RefName& n, const std::vector<RefInfo>& current) {
    Refusal why;
    if (!n.branch && !n.tag) {
      why = "only branches (refs/heads/) and tags (refs/tags/) can be pushed";
    } else if (!ValidBranchOrTagName(n.name, n.tag)) {
      why = "invalid ref name (git check-ref-format)";
    }
    std::optional<ObjectId> now;
    for (const auto& c : current) {
      if (c.kind == n.kind && c.name == n.name) now = c.target;
    }
    if (!why && now != r.old_id) why = "fetch first: the ref has moved since";
    if (!why && !r.new_id && !n.tag && n.name == hub_.options_.default_branch) {
      why = "the default branch cannot be deleted";
    }
    if (!why && r.new_id && r.old_id && n.tag) why = "the tag exists already (tags are not moved)";
    if (!why && r.new_id) {
      // The target must be a commit, pushed or stored.
      if (auto it = pushed_.find(*r.new_id); it != pushed_.end()) {
        if (objects_[it->second].kind != ObjectKind::kCommit) why = "a ref must name a commit";
      } else if (!hub_.ReadCommit(repo_, *r.new_id).ok()) {
        why = "a ref must name a commit";
      }
    }
    if (!why && r.new_id && r.old_id && !n.tag) {
      auto ff = IsAncestor(*r.old_id, *r.new_id);
      if (!ff.ok()) return ff.error();
      if (!*ff) why = "non-fast-forward: fetch and merge (or rebase) first; forced pushes are refused";
    }
    return why;
  }

  // Whether `old_id` is `new_id` or one of its ancestors, through pushed commits and stored ones (a walk
  // past kMaxAncestryWalk commits says no).
  Result<bool> IsAncestor(const ObjectId& old_id, const ObjectId& new_id) {
    std::deque<ObjectId> queue{new_id};
    std::unordered_set<ObjectId, ObjectIdHash> seen{new_id};
    while (!queue.empty()) {
      if (seen.size() > kMaxAncestryWalk) return false;
      const ObjectId id = queue.front();
      queue.pop_front();
      if (id == old_id) return true;
      std::vector<ObjectId> parents;
      if (auto it = parents_of_.find(id); it != parents_of_.end()) {
        parents = it->second;
      } else {
        auto c = hub_.ReadCommit(repo_, id);
        if (!c.ok()) return c.error();
        parents = c->parents;
      }
      for (const auto& p : parents) {
        if (seen.insert(p).second) queue.push_back(p);
      }
    }
    return false;
  }

  // ---- Stored: objects (charged to the namespace's quota), then the refs one by one.
  Result<std::vector<Refusal>> Store() {
    std::vector<index::RepoObject> stored;
    stored.reserve(objects_.size());
    for (auto& o : objects_) {
      stored.push_back(index::RepoObject{
          .key = KeyOf(o.id), .kind = static_cast<uint8_t>(o.kind), .data = std::move(o.body)});
    }
    for (auto& l : links_) stored.push_back(std::move(l));
    quota::Admission admission;
    if (hub_.options_.quota != nullptr) {
      auto admitted = hub_.options_.quota->Admit(repo_.record.ns, published_, blob_bytes_);
      if (!admitted.ok()) return FromIndex(admitted.error());
      admission = std::move(*admitted);
    }
    if (auto st = hub_.index_.PutRepoObjects(repo_.record.id, stored, admission.ObjectsCharge()); !st.ok()) {
      return FromIndex(admission.Explain(st.error()));
    }
    admission.ObjectsStored();
    if (auto st = Publish(hub_.files_, repo_, std::move(published_), admission.FilesCharge()); !st.ok())
      return st.error();
    admission.FilesPublished();
    for (size_t i = 0; i < updates_.size(); ++i) {
      if (updates_[i].target) {
        if (auto st = hub_.ReviveHistory(repo_, *ObjectId::FromBytes(*updates_[i].target)); !st.ok())
          return st.error();
      }
      if (auto st = hub_.index_.UpdateRef(repo_.record.id, updates_[i]); !st.ok()) {
        if (st.error().code != ErrorCode::kConflict) return FromIndex(st.error());
        refused_[i] = "fetch first: the ref has moved since";
      }
    }
    return refused_;
  }

  HubService& hub_;
  const Caller& caller_;
  const Repo& repo_;
  std::vector<RawObject> objects_;
  const std::vector<PushedRef>& refs_;
  std::vector<Refusal> refused_;                               // one per ref
  std::unordered_map<ObjectId, size_t, ObjectIdHash> pushed_;  // each pushed object's position in objects_
  std::unordered_map<ObjectId, std::vector<ObjectId>, ObjectIdHash> parents_of_;  // pushed commits
  std::unordered_set<ObjectId, ObjectIdHash> named_;         // ids pushed objects name that the push lacks
  std::vector<std::pair<std::string, uint64_t>> lfs_named_;  // SHA-256 and size
  uint64_t blob_bytes_ = 0;
  std::vector<index::RepoObject> links_;   // the large files' links the push adds
  std::vector<xet::FileHash> published_;   // their files
  std::vector<index::RefUpdate> updates_;  // of the refs not refused, in order
};

Result<std::vector<std::optional<std::string>>> HubService::ApplyPush(const Caller& caller, const Repo& repo,
                                                                      std::vector<RawObject> objects,
                                                                      const std::vector<PushedRef>& refs) {
  if (AccessTo(caller, repo.record) < Access::kWrite) {
    return Denied("this token cannot write to " + repo.id().str());
  }
  return PushJob(*this, caller, repo, std::move(objects), refs).Run();
}

}  // namespace cairn::hub

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

xet::Status HubService::CheckPushedPaths(const Repo& repo, const std::vector<RawObject>& objects,
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
      if (!got.ok()) return xet::Status(got.error());
      for (size_t k = 0; k < n; ++k) {
        const auto& obj = (*got)[k];
        if (obj && obj->kind == static_cast<uint8_t>(ObjectKind::kTree)) found(stored[at + k], obj->data);
      }
    }
    return xet::Status(xet::Ok{});
  };
  return CheckPathLengths(roots, bodies);
}

Result<std::optional<uint64_t>> HubService::LinkedSize(const Repo& repo, const index::RepoObject& link) {
  const auto linked = FileLink::Parse(link);
  if (!linked) return std::optional<uint64_t>();
  auto entry = files_.VisibleEntry(linked->file, repo.record.scope);
  if (!entry.ok()) {
    if (entry.error().code == xet::ErrorCode::kNotFound) return std::optional<uint64_t>();
    return FromIndex(entry.error());
  }
  return std::optional<uint64_t>((*entry)->size);
}

Result<std::vector<std::optional<std::string>>> HubService::ApplyPush(const Caller& caller, const Repo& repo,
                                                                      std::vector<RawObject> objects,
                                                                      const std::vector<PushedRef>& refs) {
  if (!Covers(caller, repo.record) || !caller.write) {
    return Fail(ErrorKind::kForbidden, "", "this token cannot write to " + repo.id().str());
  }
  std::vector<std::optional<std::string>> refused(refs.size());
  // A refusal of the whole push: every ref reported with the reason (git prints it once per ref).
  const auto refuse_all = [&](const std::string& why) {
    for (auto& r : refused) r = why;
    return refused;
  };

  // ---- The objects: each well-formed, and what each names pushed or stored.
  std::unordered_map<ObjectId, size_t, ObjectIdHash> pushed;
  for (size_t i = 0; i < objects.size(); ++i) pushed.emplace(objects[i].id, i);
  std::unordered_map<ObjectId, std::vector<ObjectId>, ObjectIdHash> parents_of;  // pushed commits
  std::unordered_set<ObjectId, ObjectIdHash> named;         // ids pushed objects name that the push lacks
  std::vector<std::pair<std::string, uint64_t>> lfs_named;  // SHA-256 and size
  uint64_t blob_bytes = 0;
  for (const auto& o : objects) {
    switch (o.kind) {
      case ObjectKind::kCommit: {
        auto c = ParseCommit(o.body);
        if (!c.ok()) return refuse_all("commit " + o.id.hex() + " is malformed");
        if (o.body.size() > kMaxCommitObjectBytes || !ValidText(c->message, "\n\r\t") ||
            !CleanSignature(c->author) || !CleanSignature(c->committer)) {
          return refuse_all("commit " + o.id.hex() +
                            ": messages and names must be UTF-8 without control "
                            "characters, a commit at most 128 KiB");
        }
        if (!pushed.contains(c->tree)) named.insert(c->tree);
        for (const auto& p : c->parents) {
          if (!pushed.contains(p)) named.insert(p);
        }
        parents_of.emplace(o.id, c->parents);
        break;
      }
      case ObjectKind::kTree: {
        auto entries = ParseTree(o.body);
        if (!entries.ok()) {
          if (entries.error().message.find("160000") != std::string::npos) {
            return refuse_all("submodules are not supported: remove the submodule (git rm) and push again");
          }
          return refuse_all("tree " + o.id.hex() + " is malformed: " + entries.error().message);
        }
        for (const auto& e : *entries) {
          if (!ValidSegment(e.name)) {
            return refuse_all("the path segment \"" + Printable(e.name, 200) +
                              "\" is not allowed (docs/hub.md, Limits)");
          }
          if (!pushed.contains(e.id)) named.insert(e.id);
        }
        break;
      }
      case ObjectKind::kBlob:
        if (auto pointer = ParseLfsPointer(o.body)) {
          lfs_named.emplace_back(pointer->sha256, pointer->size);
        } else if (o.body.size() > options_.max_push_blob_bytes) {
          return refuse_all("Your push was rejected because it contains files larger than " +
                            std::to_string(options_.max_push_blob_bytes >> 20) +
                            " MiB. Please use https://git-lfs.github.com/ to store large files.");
        }
        blob_bytes += o.body.size();
        break;
    }
  }
  // Every large file a pushed pointer names must be one the repository holds: linked by an earlier commit,
  // or uploaded to its scope (git-lfs pushes the bytes before the pack), with the pointer's size. A new one
  // is linked with the push and published to the repository's readers, as a commit's lfsFile is.
  std::vector<index::RepoObject> links;
  std::vector<xet::FileHash> published;
  std::unordered_map<std::string, uint64_t> sizes;  // of each SHA-256 met: every pointer gives the same
  for (const auto& [sha, size] : lfs_named) {
    const std::string another_size = "the LFS pointer of " + sha + " gives another size than its file's";
    if (auto [it, first] = sizes.emplace(sha, size); !first) {
      if (it->second != size) return refuse_all(another_size);
      continue;
    }
    // A linked file has its size too: a second pointer to it must agree, or listings and downloads would.
    auto link = ReadObject(repo, FileLink::Key(sha));
    if (link.ok()) {
      auto size_of = LinkedSize(repo, *link);
      if (!size_of.ok()) return size_of.error();
      if (*size_of && **size_of != size) return refuse_all(another_size);
      continue;
    }
    if (link.error().kind != ErrorKind::kNotFound) return link.error();
    auto entry = files_.VisibleBySha256(*xet::Hash::FromHex(sha), repo.record.scope);
    if (!entry.ok()) return FromIndex(entry.error());
    if (*entry == nullptr) {
      return refuse_all(
          "the large file " + sha +
          " is not on this server: push it with git-lfs installed (git lfs install), or upload it "
          "with huggingface_hub");
    }
    if ((*entry)->size != size) return refuse_all(another_size);
    links.push_back(FileLink{.sha256 = sha, .file = (*entry)->hash}.ToObject());
    published.push_back((*entry)->hash);
  }
  // What the push names and does not carry must be stored already (revived if a mark had quarantined it).
  std::vector<std::vector<uint8_t>> keys;
  for (const auto& id : named) keys.push_back(KeyOf(id));
  for (const auto& r : refs) {
    if (r.new_id && !pushed.contains(*r.new_id)) keys.push_back(KeyOf(*r.new_id));
  }
  for (size_t i = 0; i < keys.size(); i += index::Index::kMaxObjectsPerRead) {
    const size_t n = std::min(keys.size() - i, index::Index::kMaxObjectsPerRead);
    std::vector<std::vector<uint8_t>> batch(keys.begin() + static_cast<std::ptrdiff_t>(i),
                                            keys.begin() + static_cast<std::ptrdiff_t>(i + n));
    auto got = index_.ReviveRepoObjects(repo.record.id, batch);
    if (!got.ok()) return FromIndex(got.error());
    for (size_t j = 0; j < n; ++j) {
      if ((*got)[j] == index::ObjectRevival::kAbsent) {
        const ObjectId id = *ObjectId::FromBytes(batch[j]);
        return refuse_all("missing object " + id.hex() + " (the pack is incomplete)");
      }
    }
  }

  // No path longer than the API takes, through pushed trees or stored ones a pushed tree puts deeper.
  if (auto st = CheckPushedPaths(repo, objects, pushed); !st.ok()) {
    if (st.error().code == xet::ErrorCode::kLimit) return refuse_all(st.error().message);
    return FromIndex(st.error());
  }

  // ---- The refs: names, kinds, fast-forward.
  auto current = ListRefs(repo);
  if (!current.ok()) return current.error();
  const auto is_ancestor = [&](const ObjectId& old_id, const ObjectId& new_id) -> Result<bool> {
    std::deque<ObjectId> queue{new_id};
    std::unordered_set<ObjectId, ObjectIdHash> seen{new_id};
    while (!queue.empty()) {
      if (seen.size() > kMaxAncestryWalk) return false;
      const ObjectId id = queue.front();
      queue.pop_front();
      if (id == old_id) return true;
      std::vector<ObjectId> parents;
      if (auto it = parents_of.find(id); it != parents_of.end()) {
        parents = it->second;
      } else {
        auto c = ReadCommit(repo, id);
        if (!c.ok()) return c.error();
        parents = c->parents;
      }
      for (const auto& p : parents) {
        if (seen.insert(p).second) queue.push_back(p);
      }
    }
    return false;
  };
  bool any_refused = false;
  std::vector<index::RefUpdate> updates;
  for (size_t i = 0; i < refs.size(); ++i) {
    const PushedRef& r = refs[i];
    const bool tag = r.name.starts_with("refs/tags/");
    const bool branch = r.name.starts_with("refs/heads/");
    // The name under its prefix; a ref under neither ("HEAD", "refs/x") is refused, never cut.
    const std::string name = tag ? r.name.substr(10) : branch ? r.name.substr(11) : std::string();
    if (!branch && !tag) {
      refused[i] = "only branches (refs/heads/) and tags (refs/tags/) can be pushed";
    } else if (!ValidBranchOrTagName(name, tag)) {
      refused[i] = "invalid ref name (git check-ref-format)";
    }
    const index::RefKind kind = tag ? index::RefKind::kTag : index::RefKind::kBranch;
    std::optional<ObjectId> now;
    for (const auto& c : *current) {
      if (c.kind == kind && c.name == name) now = c.target;
    }
    if (!refused[i] && now != r.old_id) refused[i] = "fetch first: the ref has moved since";
    if (!refused[i] && !r.new_id && !tag && name == options_.default_branch) {
      refused[i] = "the default branch cannot be deleted";
    }
    if (!refused[i] && r.new_id && r.old_id && tag)
      refused[i] = "the tag exists already (tags are not moved)";
    if (!refused[i] && r.new_id) {
      // The target must be a commit, pushed or stored.
      if (auto it = pushed.find(*r.new_id); it != pushed.end()) {
        if (objects[it->second].kind != ObjectKind::kCommit) refused[i] = "a ref must name a commit";
      } else if (!ReadCommit(repo, *r.new_id).ok()) {
        refused[i] = "a ref must name a commit";
      }
    }
    if (!refused[i] && r.new_id && r.old_id && !tag) {
      auto ff = is_ancestor(*r.old_id, *r.new_id);
      if (!ff.ok()) return ff.error();
      if (!*ff) refused[i] = "non-fast-forward: fetch and merge (or rebase) first; forced pushes are refused";
    }
    if (refused[i]) {
      any_refused = true;
      continue;
    }
    index::RefUpdate u{kind, name, std::nullopt, std::nullopt};
    if (r.old_id) u.expected = KeyOf(*r.old_id);
    if (r.new_id) u.target = KeyOf(*r.new_id);
    updates.push_back(std::move(u));
  }
  if (any_refused) {
    // One ref refused refuses the push: the others are reported as such (git's --atomic wording).
    for (auto& r : refused) {
      if (!r) r = "atomic push failed";
    }
    return refused;
  }

  // ---- Stored: objects (charged to the namespace's quota), then the refs one by one.
  std::vector<index::RepoObject> stored;
  stored.reserve(objects.size());
  for (auto& o : objects) {
    stored.push_back(index::RepoObject{
        .key = KeyOf(o.id), .kind = static_cast<uint8_t>(o.kind), .data = std::move(o.body)});
  }
  for (auto& l : links) stored.push_back(std::move(l));
  quota::Admission admission;
  if (options_.quota != nullptr) {
    auto admitted = options_.quota->Admit(repo.record.ns, published, blob_bytes);
    if (!admitted.ok()) return FromIndex(admitted.error());
    admission = std::move(*admitted);
  }
  if (auto st = index_.PutRepoObjects(repo.record.id, stored, admission.ObjectsCharge()); !st.ok()) {
    return FromIndex(admission.Explain(st.error()));
  }
  admission.ObjectsStored();
  if (auto st = Publish(files_, repo, std::move(published), admission.FilesCharge()); !st.ok())
    return st.error();
  admission.FilesPublished();
  for (size_t i = 0; i < updates.size(); ++i) {
    if (updates[i].target) {
      if (auto st = ReviveHistory(repo, *ObjectId::FromBytes(*updates[i].target)); !st.ok())
        return st.error();
    }
    if (auto st = index_.UpdateRef(repo.record.id, updates[i]); !st.ok()) {
      if (st.error().code != xet::ErrorCode::kConflict) return FromIndex(st.error());
      refused[i] = "fetch first: the ref has moved since";
    }
  }
  return refused;
}

}  // namespace cairn::hub

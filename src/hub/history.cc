#include "hub/history.h"

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <set>
#include <unordered_set>

#include "hub/file_link.h"
#include "hub/hub_service.h"
#include "hub/stored_object.h"
#include "xet/hash.h"

namespace cairn::hub {
namespace {

// What a preload holds at most (WalkOptions::preload).
constexpr size_t kPreloadBytes = 256ULL << 20;

// Walks in waves, each read in batches (a round trip per kMaxObjectsPerRead objects on PostgreSQL, not one
// per object): the commits of a wave, then their trees level by level, then the blobs met, then the links
// of the pointers among them; the parents make the next wave.
class Walker {
 public:
  Walker(index::RepoIndex& index, int64_t repo, const WalkOptions& options)
      : index_(index), repo_(repo), options_(options) {}

  Status Walk(const std::vector<ObjectId>& heads) {
    if (options_.preload) {
      for (auto kind : {ObjectKind::kCommit, ObjectKind::kTree}) {
        if (auto st = Preload(static_cast<uint8_t>(kind)); !st.ok()) return st;
      }
    }
    std::vector<ObjectId> commits;
    for (const ObjectId& h : heads) {
      if (Visit(h)) commits.push_back(h);
    }
    while (!commits.empty()) {
      std::vector<Pending> trees;
      std::vector<ObjectId> parents;
      // Their parents and trees come first: a message cut at the bound still parses.
      auto st = Heads(commits, kMaxCommitObjectBytes, [&](size_t i, const index::RepoObjectHead& head) {
        if (head.kind != static_cast<uint8_t>(ObjectKind::kCommit)) return;
        Reached(commits[i]);
        auto c = ParseCommit(head.data);
        if (!c.ok()) {
          ++reach_.missing;  // unreadable: what it names is unknown
          return;
        }
        for (const ObjectId& p : c->parents) {
          if (Visit(p)) parents.push_back(p);
        }
        if (Visit(c->tree)) trees.push_back({c->tree, "", c->committer.time});
      });
      if (!st.ok()) return st;
      std::vector<Pending> blobs;
      while (!trees.empty()) {
        std::vector<Pending> next;
        if (auto t = Trees(trees, next, blobs); !t.ok()) return t;
        trees = std::move(next);
      }
      if (auto b = Blobs(blobs); !b.ok()) return b;
      commits = std::move(parents);
    }
    return Ok{};
  }

  Reach Take() { return std::move(reach_); }

 private:
  struct Pending {
    ObjectId oid;
    std::string path;
    int64_t time = 0;
  };

  bool Visit(const ObjectId& oid) { return seen_.insert(oid.bytes).second; }

  Status Preload(uint8_t kind) {
    std::optional<std::vector<uint8_t>> after;
    for (;;) {
      auto page = index_.ListRepoObjects(repo_, kind, after, index::Index::kMaxObjectsPerRead);
      if (!page.ok()) return page.error();
      if (page->empty()) return Ok{};
      after = page->back().key;  // before the objects move out of the page
      for (auto& o : *page) {
        // Past the budget the rest is read as the walk meets it: memory stays bounded whatever the history.
        if (loaded_bytes_ > kPreloadBytes) return Ok{};
        loaded_bytes_ += o.data.size() + o.key.size() + 64;
        if (auto id = ObjectId::FromBytes(o.key)) loaded_[id->bytes] = std::move(o);
      }
      if (page->size() < index::Index::kMaxObjectsPerRead) return Ok{};
    }
  }

  // The preloaded object, or null (not preloaded: ask the index).
  const index::RepoObject* Loaded(const ObjectId& oid) const {
    auto it = loaded_.find(oid.bytes);
    return it == loaded_.end() ? nullptr : &it->second;
  }
  void Reached(const ObjectId& oid) { reach_.keys.push_back(KeyOf(oid)); }

  // Calls `fn` with the head of each of `oids` that is stored (counting the others as missing), in batches.
  // `fn(i, head)` for each of `all` that is stored (all[i]; the others count as missing), in batches.
  template <typename Fn>
  Status Heads(const std::vector<ObjectId>& all, size_t max_bytes, Fn fn) {
    std::vector<size_t> wanted;  // positions in `all` not preloaded
    for (size_t i = 0; i < all.size(); ++i) {
      const index::RepoObject* o = Loaded(all[i]);
      if (o == nullptr) {
        wanted.push_back(i);
        continue;
      }
      const size_t n = std::min(o->data.size(), max_bytes);
      fn(i,
         index::RepoObjectHead{.kind = o->kind,
                               .size = o->data.size(),
                               .data = {o->data.begin(), o->data.begin() + static_cast<std::ptrdiff_t>(n)}});
    }
    for (size_t at = 0; at < wanted.size(); at += index::Index::kMaxObjectsPerRead) {
      const size_t n = std::min(wanted.size() - at, index::Index::kMaxObjectsPerRead);
      std::vector<std::vector<uint8_t>> keys;
      for (size_t i = at; i < at + n; ++i) keys.push_back(KeyOf(all[wanted[i]]));
      auto heads = index_.GetRepoObjectHeads(repo_, keys, max_bytes);
      if (!heads.ok()) return heads.error();
      for (size_t i = 0; i < n; ++i) {
        if (!(*heads)[i]) {
          ++reach_.missing;
          continue;
        }
        fn(wanted[at + i], *(*heads)[i]);
      }
    }
    return Ok{};
  }

  // One level of trees: their subtrees go to `next`, their blobs (met for the first time) to `blobs`.
  Status Trees(const std::vector<Pending>& all, std::vector<Pending>& next, std::vector<Pending>& blobs) {
    std::vector<Pending> level;  // not preloaded: read from the index
    for (const Pending& t : all) {
      if (const index::RepoObject* o = Loaded(t.oid)) {
        Tree(t, *o, next, blobs);
      } else {
        level.push_back(t);
      }
    }
    for (size_t at = 0; at < level.size(); at += index::Index::kMaxObjectsPerRead) {
      const size_t n = std::min(level.size() - at, index::Index::kMaxObjectsPerRead);
      std::vector<std::vector<uint8_t>> keys;
      for (size_t i = at; i < at + n; ++i) keys.push_back(KeyOf(level[i].oid));
      auto got = index_.GetRepoObjects(repo_, keys);
      if (!got.ok()) return got.error();
      for (size_t i = 0; i < n; ++i) {
        if (!(*got)[i]) {
          ++reach_.missing;
          continue;
        }
        Tree(level[at + i], *(*got)[i], next, blobs);
      }
    }
    return Ok{};
  }

  void Tree(const Pending& tree, const index::RepoObject& obj, std::vector<Pending>& next,
            std::vector<Pending>& blobs) {
    if (obj.kind != static_cast<uint8_t>(ObjectKind::kTree)) return;
    Reached(tree.oid);
    auto entries = ParseTree(obj.data);
    if (!entries.ok()) {
      ++reach_.missing;  // unreadable: what it names is unknown
      return;
    }
    for (const auto& e : *entries) {
      if (!Visit(e.id)) continue;
      Pending p{e.id, tree.path.empty() ? e.name : tree.path + "/" + e.name, tree.time};
      (e.is_tree() ? next : blobs).push_back(std::move(p));
    }
  }

  // The blobs, and for the LFS pointers among them, their links.
  Status Blobs(const std::vector<Pending>& blobs) {
    std::vector<ObjectId> oids;
    for (const auto& b : blobs) oids.push_back(b.oid);
    std::vector<std::vector<uint8_t>> links;
    auto st = Heads(oids, kMaxLfsPointerBytes, [&](size_t i, const index::RepoObjectHead& head) {
      if (head.kind != static_cast<uint8_t>(ObjectKind::kBlob)) return;
      Reached(oids[i]);
      if (head.size > kMaxLfsPointerBytes) return;
      auto pointer = ParseLfsPointer(head.data);
      if (!pointer) return;
      if (options_.on_pointer) options_.on_pointer({*pointer, blobs[i].path, blobs[i].time});
      auto key = FileLink::Key(pointer->sha256);
      if (links_.insert(key).second) links.push_back(std::move(key));
    });
    if (!st.ok()) return st;
    for (size_t at = 0; at < links.size(); at += index::Index::kMaxObjectsPerRead) {
      const size_t n = std::min(links.size() - at, index::Index::kMaxObjectsPerRead);
      std::vector<std::vector<uint8_t>> keys(links.begin() + static_cast<std::ptrdiff_t>(at),
                                             links.begin() + static_cast<std::ptrdiff_t>(at + n));
      auto got = index_.GetRepoObjects(repo_, keys);
      if (!got.ok()) return got.error();
      for (size_t k = 0; k < n; ++k) {
        const auto& obj = (*got)[k];
        const auto link = obj ? FileLink::Parse(*obj) : std::nullopt;
        if (!link) continue;
        reach_.keys.push_back(keys[k]);
        reach_.files.push_back(link->file);
      }
    }
    return Ok{};
  }

  index::RepoIndex& index_;
  const int64_t repo_;
  const WalkOptions& options_;
  std::set<std::array<uint8_t, 20>> seen_;  // commits, trees and blobs (git ids)
  std::set<std::vector<uint8_t>> links_;
  std::map<std::array<uint8_t, 20>, index::RepoObject> loaded_;  // WalkOptions::preload
  size_t loaded_bytes_ = 0;
  Reach reach_;
};

}  // namespace

Result<Reach> ReachFrom(index::RepoIndex& index, int64_t repo, const std::vector<ObjectId>& heads,
                        const WalkOptions& options) {
  Walker walker(index, repo, options);
  if (auto st = walker.Walk(heads); !st.ok()) return st.error();
  return walker.Take();
}

Result<Reach> ReachFromRefs(index::RepoIndex& index, int64_t repo, const WalkOptions& options) {
  auto refs = index.ListRefs(repo);
  if (!refs.ok()) return refs.error();
  std::vector<ObjectId> heads;
  for (const auto& r : *refs) {
    if (auto oid = ObjectId::FromBytes(r.target)) heads.push_back(*oid);
  }
  return ReachFrom(index, repo, heads, options);
}

}  // namespace cairn::hub

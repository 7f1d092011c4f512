#include "hub/history.h"

#include <array>
#include <deque>
#include <set>
#include <unordered_set>

#include "hub/hub_service.h"
#include "xet/hash.h"

namespace cairn::hub {
namespace {

std::vector<uint8_t> KeyOf(const ObjectId& id) {
  return {id.bytes.begin(), id.bytes.end()};
}

// The longest blob that can be an LFS pointer cairn writes (version line, oid line, size line).
constexpr size_t kMaxPointerBytes = 200;

class Walker {
 public:
  Walker(index::RepoIndex& index, int64_t repo, const WalkOptions& options)
      : index_(index), repo_(repo), options_(options) {}

  xet::Status Walk(const std::vector<ObjectId>& heads) {
    std::deque<ObjectId> commits(heads.begin(), heads.end());
    while (!commits.empty()) {
      const ObjectId oid = commits.front();
      commits.pop_front();
      if (!Visit(oid)) continue;
      // Its parents and tree come first: a message cut at the bound still parses.
      auto head = index_.GetRepoObjectHead(repo_, KeyOf(oid), kMaxCommitObjectBytes);
      if (!head.ok()) return head.error();
      if (!*head) ++reach_.missing;
      if (!*head || (*head)->kind != static_cast<uint8_t>(ObjectKind::kCommit)) continue;
      Reached(oid);
      auto c = ParseCommit((*head)->data);
      if (!c.ok()) continue;
      for (const ObjectId& p : c->parents) commits.push_back(p);
      if (auto st = Tree(c->tree, "", c->committer.time); !st.ok()) return st;
    }
    return xet::Ok{};
  }

  Reach Take() { return std::move(reach_); }

 private:
  bool Visit(const ObjectId& oid) { return seen_.insert(oid.bytes).second; }
  void Reached(const ObjectId& oid) { reach_.keys.push_back(KeyOf(oid)); }

  xet::Status Tree(const ObjectId& oid, const std::string& dir, int64_t time) {
    if (!Visit(oid)) return xet::Ok{};
    auto got = index_.GetRepoObjects(repo_, {KeyOf(oid)});
    if (!got.ok()) return got.error();
    if (!(*got)[0]) ++reach_.missing;
    if (!(*got)[0] || (*got)[0]->kind != static_cast<uint8_t>(ObjectKind::kTree)) return xet::Ok{};
    Reached(oid);
    auto entries = ParseTree((*got)[0]->data);
    if (!entries.ok()) return xet::Ok{};
    for (const auto& e : *entries) {
      const std::string path = dir.empty() ? e.name : dir + "/" + e.name;
      auto st = e.is_tree() ? Tree(e.id, path, time) : Blob(e.id, path, time);
      if (!st.ok()) return st;
    }
    return xet::Ok{};
  }

  xet::Status Blob(const ObjectId& oid, const std::string& path, int64_t time) {
    if (!Visit(oid)) return xet::Ok{};
    auto head = index_.GetRepoObjectHead(repo_, KeyOf(oid), kMaxPointerBytes);
    if (!head.ok()) return head.error();
    if (!*head) ++reach_.missing;
    if (!*head || (*head)->kind != static_cast<uint8_t>(ObjectKind::kBlob)) return xet::Ok{};
    Reached(oid);
    if ((*head)->size > kMaxPointerBytes) return xet::Ok{};
    auto pointer = ParseLfsPointer((*head)->data);
    if (!pointer) return xet::Ok{};
    if (options_.on_pointer) options_.on_pointer({*pointer, path, time});
    auto key = LinkKey(pointer->sha256);
    if (!links_.insert(key).second) return xet::Ok{};
    auto link = index_.GetRepoObjects(repo_, {key});
    if (!link.ok()) return link.error();
    const auto& obj = (*link)[0];
    if (!obj || obj->kind != index::kFileLinkKind || obj->data.size() != 32) return xet::Ok{};
    reach_.keys.push_back(std::move(key));
    reach_.files.push_back(xet::Hash::FromBytes(obj->data.data()));
    return xet::Ok{};
  }

  index::RepoIndex& index_;
  const int64_t repo_;
  const WalkOptions& options_;
  std::set<std::array<uint8_t, 20>> seen_;  // commits, trees and blobs (git ids)
  std::set<std::vector<uint8_t>> links_;
  Reach reach_;
};

}  // namespace

std::vector<uint8_t> LinkKey(std::string_view sha256_hex) {
  std::vector<uint8_t> key(32);
  for (size_t i = 0; i < 32; ++i) {
    const auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
    key[i] = static_cast<uint8_t>(nibble(sha256_hex[2 * i]) << 4 | nibble(sha256_hex[2 * i + 1]));
  }
  return key;
}

xet::Result<Reach> ReachFrom(index::RepoIndex& index, int64_t repo, const std::vector<ObjectId>& heads,
                             const WalkOptions& options) {
  Walker walker(index, repo, options);
  if (auto st = walker.Walk(heads); !st.ok()) return st.error();
  return walker.Take();
}

xet::Result<Reach> ReachFromRefs(index::RepoIndex& index, int64_t repo, const WalkOptions& options) {
  auto refs = index.ListRefs(repo);
  if (!refs.ok()) return refs.error();
  std::vector<ObjectId> heads;
  for (const auto& r : *refs) {
    if (auto oid = ObjectId::FromBytes(r.target)) heads.push_back(*oid);
  }
  return ReachFrom(index, repo, heads, options);
}

}  // namespace cairn::hub

#include "hub/hub_check.h"

#include <deque>
#include <set>

#include "common/media_type.h"
#include "hub/git_object.h"
#include "hub/stored_object.h"
#include "hub/tree_paths.h"

namespace cairn::hub {
namespace {

std::string RepoName(const index::RepoRecord& r) {
  return std::string(Plural(r.type)) + "/" + r.ns + "/" + r.name;
}

class Checker {
 public:
  Checker(index::RepoIndex& index, HubCheckReport& report) : index_(index), report_(report) {}

  Status Repo(const index::RepoRecord& repo) {
    ++report_.repos;
    name_ = RepoName(repo);
    if (repo.type == RepoType::kBucket) return Bucket(repo);
    auto refs = index_.ListRefs(repo.id);
    if (!refs.ok()) return FromIndex(refs.error());
    std::deque<ObjectId> commits;
    for (const auto& ref : *refs) {
      ++report_.refs;
      const bool tag = ref.kind == index::RefKind::kTag;
      if (!ValidBranchOrTagName(ref.name, tag)) {
        Find("ref", std::string(tag ? "tag " : "branch ") + Printable(ref.name) + ": git refuses this name");
      }
      if (auto oid = ObjectId::FromBytes(ref.target)) commits.push_back(*oid);
    }
    std::set<std::vector<uint8_t>> seen;  // object keys (ObjectId's <=> trips clang-tidy 14's use-nullptr)
    while (!commits.empty()) {
      const ObjectId oid = commits.front();
      commits.pop_front();
      if (!seen.insert(KeyOf(oid)).second) continue;
      auto head = index_.GetRepoObjectHead(repo.id, KeyOf(oid), kMaxCommitObjectBytes);
      if (!head.ok()) return FromIndex(head.error());
      if (!*head || (*head)->kind != static_cast<uint8_t>(ObjectKind::kCommit)) continue;  // damage: not ours
      ++report_.commits;
      auto c = ParseCommit((*head)->data);
      if (!c.ok()) continue;
      const std::string title = c->title();
      const size_t description =
          c->message.size() > title.size() + 2 ? c->message.size() - title.size() - 2 : 0;
      if ((*head)->size > kMaxCommitObjectBytes || title.size() > kMaxSummaryBytes ||
          description > kMaxDescriptionBytes) {
        Find("commit", oid.hex() + ": " + std::to_string((*head)->size) +
                           " bytes, past the bounds (summary " + std::to_string(kMaxSummaryBytes) +
                           ", description " + std::to_string(kMaxDescriptionBytes) + "); served cut");
      }
      for (const ObjectId& p : c->parents) commits.push_back(p);
      if (auto st = Tree(repo, c->tree, ""); !st.ok()) return st;
    }
    return Ok{};
  }

 private:
  // The trees under `root`, depth first without recursion (a tree stored before paths were bounded may be
  // tens of thousands deep). Past kMaxPathBytes a path is reported and not followed further.
  Status Tree(const index::RepoRecord& repo, const ObjectId& root, const std::string& root_dir) {
    std::vector<std::pair<ObjectId, std::string>> pending{{root, root_dir}};
    while (!pending.empty()) {
      auto [oid, dir] = std::move(pending.back());
      pending.pop_back();
      if (!trees_.insert(KeyOf(oid)).second) continue;
      auto got = index_.GetRepoObjects(repo.id, {KeyOf(oid)});
      if (!got.ok()) return FromIndex(got.error());
      if (!(*got)[0] || (*got)[0]->kind != static_cast<uint8_t>(ObjectKind::kTree)) continue;
      ++report_.trees;
      auto entries = ParseTree((*got)[0]->data);
      if (!entries.ok()) {
        Find("tree", oid.hex() + " at " + Printable(dir.substr(0, 200)) + ": " + entries.error().message +
                         "; its folder cannot be served");
        continue;
      }
      std::vector<std::pair<ObjectId, std::string>> subtrees;
      for (const auto& e : *entries) {
        std::string path = dir.empty() ? e.name : dir + "/" + e.name;
        if (!ValidSegment(e.name)) {
          Find("path", Printable(path) + ": a name git or a file system would misread; not served");
          continue;
        }
        if (path.size() > kMaxPathBytes) {
          Find("path", Printable(path.substr(0, 200)) + "…: longer than " + std::to_string(kMaxPathBytes) +
                           " bytes, past what a push may hold");
          continue;
        }
        if (e.is_tree()) subtrees.emplace_back(e.id, std::move(path));
      }
      for (auto it = subtrees.rbegin(); it != subtrees.rend(); ++it) pending.push_back(std::move(*it));
    }
    return Ok{};
  }

  Status Bucket(const index::RepoRecord& bucket) {
    std::optional<std::string> from;
    for (;;) {
      auto page = index_.ListBucket(bucket.id, "", from, index::Index::kMaxListedFiles);
      if (!page.ok()) return FromIndex(page.error());
      for (const auto& f : *page) {
        if (from && f.path == *from) continue;  // the last of the page before (`from` is inclusive)
        ++report_.bucket_files;
        if (!ValidPath(f.path)) Find("bucket-path", Printable(f.path) + ": refused by today's path rules");
        if (f.content_type && !ValidMediaType(*f.content_type)) {
          Find("content-type", Printable(f.path) + ": " + Printable(f.content_type->substr(0, 300)) +
                                   " is not a media type; served as application/octet-stream");
        }
      }
      if (page->size() < index::Index::kMaxListedFiles) break;
      from = page->back().path;
    }
    return Ok{};
  }

  void Find(std::string what, std::string detail) {
    report_.findings.push_back({std::move(what), name_, std::move(detail)});
  }

  index::RepoIndex& index_;
  HubCheckReport& report_;
  std::string name_;
  std::set<std::vector<uint8_t>> trees_;
};

}  // namespace

Result<HubCheckReport> CheckHub(index::RepoIndex& index,
                                const std::function<void(const std::string&)>& progress) {
  HubCheckReport report;
  for (RepoType type : {RepoType::kModel, RepoType::kDataset, RepoType::kSpace, RepoType::kBucket}) {
    std::optional<std::pair<std::string, std::string>> after;
    for (;;) {
      auto page = index.ListRepos(type, std::nullopt, after, index::Index::kMaxListedRepos);
      if (!page.ok()) return page.error();
      for (const auto& repo : *page) {
        Checker checker(index, report);
        if (auto st = checker.Repo(repo); !st.ok()) return IoError("hub: " + st.error().message);
      }
      if (page->size() < index::Index::kMaxListedRepos) break;
      after = std::pair{page->back().ns, page->back().name};
    }
    if (progress) progress("hub: " + std::to_string(report.repos) + " repositories checked");
  }
  return report;
}

}  // namespace cairn::hub

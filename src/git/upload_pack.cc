#include "git/upload_pack.h"

#include <algorithm>
#include <charconv>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "git/pack.h"
#include "git/pkt_line.h"

namespace cairn::git {

namespace {

using hub::ObjectKind;

constexpr std::string_view kAgent = "agent=cairn/1";
constexpr size_t kBatch = index::RepoIndex::kMaxObjectsPerRead;
// Blobs are read this many at a time when the pack is written: a blob may be as large as the inline limit.
constexpr size_t kBlobBatch = 64;

using IdHash = hub::ObjectIdHash;
using IdSet = std::unordered_set<ObjectId, IdHash>;

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

std::optional<ObjectId> IdAfter(std::string_view line, std::string_view prefix) {
  if (!StartsWith(line, prefix)) return std::nullopt;
  return ObjectId::FromHex(line.substr(prefix.size()));
}

// The objects of `ids` that the repository holds, by id, read in batches; those it lacks are absent.
Result<std::unordered_map<ObjectId, index::RepoObject, IdHash>> ReadObjects(index::RepoIndex& index,
                                                                            int64_t repo,
                                                                            const std::vector<ObjectId>& ids,
                                                                            size_t batch = kBatch) {
  std::unordered_map<ObjectId, index::RepoObject, IdHash> out;
  for (size_t i = 0; i < ids.size(); i += batch) {
    std::vector<std::vector<uint8_t>> keys;
    for (size_t j = i; j < std::min(ids.size(), i + batch); ++j) keys.push_back(ids[j].key());
    auto got = index.GetRepoObjects(repo, keys);
    if (!got.ok()) return got.error();
    for (size_t j = 0; j < keys.size(); ++j) {
      if ((*got)[j]) out.emplace(ids[i + j], std::move(*(*got)[j]));
    }
  }
  return out;
}

// The kind and size of each of `ids` the repository holds.
struct Head {
  uint8_t kind = 0;
  uint64_t size = 0;
};
Result<std::unordered_map<ObjectId, Head, IdHash>> ReadHeads(index::RepoIndex& index, int64_t repo,
                                                             const std::vector<ObjectId>& ids) {
  std::unordered_map<ObjectId, Head, IdHash> out;
  for (size_t i = 0; i < ids.size(); i += kBatch) {
    std::vector<std::vector<uint8_t>> keys;
    for (size_t j = i; j < std::min(ids.size(), i + kBatch); ++j) keys.push_back(ids[j].key());
    auto got = index.GetRepoObjectHeads(repo, keys, 0);
    if (!got.ok()) return got.error();
    for (size_t j = 0; j < keys.size(); ++j) {
      if ((*got)[j]) out.emplace(ids[i + j], Head{(*got)[j]->kind, (*got)[j]->size});
    }
  }
  return out;
}

// A commit as the walk needs it: its body (sent as is), tree, parents and time.
struct WalkedCommit {
  std::vector<uint8_t> body;
  ObjectId tree;
  std::vector<ObjectId> parents;
  int64_t time = 0;
};

// The repository's commits read as walks meet them, one batch per step of a walk.
class Commits {
 public:
  Commits(index::RepoIndex& index, int64_t repo) : index_(index), repo_(repo) {}

  // Reads those of `ids` not read yet; each then is Get's, or missing (not a commit of the repository).
  Status Load(const std::vector<ObjectId>& ids) {
    std::vector<ObjectId> wanted;
    for (const auto& id : ids) {
      if (!known_.contains(id) && !missing_.contains(id)) wanted.push_back(id);
    }
    auto got = ReadObjects(index_, repo_, wanted);
    if (!got.ok()) return got.error();
    for (const auto& id : wanted) {
      auto it = got->find(id);
      if (it == got->end() || it->second.kind != static_cast<uint8_t>(ObjectKind::kCommit)) {
        missing_.insert(id);
        continue;
      }
      auto parsed = hub::ParseCommit(it->second.data);
      if (!parsed.ok()) return Damaged("commit " + id.hex() + " does not parse: " + parsed.error().message);
      known_.emplace(id, WalkedCommit{std::move(it->second.data), parsed->tree, parsed->parents,
                                      parsed->committer.time});
    }
    return Ok{};
  }
  const WalkedCommit* Get(const ObjectId& id) const {
    auto it = known_.find(id);
    return it == known_.end() ? nullptr : &it->second;
  }

  // Every commit reachable from `from` (inclusive), not past the commits in `stop_at` (kept, parents not
  // followed): a breadth-first walk reading one batch per generation.
  Result<IdSet> Ancestors(const std::vector<ObjectId>& from, const IdSet& stop_at) {
    IdSet seen;
    std::vector<ObjectId> level;
    for (const auto& id : from) {
      if (seen.insert(id).second) level.push_back(id);
    }
    while (!level.empty()) {
      if (auto st = Load(level); !st.ok()) return st.error();
      std::vector<ObjectId> next;
      for (const auto& id : level) {
        const WalkedCommit* c = Get(id);
        if (c == nullptr || stop_at.contains(id)) continue;
        for (const auto& p : c->parents) {
          if (seen.insert(p).second) next.push_back(p);
        }
      }
      level = std::move(next);
    }
    return seen;
  }

 private:
  index::RepoIndex& index_;
  int64_t repo_;
  std::unordered_map<ObjectId, WalkedCommit, IdHash> known_;
  IdSet missing_;
};

enum class Filter : uint8_t { kNone, kBlobNone, kBlobLimit };

}  // namespace

struct UploadPack::Fetch {
  std::vector<ObjectId> wants;
  std::vector<ObjectId> haves;
  std::vector<ObjectId> client_shallows;
  std::vector<std::string> deepen_not;  // ref names
  uint32_t depth = 0;
  int64_t since = 0;
  bool done = false;
  bool side_band = true;
  Filter filter = Filter::kNone;
  uint64_t blob_limit = 0;
  bool deepens() const { return depth != 0 || since != 0 || !deepen_not.empty(); }

  // One argument line shared by v0 and v2; false when it is none of them.
  Result<bool> Parse(std::string_view line, const UploadPackLimits& limits) {
    if (auto id = IdAfter(line, "want ")) {
      if (wants.size() == limits.max_wants)
        return LimitExceeded("more than " + std::to_string(limits.max_wants) + " wants");
      wants.push_back(*id);
    } else if (auto have = IdAfter(line, "have ")) {
      if (haves.size() == limits.max_haves)
        return LimitExceeded("more than " + std::to_string(limits.max_haves) + " haves");
      haves.push_back(*have);
    } else if (auto shallow = IdAfter(line, "shallow ")) {
      if (client_shallows.size() == limits.max_haves) return LimitExceeded("too many shallow commits");
      client_shallows.push_back(*shallow);
    } else if (StartsWith(line, "deepen ")) {
      const std::string_view n = line.substr(7);
      if (std::from_chars(n.data(), n.data() + n.size(), depth).ec != std::errc() || depth == 0) {
        return Malformed("bad deepen: " + std::string(n.substr(0, 40)));
      }
    } else if (StartsWith(line, "deepen-since ")) {
      const std::string_view n = line.substr(13);
      if (std::from_chars(n.data(), n.data() + n.size(), since).ec != std::errc()) {
        return Malformed("bad deepen-since");
      }
    } else if (StartsWith(line, "deepen-not ")) {
      if (deepen_not.size() == 1000) return LimitExceeded("too many deepen-not");
      deepen_not.emplace_back(line.substr(11));
    } else if (line == "deepen-relative") {
      return Malformed("deepen-relative (git fetch --deepen) is not supported; use --depth");
    } else if (StartsWith(line, "filter ")) {
      const std::string_view spec = line.substr(7);
      if (spec == "blob:none") {
        filter = Filter::kBlobNone;
      } else if (StartsWith(spec, "blob:limit=")) {
        std::string_view n = spec.substr(11);
        uint64_t unit = 1;
        if (!n.empty() && (n.back() == 'k' || n.back() == 'm' || n.back() == 'g')) {
          unit = n.back() == 'k' ? 1ULL << 10 : n.back() == 'm' ? 1ULL << 20 : 1ULL << 30;
          n.remove_suffix(1);
        }
        if (std::from_chars(n.data(), n.data() + n.size(), blob_limit).ec != std::errc() ||
            blob_limit > UINT64_MAX / unit) {
          return Malformed("bad filter: " + std::string(spec.substr(0, 40)));
        }
        blob_limit *= unit;
        filter = Filter::kBlobLimit;
      } else {
        return Malformed("filter " + std::string(spec.substr(0, 40)) +
                         " is not supported (blob:none and blob:limit are)");
      }
    } else if (line == "done") {
      done = true;
    } else {
      return false;
    }
    return true;
  }
};

struct UploadPack::Plan {
  std::vector<ObjectId> common;  // haves the repository holds
  std::vector<ObjectId> shallow;
  std::vector<ObjectId> unshallow;
  std::vector<std::pair<ObjectId, std::vector<uint8_t>>> commits;
  std::vector<std::pair<ObjectId, std::vector<uint8_t>>> trees;
  std::vector<ObjectId> blobs;
  size_t objects() const { return commits.size() + trees.size() + blobs.size(); }
};

UploadPack::UploadPack(index::RepoIndex& index, int64_t repo, std::vector<hub::RefInfo> refs,
                       std::string head, UploadPackLimits limits)
    : index_(index), repo_(repo), refs_(std::move(refs)), head_(std::move(head)), limits_(limits) {}

Result<ObjectId> UploadPack::HeadTarget() const {
  for (const auto& r : refs_) {
    if (r.kind == index::RefKind::kBranch && r.name == head_) return r.target;
  }
  return NotFound("no default branch");
}

std::string UploadPack::AdvertiseV2() const {
  std::string out;
  AppendPkt(out, "version 2\n");
  AppendPkt(out, std::string(kAgent) + "\n");
  AppendPkt(out, "ls-refs=unborn\n");
  AppendPkt(out, "fetch=shallow filter\n");
  AppendPkt(out, "server-option\n");
  AppendPkt(out, "object-format=sha1\n");
  AppendFlush(out);
  return out;
}

std::string UploadPack::AdvertiseV0() const {
  std::string out;
  AppendPkt(out, "# service=git-upload-pack\n");
  AppendFlush(out);
  std::string caps =
      "multi_ack_detailed side-band-64k ofs-delta shallow deepen-since deepen-not no-progress include-tag "
      "allow-tip-sha1-in-want allow-reachable-sha1-in-want filter object-format=sha1 " +
      std::string(kAgent);
  std::vector<std::pair<std::string, ObjectId>> lines;
  if (auto head = HeadTarget(); head.ok()) {
    caps = "symref=HEAD:refs/heads/" + head_ + " " + caps;
    lines.emplace_back("HEAD", *head);
  }
  for (const auto& r : refs_) lines.emplace_back(hub::FullRefName(r), r.target);
  if (lines.empty()) lines.emplace_back("capabilities^{}", ObjectId{});
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string line = lines[i].second.hex() + " " + lines[i].first;
    if (i == 0) line += std::string(1, '\0') + caps;
    AppendPkt(out, line + "\n");
  }
  AppendFlush(out);
  return out;
}

Status UploadPack::ServeV2(std::string_view request, const Sink& sink) {
  PktReader reader(request);
  auto first = reader.Next();
  if (!first.ok()) return first.error();
  if (!*first || (*first)->kind != PktKind::kData || !StartsWith(Line((*first)->payload), "command=")) {
    return Malformed("protocol v2: the request names no command");
  }
  const std::string command(Line((*first)->payload).substr(8));
  // Capabilities until a delimiter (then arguments until the flush) or the flush.
  for (;;) {
    auto pkt = reader.Next();
    if (!pkt.ok()) return pkt.error();
    if (!*pkt) return Malformed("protocol v2: the request ends before its flush");
    if ((*pkt)->kind == PktKind::kDelim) break;
    if ((*pkt)->kind == PktKind::kFlush) break;
    const std::string_view cap = Line((*pkt)->payload);
    if (StartsWith(cap, "object-format=") && cap != "object-format=sha1") {
      return Malformed("only SHA-1 repositories are served");
    }
  }
  std::string args;
  for (;;) {
    auto pkt = reader.Next();
    if (!pkt.ok()) return pkt.error();
    if (!*pkt || (*pkt)->kind == PktKind::kFlush) break;
    if ((*pkt)->kind != PktKind::kData) return Malformed("protocol v2: a delimiter among the arguments");
    args.append(Line((*pkt)->payload));
    args.push_back('\n');
  }
  if (command == "ls-refs") return LsRefs(args, sink);
  if (command == "fetch") return FetchV2(args, sink);
  return Malformed("protocol v2: unknown command " + command.substr(0, 40));
}

Status UploadPack::LsRefs(std::string_view args, const Sink& sink) {
  bool symrefs = false;
  bool unborn = false;
  std::vector<std::string_view> prefixes;
  while (!args.empty()) {
    const size_t nl = args.find('\n');
    const std::string_view line = args.substr(0, nl);
    args.remove_prefix(nl + 1);
    if (line == "symrefs") {
      symrefs = true;
    } else if (line == "unborn") {
      unborn = true;
    } else if (StartsWith(line, "ref-prefix ")) {
      if (prefixes.size() == 1000) return LimitExceeded("too many ref-prefix arguments");
      prefixes.push_back(line.substr(11));
    } else if (line != "peel") {
      return Malformed("ls-refs: unknown argument " + std::string(line.substr(0, 40)));
    }
  }
  const auto wanted = [&](std::string_view name) {
    return prefixes.empty() || std::any_of(prefixes.begin(), prefixes.end(),
                                           [&](std::string_view p) { return StartsWith(name, p); });
  };
  std::string out;
  const std::string head_ref = "refs/heads/" + head_;
  if (wanted("HEAD")) {
    auto head = HeadTarget();
    const std::string target = symrefs ? " symref-target:" + head_ref : "";
    if (head.ok()) {
      AppendPkt(out, head->hex() + " HEAD" + target + "\n");
    } else if (unborn) {
      AppendPkt(out, "unborn HEAD" + target + "\n");
    }
  }
  for (const auto& r : refs_) {
    const std::string name = hub::FullRefName(r);
    if (wanted(name)) AppendPkt(out, r.target.hex() + " " + name + "\n");
  }
  AppendFlush(out);
  if (!sink(std::move(out))) return Unavailable("the client went away");
  return Ok{};
}

Status UploadPack::FetchV2(std::string_view args, const Sink& sink) {
  Fetch fetch;
  while (!args.empty()) {
    const size_t nl = args.find('\n');
    const std::string_view line = args.substr(0, nl);
    args.remove_prefix(nl + 1);
    auto known = fetch.Parse(line, limits_);
    if (!known.ok()) return known.error();
    // Accepted and needing nothing from a server that sends whole objects and no progress.
    static constexpr std::string_view kIgnored[] = {"thin-pack", "no-progress",  "include-tag",
                                                    "ofs-delta", "sideband-all", "wait-for-done"};
    if (!*known && std::find(std::begin(kIgnored), std::end(kIgnored), line) == std::end(kIgnored)) {
      return Malformed("fetch: unknown argument " + std::string(line.substr(0, 40)));
    }
  }
  if (fetch.wants.empty()) return Malformed("fetch: no want");
  auto plan = MakePlan(fetch);
  if (!plan.ok()) return plan.error();
  std::string out;
  if (!fetch.done) {
    AppendPkt(out, "acknowledgments\n");
    if (plan->common.empty()) AppendPkt(out, "NAK\n");
    for (const auto& id : plan->common) AppendPkt(out, "ACK " + id.hex() + "\n");
    // Ready once something is common (the pack can be cut there) or when the client has nothing to offer;
    // otherwise the client sends more haves.
    if (!plan->common.empty() || fetch.haves.empty()) {
      AppendPkt(out, "ready\n");
      AppendDelim(out);
    } else {
      AppendFlush(out);
      if (!sink(std::move(out))) return Unavailable("the client went away");
      return Ok{};
    }
  }
  if (fetch.deepens() || !fetch.client_shallows.empty()) {
    AppendPkt(out, "shallow-info\n");
    for (const auto& id : plan->shallow) AppendPkt(out, "shallow " + id.hex() + "\n");
    for (const auto& id : plan->unshallow) AppendPkt(out, "unshallow " + id.hex() + "\n");
    AppendDelim(out);
  }
  AppendPkt(out, "packfile\n");
  if (!sink(std::move(out))) return Unavailable("the client went away");
  if (auto st = SendPack(*plan, true, sink); !st.ok()) return st;
  std::string end;
  AppendFlush(end);
  if (!sink(std::move(end))) return Unavailable("the client went away");
  return Ok{};
}

Status UploadPack::ServeV0(std::string_view request, const Sink& sink) {
  Fetch fetch;
  fetch.side_band = false;
  bool multi_ack_detailed = false;
  PktReader reader(request);
  bool first = true;
  for (;;) {
    auto pkt = reader.Next();
    if (!pkt.ok()) return pkt.error();
    if (!*pkt) break;
    if ((*pkt)->kind != PktKind::kData) continue;  // the flush after the wants, the one after each have round
    std::string_view line = Line((*pkt)->payload);
    if (first && StartsWith(line, "want ")) {
      // The first want carries the client's capabilities after the id.
      first = false;
      if (line.size() > 45 && line[45] == ' ') {
        std::string_view caps = line.substr(46);
        line = line.substr(0, 45);
        while (!caps.empty()) {
          const size_t sp = caps.find(' ');
          const std::string_view cap = caps.substr(0, sp);
          if (cap == "side-band-64k" || cap == "side-band") fetch.side_band = true;
          if (cap == "multi_ack_detailed") multi_ack_detailed = true;
          if (sp == std::string_view::npos) break;
          caps.remove_prefix(sp + 1);
        }
      }
    }
    auto known = fetch.Parse(line, limits_);
    if (!known.ok()) return known.error();
    if (!*known) return Malformed("upload-pack: unexpected line " + std::string(line.substr(0, 40)));
  }
  if (fetch.wants.empty()) return Malformed("upload-pack: no want");
  auto plan = MakePlan(fetch);
  if (!plan.ok()) return plan.error();
  std::string out;
  if (fetch.deepens()) {
    for (const auto& id : plan->shallow) AppendPkt(out, "shallow " + id.hex() + "\n");
    for (const auto& id : plan->unshallow) AppendPkt(out, "unshallow " + id.hex() + "\n");
    AppendFlush(out);
  }
  // A stateless client's first request for a shallow fetch asks for the shallow list alone.
  if (fetch.haves.empty() && !fetch.done) {
    if (!sink(std::move(out))) return Unavailable("the client went away");
    return Ok{};
  }
  if (multi_ack_detailed) {
    // Each common have acknowledged; ready once one is (the pack can be cut there); NAK ends a round. After
    // "done": the last common one, or NAK.
    for (const auto& id : plan->common) AppendPkt(out, "ACK " + id.hex() + " common\n");
    if (!fetch.done) {
      if (!plan->common.empty()) AppendPkt(out, "ACK " + plan->common.back().hex() + " ready\n");
      AppendPkt(out, "NAK\n");
    } else {
      AppendPkt(out, plan->common.empty() ? std::string("NAK\n") : "ACK " + plan->common.back().hex() + "\n");
    }
  } else {
    // Without multi_ack: one ACK of a common commit, or NAK.
    AppendPkt(out, plan->common.empty() ? std::string("NAK\n") : "ACK " + plan->common.front().hex() + "\n");
  }
  if (!sink(std::move(out))) return Unavailable("the client went away");
  if (!fetch.done) return Ok{};
  if (auto st = SendPack(*plan, fetch.side_band, sink); !st.ok()) return st;
  if (!fetch.side_band) return Ok{};
  std::string end;  // side-band's end
  AppendFlush(end);
  if (!sink(std::move(end))) return Unavailable("the client went away");
  return Ok{};
}

// One fetch's plan, made in steps: the wants sorted by kind, what the client has (its haves and their
// ancestors, the refs it excludes), the commits to send (breadth first from the wants, cut where asked), then
// the trees and blobs those commits hold that the client's frontier does not.
class UploadPack::Planner {
 public:
  Planner(const UploadPack& up, const Fetch& fetch) : up_(up), fetch_(fetch), commits_(up.index_, up.repo_) {}

  Result<Plan> Run() && {
    if (auto st = SortWants(); !st.ok()) return st.error();
    if (auto st = LoadClientSide(); !st.ok()) return st.error();
    if (auto st = ExcludeDeepenNot(); !st.ok()) return st.error();
    if (auto st = WalkCommits(); !st.ok()) return st.error();
    if (auto st = WalkObjects(); !st.ok()) return st.error();
    return std::move(plan_);
  }

 private:
  // Every want must be an object of the repository.
  Status SortWants() {
    auto wanted = ReadHeads(up_.index_, up_.repo_, fetch_.wants);
    if (!wanted.ok()) return wanted.error();
    IdSet sent_blobs;
    for (const auto& id : fetch_.wants) {
      auto it = wanted->find(id);
      if (it == wanted->end()) return NotFound("not our ref " + id.hex());
      if (it->second.kind == static_cast<uint8_t>(ObjectKind::kCommit)) {
        want_commits_.push_back(id);
      } else if (it->second.kind == static_cast<uint8_t>(ObjectKind::kTree)) {
        want_trees_.push_back(id);
      } else if (it->second.kind == static_cast<uint8_t>(ObjectKind::kBlob)) {
        if (sent_blobs.insert(id).second) plan_.blobs.push_back(id);
      } else {
        return NotFound("not our ref " + id.hex());
      }
    }
    return Ok{};
  }

  // What the client has: the haves that are commits here, and their ancestors, not past its shallow ones.
  Status LoadClientSide() {
    if (auto st = commits_.Load(fetch_.haves); !st.ok()) return st;
    IdSet common_seen;
    for (const auto& id : fetch_.haves) {
      if (commits_.Get(id) != nullptr && common_seen.insert(id).second) plan_.common.push_back(id);
    }
    client_shallow_ = IdSet(fetch_.client_shallows.begin(), fetch_.client_shallows.end());
    if (plan_.common.empty()) return Ok{};
    auto has = commits_.Ancestors(plan_.common, client_shallow_);
    if (!has.ok()) return has.error();
    client_has_ = std::move(*has);
    return Ok{};
  }

  // deepen-not: every commit the named refs reach.
  Status ExcludeDeepenNot() {
    if (fetch_.deepen_not.empty()) return Ok{};
    std::vector<ObjectId> from;
    for (const auto& name : fetch_.deepen_not) {
      const auto ref = std::find_if(up_.refs_.begin(), up_.refs_.end(), [&](const hub::RefInfo& r) {
        return name == r.name || name == hub::FullRefName(r);
      });
      if (ref == up_.refs_.end()) return NotFound("deepen-not: no ref " + name.substr(0, 100));
      from.push_back(ref->target);
    }
    auto not_reach = commits_.Ancestors(from, {});
    if (!not_reach.ok()) return not_reach.error();
    excluded_ = std::move(*not_reach);
    return Ok{};
  }

  // The commits to send: from the wants, breadth first, each generation one batch.
  Status WalkCommits() {
    std::vector<ObjectId> level;
    for (const auto& id : want_commits_) {
      if (depth_of_.emplace(id, 1).second) level.push_back(id);
    }
    while (!level.empty()) {
      if (auto st = commits_.Load(level); !st.ok()) return st;
      std::vector<ObjectId> next;
      for (const auto& id : level) {
        if (auto st = VisitCommit(id, next); !st.ok()) return st;
      }
      level = std::move(next);
    }
    return Ok{};
  }

  // One commit of the walk: sent unless the client has it; its parents queued in `next` unless cut.
  Status VisitCommit(const ObjectId& id, std::vector<ObjectId>& next) {
    const WalkedCommit* c = commits_.Get(id);
    if (c == nullptr) return Damaged("commit " + id.hex() + " is missing");
    const uint32_t depth = depth_of_[id];
    const bool has = client_has_.contains(id);
    if (has && !fetch_.deepens()) return Ok{};
    if (!has) {
      plan_.commits.emplace_back(id, c->body);
      if (plan_.objects() > up_.limits_.max_objects)
        return LimitExceeded("the pack would hold too many objects");
    }
    std::vector<ObjectId> parents;
    auto cut = CutAt(id, *c, depth, parents);
    if (!cut.ok()) return cut.error();
    if (*cut) {
      if (!c->parents.empty() && !client_shallow_.contains(id)) plan_.shallow.push_back(id);
      return Ok{};
    }
    if (client_shallow_.contains(id) && !c->parents.empty()) plan_.unshallow.push_back(id);
    for (const auto& p : parents) {
      if (client_has_.contains(p) && !fetch_.deepens()) {
        frontier_.insert(p);  // the client has it: the pack is cut there
        continue;
      }
      if (depth_of_.emplace(p, depth + 1).second) next.push_back(p);
    }
    return Ok{};
  }

  // Whether the walk stops at commit `id` instead of going on to its parents (those not excluded, in
  // `parents`): not past the depth asked, the time or the refs excluded, nor (without a deepening) past a
  // commit whose parents the client lacks by choice.
  Result<bool> CutAt(const ObjectId& id, const WalkedCommit& c, uint32_t depth,
                     std::vector<ObjectId>& parents) {
    bool cut = fetch_.depth != 0 && depth >= fetch_.depth;
    if (!fetch_.deepens() && client_shallow_.contains(id)) cut = true;
    for (const auto& p : c.parents) {
      if (excluded_.contains(p)) {
        cut = true;
        continue;
      }
      parents.push_back(p);
    }
    if (fetch_.since != 0 && !cut) {
      if (auto st = commits_.Load(parents); !st.ok()) return st.error();
      for (const auto& p : parents) {
        const WalkedCommit* pc = commits_.Get(p);
        if (pc != nullptr && pc->time < fetch_.since) cut = true;
      }
    }
    return cut;
  }

  // Trees and blobs: what the sent commits' trees hold that the frontier's trees do not.
  Status WalkObjects() {
    std::vector<ObjectId> have_roots;
    for (const auto& id : frontier_) {
      if (const WalkedCommit* c = commits_.Get(id)) have_roots.push_back(c->tree);
    }
    if (auto st = WalkTrees(have_roots, false); !st.ok()) return st;
    for (const auto& id : plan_.blobs) known_.insert(id);  // wanted by id: sent once
    std::vector<ObjectId> roots = want_trees_;
    for (const auto& [id, body] : plan_.commits) roots.push_back(commits_.Get(id)->tree);
    return WalkTrees(roots, true);
  }

  // The trees under `roots` not known yet: sent (`send`), or only made known (the client's side).
  Status WalkTrees(const std::vector<ObjectId>& roots, bool send) {
    std::vector<ObjectId> trees;
    for (const auto& id : roots) {
      if (known_.insert(id).second) trees.push_back(id);
    }
    std::vector<ObjectId> limited;  // blobs whose size decides (blob:limit)
    while (!trees.empty()) {
      auto got = ReadObjects(up_.index_, up_.repo_, trees);
      if (!got.ok()) return got.error();
      std::vector<ObjectId> next;
      for (const auto& id : trees) {
        if (auto st = TakeTree(id, *got, send, next, limited); !st.ok()) return st;
      }
      trees = std::move(next);
    }
    return SendLimitedBlobs(limited);
  }

  // One tree read: its subtrees queued in `next`, its blobs sent (or, under blob:limit, weighed later).
  Status TakeTree(const ObjectId& id, std::unordered_map<ObjectId, index::RepoObject, IdHash>& got, bool send,
                  std::vector<ObjectId>& next, std::vector<ObjectId>& limited) {
    auto it = got.find(id);
    if (it == got.end() || it->second.kind != static_cast<uint8_t>(ObjectKind::kTree)) {
      if (!send) return Ok{};  // the client's side: what is not here needs no cutting
      return Damaged("tree " + id.hex() + " is missing");
    }
    auto entries = hub::ParseTree(it->second.data);
    if (!entries.ok()) return Damaged("tree " + id.hex() + " does not parse");
    for (const auto& e : *entries) {
      if (!known_.insert(e.id).second) continue;
      if (e.is_tree()) {
        next.push_back(e.id);
      } else if (send && fetch_.filter == Filter::kNone) {
        plan_.blobs.push_back(e.id);
      } else if (send && fetch_.filter == Filter::kBlobLimit) {
        limited.push_back(e.id);
      }
    }
    if (send) plan_.trees.emplace_back(id, std::move(it->second.data));
    if (plan_.objects() > up_.limits_.max_objects)
      return LimitExceeded("the pack would hold too many objects");
    return Ok{};
  }

  // blob:limit: the blobs no larger than the limit.
  Status SendLimitedBlobs(const std::vector<ObjectId>& limited) {
    if (limited.empty()) return Ok{};
    auto heads = ReadHeads(up_.index_, up_.repo_, limited);
    if (!heads.ok()) return heads.error();
    for (const auto& id : limited) {
      auto it = heads->find(id);
      if (it == heads->end()) return Damaged("blob " + id.hex() + " is missing");
      if (it->second.size <= fetch_.blob_limit) plan_.blobs.push_back(id);
    }
    return Ok{};
  }

  const UploadPack& up_;
  const Fetch& fetch_;
  Plan plan_;
  Commits commits_;
  std::vector<ObjectId> want_commits_, want_trees_;
  IdSet client_shallow_;
  IdSet client_has_;
  IdSet excluded_;
  std::unordered_map<ObjectId, uint32_t, IdHash> depth_of_;
  IdSet frontier_;  // commits the client has that sent commits name as parents: the pack is cut there
  IdSet known_;     // trees and blobs the client has (the frontier's) or the pack holds already
};

Result<UploadPack::Plan> UploadPack::MakePlan(const Fetch& fetch) {
  return Planner(*this, fetch).Run();
}

Status UploadPack::SendPack(const Plan& plan, bool side_band, const Sink& sink) {
  const auto framed = [&](std::string&& bytes) {
    if (!side_band) return sink(std::move(bytes));
    std::string out;
    out.reserve(bytes.size() + bytes.size() / kMaxSideBandData * 5 + 5);
    AppendSideBand(out, 1, bytes);
    return sink(std::move(out));
  };
  // An error once the pack has begun goes in band 3, which git prints ("remote error: ...").
  const auto fail = [&](Error e) -> Status {
    if (side_band) {
      std::string out;
      AppendSideBand(out, 3, "cairn: " + e.message + "\n");
      sink(std::move(out));
    }
    return e;
  };
  PackWriter pack(static_cast<uint32_t>(plan.objects()), framed);
  for (const auto& [id, body] : plan.commits) {
    if (auto st = pack.Add(ObjectKind::kCommit, body); !st.ok()) return fail(st.error());
  }
  for (const auto& [id, body] : plan.trees) {
    if (auto st = pack.Add(ObjectKind::kTree, body); !st.ok()) return fail(st.error());
  }
  for (size_t i = 0; i < plan.blobs.size(); i += kBlobBatch) {
    const std::vector<ObjectId> batch(
        plan.blobs.begin() + static_cast<std::ptrdiff_t>(i),
        plan.blobs.begin() + static_cast<std::ptrdiff_t>(std::min(plan.blobs.size(), i + kBlobBatch)));
    auto got = ReadObjects(index_, repo_, batch, kBlobBatch);
    if (!got.ok()) return fail(got.error());
    for (const auto& id : batch) {
      auto it = got->find(id);
      if (it == got->end() || it->second.kind != static_cast<uint8_t>(ObjectKind::kBlob)) {
        return fail(Damaged("blob " + id.hex() + " is missing"));
      }
      if (auto st = pack.Add(ObjectKind::kBlob, it->second.data); !st.ok()) return fail(st.error());
    }
  }
  if (auto st = pack.Finish(); !st.ok()) return fail(st.error());
  return Ok{};
}

}  // namespace cairn::git

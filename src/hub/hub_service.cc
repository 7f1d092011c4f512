#include "hub/hub_service.h"

#include <openssl/rand.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <map>
#include <unordered_map>

#include "common/hex.h"
#include "hub/file_link.h"
#include "hub/history.h"
#include "hub/stored_object.h"
#include "hub/tree_paths.h"

namespace cairn::hub {
namespace {

// What a new repository starts with, as on the Hub: large-file patterns for git users of the repository.
constexpr std::string_view kGitAttributes =
    "*.bin filter=lfs diff=lfs merge=lfs -text\n"
    "*.gguf filter=lfs diff=lfs merge=lfs -text\n"
    "*.h5 filter=lfs diff=lfs merge=lfs -text\n"
    "*.onnx filter=lfs diff=lfs merge=lfs -text\n"
    "*.parquet filter=lfs diff=lfs merge=lfs -text\n"
    "*.pt filter=lfs diff=lfs merge=lfs -text\n"
    "*.pth filter=lfs diff=lfs merge=lfs -text\n"
    "*.safetensors filter=lfs diff=lfs merge=lfs -text\n"
    "*.tar filter=lfs diff=lfs merge=lfs -text\n"
    "*.zip filter=lfs diff=lfs merge=lfs -text\n";

Error RepoNotFound(const RepoId& id) {
  return hub::RepoNotFound("Repository not found: " + id.str());
}

std::vector<std::string_view> Split(std::string_view path) {
  std::vector<std::string_view> out;
  while (!path.empty()) {
    const size_t slash = path.find('/');
    out.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return out;
}

std::string JoinPath(std::string_view dir, std::string_view name) {
  return dir.empty() ? std::string(name) : std::string(dir) + "/" + std::string(name);
}

}  // namespace

// ---- Names

Error FromIndex(const Error& e) {
  switch (e.code) {
    case ErrorCode::kHashMismatch:  // what the index holds disagrees with itself: the server's fault
    case ErrorCode::kInconsistent:
      return Damaged(e.message);
    case ErrorCode::kUnsatisfiable:
      return Malformed(e.message);
    default:
      return e;
  }
}

std::optional<RepoType> TypeFromPlural(std::string_view plural) {
  if (plural == "models") return RepoType::kModel;
  if (plural == "datasets") return RepoType::kDataset;
  if (plural == "spaces") return RepoType::kSpace;
  if (plural == "buckets") return RepoType::kBucket;
  return std::nullopt;
}

std::string RepoPath(const RepoId& id) {
  if (id.type == RepoType::kModel) return id.str();
  return std::string(Plural(id.type)) + "/" + id.str();
}

std::string_view Plural(RepoType type) {
  switch (type) {
    case RepoType::kModel:
      return "models";
    case RepoType::kDataset:
      return "datasets";
    case RepoType::kSpace:
      return "spaces";
    case RepoType::kBucket:
      return "buckets";
  }
  return "models";
}

bool ValidPath(std::string_view path) {
  if (path.empty() || path.size() > 4096) return false;
  if (path.front() == '/' || path.back() == '/') return false;
  for (std::string_view segment : Split(path)) {
    if (!ValidSegment(segment)) return false;
  }
  return true;
}

bool ValidText(std::string_view text, std::string_view allowed) {
  if (!ValidUtf8(text) || HasC1Control(text)) return false;
  return std::none_of(text.begin(), text.end(), [&](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return (c < 0x20 || c == 0x7f) && allowed.find(ch) == std::string_view::npos;
  });
}

std::string NamespaceOf(std::string_view scope) {
  std::vector<std::string_view> parts = Split(scope);
  if (parts.size() == 3 && TypeFromPlural(parts[0])) return std::string(parts[1]);  // "datasets/alice/data"
  return parts.empty() ? std::string() : std::string(parts[0]);
}

namespace {
constexpr std::string_view kMirrorScopePrefix = "mirror:";

std::string RandomScope(std::string_view prefix) {
  uint8_t bytes[16];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    // Without randomness, time and address still make a scope no earlier repository had.
    const auto t = static_cast<uint64_t>(std::time(nullptr));
    std::memcpy(bytes, &t, 8);
    const auto p = reinterpret_cast<uintptr_t>(&bytes);
    std::memcpy(bytes + 8, &p, 8);
  }
  return std::string(prefix) + HexEncode(bytes);
}
}  // namespace

std::string NewRepoScope() {
  return RandomScope("hub:");
}

std::string NewMirrorScope() {
  return RandomScope(kMirrorScopePrefix);
}

bool IsMirrored(const index::RepoRecord& record) {
  return record.scope.starts_with(kMirrorScopePrefix);
}

// ---- The service

HubService::HubService(index::Index& index, files::FileService& files, HubOptions options)
    : index_(index),
      audit_(index),
      files_(files),
      options_(std::move(options)),
      trees_(options_.cache_bytes / 2),
      objects_(options_.cache_bytes / 2) {}

int64_t HubService::Now() const {
  return options_.clock->UnixSeconds();
}

index::RepoRecord ProspectiveRecord(const RepoId& id) {
  return index::RepoRecord{.id = 0,
                           .type = id.type,
                           .ns = id.ns,
                           .name = id.name,
                           .is_private = false,
                           .created_at = 0,
                           .scope = {},
                           .read_scope = {}};
}

namespace {

// Whether a scope ("alice", "alice/model", "datasets/alice/data") covers the repository.
bool ScopeCovers(std::string_view scope, const index::RepoRecord& repo) {
  if (scope == repo.ns) return true;
  std::string exact = repo.ns + "/" + repo.name;
  if (repo.type != RepoType::kModel) exact = std::string(Plural(repo.type)) + "/" + exact;
  return scope == exact;
}

}  // namespace

std::string Caller::Who() const {
  return person() ? user : NamespaceOf(scope);
}

index::AuditActor Caller::Actor() const {
  return index::AuditActor{
      .actor = person() ? user : "scope:" + scope, .token_id = token_id, .client = client};
}

index::AuditEvent HubService::Event(const Caller& caller, const RepoId& id, std::string action,
                                    std::string detail) {
  return caller.Actor().Event(Now(), std::move(action), id.ns, RepoPath(id), std::move(detail));
}

Access AccessToNamespace(const Caller& caller, std::string_view ns) {
  if (caller.anonymous()) return Access::kNone;
  if (!caller.person()) {
    if (NamespaceOf(caller.scope) != ns) return Access::kNone;
    return caller.write ? Access::kAdmin : Access::kRead;
  }
  for (const ScopeAccess& s : caller.reach) {
    if (s.scope == ns) return s.access;
  }
  return Access::kNone;
}

Access AccessTo(const Caller& caller, const index::RepoRecord& repo) {
  if (caller.anonymous()) return Access::kNone;
  if (!caller.person()) {
    if (!ScopeCovers(caller.scope, repo)) return Access::kNone;
    return caller.write ? Access::kAdmin : Access::kRead;
  }
  Access most = Access::kNone;
  for (const ScopeAccess& s : caller.reach) {
    if (ScopeCovers(s.scope, repo)) most = std::max(most, s.access);
  }
  return most;
}

bool HubService::Inline(uint64_t size, std::span<const uint8_t> sample) const {
  if (size > static_cast<uint64_t>(options_.max_inline_bytes)) return false;
  return std::find(sample.begin(), sample.end(), uint8_t{0}) == sample.end();  // text, as far as it shows
}

Result<Repo> HubService::CreateRepo(const Caller& caller, const RepoId& id, bool is_private) {
  if (!ValidName(id.ns) || !ValidName(id.name)) {
    return Malformed("invalid repository name: " + id.str());
  }
  if (caller.anonymous()) return Unauthorized("creating a repository needs a token");
  index::NewRepo repo{.type = id.type,
                      .ns = id.ns,
                      .name = id.name,
                      .is_private = is_private,
                      .created_at = Now(),
                      .scope = NewRepoScope(),
                      .read_scope = NewRepoScope(),
                      .objects = {},
                      .refs = {},
                      .audit = Event(caller, id, "repo.create", is_private ? "private" : "public")};
  if (AccessTo(caller, ProspectiveRecord(id)) < Access::kWrite) {
    return Denied("this token cannot create repositories in " + id.ns);
  }
  // The first commit: .gitattributes alone, as the Hub starts a repository (a bucket has no history).
  if (id.type != RepoType::kBucket) {
    ObjectId blob, tree, commit;
    repo.objects.push_back(StoredObject(ObjectKind::kBlob, BytesOf(kGitAttributes), &blob));
    const std::vector<TreeEntry> root = {{EntryMode::kFile, ".gitattributes", blob}};
    repo.objects.push_back(StoredObject(ObjectKind::kTree, EncodeTree(root), &tree));
    Commit first;
    first.tree = tree;
    first.author = {caller.Who(), caller.Who() + "@users.noreply.cairn", Now()};
    first.committer = first.author;
    first.message = "initial commit";
    repo.objects.push_back(StoredObject(ObjectKind::kCommit, BytesOf(EncodeCommit(first)), &commit));
    repo.refs.push_back({index::RefKind::kBranch, options_.default_branch, KeyOf(commit)});
  }
  auto created = index_.CreateRepo(repo);
  if (!created.ok()) {
    if (created.error().code == ErrorCode::kConflict) {
      return RepoExists("You already created this repo: " + id.str());
    }
    return FromIndex(created.error());
  }
  return Repo{std::move(*created)};
}

Result<Repo> HubService::Open(const Caller& caller, const RepoId& id, bool write) {
  return OpenAs(caller, id, write ? Access::kWrite : Access::kRead);
}

Result<Repo> HubService::OpenAs(const Caller& caller, const RepoId& id, Access need) {
  auto found = index_.FindRepo(id.type, id.ns, id.name);
  if (!found.ok()) {
    if (found.error().code == ErrorCode::kNotFound) return RepoNotFound(id);
    return FromIndex(found.error());
  }
  const Access has = AccessTo(caller, *found);
  if (found->is_private && has < Access::kRead) return RepoNotFound(id);
  if (need > Access::kRead) {
    if (caller.anonymous()) return Unauthorized("writing needs a token");
    if (has < need) {
      return Denied(need == Access::kAdmin
                        ? "this token cannot change the settings of " + id.str() + " (an admin's right)"
                        : "this token cannot write to " + id.str());
    }
    // A mirror's copy changes only as its upstream does.
    if (IsMirrored(*found)) {
      return Denied(id.str() + " is mirrored from upstream: it is read-only here");
    }
  }
  return Repo{std::move(*found)};
}

Status HubService::DeleteRepo(const Caller& caller, const RepoId& id) {
  auto repo = OpenAs(caller, id, Access::kAdmin);
  if (!repo.ok()) return repo.error();
  const auto event = Event(caller, id, "repo.delete");
  if (auto st = index_.DeleteRepo(repo->record.id, &event); !st.ok()) return FromIndex(st.error());
  return QuotaChanged(repo->record.ns);
}

Status HubService::UpdateSettings(const Caller& caller, const RepoId& id, std::optional<bool> is_private) {
  auto repo = OpenAs(caller, id, Access::kAdmin);
  if (!repo.ok()) return repo.error();
  index::RepoChange change;
  change.is_private = is_private;
  // Going private retires the read scope: every read token minted while the repository was public (to
  // anyone, for an hour) reads nothing from this moment, on every node, and so does every link it minted.
  if (is_private.value_or(false) && !repo->record.is_private) change.read_scope = NewRepoScope();
  if (is_private) change.audit = Event(caller, id, "repo.settings", *is_private ? "private" : "public");
  if (auto st = index_.UpdateRepo(repo->record.id, change); !st.ok()) return FromIndex(st.error());
  return Ok{};
}

Status HubService::MoveRepo(const Caller& caller, const RepoId& from, const RepoId& to) {
  if (!ValidName(to.ns) || !ValidName(to.name) || to.type != from.type) {
    return Malformed("invalid destination: " + to.str());
  }
  auto repo = OpenAs(caller, from, Access::kAdmin);
  if (!repo.ok()) return repo.error();
  // The destination must be the caller's to create.
  if (AccessTo(caller, ProspectiveRecord(to)) < Access::kWrite) {
    return Denied("this token cannot create repositories in " + to.ns);
  }
  index::RepoChange change;
  change.ns = to.ns;
  change.name = to.name;
  change.audit = Event(caller, from, "repo.move", "to " + RepoPath(to));
  if (auto st = index_.UpdateRepo(repo->record.id, change); !st.ok()) {
    if (st.error().code == ErrorCode::kConflict) {
      return RepoExists("a repository named " + to.str() + " exists");
    }
    return FromIndex(st.error());
  }
  if (auto st = QuotaChanged(repo->record.ns); !st.ok()) return st;
  return QuotaChanged(to.ns);
}

Result<std::vector<Repo>> HubService::ListRepos(const Caller& caller, RepoType type,
                                                const std::optional<std::string>& author,
                                                const std::optional<std::string>& after, size_t limit) {
  std::optional<std::pair<std::string, std::string>> cursor;
  if (after) {
    const size_t slash = after->find('/');
    if (slash == std::string::npos) return Malformed("bad cursor");
    cursor = std::pair{after->substr(0, slash), after->substr(slash + 1)};
  }
  std::vector<Repo> out;
  // Private repositories the caller cannot see are skipped: read pages until `limit` are visible.
  while (out.size() < limit) {
    auto page = index_.ListRepos(type, author, cursor, index::Index::kMaxListedRepos);
    if (!page.ok()) return FromIndex(page.error());
    for (auto& r : *page) {
      if (r.is_private && AccessTo(caller, r) < Access::kRead) continue;
      out.push_back(Repo{r});
      if (out.size() == limit) break;
    }
    if (page->size() < index::Index::kMaxListedRepos) break;
    cursor = std::pair{page->back().ns, page->back().name};
  }
  return out;
}

Result<HubService::Storage> HubService::StorageOf(const Repo& repo) {
  Storage out{.bytes = 0, .updated_at = repo.record.created_at};
  auto files = files_.Totals(repo.record.read_scope);
  if (!files.ok()) return FromIndex(files.error());
  out.bytes = files->bytes;
  if (repo.record.type == RepoType::kBucket) return out;
  auto head = Resolve(repo, options_.default_branch);
  if (!head.ok()) return head.error().code == ErrorCode::kNotFound ? Result<Storage>(out) : head.error();
  auto commit = ReadCommit(repo, *head);
  if (!commit.ok()) return commit.error();
  out.updated_at = commit->committer.time;
  return out;
}

// ---- Objects

namespace {

// Objects are cached by "<repository id>:<key bytes>": keys are content hashes, so an entry never goes stale.
std::string ObjectCacheKey(const Repo& repo, const std::vector<uint8_t>& key) {
  std::string out = std::to_string(repo.record.id) + ":";
  out.append(key.begin(), key.end());
  return out;
}

}  // namespace

void HubService::Forget(const Repo& repo, const std::vector<uint8_t>& key) {
  objects_.Erase(ObjectCacheKey(repo, key));
}

std::shared_ptr<const index::RepoObject> HubService::Remember(const Repo& repo, index::RepoObject obj) {
  auto shared = std::make_shared<const index::RepoObject>(std::move(obj));
  objects_.Put(ObjectCacheKey(repo, shared->key), shared, shared->data.size() + shared->key.size() + 64);
  return shared;
}

Result<index::RepoObject> HubService::ReadObject(const Repo& repo, const std::vector<uint8_t>& key) {
  if (auto hit = objects_.Get(ObjectCacheKey(repo, key))) return *hit;
  auto got = index_.GetRepoObjects(repo.record.id, {key});
  if (!got.ok()) return FromIndex(got.error());
  if (!(*got)[0]) return NotFound("object missing");
  return *Remember(repo, std::move(*(*got)[0]));
}

Status HubService::Prefetch(const Repo& repo, const std::vector<std::vector<uint8_t>>& keys) {
  std::vector<std::vector<uint8_t>> missing;
  for (const auto& key : keys) {
    if (!objects_.Get(ObjectCacheKey(repo, key))) missing.push_back(key);
  }
  for (size_t i = 0; i < missing.size(); i += index::Index::kMaxObjectsPerRead) {
    const size_t n = std::min(missing.size() - i, index::Index::kMaxObjectsPerRead);
    std::vector<std::vector<uint8_t>> batch(missing.begin() + static_cast<std::ptrdiff_t>(i),
                                            missing.begin() + static_cast<std::ptrdiff_t>(i + n));
    auto got = index_.GetRepoObjects(repo.record.id, batch);
    if (!got.ok()) return FromIndex(got.error());
    for (auto& obj : *got) {
      if (obj) Remember(repo, std::move(*obj));
    }
  }
  return Ok{};
}

Result<std::shared_ptr<const HubService::ParsedTree>> HubService::ReadParsedTree(const Repo& repo,
                                                                                 const ObjectId& oid) {
  const std::string cache_key = std::to_string(repo.record.id) + ":" + oid.hex();
  if (auto hit = trees_.Get(cache_key)) return hit;
  auto obj = ReadObject(repo, KeyOf(oid));
  if (!obj.ok()) return Damaged("tree " + oid.hex() + " is missing");
  if (obj->kind != static_cast<uint8_t>(ObjectKind::kTree)) {
    return Damaged("object " + oid.hex() + " is not a tree");
  }
  auto entries = ParseTree(obj->data);
  if (!entries.ok()) return Damaged(entries.error().message);
  auto tree = std::make_shared<ParsedTree>();
  tree->entries = std::move(*entries);
  size_t charge = 64;
  for (size_t i = 0; i < tree->entries.size(); ++i) {
    const TreeEntry& e = tree->entries[i];
    if (ValidSegment(e.name)) tree->served.push_back(static_cast<uint32_t>(i));
    charge += e.name.size() + sizeof(TreeEntry) + sizeof(uint32_t);
  }
  std::shared_ptr<const ParsedTree> parsed = std::move(tree);
  trees_.Put(cache_key, parsed, charge);
  return parsed;
}

Result<std::shared_ptr<const std::vector<TreeEntry>>> HubService::ReadTree(const Repo& repo,
                                                                           const ObjectId& oid) {
  auto tree = ReadParsedTree(repo, oid);
  if (!tree.ok()) return tree.error();
  return std::shared_ptr<const std::vector<TreeEntry>>(*tree, &(*tree)->entries);  // shares its owner
}

Result<Commit> HubService::ReadCommit(const Repo& repo, const ObjectId& oid) {
  const auto not_found = [&] { return RevisionNotFound("Invalid rev id: " + oid.hex()); };
  // The object as cached (whole objects only), or the bounded head the index gave: parsed where it lies.
  std::shared_ptr<const index::RepoObject> object = objects_.Get(ObjectCacheKey(repo, KeyOf(oid)));
  std::vector<uint8_t> cut;
  if (!object) {
    // Never more than the bound: a commit an older cairn stored with a description of any size costs a
    // reader kMaxCommitObjectBytes at most, and only whole objects are cached.
    auto head = index_.GetRepoObjectHead(repo.record.id, KeyOf(oid), kMaxCommitObjectBytes);
    if (!head.ok()) return FromIndex(head.error());
    if (!*head) return not_found();
    if ((*head)->size <= kMaxCommitObjectBytes) {
      object = Remember(
          repo,
          index::RepoObject{.key = KeyOf(oid), .kind = (*head)->kind, .data = std::move((*head)->data)});
    } else if ((*head)->kind == static_cast<uint8_t>(ObjectKind::kCommit)) {
      cut = std::move((*head)->data);
    }
  }
  if (object && object->kind != static_cast<uint8_t>(ObjectKind::kCommit)) return not_found();
  if (!object && cut.empty()) return not_found();
  const bool whole = object != nullptr;
  const std::span<const uint8_t> body = whole ? std::span<const uint8_t>(object->data) : std::span(cut);
  auto c = ParseCommit(body);
  if (!c.ok()) return Damaged(c.error().message);
  if (!whole || c->message.size() > kMaxSummaryBytes + 2 + kMaxDescriptionBytes) {
    c->message.resize(std::min(c->message.size(), kMaxSummaryBytes + 2 + kMaxDescriptionBytes));
    // Cut at a character boundary: what is served stays valid UTF-8.
    while (!c->message.empty() && (static_cast<unsigned char>(c->message.back()) & 0xc0) == 0x80)
      c->message.pop_back();
    if (!c->message.empty() && static_cast<unsigned char>(c->message.back()) >= 0xc0) c->message.pop_back();
  }
  return std::move(*c);
}

Result<std::vector<uint8_t>> HubService::ReadBlob(const Repo& repo, const ObjectId& blob) {
  auto obj = ReadObject(repo, KeyOf(blob));
  if (!obj.ok() || obj->kind != static_cast<uint8_t>(ObjectKind::kBlob)) {
    return Damaged("blob " + blob.hex() + " is missing");
  }
  return std::move(obj->data);
}

Result<files::StoredFile> HubService::OpenLarge(const Repo& repo, const xet::FileHash& file) {
  auto stored = files_.Find(file, repo.record.scope);
  if (!stored.ok()) {
    // The link was made from a registered file: a missing one is damage, not a client mistake.
    if (stored.error().code == ErrorCode::kUnavailable) return FromIndex(stored.error());
    if (stored.error().code == ErrorCode::kNotFound) {
      // Its link was removed (permanently_delete_lfs_files) and a collector freed it.
      return EntryNotFound("the file at this path was permanently deleted");
    }
    return Damaged("the Xet file of this path is missing: " + stored.error().message);
  }
  return std::move(*stored);
}

Result<files::StoredFile> HubService::OpenLargeBySha256(const Repo& repo, std::string_view sha256) {
  if (!IsSha256Hex(sha256)) return Malformed("not a SHA-256 (64 lowercase hex digits)");
  auto link = ReadObject(repo, FileLink::Key(sha256));
  if (!link.ok()) return link.error();
  const auto linked = FileLink::Parse(*link);
  if (!linked) return Damaged("the link of " + std::string(sha256) + " is damaged");
  return OpenLarge(repo, linked->file);
}

// ---- Revisions

Result<ObjectId> HubService::Resolve(const Repo& repo, std::string_view revision) {
  const auto not_found = [&] { return RevisionNotFound("Invalid rev id: " + std::string(revision)); };
  if (revision.empty() || revision.size() > 255) return not_found();
  if (auto oid = ObjectId::FromHex(revision)) {
    // The index, not the cache: a collector may have swept a commit no ref reaches (a squashed history).
    auto stored = index_.GetRepoObjectHead(repo.record.id, KeyOf(*oid), 0);
    if (!stored.ok()) return FromIndex(stored.error());
    if (!*stored) return not_found();
    auto c = ReadCommit(repo, *oid);
    if (!c.ok()) return c.error();
    return *oid;
  }
  std::optional<index::RefKind> only;
  if (revision.starts_with("refs/heads/")) {
    only = index::RefKind::kBranch;
    revision.remove_prefix(11);
  } else if (revision.starts_with("refs/tags/")) {
    only = index::RefKind::kTag;
    revision.remove_prefix(10);
  }
  auto refs = index_.ListRefs(repo.record.id);
  if (!refs.ok()) return FromIndex(refs.error());
  for (index::RefKind kind : {index::RefKind::kBranch, index::RefKind::kTag}) {  // branches first, as git
    if (only && *only != kind) continue;
    for (const auto& r : *refs) {
      if (r.kind == kind && r.name == revision) {
        auto oid = ObjectId::FromBytes(r.target);
        if (!oid) return Damaged("ref " + r.name + " is damaged");
        return *oid;
      }
    }
  }
  return not_found();
}

Result<std::vector<RefInfo>> HubService::ListRefs(const Repo& repo) {
  auto refs = index_.ListRefs(repo.record.id);
  if (!refs.ok()) return FromIndex(refs.error());
  std::vector<RefInfo> out;
  for (const auto& r : *refs) {
    auto oid = ObjectId::FromBytes(r.target);
    if (!oid) return Damaged("ref " + r.name + " is damaged");
    out.push_back({r.kind, r.name, *oid});
  }
  return out;
}

Status HubService::CreateRef(const Caller& caller, const Repo& repo, index::RefKind kind,
                             const std::string& name, std::optional<std::string_view> revision,
                             bool exist_ok) {
  if (!ValidBranchOrTagName(name, kind == index::RefKind::kTag)) {
    return Malformed("invalid ref name (git check-ref-format): " + name);
  }
  auto target = Resolve(repo, revision.value_or(options_.default_branch));
  if (!target.ok()) return target.error();
  // A commit named by its id may be one no ref reaches (a deleted branch's, a squashed history's): what a
  // collector's mark quarantined is revived before the ref names it. A branch or tag name's target is
  // reachable already.
  if (revision && ObjectId::FromHex(*revision)) {
    if (auto st = ReviveHistory(repo, *target); !st.ok()) return st;
  }
  index::RefUpdate update{kind, name, std::nullopt, KeyOf(*target)};
  update.audit = Event(caller, repo.id(), kind == index::RefKind::kTag ? "tag.create" : "branch.create",
                       name + " at " + target->hex());
  if (auto st = index_.UpdateRef(repo.record.id, update); !st.ok()) {
    if (st.error().code == ErrorCode::kConflict) {
      if (exist_ok) return Ok{};
      return Conflict((kind == index::RefKind::kBranch ? "Branch " : "Tag ") + name + " already exists");
    }
    return FromIndex(st.error());
  }
  return Ok{};
}

Status HubService::ReviveHistory(const Repo& repo, const ObjectId& commit) {
  const auto gone = [&] {
    return RevisionNotFound("revision " + commit.hex() + " was deleted by the garbage collector");
  };
  // Everything it reaches, the commit itself last: while any of it is still quarantined the commit is too,
  // so another request moving a ref onto it revives the whole of it as well, never trusts a part.
  auto reach = ReachFrom(index_, repo.record.id, {commit});
  if (!reach.ok()) return FromIndex(reach.error());
  if (reach->missing > 0 || reach->keys.empty()) return gone();
  const auto revive = [&](const std::vector<std::vector<uint8_t>>& keys) -> Status {
    auto revived = index_.ReviveRepoObjects(repo.record.id, keys);
    if (!revived.ok()) return FromIndex(revived.error());
    for (auto r : *revived) {
      if (r == index::ObjectRevival::kAbsent) return gone();
    }
    return Ok{};
  };
  const size_t batch = index::Index::kMaxObjectsPerRead;
  for (size_t i = 1; i < reach->keys.size(); i += batch) {  // [0] is the commit
    const size_t n = std::min(reach->keys.size() - i, batch);
    if (auto st = revive({reach->keys.begin() + static_cast<std::ptrdiff_t>(i),
                          reach->keys.begin() + static_cast<std::ptrdiff_t>(i + n)});
        !st.ok())
      return st;
  }
  // Its large files and their xorbs, as a commit naming them would; then the commit.
  if (auto st = Publish(files_, repo, std::move(reach->files)); !st.ok()) return st;
  if (auto st = revive({reach->keys.front()}); !st.ok()) return st;
  return Ok{};
}

Status HubService::DeleteRef(const Caller& caller, const Repo& repo, index::RefKind kind,
                             const std::string& name) {
  if (kind == index::RefKind::kBranch && name == options_.default_branch) {
    return Malformed("the default branch cannot be deleted");
  }
  auto refs = ListRefs(repo);
  if (!refs.ok()) return refs.error();
  for (const auto& r : *refs) {
    if (r.kind != kind || r.name != name) continue;
    index::RefUpdate update{kind, name, KeyOf(r.target), std::nullopt};
    update.audit = Event(caller, repo.id(), kind == index::RefKind::kTag ? "tag.delete" : "branch.delete",
                         name + " was " + r.target.hex());
    if (auto st = index_.UpdateRef(repo.record.id, update); !st.ok()) return FromIndex(st.error());
    return Ok{};
  }
  return RevisionNotFound("Invalid rev id: " + name);
}

Result<HubService::CommitPage> HubService::ListCommits(const Repo& repo, const ObjectId& head, size_t skip,
                                                       size_t limit, size_t max_message_bytes) {
  CommitPage out;
  size_t message_bytes = 0;
  std::optional<ObjectId> at = head;
  for (size_t i = 0; at; ++i) {
    if (out.commits.size() == limit || (!out.commits.empty() && message_bytes >= max_message_bytes)) {
      out.more = true;
      break;
    }
    auto c = ReadCommit(repo, *at);
    if (!c.ok()) return c.error();
    std::optional<ObjectId> parent;
    if (!c->parents.empty()) parent = c->parents.front();
    if (i >= skip) {
      message_bytes += c->message.size();
      out.commits.push_back({*at, std::move(*c)});
    }
    at = parent;
  }
  return out;
}

// ---- Files

Result<PathInfo> HubService::DescribeBlob(const Repo& repo, std::string path, const ObjectId& oid) {
  auto obj = ReadObject(repo, KeyOf(oid));
  if (!obj.ok()) return Damaged("blob " + oid.hex() + " is missing");
  PathInfo info;
  info.path = std::move(path);
  info.oid = oid;
  info.size = obj->data.size();
  if (auto pointer = ParseLfsPointer(obj->data)) {
    // A large file is a pointer this repository links to a Xet file. A small file that merely reads like a
    // pointer (one checked into a git repository, say) has no link: it is the text it holds.
    auto link = ReadObject(repo, FileLink::Key(pointer->sha256));
    const auto linked = link.ok() ? FileLink::Parse(*link) : std::nullopt;
    if (linked) {
      info.size = pointer->size;
      info.xet = linked->file;
      info.lfs = std::move(*pointer);
    } else if (!link.ok() && link.error().code != ErrorCode::kNotFound) {
      return link.error();
    } else if (IsMirrored(repo.record)) {
      // Every pointer of a mirrored history is a large file upstream; its bytes are fetched when first asked.
      info.size = pointer->size;
      info.lfs = std::move(*pointer);
    }
  }
  return info;
}

Result<PathInfo> HubService::Describe(const Repo& repo, std::string path, const TreeEntry& entry) {
  if (entry.is_tree()) {
    PathInfo info;
    info.path = std::move(path);
    info.is_dir = true;
    info.oid = entry.id;
    return info;
  }
  return DescribeBlob(repo, std::move(path), entry.id);
}

Result<PathInfo> HubService::Stat(const Repo& repo, const ObjectId& commit, std::string_view path) {
  auto c = ReadCommit(repo, commit);
  if (!c.ok()) return c.error();
  const auto missing = [&] { return EntryNotFound(std::string(path) + " does not exist at this revision"); };
  if (path.empty()) {
    PathInfo root;
    root.is_dir = true;
    root.oid = c->tree;
    return root;
  }
  if (!ValidPath(path)) return missing();
  ObjectId tree = c->tree;
  const auto segments = Split(path);
  for (size_t i = 0; i < segments.size(); ++i) {
    auto entries = ReadTree(repo, tree);
    if (!entries.ok()) return entries.error();
    auto it = std::find_if((*entries)->begin(), (*entries)->end(),
                           [&](const TreeEntry& e) { return e.name == segments[i]; });
    if (it == (*entries)->end()) return missing();
    if (i + 1 == segments.size()) return Describe(repo, std::string(path), *it);
    if (!it->is_tree()) return missing();
    tree = it->id;
  }
  return missing();
}

Result<std::vector<PathInfo>> HubService::List(const Repo& repo, const ObjectId& commit,
                                               std::string_view path, bool recursive) {
  auto at = Stat(repo, commit, path);
  if (!at.ok()) return at.error();
  if (!at->is_dir) {
    return EntryNotFound(std::string(path) + " is not a folder");
  }
  std::vector<PathInfo> out;
  // Depth first in tree order: a folder, then (when recursive) what it holds.
  std::vector<std::pair<std::string, ObjectId>> pending = {{std::string(path), at->oid}};
  while (!pending.empty()) {
    auto [dir, oid] = std::move(pending.back());
    pending.pop_back();
    auto tree = ReadParsedTree(repo, oid);
    if (!tree.ok()) return tree.error();
    std::vector<const TreeEntry*> served;
    for (const uint32_t i : (*tree)->served) served.push_back(&(*tree)->entries[i]);
    if (auto st = PrefetchEntries(repo, served, recursive); !st.ok()) return st.error();
    std::vector<std::pair<std::string, ObjectId>> subdirs;
    for (const TreeEntry* entry : served) {
      const TreeEntry& e = *entry;
      auto info = Describe(repo, JoinPath(dir, e.name), e);
      if (!info.ok()) return info.error();
      if (recursive && e.is_tree()) subdirs.emplace_back(info->path, e.id);
      out.push_back(std::move(*info));
    }
    for (auto it = subdirs.rbegin(); it != subdirs.rend(); ++it) pending.push_back(std::move(*it));
  }
  if (recursive) {
    std::stable_sort(out.begin(), out.end(),
                     [](const PathInfo& a, const PathInfo& b) { return a.path < b.path; });
  }
  return out;
}

Status HubService::PrefetchEntries(const Repo& repo, const std::vector<const TreeEntry*>& entries,
                                   bool subtrees_too) {
  // The blobs in a few reads (one round trip per 1,000 on PostgreSQL), then their LFS links.
  std::vector<std::vector<uint8_t>> blobs, subtrees;
  for (const TreeEntry* e : entries) (e->is_tree() ? subtrees : blobs).push_back(KeyOf(e->id));
  if (auto st = Prefetch(repo, blobs); !st.ok()) return st;
  if (subtrees_too) {
    if (auto st = Prefetch(repo, subtrees); !st.ok()) return st;
  }
  std::vector<std::vector<uint8_t>> links;
  for (const TreeEntry* e : entries) {
    if (e->is_tree()) continue;
    auto blob = ReadObject(repo, KeyOf(e->id));
    if (!blob.ok()) continue;  // Describe reports it
    if (auto pointer = ParseLfsPointer(blob->data)) links.push_back(FileLink::Key(pointer->sha256));
  }
  return Prefetch(repo, links);
}

Result<HubService::FolderPage> HubService::ListPage(const Repo& repo, const ObjectId& commit,
                                                    std::string_view path, size_t offset, size_t limit) {
  auto at = Stat(repo, commit, path);
  if (!at.ok()) return at.error();
  if (!at->is_dir) return EntryNotFound(std::string(path) + " is not a folder");
  auto tree = ReadParsedTree(repo, at->oid);
  if (!tree.ok()) return tree.error();
  const std::vector<uint32_t>& served = (*tree)->served;
  FolderPage page;
  page.total = served.size();
  std::vector<const TreeEntry*> slice;
  for (size_t i = std::min(offset, served.size()); i < served.size() && slice.size() < limit; ++i)
    slice.push_back(&(*tree)->entries[served[i]]);
  if (auto st = PrefetchEntries(repo, slice, false); !st.ok()) return st.error();
  for (const TreeEntry* e : slice) {
    auto info = Describe(repo, JoinPath(std::string(path), e->name), *e);
    if (!info.ok()) return info.error();
    page.entries.push_back(std::move(*info));
  }
  return page;
}

Status HubService::CheckRoom(const Repo& repo) {
  if (options_.quota == nullptr) return Ok{};
  if (auto st = options_.quota->CheckRoom(repo.record.ns); !st.ok()) return FromIndex(st.error());
  return Ok{};
}

Status HubService::QuotaChanged(const std::string& ns) {
  if (options_.quota == nullptr) return Ok{};
  if (auto st = options_.quota->MarkStale(ns); !st.ok()) return FromIndex(st.error());
  return Ok{};
}

Status ForEachMirrored(index::RepoIndex& index, const std::function<Status(index::RepoRecord&&)>& fn) {
  for (const auto type : {index::RepoType::kModel, index::RepoType::kDataset, index::RepoType::kSpace}) {
    std::optional<std::pair<std::string, std::string>> after;
    for (;;) {
      auto page = index.ListRepos(type, std::nullopt, after, index::RepoIndex::kMaxListedRepos);
      if (!page.ok()) return page.error();
      const bool last = page->size() < index::RepoIndex::kMaxListedRepos;
      if (!last) after = std::pair{page->back().ns, page->back().name};
      for (auto& r : *page) {
        if (!IsMirrored(r)) continue;
        if (auto st = fn(std::move(r)); !st.ok()) return st;
      }
      if (last) break;
    }
  }
  return Ok{};
}

namespace {

// The paths under the trees of `objects` within the API's bound (tree_paths.h). A tree they name and do not
// carry counts as empty: a mirror's fetch or an import brings a whole history, and its stored part was
// checked when it came.
Status CheckCarriedPaths(const std::vector<RawObject>& objects) {
  std::unordered_map<ObjectId, size_t, ObjectIdHash> trees;
  std::vector<ObjectId> roots;
  for (size_t i = 0; i < objects.size(); ++i) {
    if (objects[i].kind != ObjectKind::kTree) continue;
    trees.emplace(objects[i].id, i);
    roots.push_back(objects[i].id);
  }
  return CheckPathLengths(roots, [&](const std::vector<ObjectId>& ids, const auto& found) {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (auto it = trees.find(ids[i]); it != trees.end()) found(i, objects[it->second].body);
    }
    return Status(Ok{});
  });
}

}  // namespace

Result<std::vector<index::RepoObject>> StorableObjects(std::vector<RawObject> objects) {
  std::vector<index::RepoObject> out;
  out.reserve(objects.size());
  for (auto& o : objects) {
    if (o.kind == ObjectKind::kCommit) {
      if (auto c = ParseCommit(o.body); !c.ok())
        return Malformed("commit " + o.id.hex() + ": " + c.error().message);
    } else if (o.kind == ObjectKind::kTree) {
      auto entries = ParseTree(o.body);
      if (!entries.ok()) return Malformed("tree " + o.id.hex() + ": " + entries.error().message);
      for (const auto& e : *entries) {
        if (!ValidSegment(e.name)) return Malformed("tree " + o.id.hex() + " names a path cairn refuses");
      }
    }
  }
  if (auto st = CheckCarriedPaths(objects); !st.ok()) return Malformed(st.error().message);
  for (auto& o : objects) {
    out.push_back(index::RepoObject{
        .key = o.id.key(), .kind = static_cast<uint8_t>(o.kind), .data = std::move(o.body)});
  }
  return out;
}

Status Publish(files::FileService& service, const Repo& repo, std::vector<xet::FileHash> published,
               const index::QuotaCharge* charge) {
  if (auto st = service.Share(std::move(published), repo.record.read_scope, charge); !st.ok())
    return FromIndex(st.error());
  return Ok{};
}

Status HubService::ShareLarge(const Caller& caller, const RepoId& source, const xet::FileHash& file,
                              const std::optional<std::string>& sha256, const Repo& target) {
  auto from = Open(caller, source, false);
  if (!from.ok()) return from.error();
  // A writer of the source may lend any upload made for it; a reader only what the source committed.
  const bool writes_source = AccessTo(caller, from->record) >= Access::kWrite;
  auto entry = files_.VisibleEntry(file, writes_source ? from->record.scope : from->record.read_scope);
  if (!entry.ok()) {
    if (entry.error().code == ErrorCode::kNotFound) {
      return EntryNotFound("no file " + file.hex() + " in " + source.str());
    }
    return FromIndex(entry.error());
  }
  if (sha256 && (!IsSha256Hex(*sha256) || (*entry)->sha256 != xet::Hash::FromHex(*sha256))) {
    return Malformed("the sha256 does not match file " + file.hex());
  }
  if (auto st = files_.Share({file}, target.record.scope); !st.ok()) return FromIndex(st.error());
  return Ok{};
}

// ---- Commits

namespace {

// A folder being edited: its entries as read, and what the commit changed under it.
struct Node {
  struct Child {
    EntryMode mode = EntryMode::kFile;
    ObjectId id;
    std::unique_ptr<Node> node;  // a folder opened for editing
  };
  std::map<std::string, Child> children;
  bool dirty = false;

  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  // Takes the folders below apart one at a time: a chain of unique_ptrs would otherwise be destroyed by a
  // recursion as deep as the path.
  ~Node() {
    std::vector<std::unique_ptr<Node>> below;
    const auto detach = [&below](Node& n) {
      for (auto& [name, child] : n.children) {
        if (child.node) below.push_back(std::move(child.node));
      }
    };
    detach(*this);
    while (!below.empty()) {
      std::unique_ptr<Node> n = std::move(below.back());
      below.pop_back();
      detach(*n);
    }
  }
};

// Edits the trees of one commit in memory; Write stores the folders that changed.
class TreeEditor {
 public:
  using Loader = std::function<Result<std::shared_ptr<const std::vector<TreeEntry>>>(const ObjectId&)>;
  TreeEditor(Loader load, std::unique_ptr<Node> root) : load_(std::move(load)), root_(std::move(root)) {}

  static Result<std::unique_ptr<Node>> Open(const Loader& load, const ObjectId& tree) {
    auto entries = load(tree);
    if (!entries.ok()) return entries.error();
    auto node = std::make_unique<Node>();
    for (const auto& e : **entries) node->children[e.name] = {e.mode, e.id, nullptr};
    return node;
  }

  Status Put(std::string_view path, EntryMode mode, const ObjectId& id) {
    const auto segments = Split(path);
    Node* node = root_.get();
    for (size_t i = 0; i + 1 < segments.size(); ++i) {
      node->dirty = true;
      auto [it, inserted] = node->children.try_emplace(std::string(segments[i]));
      auto& child = it->second;
      if (inserted) {
        child.mode = EntryMode::kTree;
        child.node = std::make_unique<Node>();
      } else if (child.mode != EntryMode::kTree) {
        return Malformed(std::string(path) + ": " + std::string(segments[i]) + " is a file, not a folder");
      }
      if (auto st = Expand(child); !st.ok()) return st;
      node = child.node.get();
    }
    node->dirty = true;
    auto& leaf = node->children[std::string(segments.back())];
    // A folder this commit emptied is gone: a file may take its name.
    if (leaf.mode == EntryMode::kTree && !(leaf.node && leaf.node->children.empty())) {
      return Malformed(std::string(path) + " is a folder");
    }
    leaf.mode = mode;
    leaf.id = id;
    leaf.node.reset();
    return Ok{};
  }

  // The entry at `path` (a file, or a folder when `folder`), or kNotFound.
  Status Remove(std::string_view path, bool folder) {
    const auto segments = Split(path);
    std::vector<Node*> trail = {root_.get()};
    for (size_t i = 0; i + 1 < segments.size(); ++i) {
      auto it = trail.back()->children.find(std::string(segments[i]));
      if (it == trail.back()->children.end() || it->second.mode != EntryMode::kTree) return Missing(path);
      if (auto st = Expand(it->second); !st.ok()) return st;
      trail.push_back(it->second.node.get());
    }
    auto it = trail.back()->children.find(std::string(segments.back()));
    if (it == trail.back()->children.end() || (it->second.mode == EntryMode::kTree) != folder)
      return Missing(path);
    trail.back()->children.erase(it);
    for (auto* n : trail) n->dirty = true;
    return Ok{};
  }

  // Stores every changed folder (into `objects`) and returns the root's id. Emptied folders disappear, as
  // git keeps none.
  ObjectId Write(std::vector<index::RepoObject>& objects) {
    auto id = WriteNode(*root_, objects);
    if (!id) {
      ObjectId empty;
      objects.push_back(StoredObject(ObjectKind::kTree, {}, &empty));
      return empty;
    }
    return *id;
  }

 private:
  static Status Missing(std::string_view path) {
    return EntryNotFound(std::string(path) + " does not exist");
  }

  Status Expand(Node::Child& child) {
    if (child.node) return Ok{};
    auto node = Open(load_, child.id);
    if (!node.ok()) return node.error();
    child.node = std::move(*node);
    return Ok{};
  }

  // The folders under `root` that changed, each after the changed ones it holds, without recursion (a path
  // may be 2,048 folders deep). A written folder's id goes into its parent's entry; nullopt: it is empty.
  static std::optional<ObjectId> WriteNode(Node& root, std::vector<index::RepoObject>& objects) {
    std::vector<std::pair<Node*, bool>> stack{{&root, false}};
    std::map<const Node*, std::optional<ObjectId>> written;
    while (!stack.empty()) {
      auto [node, expanded] = stack.back();
      stack.pop_back();
      if (!expanded) {
        stack.emplace_back(node, true);
        for (auto& [name, child] : node->children) {
          if (child.node && child.node->dirty) stack.emplace_back(child.node.get(), false);
        }
        continue;
      }
      std::vector<TreeEntry> entries;
      for (auto& [name, child] : node->children) {
        ObjectId id = child.id;
        if (child.node && child.node->dirty) {
          auto it = written.find(child.node.get());
          if (!it->second) continue;
          id = *it->second;
          written.erase(it);
        }
        entries.push_back({child.mode, name, id});
      }
      std::optional<ObjectId> id;
      if (!entries.empty()) {
        SortTree(entries);
        id.emplace();
        objects.push_back(StoredObject(ObjectKind::kTree, EncodeTree(entries), &*id));
      }
      written[node] = id;
    }
    return written.at(&root);
  }

  Loader load_;
  std::unique_ptr<Node> root_;
};

}  // namespace

// The tree edits and the objects of one commit, one operation at a time. Index failures other than "not
// found" end the commit with that failure (never read as "absent").
class HubService::CommitBuilder {
 public:
  CommitBuilder(HubService& hub, const Repo& repo, const ObjectId& head, TreeEditor tree_editor)
      : hub_(hub), repo_(repo), head_(head), editor_(std::move(tree_editor)) {}

  Status Apply(const AddInline& add) {
    if (!ValidPath(add.path)) return Malformed("invalid path: " + add.path);
    if (add.content.size() > static_cast<size_t>(hub_.options_.max_inline_bytes)) {
      return Malformed(add.path + " is too large to commit inline: upload it as a large file");
    }
    ObjectId blob;
    objects_.push_back(StoredObject(ObjectKind::kBlob, add.content, &blob));
    return editor_.Put(add.path, EntryMode::kFile, blob);
  }

  // A large file: it must have come through this repository's upload (its CAS scope), with these bytes.
  Status Apply(const AddLfs& lfs) {
    if (!ValidPath(lfs.path)) return Malformed("invalid path: " + lfs.path);
    if (!IsSha256Hex(lfs.pointer.sha256)) return Malformed("bad sha256 for " + lfs.path);
    auto entry = hub_.files_.VisibleBySha256(*xet::Hash::FromHex(lfs.pointer.sha256), repo_.record.scope);
    if (!entry.ok()) return FromIndex(entry.error());
    if (*entry == nullptr) {
      return Malformed(lfs.path + ": no file with sha256 " + lfs.pointer.sha256 +
                       " was uploaded to this repository");
    }
    // The repository links a SHA-256 to one Xet file for good: a later upload claiming the same SHA-256 for
    // other chunks cannot take the name over.
    const FileLink link{.sha256 = lfs.pointer.sha256, .file = (*entry)->hash};
    auto linked = hub_.ReadObject(repo_, FileLink::Key(link.sha256));
    if (!linked.ok() && linked.error().code != ErrorCode::kNotFound) return linked.error();
    if (linked.ok() && FileLink::Parse(*linked) != link) {
      return Conflict(lfs.path + ": sha256 " + lfs.pointer.sha256 +
                      " is linked to another file in this repository");
    }
    LfsPointer pointer = lfs.pointer;
    if (!lfs.size_given) pointer.size = (*entry)->size;
    if ((*entry)->size != pointer.size) {
      return Malformed(lfs.path + ": the size does not match the uploaded file");
    }
    ObjectId blob;
    objects_.push_back(StoredObject(ObjectKind::kBlob, BytesOf(EncodeLfsPointer(pointer)), &blob));
    objects_.push_back(link.ToObject());
    published_.push_back(link.file);
    return editor_.Put(lfs.path, EntryMode::kFile, blob);
  }

  Status Apply(const DeletePath& del) {
    std::string path = del.path;
    while (del.folder && path.ends_with('/')) path.pop_back();
    if (!ValidPath(path)) return Malformed("invalid path: " + del.path);
    return editor_.Remove(path, del.folder);
  }

  Status Apply(const CopyPath& copy) {
    if (!ValidPath(copy.to)) return Malformed("invalid path: " + copy.to);
    ObjectId from_commit = head_;
    if (copy.from_revision) {
      auto r = hub_.Resolve(repo_, *copy.from_revision);
      if (!r.ok()) return r.error();
      from_commit = *r;
    }
    auto src = hub_.Stat(repo_, from_commit, copy.from);
    if (!src.ok()) return src.error();
    if (src->is_dir) return Malformed("copying a folder is not supported: " + copy.from);
    // Stored again with the commit (and its large file published again): an old revision's blob may be one
    // a collector found unreachable, and what a new commit names must be revived with it.
    auto blob = hub_.ReadObject(repo_, KeyOf(src->oid));
    if (!blob.ok()) return blob.error();
    objects_.push_back(std::move(*blob));
    if (src->lfs && src->xet) {
      objects_.push_back(FileLink{.sha256 = src->lfs->sha256, .file = *src->xet}.ToObject());
      published_.push_back(*src->xet);
    }
    return editor_.Put(copy.to, EntryMode::kFile, src->oid);
  }

  TreeEditor& editor() { return editor_; }
  std::vector<index::RepoObject> TakeObjects() { return std::move(objects_); }
  std::vector<xet::FileHash> TakePublished() { return std::move(published_); }

 private:
  HubService& hub_;
  const Repo& repo_;
  const ObjectId head_;
  TreeEditor editor_;
  std::vector<index::RepoObject> objects_;
  std::vector<xet::FileHash> published_;  // the large files the commit names, for the read scope
};

Result<CommitInfo> HubService::CreateCommit(const Caller& caller, const Repo& repo,
                                            const CommitRequest& request) {
  if (request.operations.size() > options_.max_operations) {
    return Malformed("too many operations in one commit");
  }
  if (request.summary.empty() || request.summary.size() > kMaxSummaryBytes ||
      !ValidText(request.summary, "\t")) {
    return Malformed("a commit needs a one-line summary of at most " + std::to_string(kMaxSummaryBytes) +
                     " bytes of UTF-8 text");
  }
  if (request.description.size() > kMaxDescriptionBytes || !ValidText(request.description, "\t\n\r")) {
    return Malformed("a commit's description is at most " + std::to_string(kMaxDescriptionBytes) +
                     " bytes of UTF-8 text");
  }
  // The branch's head: the parent of the new commit and the state the update expects.
  std::optional<ObjectId> head;
  auto refs = ListRefs(repo);
  if (!refs.ok()) return refs.error();
  for (const auto& r : *refs) {
    if (r.kind == index::RefKind::kBranch && r.name == request.branch) head = r.target;
  }
  const bool new_branch = !head;
  if (!head) {
    if (!request.create_branch) {
      return RevisionNotFound("Invalid rev id: " + request.branch);
    }
    auto from = Resolve(repo, options_.default_branch);
    if (!from.ok()) return from.error();
    head = *from;
  }
  if (request.parent && *request.parent != *head) {
    return Stale("A commit has happened since " + request.parent->hex() + ". Please refresh and try again.");
  }
  auto parent = ReadCommit(repo, *head);
  if (!parent.ok()) return parent.error();

  const TreeEditor::Loader load = [this, &repo](const ObjectId& oid) { return ReadTree(repo, oid); };
  auto root = TreeEditor::Open(load, parent->tree);
  if (!root.ok()) return root.error();
  CommitBuilder builder(*this, repo, *head, TreeEditor(load, std::move(*root)));
  for (const Operation& op : request.operations) {
    if (auto st = std::visit([&builder](const auto& o) { return builder.Apply(o); }, op); !st.ok())
      return st.error();
  }
  std::vector<index::RepoObject> objects = builder.TakeObjects();
  const ObjectId tree = builder.editor().Write(objects);
  Commit commit;
  commit.tree = tree;
  commit.parents = {*head};
  const std::string who = caller.Who();
  commit.author = {who, who + "@users.noreply.cairn", Now()};
  commit.committer = commit.author;
  commit.message = request.summary;
  if (!request.description.empty()) commit.message += "\n\n" + request.description;
  ObjectId oid;
  objects.push_back(StoredObject(ObjectKind::kCommit, BytesOf(EncodeCommit(commit)), &oid));
  // Admitted by the namespace's quota first: what its large files and small files add (trees and the
  // commit itself are never refused, so that a deletion always goes through), charged by the writes below.
  std::vector<xet::FileHash> published = builder.TakePublished();
  quota::Admission admission;
  if (options_.quota != nullptr) {
    uint64_t blob_bytes = 0;
    for (const auto& o : objects) {
      if (o.kind == static_cast<uint8_t>(ObjectKind::kBlob)) blob_bytes += o.data.size();
    }
    auto admitted = options_.quota->Admit(repo.record.ns, published, blob_bytes);
    if (!admitted.ok()) return FromIndex(admitted.error());
    admission = std::move(*admitted);
  }
  // Objects (durable, harmless if the update below loses), then the large files published to the
  // repository's readers (the read scope sees only what a commit named), then the branch, compare and swap.
  if (auto st = index_.PutRepoObjects(repo.record.id, objects, admission.ObjectsCharge()); !st.ok())
    return FromIndex(admission.Explain(st.error()));
  admission.ObjectsStored();
  if (auto st = Publish(files_, repo, std::move(published), admission.FilesCharge()); !st.ok())
    return st.error();
  admission.FilesPublished();  // counted in the namespace's usage whether or not the branch moves below
  index::RefUpdate update{index::RefKind::kBranch, request.branch, std::nullopt, KeyOf(oid)};
  if (!new_branch) update.expected = KeyOf(*head);
  update.audit = Event(caller, repo.id(), "commit",
                       request.branch + " " + (head ? head->hex() : "new") + ".." + oid.hex());
  if (auto st = index_.UpdateRef(repo.record.id, update); !st.ok()) {
    if (st.error().code == ErrorCode::kConflict) {
      return Stale("A commit has happened since. Please refresh and try again.");
    }
    return FromIndex(st.error());
  }
  return CommitInfo{oid, std::move(commit)};
}

}  // namespace cairn::hub

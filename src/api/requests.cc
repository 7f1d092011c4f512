#include "api/requests.h"

#include <boost/json.hpp>
#include <charconv>
#include <functional>
#include <map>

#include "common/base64.h"
#include "common/percent_encode.h"
#include "http/form.h"

namespace cairn::api {
namespace {

namespace json = boost::json;

BodyError Refused(std::string message) {
  return BodyError{std::move(message)};
}

std::optional<hub::RepoType> TypeFromSingular(std::string_view s, bool bucket = false) {
  if (s.empty() || s == "model") return hub::RepoType::kModel;
  if (bucket && s == "bucket") return hub::RepoType::kBucket;
  if (s == "dataset") return hub::RepoType::kDataset;
  if (s == "space") return hub::RepoType::kSpace;
  return std::nullopt;
}

const json::object* ParseObject(std::string_view body, json::value& storage) {
  boost::system::error_code ec;
  storage = json::parse(body, ec);
  return ec ? nullptr : storage.if_object();
}

std::optional<std::string> StringField(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr || !v->is_string()) return std::nullopt;
  return std::string(v->get_string());
}

// The visibility a body sets: "visibility" (anything but "public" is private), then "private" (a boolean).
std::optional<bool> Visibility(const json::object& o) {
  std::optional<bool> is_private;
  if (auto vis = StringField(o, "visibility")) is_private = *vis != "public";
  if (const json::value* p = o.if_contains("private"); p != nullptr && p->is_bool())
    is_private = p->get_bool();
  return is_private;
}

// The strings of the array `key` of `o` (other values skipped); nullopt when there is no such array or it has
// more than `max` values.
std::optional<std::vector<std::string>> StringArray(const json::object& o, std::string_view key, size_t max) {
  const json::value* p = o.if_contains(key);
  if (p == nullptr || !p->is_array() || p->get_array().size() > max) return std::nullopt;
  std::vector<std::string> out;
  for (const auto& v : p->get_array()) {
    if (v.is_string()) out.emplace_back(v.get_string());
  }
  return out;
}

// Calls `fn` with each line of an NDJSON body (blank lines skipped) parsed as a JSON object. Stops at the
// first line that is not one, or for which `fn` gives a reason, and returns the reason with the line's
// number.
std::optional<std::string> ForEachLine(
    std::string_view body, std::string_view what,
    const std::function<std::optional<std::string>(const json::object&)>& fn) {
  size_t line_no = 0;
  while (!body.empty()) {
    const size_t nl = body.find('\n');
    const std::string_view line = body.substr(0, nl);
    body.remove_prefix(nl == std::string_view::npos ? body.size() : nl + 1);
    ++line_no;
    if (line.empty() || line == "\r") continue;
    boost::system::error_code ec;
    const json::value v = json::parse(line, ec);
    const json::object* o = ec ? nullptr : v.if_object();
    std::optional<std::string> why = o ? fn(*o) : std::optional<std::string>("not a JSON object");
    if (why) return std::string(what) + " line " + std::to_string(line_no) + ": " + *why;
  }
  return std::nullopt;
}

// "ns/name" with exactly one slash.
std::optional<hub::RepoId> RepoIdOf(hub::RepoType type, const std::string& s) {
  const size_t slash = s.find('/');
  if (slash == std::string::npos || s.find('/', slash + 1) != std::string::npos) return std::nullopt;
  return hub::RepoId{type, s.substr(0, slash), s.substr(slash + 1)};
}

}  // namespace

// ---- CAS routes

std::optional<cas::ByteRange> ParseReconstructionRange(std::string_view h) {
  if (!h.starts_with("bytes=")) return std::nullopt;
  h.remove_prefix(6);
  const size_t dash = h.find('-');
  if (dash == std::string_view::npos || dash == 0 || h.find(',') != std::string_view::npos)
    return std::nullopt;
  uint64_t a = 0;
  uint64_t b = UINT64_MAX;
  auto r1 = std::from_chars(h.data(), h.data() + dash, a);
  if (r1.ec != std::errc() || r1.ptr != h.data() + dash) return std::nullopt;
  if (dash + 1 < h.size()) {
    auto r2 = std::from_chars(h.data() + dash + 1, h.data() + h.size(), b);
    if (r2.ec != std::errc() || r2.ptr != h.data() + h.size() || b < a) return std::nullopt;
  }
  return cas::ByteRange{a, b};
}

Parsed<std::vector<xet::FileHash>> ParseBatchFileIds(
    const std::vector<std::pair<std::string, std::string>>& query) {
  std::vector<xet::FileHash> files;
  for (const auto& [k, v] : query) {
    if (k != "file_id") continue;
    auto h = xet::Hash::FromHex(v);
    if (!h) return Refused("file_id must be 64 hex digits");
    files.push_back(*h);
  }
  if (files.empty() || files.size() > 1000) return Refused("give 1 to 1000 file_id values");
  return files;
}

// ---- Plain files

Parsed<LinkBody> ParseLinkBody(std::string_view body) {
  json::value storage;
  const json::object* o = ParseObject(body, storage);
  const json::value* hash_v = o ? o->if_contains("file_hash") : nullptr;
  const json::value* ttl_v = o ? o->if_contains("ttl_seconds") : nullptr;
  const json::value* name_v = o ? o->if_contains("name") : nullptr;
  std::optional<xet::Hash> hash;
  if (hash_v != nullptr && hash_v->is_string()) hash = xet::Hash::FromHex(hash_v->get_string());
  if (!hash || (ttl_v != nullptr && !ttl_v->is_int64()) || (name_v != nullptr && !name_v->is_string())) {
    return Refused(
        R"(the body is {"file_hash": "<64 hex digits>", "ttl_seconds": <seconds>, "name": "<file name>"})");
  }
  LinkBody out;
  out.file = *hash;
  if (ttl_v != nullptr) out.ttl_seconds = ttl_v->get_int64();
  if (name_v != nullptr) out.name = std::string(name_v->get_string());
  return out;
}

// ---- Hub: repositories

Parsed<RepoBody> ParseRepoBody(std::string_view body) {
  json::value storage;
  const json::object* o = ParseObject(body, storage);
  const auto name = o ? StringField(*o, "name") : std::nullopt;
  const auto type = o ? TypeFromSingular(StringField(*o, "type").value_or("")) : std::nullopt;
  if (!name || !type) return Refused(R"(the body is {"name", "organization", "type"})");
  return RepoBody{*type, StringField(*o, "organization").value_or(""), *name, Visibility(*o).value_or(false)};
}

Parsed<MoveBody> ParseMoveBody(std::string_view body) {
  json::value storage;
  const json::object* o = ParseObject(body, storage);
  const auto from = o ? StringField(*o, "fromRepo") : std::nullopt;
  const auto to = o ? StringField(*o, "toRepo") : std::nullopt;
  const auto type = o ? TypeFromSingular(StringField(*o, "type").value_or(""), true) : std::nullopt;
  std::optional<hub::RepoId> a, b;
  if (from && to && type) {
    a = RepoIdOf(*type, *from);
    b = RepoIdOf(*type, *to);
  }
  if (!a || !b) return Refused(R"(the body is {"fromRepo": "ns/name", "toRepo": "ns/name", "type"})");
  return MoveBody{std::move(*a), std::move(*b)};
}

Parsed<std::optional<bool>> ParseSettingsBody(std::string_view body) {
  json::value storage;
  const json::object* o = ParseObject(body, storage);
  if (o == nullptr) return Refused(R"(the body is {"visibility": "private"|"public"})");
  if (const json::value* g = o->if_contains("gated"); g != nullptr && !(g->is_bool() && !g->get_bool()))
    return Refused("gated repositories are not supported");
  return Visibility(*o);
}

Parsed<std::optional<std::string>> ParseBranchBody(std::string_view body) {
  if (body.empty()) return std::optional<std::string>();
  json::value storage;
  const json::object* o = ParseObject(body, storage);
  if (o == nullptr) return Refused(R"(the body is {"startingPoint": "<revision>"})");
  return StringField(*o, "startingPoint");
}

Parsed<std::optional<std::string>> ParseSquashBody(std::string_view body) {
  if (body.empty()) return std::optional<std::string>();
  json::value storage;
  const json::object* o = ParseObject(body, storage);
  if (o == nullptr) return Refused(R"(the body is {"message": "..."})");
  return StringField(*o, "message");
}

Parsed<LfsDeletionBody> ParseLfsDeletionBody(std::string_view body) {
  json::value storage;
  const json::object* o = ParseObject(body, storage);
  const json::value* d = o ? o->if_contains("deletions") : nullptr;
  const json::object* deletions = d ? d->if_object() : nullptr;
  const json::value* shas = deletions ? deletions->if_contains("sha") : nullptr;
  if (shas == nullptr || !shas->is_array() || shas->get_array().size() > 1000) {
    return Refused(R"(the body is {"deletions": {"sha": [...], "rewriteHistory": true}}, at most 1000)");
  }
  LfsDeletionBody out;
  for (const auto& v : shas->get_array()) {
    if (!v.is_string()) return Refused("each sha is a string");
    out.sha256s.emplace_back(v.get_string());
  }
  if (const json::value* r = deletions->if_contains("rewriteHistory")) {
    if (!r->is_bool()) return Refused("rewriteHistory is true or false");
    out.rewrite_history = r->get_bool();
  }
  return out;
}

Parsed<std::string> ParseTagBody(std::string_view body) {
  json::value storage;
  const json::object* o = ParseObject(body, storage);
  auto name = o ? StringField(*o, "tag") : std::nullopt;
  if (!name) return Refused(R"(the body is {"tag": "<name>", "message": "..."})");
  return std::move(*name);
}

Parsed<std::vector<PreuploadFile>> ParsePreuploadBody(std::string_view body) {
  json::value storage;
  const json::object* o = ParseObject(body, storage);
  const json::value* files = o ? o->if_contains("files") : nullptr;
  if (files == nullptr || !files->is_array() || files->get_array().size() > 1000)
    return Refused(R"(the body is {"files": [{"path", "sample", "size"}]}, at most 1000)");
  std::vector<PreuploadFile> out;
  for (const auto& f : files->get_array()) {
    const json::object* fo = f.if_object();
    auto path = fo ? StringField(*fo, "path") : std::nullopt;
    auto sample = fo ? StringField(*fo, "sample") : std::nullopt;
    const json::value* size = fo ? fo->if_contains("size") : nullptr;
    std::optional<std::vector<uint8_t>> bytes = sample ? Base64Decode(*sample) : std::nullopt;
    if (!path || !bytes || size == nullptr || !size->is_number())
      return Refused("each file needs a path, a base64 sample and a size");
    boost::system::error_code ec;
    const auto n = size->to_number<uint64_t>(ec);
    if (ec) return Refused("bad size");
    out.push_back({std::move(*path), n, std::move(*bytes)});
  }
  return out;
}

Parsed<hub::CommitRequest> ParseCommitBody(std::string_view body, int64_t max_inline_bytes) {
  hub::CommitRequest commit;
  bool have_header = false;
  // How each path was added: the same path twice is applied in order (as huggingface_hub warns and the Hub
  // does), but inline bytes and an LFS file for one path leave it unclear which the client meant.
  std::map<std::string, bool, std::less<>> added_lfs;
  auto error = ForEachLine(body, "commit", [&](const json::object& o) -> std::optional<std::string> {
    const auto key = StringField(o, "key");
    const json::value* value_v = o.if_contains("value");
    const json::object* value = value_v ? value_v->if_object() : nullptr;
    if (!key || value == nullptr) return R"(each line is {"key": ..., "value": {...}})";
    if (*key == "header") {
      if (have_header) return "a commit has one header line";
      commit.summary = StringField(*value, "summary").value_or("");
      commit.description = StringField(*value, "description").value_or("");
      if (auto parent = StringField(*value, "parentCommit")) {
        commit.parent = hub::ObjectId::FromHex(*parent);
        if (!commit.parent) return "parentCommit must be a full 40-digit commit id";
      }
      have_header = true;
      return std::nullopt;
    }
    if (!have_header) return "the header comes first";
    const auto path = StringField(*value, "path");
    if (!path) return "a path is needed";
    if (*key == "file" || *key == "lfsFile") {
      const bool lfs = *key == "lfsFile";
      if (auto [it, inserted] = added_lfs.try_emplace(*path, lfs); !inserted && it->second != lfs)
        return *path + " is added both as a file and as an lfsFile";
    }
    if (*key == "file") {
      auto content = StringField(*value, "content");
      const auto encoding = StringField(*value, "encoding").value_or("base64");
      if (!content || encoding != "base64") return "file content must be base64";
      // Refused before it is decoded: what cannot go inline takes no more memory than its text.
      if (content->size() / 4 * 3 > static_cast<uint64_t>(max_inline_bytes) + 3)
        return *path + " is too large to commit inline: upload it as a large file";
      auto bytes = Base64Decode(*content);
      if (!bytes) return "file content is not base64";
      commit.operations.emplace_back(hub::AddInline{*path, std::move(*bytes)});
    } else if (*key == "lfsFile") {
      const auto oid = StringField(*value, "oid");
      if (StringField(*value, "algo").value_or("sha256") != "sha256" || !oid || !hub::IsSha256Hex(*oid))
        return "lfsFile needs a sha256 oid (64 lowercase hex digits)";
      hub::AddLfs add{*path, hub::LfsPointer{*oid, 0}, false};
      if (const json::value* size = value->if_contains("size")) {
        boost::system::error_code ec;
        add.pointer.size = size->to_number<uint64_t>(ec);
        if (ec) return "bad size";
        add.size_given = true;
      }
      commit.operations.emplace_back(std::move(add));
    } else if (*key == "deletedFile" || *key == "deletedFolder") {
      commit.operations.emplace_back(hub::DeletePath{*path, *key == "deletedFolder"});
    } else {
      return "unknown key " + *key;
    }
    return std::nullopt;
  });
  if (error) return Refused(std::move(*error));
  if (!have_header) return Refused("a commit starts with its header line");
  return commit;
}

Parsed<DuplicateBody> ParseDuplicateBody(std::string_view body) {
  json::value storage;
  const json::object* o = ParseObject(body, storage);
  const json::value* target_v = o ? o->if_contains("target") : nullptr;
  const json::object* target = target_v ? target_v->if_object() : nullptr;
  const json::value* files_v = o ? o->if_contains("files") : nullptr;
  const auto type = target ? TypeFromSingular(StringField(*target, "type").value_or("")) : std::nullopt;
  const auto name = target ? StringField(*target, "name") : std::nullopt;
  const size_t slash = name ? name->find('/') : std::string::npos;
  if (!type || slash == std::string::npos || files_v == nullptr || !files_v->is_array() ||
      files_v->get_array().size() > 1000) {
    return Refused(R"(the body is {"target": {"type", "name"}, "files": [{"xetHash", "sha256"}]})");
  }
  DuplicateBody out;
  out.target = hub::RepoId{*type, name->substr(0, slash), name->substr(slash + 1)};
  for (const auto& f : files_v->get_array()) {
    const json::object* fo = f.if_object();
    const auto xet = fo ? StringField(*fo, "xetHash") : std::nullopt;
    const auto sha = fo ? StringField(*fo, "sha256") : std::nullopt;
    const auto hash = xet ? xet::Hash::FromHex(*xet) : std::nullopt;
    if (!hash || !sha) return Refused("each file needs its xetHash and sha256");
    out.files.push_back({*hash, *sha});
  }
  return out;
}

Parsed<std::vector<std::string>> ParsePathsInfoBody(std::string_view body) {
  std::vector<std::string> paths;
  json::value storage;
  if (const json::object* o = ParseObject(body, storage)) {
    if (auto p = StringArray(*o, "paths", SIZE_MAX)) paths = std::move(*p);
  } else {
    auto form = http::FormValues(body, "paths");
    if (!form) return Refused("the body is a form of paths");
    paths = std::move(*form);
  }
  if (paths.size() > 1000) return Refused("at most 1000 paths in one request");
  return paths;
}

// ---- Hub: buckets

Parsed<bool> ParseBucketCreateBody(std::string_view body) {
  if (body.empty()) return false;
  json::value storage;
  const json::object* o = ParseObject(body, storage);
  if (o == nullptr) return Refused(R"(the body is {"visibility": ...})");
  const auto vis = StringField(*o, "visibility");
  return vis && *vis != "public";
}

Parsed<bool> ParseBucketSettingsBody(std::string_view body) {
  json::value storage;
  const json::object* o = ParseObject(body, storage);
  const json::value* p = o ? o->if_contains("private") : nullptr;
  if (p == nullptr || !p->is_bool()) return Refused(R"(the body is {"private": true|false})");
  return p->get_bool();
}

Parsed<std::vector<std::string>> ParseBucketPathsInfoBody(std::string_view body) {
  json::value storage;
  const json::object* o = ParseObject(body, storage);
  auto paths = o ? StringArray(*o, "paths", 1000) : std::nullopt;
  if (!paths) return Refused(R"(the body is {"paths": [...]}, at most 1000)");
  return std::move(*paths);
}

Parsed<std::vector<hub::BucketOp>> ParseBucketBatchBody(std::string_view body) {
  std::vector<hub::BucketOp> ops;
  auto error = ForEachLine(body, "batch", [&](const json::object& o) -> std::optional<std::string> {
    const auto type = StringField(o, "type");
    const auto path = StringField(o, "path");
    if (!type || !path) return R"(each line is {"type": ..., "path": ...})";
    hub::BucketOp op;
    op.path = *path;
    if (*type == "deleteFile") {
      op.kind = hub::BucketOp::Kind::kDelete;
    } else if (*type == "addFile" || *type == "copyFile") {
      op.kind = *type == "addFile" ? hub::BucketOp::Kind::kAdd : hub::BucketOp::Kind::kCopy;
      const auto hash = StringField(o, "xetHash");
      op.file = hash ? xet::Hash::FromHex(*hash) : std::nullopt;
      if (!op.file) return "xetHash must be 64 hex digits";
      if (const json::value* m = o.if_contains("mtime"); m != nullptr && m->is_number()) {
        boost::system::error_code ec;
        op.mtime_ms = m->to_number<int64_t>(ec);
        // Milliseconds of the years 1970 to 9999: dates huggingface_hub can read back.
        if (ec || op.mtime_ms < 0 || op.mtime_ms > 253402300799999) return "mtime out of range";
      }
      op.content_type = StringField(o, "contentType");
      if (op.kind == hub::BucketOp::Kind::kCopy) {
        const auto src_type = TypeFromSingular(StringField(o, "sourceRepoType").value_or("bucket"), true);
        const auto src = StringField(o, "sourceRepoId").value_or("");
        const size_t slash = src.find('/');
        if (!src_type || slash == std::string::npos)
          return "a copy names its sourceRepoType and sourceRepoId";
        op.source = hub::RepoId{*src_type, src.substr(0, slash), src.substr(slash + 1)};
      }
    } else {
      return "unknown type " + *type;
    }
    ops.push_back(std::move(op));
    return std::nullopt;
  });
  if (error) return Refused(std::move(*error));
  if (ops.size() > hub::BucketService::kMaxOps) return Refused("too many operations");
  return ops;
}

// ---- git-lfs

namespace {

// One {"oid", "size"} of git-lfs's bodies.
Parsed<LfsBatchObject> LfsObjectOf(const json::object& fo) {
  auto oid = StringField(fo, "oid");
  const json::value* size = fo.if_contains("size");
  if (!oid || !hub::IsSha256Hex(*oid) || size == nullptr || !size->is_number()) {
    return Refused("each object needs an oid (64 lowercase hex digits) and a size");
  }
  boost::system::error_code ec;
  const auto n = size->to_number<uint64_t>(ec);
  if (ec) return Refused("bad size");
  return LfsBatchObject{std::move(*oid), n};
}

}  // namespace

Parsed<LfsBatchBody> ParseLfsBatchBody(std::string_view body) {
  json::value storage;
  const json::object* o = ParseObject(body, storage);
  if (o == nullptr) return Refused("the body is a JSON object (git-lfs batch API)");
  LfsBatchBody out;
  auto operation = StringField(*o, "operation");
  if (!operation || (*operation != "download" && *operation != "upload")) {
    return Refused(R"("operation" is "download" or "upload")");
  }
  out.operation = std::move(*operation);
  if (const json::value* t = o->if_contains("transfers")) {
    if (!t->is_array() || t->get_array().size() > 16) return Refused(R"("transfers" is a list of names)");
    for (const auto& name : t->get_array()) {
      if (!name.is_string() || name.get_string().size() > 64)
        return Refused(R"("transfers" is a list of names)");
      out.transfers.emplace_back(name.get_string());
    }
  }
  if (const json::value* h = o->if_contains("hash_algo")) {
    if (!h->is_string() || h->get_string().size() > 64) return Refused(R"("hash_algo" is a name)");
    out.hash_algo = h->get_string();
  }
  const json::value* objects = o->if_contains("objects");
  if (objects == nullptr || !objects->is_array() || objects->get_array().size() > kMaxLfsObjects) {
    return Refused(R"("objects" is a list of {"oid", "size"}, at most 1000)");
  }
  for (const auto& v : objects->get_array()) {
    const json::object* fo = v.if_object();
    if (fo == nullptr) return Refused("each object needs an oid (64 lowercase hex digits) and a size");
    auto object = LfsObjectOf(*fo);
    if (!object) return object.error();
    out.objects.push_back(std::move(*object));
  }
  return out;
}

Parsed<LfsBatchObject> ParseLfsVerifyBody(std::string_view body) {
  json::value storage;
  const json::object* o = ParseObject(body, storage);
  if (o == nullptr) return Refused(R"(the body is a JSON object {"oid", "size"})");
  return LfsObjectOf(*o);
}

Parsed<LfsCompletionBody> ParseLfsCompletionBody(std::string_view body) {
  json::value storage;
  const json::object* o = ParseObject(body, storage);
  if (o == nullptr) return Refused(R"(the body is a JSON object {"oid", "parts"})");
  LfsCompletionBody out;
  auto oid = StringField(*o, "oid");
  if (!oid || !hub::IsSha256Hex(*oid)) return Refused("oid is 64 lowercase hex digits");
  out.oid = std::move(*oid);
  const json::value* parts = o->if_contains("parts");
  if (parts == nullptr || !parts->is_array() || parts->get_array().size() > kMaxLfsParts)
    return Refused(R"("parts" is a list of {"partNumber", "etag"}, at most 100000)");
  for (const auto& v : parts->get_array()) {
    const json::object* po = v.if_object();
    const json::value* number = po ? po->if_contains("partNumber") : nullptr;
    auto etag = po ? StringField(*po, "etag") : std::nullopt;
    boost::system::error_code ec;
    const auto n = number != nullptr && number->is_number() ? number->to_number<uint32_t>(ec) : 0;
    if (number == nullptr || !number->is_number() || ec || !etag || etag->size() > 256)
      return Refused(R"(each part is {"partNumber": N, "etag": "..."})");
    out.parts.emplace_back(n, std::move(*etag));
  }
  return out;
}

std::optional<std::string> RenamedTarget(std::string_view target, const hub::RepoId& from,
                                         const hub::RepoId& to) {
  const std::string old_path = "/" + PercentEncode(from.ns) + "/" + PercentEncode(from.name);
  for (size_t at = target.find(old_path); at != std::string_view::npos; at = target.find(old_path, at + 1)) {
    const size_t end = at + old_path.size();
    // The whole name ("/ns/old", not "/ns/older"): what follows is the path's next segment, ".git", a query,
    // or nothing.
    if (end < target.size() && target[end] != '/' && target[end] != '.' && target[end] != '?') continue;
    return std::string(target.substr(0, at)) + "/" + PercentEncode(to.ns) + "/" + PercentEncode(to.name) +
           std::string(target.substr(end));
  }
  return std::nullopt;
}

Parsed<TokenBody> ParseTokenBody(std::string_view body) {
  constexpr std::string_view kForm =
      R"(the body is {"name", "role": "read", "write" or "fineGrained", "expiresIn": seconds, )"
      R"("scoped": [{"scope", "permission": "read" or "write"}]})";
  json::value storage;
  const json::object* o = ParseObject(body, storage);
  const auto name = o ? StringField(*o, "name") : std::nullopt;
  const auto role = o ? people::ParseTokenRole(StringField(*o, "role").value_or("")) : std::nullopt;
  if (!name || !role) return Refused(std::string(kForm));
  TokenBody out{.name = *name, .role = *role, .expires_in = std::nullopt, .grants = {}};
  if (const json::value* e = o->if_contains("expiresIn"); e != nullptr) {
    if (!e->is_int64()) return Refused("expiresIn is a whole number of seconds");
    out.expires_in = e->get_int64();
  }
  const json::value* scoped = o->if_contains("scoped");
  if (scoped == nullptr) return out;
  const json::array* list = scoped->if_array();
  if (list == nullptr || list->size() > people::PeopleService::kMaxGrants) return Refused(std::string(kForm));
  for (const json::value& v : *list) {
    const json::object* g = v.if_object();
    const auto scope = g ? StringField(*g, "scope") : std::nullopt;
    const auto perm = g ? StringField(*g, "permission") : std::nullopt;
    if (!scope || !perm || (*perm != "read" && *perm != "write")) return Refused(std::string(kForm));
    out.grants.push_back(people::Grant{.scope = *scope, .write = *perm == "write"});
  }
  return out;
}

namespace {
constexpr std::string_view kTokenExchangeForm =
    "the body gives grant_type, subject_token_type, subject_token and resource (JSON or a form)";
}  // namespace

Parsed<TokenExchangeBody> TokenExchangeOf(const http::FormFields& fields) {
  TokenExchangeBody out;
  for (auto [key, into] :
       {std::pair{"grant_type", &out.grant_type}, std::pair{"subject_token_type", &out.subject_token_type},
        std::pair{"subject_token", &out.subject_token}, std::pair{"resource", &out.resource}}) {
    const auto it = fields.find(std::string_view(key));
    if (it == fields.end() || it->second.empty()) return Refused(std::string(kTokenExchangeForm));
    *into = it->second;
  }
  return out;
}

Parsed<TokenExchangeBody> ParseTokenExchangeBody(std::string_view body, bool form) {
  constexpr std::string_view kForm = kTokenExchangeForm;
  http::FormFields fields;
  if (form) {
    if (body.empty()) return Refused(std::string(kForm));
    auto parsed = http::ParseForm(body);
    if (!parsed) return Refused(std::string(kForm) + "; no field given twice");
    fields = std::move(*parsed);
  } else {
    json::value storage;
    const json::object* o = ParseObject(body, storage);
    if (o == nullptr) return Refused(std::string(kForm));
    for (const char* key : {"grant_type", "subject_token_type", "subject_token", "resource"}) {
      if (auto v = StringField(*o, key)) fields.emplace(key, *v);
    }
  }
  return TokenExchangeOf(fields);
}

Parsed<people::PublisherSpec> ParsePublisherBody(std::string_view body, std::string ns) {
  constexpr std::string_view kForm =
      R"(the body is {"repo" (optional), "issuer", "audience", "claims": {"name": "value"}, )"
      R"("role": "read" or "write"})";
  json::value storage;
  const json::object* o = ParseObject(body, storage);
  const auto issuer = o ? StringField(*o, "issuer") : std::nullopt;
  const auto audience = o ? StringField(*o, "audience") : std::nullopt;
  const json::value* claims = o ? o->if_contains("claims") : nullptr;
  if (!issuer || !audience || claims == nullptr || !claims->is_object()) return Refused(std::string(kForm));
  people::PublisherSpec out{.ns = std::move(ns),
                            .repo = StringField(*o, "repo").value_or(""),
                            .issuer = *issuer,
                            .audience = *audience,
                            .claims = {},
                            .role = people::TokenRole::kWrite};
  if (o->contains("role")) {
    const auto role = StringField(*o, "role");
    if (role != "read" && role != "write") return Refused(std::string(kForm));
    out.role = *role == "read" ? people::TokenRole::kRead : people::TokenRole::kWrite;
  }
  if (claims->as_object().size() > people::kMaxClaims) return Refused("at most 16 claims a policy");
  for (const auto& [name, value] : claims->as_object()) {
    if (!value.is_string()) return Refused("a claim's value is a string");
    out.claims.push_back(people::Claim{.name = std::string(name), .value = std::string(value.as_string())});
  }
  return out;
}

}  // namespace cairn::api

#include "api/hub_routes.h"

#include <boost/json.hpp>
#include <charconv>
#include <ctime>
#include <functional>
#include <thread>

#include "api/errors.h"
#include "api/file_routes.h"
#include "api/requests.h"
#include "common/percent_encode.h"
#include "common/printable.h"
#include "http/auth.h"
#include "http/media_type.h"
#include "http/range.h"

namespace cairn::api {
namespace {

using http::Exchange;
using http::Response;
using http::RouteOptions;
using http::Verb;
namespace json = boost::json;

// ---- Answers

// The messages one page of a commit listing carries, at most (the page ends early past it).
constexpr size_t kCommitPageTextBytes = 4 << 20;

Response JsonAnswer(const json::value& v, unsigned status = 200) {
  return Response::Json(status, json::serialize(v));
}

// "2026-12-01T19:18:42.123Z": the only form huggingface_hub parses.
std::string IsoDateMs(int64_t unix_ms) {
  const int64_t ms = ((unix_ms % 1000) + 1000) % 1000;
  const auto t = static_cast<std::time_t>((unix_ms - ms) / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  if (std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm) == 0) return "1970-01-01T00:00:00.000Z";
  const std::string millis = std::to_string(1000 + ms);  // "1mmm": three digits after the 1
  return std::string(buf) + "." + millis.substr(1) + "Z";
}

std::string IsoDate(int64_t unix_seconds) {
  return IsoDateMs(unix_seconds * 1000);
}

// Small files' bytes as a source for range answers.
class MemorySource final : public http::ByteSource {
 public:
  explicit MemorySource(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  http::Status ReadAt(uint64_t offset, std::span<uint8_t> out) const override {
    if (offset + out.size() > bytes_.size()) return http::Error{500, "read past the end"};
    std::copy_n(bytes_.begin() + static_cast<std::ptrdiff_t>(offset), out.size(), out.begin());
    return http::Ok{};
  }

 private:
  std::vector<uint8_t> bytes_;
};

// ---- Requests

// Who asks: a token is optional on reads; a bad one is refused rather than ignored, and so is a CAS token
// (a CAS scope's credential, accepted by the CAS routes alone: it speaks for nobody here).
http::Result<hub::Caller> CallerOf(const http::Server& server, const http::Request& req) {
  const std::string_view header = req.Header("Authorization");
  if (header.empty()) return hub::Caller{};
  const http::Authenticator* auth = server.authenticator();
  if (auth == nullptr) return http::Error{401, "this server checks no tokens"};
  auto who = auth->Authenticate(header, http::Permission::kRead, http::kAccessTokens);
  if (!who) return http::Error{401, "Invalid credentials in Authorization header"};
  return hub::Caller{who->scope, who->perm == http::Permission::kWrite, who->expires};
}

struct RepoRequest {
  hub::Caller caller;
  hub::RepoId id;
};

// The caller and the repository named by the route's {types}/{ns}/{name} (types: "models" when absent).
std::optional<RepoRequest> RepoOf(const http::Server& server, const std::shared_ptr<Exchange>& ex) {
  const auto& req = ex->request();
  auto caller = CallerOf(server, req);
  if (!caller) {
    ex->Respond(HubErrorResponse(401, "", caller.error().message));
    return std::nullopt;
  }
  std::optional<hub::RepoType> type = hub::RepoType::kModel;
  if (const std::string& t = req.Param("types"); !t.empty()) type = hub::TypeFromPlural(t);
  if (!type || *type == hub::RepoType::kBucket) {
    ex->Respond(HubErrorResponse(404, "", "no such route"));
    return std::nullopt;
  }
  // A name no repository can have (not even valid UTF-8, say) is simply not found.
  if (!hub::ValidName(req.Param("ns")) || !hub::ValidName(req.Param("name"))) {
    ex->Respond(HubErrorResponse(404, "RepoNotFound", "Repository not found"));
    return std::nullopt;
  }
  return RepoRequest{std::move(*caller), hub::RepoId{*type, req.Param("ns"), req.Param("name")}};
}

bool QueryTrue(const http::Request& req, std::string_view key) {
  auto v = req.Query(key);
  return v && (*v == "1" || *v == "true" || *v == "True");
}

// The answer to a change that returns nothing: {} or the error.
Response Done(const hub::Status& st) {
  return st ? JsonAnswer(json::object{}) : HubErrorResponse(st.error());
}

// The answer to a create: `out` (the url), or when the name is taken a 409 that carries the url as well:
// huggingface_hub reads it with exist_ok.
Response CreatedAnswer(const hub::Result<hub::Repo>& made, json::object out) {
  if (!made) {
    if (made.error().kind != hub::ErrorKind::kConflict) return HubErrorResponse(made.error());
    return HubErrorResponse(made.error(), std::move(out));  // the 409 names the repository that exists
  }
  return JsonAnswer(out);
}

// ---- The routes

class HubRoutes {
 public:
  HubRoutes(http::Server& server, hub::HubService& hub, hub::BucketService& buckets,
            files::FileService& files, HubRouteOptions options)
      : server_(server), hub_(hub), buckets_(buckets), files_(files), options_(std::move(options)) {
    while (!options_.public_url.empty() && options_.public_url.back() == '/') options_.public_url.pop_back();
  }

  // Registers every route; the handlers share `self`, which lives as long as the server's router.
  static void Register(const std::shared_ptr<HubRoutes>& self);

 private:
  // Runs `fn(request, repo)` on a worker with the repository opened for reading or writing.
  template <typename Fn>
  void WithRepo(const std::shared_ptr<Exchange>& ex, bool write, Fn fn) {
    auto rr = RepoOf(server_, ex);
    if (!rr) return;
    ex->Offload([this, ex, write, rr = std::move(*rr), fn = std::move(fn)] {
      // Reads go through the mirror when there is one: it copies a repository this server does not hold.
      auto repo = (options_.mirror != nullptr && !write) ? options_.mirror->Open(rr.caller, rr.id)
                                                         : hub_.Open(rr.caller, rr.id, write);
      if (!repo && repo.error().kind == hub::ErrorKind::kNotFound && options_.mirror != nullptr) {
        // Renamed upstream: the client is sent to the new name, as the Hub sends it.
        if (auto to = options_.mirror->RenamedTo(rr.id)) {
          if (auto target = RenamedTarget(ex->request().target, rr.id, *to)) {
            Response moved = HubErrorResponse(307, "", "moved to " + to->str());
            moved.Header("Location", *target);
            return ex->Respond(std::move(moved));
          }
        }
      }
      if (!repo) return ex->Respond(HubErrorResponse(repo.error()));
      fn(rr, *repo);
    });
  }

  // A revision to read at: a mirrored repository's names as its upstream has them (mirror_service.h).
  hub::Result<hub::ObjectId> ResolveIn(const hub::Repo& repo, std::string_view revision) {
    if (options_.mirror != nullptr && hub::IsMirrored(repo.record))
      return options_.mirror->Resolve(repo, revision);
    return hub_.Resolve(repo, revision);
  }

  std::string RepoUrl(const hub::RepoId& id) const { return options_.public_url + "/" + hub::RepoPath(id); }

  json::object EntryJson(const hub::PathInfo& p) const {
    json::object o;
    o["type"] = p.is_dir ? "directory" : "file";
    o["oid"] = p.oid.hex();
    o["size"] = p.is_dir ? 0 : p.size;
    o["path"] = p.path;
    if (p.lfs) {
      o["lfs"] = {{"oid", p.lfs->sha256},
                  {"size", p.lfs->size},
                  {"pointerSize", hub::EncodeLfsPointer(*p.lfs).size()}};
    }
    if (p.xet) o["xetHash"] = p.xet->hex();
    return o;
  }

  std::optional<RepoRequest> RepoInBodyOf(const std::shared_ptr<Exchange>& ex, bool* is_private);
  void Whoami(const std::shared_ptr<Exchange>& ex);
  void Quota(const std::shared_ptr<Exchange>& ex);
  void CreateRepo(const std::shared_ptr<Exchange>& ex);
  void DeleteRepo(const std::shared_ptr<Exchange>& ex);
  void MoveRepo(const std::shared_ptr<Exchange>& ex);
  void ListRepos(const std::shared_ptr<Exchange>& ex);
  void Settings(const std::shared_ptr<Exchange>& ex);
  void RepoInfo(const std::shared_ptr<Exchange>& ex);
  void Tree(const std::shared_ptr<Exchange>& ex);
  void PathsInfo(const std::shared_ptr<Exchange>& ex);
  void Refs(const std::shared_ptr<Exchange>& ex);
  void Commits(const std::shared_ptr<Exchange>& ex);
  void Branch(const std::shared_ptr<Exchange>& ex, bool create);
  void Tag(const std::shared_ptr<Exchange>& ex, bool create);
  void Preupload(const std::shared_ptr<Exchange>& ex);
  void Commit(const std::shared_ptr<Exchange>& ex);
  void XetToken(const std::shared_ptr<Exchange>& ex, bool write);
  void DuplicateLfs(const std::shared_ptr<Exchange>& ex);
  void SuperSquash(const std::shared_ptr<Exchange>& ex);
  void ListLfsFiles(const std::shared_ptr<Exchange>& ex);
  void DeleteLfsFiles(const std::shared_ptr<Exchange>& ex);
  void Resolve(const std::shared_ptr<Exchange>& ex);
  // Sends a mirrored file being fetched as its bytes arrive (chunked: pending.spool), on this request thread:
  // all of it, or `range` of it (206).
  void StreamArriving(const std::shared_ptr<Exchange>& ex, const hub::PathInfo& info,
                      const hub::ObjectId& commit, const mirror::MirrorService::Pending& pending,
                      const std::string& xet_auth, std::optional<http::ByteRange> range);

  // Buckets.
  std::optional<RepoRequest> BucketOf(const std::shared_ptr<Exchange>& ex, bool creating = false);
  template <typename Fn>
  void WithBucket(const std::shared_ptr<Exchange>& ex, bool write, Fn fn);
  json::object BucketJson(const hub::Repo& bucket, const index::BucketTotals& totals) const;
  static json::object BucketFileJson(const index::BucketFile& f);
  void BucketCreate(const std::shared_ptr<Exchange>& ex);
  void BucketInfo(const std::shared_ptr<Exchange>& ex);
  void BucketList(const std::shared_ptr<Exchange>& ex);
  void BucketDelete(const std::shared_ptr<Exchange>& ex);
  void BucketSettings(const std::shared_ptr<Exchange>& ex);
  void BucketTree(const std::shared_ptr<Exchange>& ex);
  void BucketPathsInfo(const std::shared_ptr<Exchange>& ex);
  void BucketBatch(const std::shared_ptr<Exchange>& ex);
  void BucketToken(const std::shared_ptr<Exchange>& ex, bool write);
  void BucketResolve(const std::shared_ptr<Exchange>& ex);
  void MintCasToken(const std::shared_ptr<Exchange>& ex, const hub::Caller& caller, const hub::Repo& repo,
                    bool write);

  http::Server& server_;
  hub::HubService& hub_;
  hub::BucketService& buckets_;
  files::FileService& files_;
  HubRouteOptions options_;
};

void HubRoutes::Whoami(const std::shared_ptr<Exchange>& ex) {
  auto caller = CallerOf(server_, ex->request());
  if (!caller || caller->anonymous()) {
    return ex->Respond(HubErrorResponse(401, "", "Invalid credentials in Authorization header"));
  }
  const std::string ns = hub::NamespaceOf(caller->scope);
  json::object token{{"displayName", "cairn token for " + caller->scope},
                     {"role", caller->write ? "write" : "read"}};
  json::object out{{"type", "user"},
                   {"id", ns},
                   {"name", ns},
                   {"fullname", ns},
                   {"orgs", json::array()},
                   {"auth", {{"type", "access_token"}, {"accessToken", std::move(token)}}}};
  ex->Respond(JsonAnswer(out));
}

// A namespace's storage quota and usage, for a token of the namespace or of one of its repositories:
// measured now (with what it is made of) when asked (?measure=true) or when the recorded usage is not
// current.
void HubRoutes::Quota(const std::shared_ptr<Exchange>& ex) {
  auto caller = CallerOf(server_, ex->request());
  if (!caller || caller->anonymous()) {
    return ex->Respond(HubErrorResponse(401, "", "Invalid credentials in Authorization header"));
  }
  const std::string ns = ex->request().Param("ns");
  if (!hub::ValidName(ns) || hub::NamespaceOf(caller->scope) != ns) {
    return ex->Respond(
        HubErrorResponse(403, "", "this token does not speak for namespace " + Printable(ns, 96)));
  }
  if (options_.quota == nullptr) return ex->Respond(HubErrorResponse(404, "", "this server keeps no quotas"));
  const auto measure = ex->request().Query("measure");
  const bool asked = measure && (*measure == "true" || *measure == "1");
  ex->Offload([this, ex, ns, asked] {
    auto recorded = options_.quota->Recorded(ns);
    if (!recorded) return ex->Respond(ErrorResponse(recorded.error()));
    std::optional<quota::Usage> usage;
    if (!asked && *recorded && (*recorded)->exact) {
      usage = std::move(**recorded);
    } else {
      auto measured = options_.quota->Measure(ns);
      if (!measured) return ex->Respond(ErrorResponse(measured.error()));
      usage = std::move(*measured);
    }
    json::object out{{"namespace", ns},
                     {"used", usage->used},
                     {"exact", usage->exact},
                     {"measuredAt", usage->measured_at}};
    out["limit"] = usage->limit ? json::value(*usage->limit) : json::value(nullptr);
    if (usage->measured_at != 0 &&
        usage->repos + usage->files + usage->chunk_bytes + usage->object_bytes > 0) {
      out["repos"] = usage->repos;
      out["files"] = usage->files;
      out["chunkBytes"] = usage->chunk_bytes;
      out["objectBytes"] = usage->object_bytes;
    }
    ex->Respond(JsonAnswer(out));
  });
}

// The caller and the repository a create or delete body names (and whether it asks for a private one);
// answers the request itself when there is none.
std::optional<RepoRequest> HubRoutes::RepoInBodyOf(const std::shared_ptr<Exchange>& ex, bool* is_private) {
  auto caller = CallerOf(server_, ex->request());
  if (!caller) {
    ex->Respond(HubErrorResponse(401, "", caller.error().message));
    return std::nullopt;
  }
  auto body = ParseRepoBody(ex->request().body);
  if (!body) {
    ex->Respond(HubErrorResponse(400, "", body.error().message));
    return std::nullopt;
  }
  if (body->ns.empty()) body->ns = hub::NamespaceOf(caller->scope);
  *is_private = body->is_private;
  return RepoRequest{std::move(*caller), hub::RepoId{body->type, std::move(body->ns), std::move(body->name)}};
}

void HubRoutes::CreateRepo(const std::shared_ptr<Exchange>& ex) {
  bool is_private = false;
  auto rr = RepoInBodyOf(ex, &is_private);
  if (!rr) return;
  ex->Offload([this, ex, rr = std::move(*rr), is_private] {
    ex->Respond(CreatedAnswer(hub_.CreateRepo(rr.caller, rr.id, is_private),
                              json::object{{"url", RepoUrl(rr.id)}, {"name", rr.id.str()}}));
  });
}

void HubRoutes::DeleteRepo(const std::shared_ptr<Exchange>& ex) {
  bool is_private = false;
  auto rr = RepoInBodyOf(ex, &is_private);
  if (!rr) return;
  ex->Offload([this, ex, caller = rr->caller, id = rr->id] {
    auto st = hub_.DeleteRepo(caller, id);
    ex->Respond(Done(st));
  });
}

void HubRoutes::MoveRepo(const std::shared_ptr<Exchange>& ex) {
  auto caller = CallerOf(server_, ex->request());
  if (!caller) return ex->Respond(HubErrorResponse(401, "", caller.error().message));
  auto move = ParseMoveBody(ex->request().body);
  if (!move) return ex->Respond(HubErrorResponse(400, "", move.error().message));
  ex->Offload([this, ex, caller = *caller, a = move->from, b = move->to] {
    auto st = hub_.MoveRepo(caller, a, b);
    if (!st) return ex->Respond(HubErrorResponse(st.error()));
    ex->Respond(JsonAnswer(json::object{{"url", RepoUrl(b)}}));
  });
}

void HubRoutes::ListRepos(const std::shared_ptr<Exchange>& ex) {
  const auto& req = ex->request();
  auto caller = CallerOf(server_, req);
  if (!caller) return ex->Respond(HubErrorResponse(401, "", caller.error().message));
  const auto type = hub::TypeFromPlural(req.Param("types"));
  if (!type || *type == hub::RepoType::kBucket)
    return ex->Respond(HubErrorResponse(404, "", "no such route"));
  std::optional<std::string> author;
  if (auto a = req.Query("author"); a && !a->empty()) author = std::string(*a);
  std::optional<std::string> search;
  if (auto s = req.Query("search"); s && !s->empty()) search = std::string(*s);
  size_t limit = 1000;
  if (auto l = req.Query("limit")) {
    const auto [end, ec] = std::from_chars(l->data(), l->data() + l->size(), limit);
    if (ec != std::errc() || end != l->data() + l->size() || limit == 0) {
      return ex->Respond(HubErrorResponse(400, "", "limit must be a positive number"));
    }
    limit = std::min<size_t>(limit, 1000);
  }
  std::optional<std::string> cursor;
  if (auto c = req.Query("cursor"); c && !c->empty()) cursor = std::string(*c);
  ex->Offload([this, ex, caller = *caller, type = *type, author, search, limit, cursor] {
    auto page = hub_.ListRepos(caller, type, author, cursor, limit);
    if (!page) return ex->Respond(HubErrorResponse(page.error()));
    json::array out;
    for (const auto& r : *page) {
      const std::string id = r.record.ns + "/" + r.record.name;
      if (search && id.find(*search) == std::string::npos) continue;
      if (options_.mirror != nullptr && hub::IsMirrored(r.record) && !options_.mirror->MayRead(caller))
        continue;
      out.push_back(json::object{{"_id", r.record.scope},
                                 {"id", id},
                                 {"author", r.record.ns},
                                 {"private", r.record.is_private},
                                 {"createdAt", IsoDate(r.record.created_at)},
                                 {"downloads", 0},
                                 {"likes", 0},
                                 {"tags", json::array()}});
    }
    Response resp = JsonAnswer(out);
    if (page->size() == limit) {
      const auto& last = page->back().record;
      std::string next = options_.public_url + "/api/" + std::string(hub::Plural(type)) +
                         "?limit=" + std::to_string(limit) +
                         "&cursor=" + PercentEncode(last.ns + "/" + last.name);
      if (author) next += "&author=" + PercentEncode(*author);
      if (search) next += "&search=" + PercentEncode(*search);
      resp.Header("Link", "<" + next + ">; rel=\"next\"");
    }
    ex->Respond(std::move(resp));
  });
}

void HubRoutes::Settings(const std::shared_ptr<Exchange>& ex) {
  auto settings = ParseSettingsBody(ex->request().body);
  if (!settings) return ex->Respond(HubErrorResponse(400, "", settings.error().message));
  auto rr = RepoOf(server_, ex);
  if (!rr) return;
  ex->Offload([this, ex, rr = std::move(*rr), is_private = *settings] {
    auto st = hub_.UpdateSettings(rr.caller, rr.id, is_private);
    ex->Respond(Done(st));
  });
}

void HubRoutes::RepoInfo(const std::shared_ptr<Exchange>& ex) {
  const std::string revision = ex->request().Param("rev");
  const bool blobs = QueryTrue(ex->request(), "blobs");
  WithRepo(ex, false, [this, ex, revision, blobs](const RepoRequest& rr, const hub::Repo& repo) {
    auto oid = ResolveIn(repo, revision.empty() ? hub_.options().default_branch : revision);
    if (!oid) return ex->Respond(HubErrorResponse(oid.error()));
    auto commit = hub_.ReadCommit(repo, *oid);
    if (!commit) return ex->Respond(HubErrorResponse(commit.error()));
    auto files = hub_.List(repo, *oid, "", true);
    if (!files) return ex->Respond(HubErrorResponse(files.error()));
    json::array siblings;
    uint64_t used = 0;
    for (const auto& f : *files) {
      if (f.is_dir) continue;
      json::object s{{"rfilename", f.path}};
      if (blobs) {
        s["size"] = f.size;
        s["blobId"] = f.oid.hex();
        if (f.lfs) {
          s["lfs"] = {{"sha256", f.lfs->sha256},
                      {"size", f.lfs->size},
                      {"pointerSize", hub::EncodeLfsPointer(*f.lfs).size()}};
        }
      }
      used += f.size;
      siblings.push_back(std::move(s));
    }
    const auto& r = repo.record;
    json::object out{{"_id", r.scope},
                     {"id", rr.id.str()},
                     {"author", r.ns},
                     {"sha", oid->hex()},
                     {"lastModified", IsoDate(commit->committer.time)},
                     {"createdAt", IsoDate(r.created_at)},
                     {"private", r.is_private},
                     {"disabled", false},
                     {"gated", false},
                     {"downloads", 0},
                     {"likes", 0},
                     {"tags", json::array()},
                     {"siblings", std::move(siblings)},
                     {"usedStorage", used},
                     {"xetEnabled", true}};
    if (r.type == hub::RepoType::kModel) out["modelId"] = rr.id.str();
    if (r.type == hub::RepoType::kSpace) out["sdk"] = "static";
    ex->Respond(JsonAnswer(out));
  });
}

void HubRoutes::Tree(const std::shared_ptr<Exchange>& ex) {
  const auto& req = ex->request();
  const std::string revision = req.Param("rev");
  const std::string path = req.Param("path");
  const bool recursive = QueryTrue(req, "recursive");
  size_t cursor = 0;
  if (auto c = req.Query("cursor")) {
    const auto [end, ec] = std::from_chars(c->data(), c->data() + c->size(), cursor);
    if (ec != std::errc() || end != c->data() + c->size())
      return ex->Respond(HubErrorResponse(400, "", "bad cursor"));
  }
  WithRepo(ex, false,
           [this, ex, revision, path, recursive, cursor](const RepoRequest& rr, const hub::Repo& repo) {
             auto oid = ResolveIn(repo, revision);
             if (!oid) return ex->Respond(HubErrorResponse(oid.error()));
             auto entries = hub_.List(repo, *oid, path, recursive);
             if (!entries) return ex->Respond(HubErrorResponse(entries.error()));
             constexpr size_t kPage = 1000;
             json::array out;
             for (size_t i = cursor; i < entries->size() && i < cursor + kPage; ++i)
               out.push_back(EntryJson((*entries)[i]));
             Response resp = JsonAnswer(out);
             if (cursor + kPage < entries->size()) {
               // The next page of the same commit, whatever the branch does meanwhile.
               std::string next = options_.public_url + "/api/" + std::string(hub::Plural(rr.id.type)) + "/" +
                                  rr.id.str() + "/tree/" + oid->hex();
               if (!path.empty()) next += "/" + PercentEncode(path);
               next += std::string("?recursive=") + (recursive ? "true" : "false") +
                       "&expand=false&cursor=" + std::to_string(cursor + kPage);
               resp.Header("Link", "<" + next + ">; rel=\"next\"");
             }
             ex->Respond(std::move(resp));
           });
}

void HubRoutes::PathsInfo(const std::shared_ptr<Exchange>& ex) {
  auto paths = ParsePathsInfoBody(ex->request().body);
  if (!paths) return ex->Respond(HubErrorResponse(400, "", paths.error().message));
  const std::string revision = ex->request().Param("rev");
  WithRepo(ex, false,
           [this, ex, revision, paths = std::move(*paths)](const RepoRequest&, const hub::Repo& repo) {
             auto oid = ResolveIn(repo, revision);
             if (!oid) return ex->Respond(HubErrorResponse(oid.error()));
             json::array out;
             for (const std::string& p : paths) {
               auto info = hub_.Stat(repo, *oid, p);
               if (!info) {
                 if (info.error().kind == hub::ErrorKind::kNotFound) continue;  // missing paths are left out
                 return ex->Respond(HubErrorResponse(info.error()));
               }
               out.push_back(EntryJson(*info));
             }
             ex->Respond(JsonAnswer(out));
           });
}

void HubRoutes::Refs(const std::shared_ptr<Exchange>& ex) {
  const bool prs = QueryTrue(ex->request(), "include_prs");
  WithRepo(ex, false, [this, ex, prs](const RepoRequest&, const hub::Repo& repo) {
    auto refs = hub_.ListRefs(repo);
    if (!refs) return ex->Respond(HubErrorResponse(refs.error()));
    json::array branches, tags;
    for (const auto& r : *refs) {
      const bool branch = r.kind == index::RefKind::kBranch;
      json::object o{{"name", r.name}, {"ref", hub::FullRefName(r)}, {"targetCommit", r.target.hex()}};
      (branch ? branches : tags).push_back(std::move(o));
    }
    json::object out{
        {"branches", std::move(branches)}, {"converts", json::array()}, {"tags", std::move(tags)}};
    if (prs) out["pullRequests"] = json::array();
    ex->Respond(JsonAnswer(out));
  });
}

void HubRoutes::Commits(const std::shared_ptr<Exchange>& ex) {
  const auto& req = ex->request();
  const std::string revision = req.Param("rev");
  size_t page = 0;
  size_t limit = 50;
  std::optional<size_t> skip;  // cairn's own next links: a page cut short by its budget ends anywhere
  for (auto [key, out] : {std::pair{"p", &page}, std::pair{"limit", &limit}}) {
    if (auto v = req.Query(key)) {
      const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), *out);
      if (ec != std::errc() || end != v->data() + v->size())
        return ex->Respond(HubErrorResponse(400, "", "bad page"));
    }
  }
  if (auto v = req.Query("skip")) {
    size_t n = 0;
    const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
    if (ec != std::errc() || end != v->data() + v->size())
      return ex->Respond(HubErrorResponse(400, "", "bad skip"));
    skip = n;
  }
  limit = std::clamp<size_t>(limit, 1, 1000);
  if (!skip && page > SIZE_MAX / limit) return ex->Respond(HubErrorResponse(400, "", "bad page"));
  const size_t first = skip.value_or(page * limit);
  WithRepo(ex, false, [this, ex, revision, first, limit](const RepoRequest& rr, const hub::Repo& repo) {
    auto head = ResolveIn(repo, revision);
    if (!head) return ex->Respond(HubErrorResponse(head.error()));
    // A page holds at most kCommitPageTextBytes of messages: its memory does not grow with what was stored.
    auto listed = hub_.ListCommits(repo, *head, first, limit, kCommitPageTextBytes);
    if (!listed) return ex->Respond(HubErrorResponse(listed.error()));
    json::array out;
    for (const auto& c : listed->commits) {
      const std::string title = c.commit.title();
      std::string message =
          c.commit.message.size() > title.size() ? c.commit.message.substr(title.size()) : "";
      while (!message.empty() && message.front() == '\n') message.erase(0, 1);
      out.push_back(json::object{{"id", c.oid.hex()},
                                 {"authors", json::array{json::object{{"user", c.commit.author.name}}}},
                                 {"date", IsoDate(c.commit.committer.time)},
                                 {"title", title},
                                 {"message", message}});
    }
    Response resp = JsonAnswer(out);
    if (listed->more) {
      resp.Header("Link", "<" + options_.public_url + "/api/" + std::string(hub::Plural(rr.id.type)) + "/" +
                              rr.id.str() + "/commits/" + head->hex() +
                              "?skip=" + std::to_string(first + listed->commits.size()) +
                              "&limit=" + std::to_string(limit) + ">; rel=\"next\"");
    }
    ex->Respond(std::move(resp));
  });
}

void HubRoutes::Branch(const std::shared_ptr<Exchange>& ex, bool create) {
  const std::string branch = ex->request().Param("branch");
  std::optional<std::string> start;
  if (create) {
    auto body = ParseBranchBody(ex->request().body);
    if (!body) return ex->Respond(HubErrorResponse(400, "", body.error().message));
    start = std::move(*body);
  }
  WithRepo(ex, true, [this, ex, branch, start, create](const RepoRequest&, const hub::Repo& repo) {
    auto st = create ? hub_.CreateRef(repo, index::RefKind::kBranch, branch, start, false)
                     : hub_.DeleteRef(repo, index::RefKind::kBranch, branch);
    ex->Respond(Done(st));
  });
}

void HubRoutes::Tag(const std::shared_ptr<Exchange>& ex, bool create) {
  // Creating: the URL names the revision, the body the tag. Deleting: the URL names the tag.
  const std::string at = ex->request().Param("rev");
  std::string tag = at;
  if (create) {
    auto name = ParseTagBody(ex->request().body);
    if (!name) return ex->Respond(HubErrorResponse(400, "", name.error().message));
    tag = std::move(*name);
  }
  WithRepo(ex, true, [this, ex, tag, at, create](const RepoRequest&, const hub::Repo& repo) {
    auto st = create ? hub_.CreateRef(repo, index::RefKind::kTag, tag, at, false)
                     : hub_.DeleteRef(repo, index::RefKind::kTag, tag);
    ex->Respond(Done(st));
  });
}

void HubRoutes::Preupload(const std::shared_ptr<Exchange>& ex) {
  auto asked = ParsePreuploadBody(ex->request().body);
  if (!asked) return ex->Respond(HubErrorResponse(400, "", asked.error().message));
  const std::string revision = ex->request().Param("rev");
  WithRepo(
      ex, true, [this, ex, revision, asked = std::move(*asked)](const RepoRequest&, const hub::Repo& repo) {
        // A namespace whose quota is used up hears so before it uploads anything (huggingface_hub shows it).
        if (auto st = hub_.CheckRoom(repo); !st) return ex->Respond(HubErrorResponse(st.error()));
        auto head = hub_.Resolve(repo, revision);
        json::array out;
        for (const PreuploadFile& a : asked) {
          const bool inline_file = hub_.Inline(a.size, a.sample);
          json::object entry{
              {"path", a.path}, {"uploadMode", inline_file ? "regular" : "lfs"}, {"shouldIgnore", false}};
          entry["oid"] = nullptr;
          // What the path holds now, so that an unchanged file is not sent again.
          if (head && hub::ValidPath(a.path)) {
            if (auto info = hub_.Stat(repo, *head, a.path); info && !info->is_dir) {
              if (info->lfs && !inline_file) entry["oid"] = info->lfs->sha256;
              if (!info->lfs && inline_file) entry["oid"] = info->oid.hex();
            }
          }
          out.push_back(std::move(entry));
        }
        ex->Respond(JsonAnswer(json::object{{"files", std::move(out)}}));
      });
}

void HubRoutes::Commit(const std::shared_ptr<Exchange>& ex) {
  const auto& req = ex->request();
  if (QueryTrue(req, "create_pr"))
    return ex->Respond(HubErrorResponse(400, "", "pull requests are not supported by cairn"));
  auto commit = ParseCommitBody(req.body, hub_.options().max_inline_bytes);
  if (!commit) return ex->Respond(HubErrorResponse(400, "", commit.error().message));
  commit->branch = req.Param("rev");
  if (commit->branch.starts_with("refs/heads/")) commit->branch.erase(0, 11);
  WithRepo(ex, true, [this, ex, commit = std::move(*commit)](const RepoRequest& rr, const hub::Repo& repo) {
    auto made = hub_.CreateCommit(rr.caller, repo, commit);
    if (!made) return ex->Respond(HubErrorResponse(made.error()));
    ex->Respond(JsonAnswer(json::object{{"commitUrl", RepoUrl(rr.id) + "/commit/" + made->oid.hex()},
                                        {"commitOid", made->oid.hex()},
                                        {"pullRequestUrl", nullptr},
                                        {"success", true}}));
  });
}

// Cross-repository copies of large files: the source (this route's repository) lends its files to the
// target's scope; the commit that follows names them by SHA-256.
void HubRoutes::DuplicateLfs(const std::shared_ptr<Exchange>& ex) {
  auto body = ParseDuplicateBody(ex->request().body);
  if (!body) return ex->Respond(HubErrorResponse(400, "", body.error().message));
  WithRepo(ex, false,
           [this, ex, to = std::move(body->target), wanted = std::move(body->files)](const RepoRequest& rr,
                                                                                     const hub::Repo&) {
             auto target_repo = hub_.Open(rr.caller, to, true);
             if (!target_repo) return ex->Respond(HubErrorResponse(target_repo.error()));
             json::array failed;
             for (const DuplicateBody::File& w : wanted) {
               if (auto st = hub_.ShareLarge(rr.caller, rr.id, w.xet, w.sha256, *target_repo); !st) {
                 failed.push_back(json::object{{"sha256", w.sha256}, {"error", st.error().message}});
               }
             }
             ex->Respond(JsonAnswer(json::object{{"failed", std::move(failed)}}));
           });
}

// ---- Purge (hub/purge.cc): writers only; each removes references, a later collection frees the bytes.

void HubRoutes::SuperSquash(const std::shared_ptr<Exchange>& ex) {
  auto message = ParseSquashBody(ex->request().body);
  if (!message) return ex->Respond(HubErrorResponse(400, "", message.error().message));
  std::string branch = ex->request().Param("branch");
  if (branch.starts_with("refs/heads/")) branch.erase(0, 11);
  WithRepo(ex, true,
           [this, ex, branch, message = std::move(*message)](const RepoRequest& rr, const hub::Repo& repo) {
             auto made = hub_.SuperSquash(rr.caller, repo, branch,
                                          message.value_or("Super-squash branch '" + branch + "'"));
             if (!made) return ex->Respond(HubErrorResponse(made.error()));
             ex->Respond(JsonAnswer(json::object{{"commitOid", made->oid.hex()}}));
           });
}

void HubRoutes::ListLfsFiles(const std::shared_ptr<Exchange>& ex) {
  std::optional<std::string> cursor;
  if (auto c = ex->request().Query("cursor"); c && !c->empty()) cursor = std::string(*c);
  constexpr size_t kPage = 1000;
  WithRepo(ex, true, [this, ex, cursor](const RepoRequest& rr, const hub::Repo& repo) {
    auto page = hub_.ListLfsFiles(repo, cursor, kPage);
    if (!page) return ex->Respond(HubErrorResponse(page.error()));
    json::array out;
    for (const auto& f : page->files) {
      out.push_back(json::object{{"fileOid", f.sha256},
                                 {"oid", f.sha256},
                                 {"size", f.size},
                                 {"filename", f.filename},
                                 {"pushedAt", IsoDate(f.pushed_at)},
                                 {"xetHash", f.xet.hex()}});
    }
    Response resp = JsonAnswer(out);
    if (page->next) {
      resp.Header("Link", "<" + options_.public_url + "/api/" + std::string(hub::Plural(rr.id.type)) + "/" +
                              rr.id.str() + "/lfs-files?cursor=" + *page->next + ">; rel=\"next\"");
    }
    ex->Respond(std::move(resp));
  });
}

void HubRoutes::DeleteLfsFiles(const std::shared_ptr<Exchange>& ex) {
  auto body = ParseLfsDeletionBody(ex->request().body);
  if (!body) return ex->Respond(HubErrorResponse(400, "", body.error().message));
  WithRepo(ex, true, [this, ex, body = std::move(*body)](const RepoRequest&, const hub::Repo& repo) {
    ex->Respond(Done(hub_.DeleteLfsFiles(repo, body.sha256s, body.rewrite_history)));
  });
}

void HubRoutes::XetToken(const std::shared_ptr<Exchange>& ex, bool write) {
  WithRepo(ex, write, [this, ex, write](const RepoRequest& rr, const hub::Repo& repo) {
    MintCasToken(ex, rr.caller, repo, write);
  });
}

void HubRoutes::MintCasToken(const std::shared_ptr<Exchange>& ex, const hub::Caller& caller,
                             const hub::Repo& repo, bool write) {
  if (write) {
    if (auto st = hub_.CheckRoom(repo); !st) return ex->Respond(HubErrorResponse(st.error()));
  }
  {
    // A CAS token for one of this repository's scopes alone. A write token's scope sees every upload made
    // with it (files uploaded with it are visible to this repository only); a read token's scope sees only
    // what the repository committed, and is replaced when the repository goes private.
    // Of the CAS kind: accepted by the CAS routes alone, never as the caller of the Hub API, git or the
    // mirror (an anonymous caller gets read tokens of public repositories).
    const http::Principal who{write ? repo.record.scope : repo.record.read_scope,
                              write ? http::Permission::kWrite : http::Permission::kRead,
                              http::TokenKind::kCas};
    const http::Authenticator* auth = server_.authenticator();
    if (auth == nullptr) return ex->Respond(HubErrorResponse(500, "", "this server signs no tokens"));
    const int64_t now = auth->now();
    // No longer than the caller's own token lives: a credential mints nothing that outlives it.
    std::chrono::seconds ttl = options_.cas_token_ttl;
    if (caller.expires > 0)
      ttl = std::min(ttl, std::chrono::seconds(std::max<int64_t>(caller.expires - now, 1)));
    auto token = auth->Mint(who, ttl, now);  // with the current key, as it verifies
    if (!token) return ex->Respond(HubErrorResponse(500, "", token.error().message));
    const int64_t exp = now + ttl.count();
    Response r =
        JsonAnswer(json::object{{"accessToken", *token}, {"exp", exp}, {"casUrl", options_.public_url}});
    r.Header("X-Xet-Cas-Url", options_.public_url)
        .Header("X-Xet-Access-Token", *token)
        .Header("X-Xet-Token-Expiration", std::to_string(exp));
    ex->Respond(std::move(r));
  }
}

// ---- Buckets

std::optional<RepoRequest> HubRoutes::BucketOf(const std::shared_ptr<Exchange>& ex, bool creating) {
  const auto& req = ex->request();
  auto caller = CallerOf(server_, req);
  if (!caller) {
    ex->Respond(HubErrorResponse(401, "", caller.error().message));
    return std::nullopt;
  }
  std::string ns = req.Param("ns");
  if (ns == "me") ns = hub::NamespaceOf(caller->scope);  // huggingface_hub's "my namespace"
  if (!hub::ValidName(ns) || !hub::ValidName(req.Param("name"))) {
    ex->Respond(creating ? HubErrorResponse(400, "", "invalid bucket name: " + ns + "/" + req.Param("name"))
                         : HubErrorResponse(404, "RepoNotFound", "Bucket not found"));
    return std::nullopt;
  }
  return RepoRequest{std::move(*caller), hub::RepoId{hub::RepoType::kBucket, ns, req.Param("name")}};
}

template <typename Fn>
void HubRoutes::WithBucket(const std::shared_ptr<Exchange>& ex, bool write, Fn fn) {
  auto rr = BucketOf(ex);
  if (!rr) return;
  ex->Offload([this, ex, write, rr = std::move(*rr), fn = std::move(fn)] {
    auto bucket = hub_.Open(rr.caller, rr.id, write);
    if (!bucket) return ex->Respond(HubErrorResponse(bucket.error()));
    fn(rr, *bucket);
  });
}

json::object HubRoutes::BucketJson(const hub::Repo& bucket, const index::BucketTotals& totals) const {
  const auto& r = bucket.record;
  return json::object{{"id", r.ns + "/" + r.name},
                      {"private", r.is_private},
                      {"createdAt", IsoDate(r.created_at)},
                      {"size", totals.bytes},
                      {"totalFiles", totals.files}};
}

json::object HubRoutes::BucketFileJson(const index::BucketFile& f) {
  json::object o{{"type", "file"},
                 {"path", f.path},
                 {"size", f.size},
                 {"xetHash", f.file.hex()},
                 {"mtime", IsoDateMs(f.mtime_ms)},
                 {"uploadedAt", IsoDate(f.uploaded_at)}};
  if (f.content_type) o["contentType"] = *f.content_type;
  return o;
}

void HubRoutes::BucketCreate(const std::shared_ptr<Exchange>& ex) {
  auto is_private = ParseBucketCreateBody(ex->request().body);
  if (!is_private) return ex->Respond(HubErrorResponse(400, "", is_private.error().message));
  auto rr = BucketOf(ex, true);
  if (!rr) return;
  ex->Offload([this, ex, rr = std::move(*rr), is_private = *is_private] {
    ex->Respond(CreatedAnswer(
        hub_.CreateRepo(rr.caller, rr.id, is_private),
        json::object{{"url", options_.public_url + "/buckets/" + rr.id.str()}, {"id", rr.id.str()}}));
  });
}

void HubRoutes::BucketInfo(const std::shared_ptr<Exchange>& ex) {
  WithBucket(ex, false, [this, ex](const RepoRequest&, const hub::Repo& bucket) {
    auto totals = buckets_.Totals(bucket);
    if (!totals) return ex->Respond(HubErrorResponse(totals.error()));
    ex->Respond(JsonAnswer(BucketJson(bucket, *totals)));
  });
}

void HubRoutes::BucketList(const std::shared_ptr<Exchange>& ex) {
  const auto& req = ex->request();
  auto caller = CallerOf(server_, req);
  if (!caller) return ex->Respond(HubErrorResponse(401, "", caller.error().message));
  std::string ns = req.Param("ns");
  if (ns == "me") ns = hub::NamespaceOf(caller->scope);
  std::optional<std::string> search;
  if (auto q = req.Query("search"); q && !q->empty()) search = std::string(*q);
  std::optional<std::string> cursor;
  if (auto c = req.Query("cursor"); c && !c->empty()) cursor = std::string(*c);
  ex->Offload([this, ex, caller = *caller, ns, search, cursor] {
    constexpr size_t kPage = 100;
    auto page = hub_.ListRepos(caller, hub::RepoType::kBucket, ns, cursor, kPage);
    if (!page) return ex->Respond(HubErrorResponse(page.error()));
    json::array out;
    for (const auto& b : *page) {
      if (search && b.record.name.find(*search) == std::string::npos) continue;
      auto totals = buckets_.Totals(b);
      if (!totals) return ex->Respond(HubErrorResponse(totals.error()));
      out.push_back(BucketJson(b, *totals));
    }
    Response r = JsonAnswer(out);
    if (page->size() == kPage) {
      std::string next = options_.public_url + "/api/buckets/" + PercentEncode(ns) +
                         "?cursor=" + PercentEncode(page->back().record.ns + "/" + page->back().record.name);
      if (search) next += "&search=" + PercentEncode(*search);
      r.Header("Link", "<" + next + ">; rel=\"next\"");
    }
    ex->Respond(std::move(r));
  });
}

void HubRoutes::BucketDelete(const std::shared_ptr<Exchange>& ex) {
  auto rr = BucketOf(ex);
  if (!rr) return;
  ex->Offload([this, ex, rr = std::move(*rr)] {
    auto st = hub_.DeleteRepo(rr.caller, rr.id);
    ex->Respond(Done(st));
  });
}

void HubRoutes::BucketSettings(const std::shared_ptr<Exchange>& ex) {
  auto is_private = ParseBucketSettingsBody(ex->request().body);
  if (!is_private) return ex->Respond(HubErrorResponse(400, "", is_private.error().message));
  auto rr = BucketOf(ex);
  if (!rr) return;
  ex->Offload([this, ex, rr = std::move(*rr), is_private = *is_private] {
    auto st = hub_.UpdateSettings(rr.caller, rr.id, is_private);
    ex->Respond(Done(st));
  });
}

void HubRoutes::BucketTree(const std::shared_ptr<Exchange>& ex) {
  const auto& req = ex->request();
  const std::string prefix = req.Param("path");
  // Absent means recursive, as the Hub answers.
  const bool recursive = !req.Query("recursive") || QueryTrue(req, "recursive");
  std::optional<std::string> cursor;
  if (auto c = req.Query("cursor"); c && !c->empty()) cursor = std::string(*c);
  WithBucket(ex, false,
             [this, ex, prefix, recursive, cursor](const RepoRequest& rr, const hub::Repo& bucket) {
               constexpr size_t kPage = 1000;
               auto page = buckets_.List(bucket, prefix, recursive, cursor, kPage);
               if (!page) return ex->Respond(HubErrorResponse(page.error()));
               json::array out;
               for (const auto& e : page->entries) {
                 out.push_back(e.is_dir ? json::object{{"type", "directory"}, {"path", e.path}}
                                        : BucketFileJson(e.file));
               }
               Response r = JsonAnswer(out);
               if (page->next) {
                 std::string next = options_.public_url + "/api/buckets/" + rr.id.str() + "/tree";
                 if (!prefix.empty()) next += "/" + PercentEncode(prefix);
                 next += std::string("?recursive=") + (recursive ? "true" : "false") +
                         "&cursor=" + PercentEncode(*page->next);
                 r.Header("Link", "<" + next + ">; rel=\"next\"");
               }
               ex->Respond(std::move(r));
             });
}

void HubRoutes::BucketPathsInfo(const std::shared_ptr<Exchange>& ex) {
  auto paths = ParseBucketPathsInfoBody(ex->request().body);
  if (!paths) return ex->Respond(HubErrorResponse(400, "", paths.error().message));
  WithBucket(ex, false, [this, ex, paths = std::move(*paths)](const RepoRequest&, const hub::Repo& bucket) {
    auto files = buckets_.Stat(bucket, paths);
    if (!files) return ex->Respond(HubErrorResponse(files.error()));
    json::array out;
    for (const auto& f : *files) out.push_back(BucketFileJson(f));
    ex->Respond(JsonAnswer(out));
  });
}

void HubRoutes::BucketBatch(const std::shared_ptr<Exchange>& ex) {
  auto ops = ParseBucketBatchBody(ex->request().body);
  if (!ops) return ex->Respond(HubErrorResponse(400, "", ops.error().message));
  WithBucket(ex, true, [this, ex, ops = std::move(*ops)](const RepoRequest& rr, const hub::Repo& bucket) {
    // Copies from elsewhere: the source lends the file to this bucket's scope first (the caller must read
    // it).
    std::vector<hub::BucketOpFailure> refused;
    std::vector<hub::BucketOp> doable;
    for (hub::BucketOp op : ops) {
      if (op.kind == hub::BucketOp::Kind::kCopy && op.source && op.file &&
          !(op.source->type == hub::RepoType::kBucket && op.source->ns == bucket.record.ns &&
            op.source->name == bucket.record.name)) {
        // An empty file has no upload to lend: reading the source is all it takes.
        hub::Status st = hub::Ok{};
        if (op.file->is_zero()) {
          if (auto src = hub_.Open(rr.caller, *op.source, false); !src) st = src.error();
        } else {
          st = hub_.ShareLarge(rr.caller, *op.source, *op.file, std::nullopt, bucket);
        }
        if (!st) {
          refused.push_back({op.path, st.error().message});
          continue;
        }
        op.source.reset();  // now a file of this bucket's scope
        op.kind = hub::BucketOp::Kind::kAdd;
      }
      doable.push_back(std::move(op));
    }
    auto failed = buckets_.Apply(bucket, doable);
    if (!failed) return ex->Respond(HubErrorResponse(failed.error()));
    failed->insert(failed->begin(), refused.begin(), refused.end());
    json::array list;
    for (const auto& f : *failed) list.push_back(json::object{{"path", f.path}, {"error", f.error}});
    const bool all = failed->size() == refused.size() + doable.size() && !failed->empty();
    ex->Respond(JsonAnswer(json::object{{"failed", std::move(list)}}, all ? 422 : 200));
  });
}

void HubRoutes::BucketToken(const std::shared_ptr<Exchange>& ex, bool write) {
  WithBucket(ex, write, [this, ex, write](const RepoRequest& rr, const hub::Repo& bucket) {
    MintCasToken(ex, rr.caller, bucket, write);
  });
}

void HubRoutes::BucketResolve(const std::shared_ptr<Exchange>& ex) {
  const std::string path = ex->request().Param("path");
  WithBucket(ex, false, [this, ex, path](const RepoRequest& rr, const hub::Repo& bucket) {
    auto f = buckets_.StatOne(bucket, path);
    if (!f) return ex->Respond(HubErrorResponse(f.error()));
    const std::string etag = "\"" + f->file.hex() + "\"";
    // The type the batch gave, if it is one (a value stored before media types were checked is not), with
    // nosniff and a sandbox: whatever it is, it does not run as a page of cairn's origin.
    Response r;
    if (f->file.is_zero()) {
      r = Response::Binary(200, "");
      r.Header("ETag", etag);
      http::SetStoredBytesHeaders(r, f->content_type);
    } else {
      auto stored = hub_.OpenLarge(bucket, f->file);
      if (!stored) return ex->Respond(HubErrorResponse(stored.error()));
      r = ServeStoredFile(files_, ex->request(), std::move(*stored), etag, options_.max_ranges,
                          f->content_type);
    }
    r.Header("X-Xet-Hash", f->file.hex())
        .Header("X-Linked-Size", std::to_string(f->size))
        .Header("Link", "<" + options_.public_url + "/api/buckets/" + rr.id.str() +
                            "/xet-read-token>; rel=\"xet-auth\"");
    ex->Respond(std::move(r));
  });
}

void HubRoutes::Resolve(const std::shared_ptr<Exchange>& ex) {
  const std::string revision = ex->request().Param("rev");
  const std::string path = ex->request().Param("path");
  WithRepo(ex, false, [this, ex, revision, path](const RepoRequest& rr, const hub::Repo& repo) {
    auto oid = ResolveIn(repo, revision);
    if (!oid) return ex->Respond(HubErrorResponse(oid.error()));
    auto info = hub_.Stat(repo, *oid, path);
    if (!info) return ex->Respond(HubErrorResponse(info.error()));
    if (info->is_dir) return ex->Respond(HubErrorResponse(404, "EntryNotFound", path + " is a folder"));
    const auto& req = ex->request();
    const std::string xet_auth = "<" + options_.public_url + "/api/" + std::string(hub::Plural(rr.id.type)) +
                                 "/" + rr.id.str() + "/xet-read-token/" + oid->hex() + ">; rel=\"xet-auth\"";
    if (info->lfs && hub::IsMirrored(repo.record)) {
      // A mirrored repository's large file, fetched now when it was not yet. A HEAD is answered as soon as
      // upstream described it (hf_xet then waits at the reconstruction); anything else waits for the bytes.
      if (options_.mirror == nullptr && !info->xet) {
        return ex->Respond(
            HubErrorResponse(503, "", path + " is mirrored and was not fetched; mirroring is off"));
      }
      if (options_.mirror != nullptr && !info->xet) {
        auto pending = options_.mirror->Begin(repo, *oid, *info);
        if (!pending) return ex->Respond(HubErrorResponse(pending.error()));
        if (!pending->held && pending->spool && req.method == http::Verb::get) {
          // A plain download of a cold file: its bytes as they arrive (huggingface_hub without hf_xet reads
          // with a 10-second timeout, and resumes a cut download with a range).
          const auto header = req.Header("Range");
          if (header.empty()) return StreamArriving(ex, *info, *oid, *pending, xet_auth, std::nullopt);
          auto ranges = http::ParseRange(header, info->size);
          if (!ranges)
            return ex->Respond(HubErrorResponse(ranges.error().status, "", ranges.error().message));
          if (ranges->size() == 1)
            return StreamArriving(ex, *info, *oid, *pending, xet_auth, ranges->front());
          // Several ranges: answered once the file is stored.
        }
        // A HEAD is answered at once: with upstream's Xet hash when it has one (hf_xet then waits at the
        // reconstruction), else as a plain file (the client's GET then streams from the spool).
        if (!pending->held && req.method == http::Verb::head && (pending->xet || pending->spool)) {
          const std::string etag = "\"" + info->lfs->sha256 + "\"";
          Response r = http::RangeResponse(std::make_shared<const MemorySource>(std::vector<uint8_t>()),
                                           info->size, {}, "application/octet-stream");
          r.Header("ETag", etag)
              .Header("Accept-Ranges", "bytes")
              .Header("X-Linked-Etag", etag)
              .Header("X-Linked-Size", std::to_string(info->size))
              .Header("X-Repo-Commit", oid->hex());
          if (pending->xet) r.Header("X-Xet-Hash", pending->xet->hex()).Header("Link", xet_auth);
          http::SetStoredBytesHeaders(r, std::nullopt);
          return ex->Respond(std::move(r));
        }
      }
      if (options_.mirror != nullptr) {
        auto file = options_.mirror->Large(repo, *oid, *info);
        if (!file) return ex->Respond(HubErrorResponse(file.error()));
        info->xet = *file;
      }
    }
    Response r;
    if (info->xet) {
      auto stored = hub_.OpenLarge(repo, *info->xet);
      if (!stored) return ex->Respond(HubErrorResponse(stored.error()));
      const std::string etag = "\"" + info->lfs->sha256 + "\"";
      r = ServeStoredFile(files_, req, std::move(*stored), etag, options_.max_ranges);
      r.Header("X-Linked-Etag", etag)
          .Header("X-Linked-Size", std::to_string(info->size))
          .Header("X-Xet-Hash", info->xet->hex())
          .Header("Link", xet_auth);
    } else {
      auto blob = hub_.ReadBlob(repo, info->oid);
      if (!blob) return ex->Respond(HubErrorResponse(blob.error()));
      const std::string etag = "\"" + info->oid.hex() + "\"";
      const uint64_t size = blob->size();
      std::vector<http::ByteRange> ranges;
      if (auto range = req.Header("Range"); !range.empty()) {
        auto parsed = http::ParseRange(range, size, options_.max_ranges);
        if (!parsed) {
          r = Response::ErrorJson(parsed.error().status, parsed.error().message);
          if (parsed.error().status == 416) r.Header("Content-Range", "bytes */" + std::to_string(size));
          return ex->Respond(std::move(r));
        }
        ranges = std::move(*parsed);
      }
      r = http::RangeResponse(std::make_shared<const MemorySource>(std::move(*blob)), size, ranges,
                              "application/octet-stream");
      r.Header("ETag", etag).Header("Accept-Ranges", "bytes");
      http::SetStoredBytesHeaders(r, std::nullopt);
    }
    r.Header("X-Repo-Commit", oid->hex());
    ex->Respond(std::move(r));
  });
}

void HubRoutes::StreamArriving(const std::shared_ptr<Exchange>& ex, const hub::PathInfo& info,
                               const hub::ObjectId& commit, const mirror::MirrorService::Pending& pending,
                               const std::string& xet_auth, std::optional<http::ByteRange> range) {
  const std::string etag = "\"" + info.lfs->sha256 + "\"";
  Response head;
  head.Header("Content-Type", "application/octet-stream")
      .Header("ETag", etag)
      .Header("X-Linked-Etag", etag)
      .Header("X-Linked-Size", std::to_string(info.size))
      .Header("X-Repo-Commit", commit.hex());
  if (pending.xet) head.Header("X-Xet-Hash", pending.xet->hex()).Header("Link", xet_auth);
  http::SetStoredBytesHeaders(head, std::nullopt);
  const uint64_t first = range ? range->first : 0;
  const uint64_t end = range ? range->last + 1 : info.size;  // exclusive
  if (range) {
    head.Header("Content-Range", "bytes " + std::to_string(range->first) + "-" + std::to_string(range->last) +
                                     "/" + std::to_string(info.size));
  }
  auto stream = ex->StartStream(range ? 206 : 200, head.headers);
  // Paced on what the socket has not taken yet, so that a slow reader holds no more than a few MiB here. A
  // transfer that fails cuts the body short: the client sees fewer bytes than X-Linked-Size and asks again.
  constexpr size_t kPiece = 1 << 20;
  constexpr uint64_t kQueued = 8ULL << 20;
  std::string piece;
  uint64_t sent = first;
  while (sent < end && stream->open()) {
    piece.resize(std::min<uint64_t>(kPiece, end - sent));
    auto n = pending.spool->Read(sent, std::span(reinterpret_cast<uint8_t*>(piece.data()), piece.size()),
                                 std::chrono::seconds(300));
    if (!n || *n == 0) break;
    piece.resize(*n);
    sent += *n;
    if (!stream->Write(std::move(piece))) break;
    piece = std::string();
    while (stream->open() && stream->pending_bytes() > kQueued) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  if (sent == end) {
    stream->Finish();
  } else {
    stream->Abort();  // cut: never a complete body of fewer bytes
  }
}

void HubRoutes::Register(const std::shared_ptr<HubRoutes>& self) {
  auto& r = self->server_.router();
  const auto bind = [self](void (HubRoutes::*fn)(const std::shared_ptr<Exchange>&)) {
    return [self, fn](const std::shared_ptr<Exchange>& ex) { (self.get()->*fn)(ex); };
  };
  const auto with = [self](auto fn) {
    return [self, fn](const std::shared_ptr<Exchange>& ex) { fn(*self, ex); };
  };
  const uint64_t small = 1 << 20;
  const auto commits = std::make_shared<http::AdmissionGate>(self->options_.max_concurrent_commits);
  // The slots are shared fairly between namespaces (admission.h): a request counts for the namespace it may
  // write, known from the token and the URL alone; a token that cannot write there (it will be refused
  // once the repository is looked up) counts for one pool of all such requests, so no set of tokens of
  // other scopes gains shares.
  const auto tenant = [](bool bucket) {
    return [bucket](const http::Request& req) -> std::string {
      if (!req.principal) return "~none";
      const hub::Caller caller{req.principal->scope, req.principal->perm == http::Permission::kWrite,
                               req.principal->expires};
      std::optional<hub::RepoType> type = hub::RepoType::kModel;
      if (bucket) {
        type = hub::RepoType::kBucket;
      } else if (const std::string& t = req.Param("types"); !t.empty()) {
        type = hub::TypeFromPlural(t);
      }
      std::string ns = req.Param("ns");
      if (bucket && ns == "me") ns = hub::NamespaceOf(caller.scope);
      if (!type || !caller.write ||
          !hub::Covers(caller, hub::ProspectiveRecord({*type, ns, req.Param("name")})))
        return "~others";
      return "ns:" + ns;
    };
  };
  // Literal routes before the ones whose first segments are captures.
  r.Handle(Verb::get, "/api/whoami-v2", RouteOptions().Name("hub_whoami"), bind(&HubRoutes::Whoami));
  r.Handle(Verb::get, "/api/quotas/{ns}", RouteOptions().Name("hub_quota"), bind(&HubRoutes::Quota));
  r.Handle(Verb::post, "/api/validate-yaml", RouteOptions().Name("hub_validate_yaml").MaxBody(small),
           [](const std::shared_ptr<Exchange>& ex) {
             ex->Respond(JsonAnswer(json::object{{"errors", json::array()}, {"warnings", json::array()}}));
           });
  r.Handle(Verb::get, "/api/agent-harnesses", RouteOptions().Name("hub_agent_harnesses"),
           [](const std::shared_ptr<Exchange>& ex) {
             ex->Respond(
                 JsonAnswer(json::object{{"standardEnvVars", json::array()}, {"harnesses", json::object{}}}));
           });
  r.Handle(Verb::post, "/api/repos/create", RouteOptions().Name("hub_repo_create").MaxBody(small),
           bind(&HubRoutes::CreateRepo));
  r.Handle(Verb::delete_, "/api/repos/delete", RouteOptions().Name("hub_repo_delete").MaxBody(small),
           bind(&HubRoutes::DeleteRepo));
  r.Handle(Verb::post, "/api/repos/move", RouteOptions().Name("hub_repo_move").MaxBody(small),
           bind(&HubRoutes::MoveRepo));
  // Buckets, before the routes whose {types} would take "buckets".
  const std::string bucket = "/api/buckets/{ns}/{name}";
  r.Handle(Verb::get, "/api/buckets/{ns}", RouteOptions().Name("hub_bucket_list"),
           bind(&HubRoutes::BucketList));
  r.Handle(Verb::post, bucket, RouteOptions().Name("hub_bucket_create").MaxBody(small),
           bind(&HubRoutes::BucketCreate));
  r.Handle(Verb::get, bucket, RouteOptions().Name("hub_bucket_info"), bind(&HubRoutes::BucketInfo));
  r.Handle(Verb::delete_, bucket, RouteOptions().Name("hub_bucket_delete"), bind(&HubRoutes::BucketDelete));
  r.Handle(Verb::put, bucket + "/settings", RouteOptions().Name("hub_bucket_settings").MaxBody(small),
           bind(&HubRoutes::BucketSettings));
  r.Handle(Verb::get, bucket + "/tree", RouteOptions().Name("hub_bucket_tree"), bind(&HubRoutes::BucketTree));
  r.Handle(Verb::get, bucket + "/tree/{path...}", RouteOptions().Name("hub_bucket_tree"),
           bind(&HubRoutes::BucketTree));
  r.Handle(Verb::post, bucket + "/paths-info", RouteOptions().Name("hub_bucket_paths_info").MaxBody(small),
           bind(&HubRoutes::BucketPathsInfo));
  r.Handle(Verb::post, bucket + "/batch",
           RouteOptions()
               .Name("hub_bucket_batch")
               .Auth(http::Permission::kWrite)
               .MaxBody(4 * small)
               .AdmitPer(commits, tenant(true)),
           bind(&HubRoutes::BucketBatch));
  r.Handle(Verb::get, bucket + "/xet-write-token", RouteOptions().Name("hub_bucket_xet_write_token"),
           with([](HubRoutes& h, const std::shared_ptr<Exchange>& ex) { h.BucketToken(ex, true); }));
  r.Handle(Verb::get, bucket + "/xet-read-token", RouteOptions().Name("hub_bucket_xet_read_token"),
           with([](HubRoutes& h, const std::shared_ptr<Exchange>& ex) { h.BucketToken(ex, false); }));
  r.Handle(Verb::get, "/buckets/{ns}/{name}/resolve/{path...}", RouteOptions().Name("hub_bucket_resolve"),
           bind(&HubRoutes::BucketResolve));

  r.Handle(Verb::get, "/api/{types}", RouteOptions().Name("hub_repo_list"), bind(&HubRoutes::ListRepos));
  const std::string repo = "/api/{types}/{ns}/{name}";
  r.Handle(Verb::get, repo, RouteOptions().Name("hub_repo_info"), bind(&HubRoutes::RepoInfo));
  r.Handle(Verb::get, repo + "/revision/{rev}", RouteOptions().Name("hub_repo_info"),
           bind(&HubRoutes::RepoInfo));
  r.Handle(Verb::put, repo + "/settings", RouteOptions().Name("hub_settings").MaxBody(small),
           bind(&HubRoutes::Settings));
  r.Handle(Verb::get, repo + "/tree/{rev}", RouteOptions().Name("hub_tree"), bind(&HubRoutes::Tree));
  r.Handle(Verb::get, repo + "/tree/{rev}/{path...}", RouteOptions().Name("hub_tree"),
           bind(&HubRoutes::Tree));
  r.Handle(Verb::post, repo + "/paths-info/{rev}", RouteOptions().Name("hub_paths_info").MaxBody(small),
           bind(&HubRoutes::PathsInfo));
  r.Handle(Verb::get, repo + "/refs", RouteOptions().Name("hub_refs"), bind(&HubRoutes::Refs));
  r.Handle(Verb::get, repo + "/commits/{rev}", RouteOptions().Name("hub_commits"), bind(&HubRoutes::Commits));
  r.Handle(Verb::post, repo + "/branch/{branch}", RouteOptions().Name("hub_branch").MaxBody(small),
           with([](HubRoutes& h, const std::shared_ptr<Exchange>& ex) { h.Branch(ex, true); }));
  r.Handle(Verb::delete_, repo + "/branch/{branch}", RouteOptions().Name("hub_branch"),
           with([](HubRoutes& h, const std::shared_ptr<Exchange>& ex) { h.Branch(ex, false); }));
  r.Handle(Verb::post, repo + "/tag/{rev}", RouteOptions().Name("hub_tag").MaxBody(small),
           with([](HubRoutes& h, const std::shared_ptr<Exchange>& ex) { h.Tag(ex, true); }));
  r.Handle(Verb::delete_, repo + "/tag/{rev}", RouteOptions().Name("hub_tag"),
           with([](HubRoutes& h, const std::shared_ptr<Exchange>& ex) { h.Tag(ex, false); }));
  r.Handle(Verb::post, repo + "/preupload/{rev}", RouteOptions().Name("hub_preupload").MaxBody(4 * small),
           bind(&HubRoutes::Preupload));
  r.Handle(Verb::post, repo + "/commit/{rev}",
           RouteOptions()
               .Name("hub_commit")
               .Auth(http::Permission::kWrite)  // before the body is read or a slot is taken
               .MaxBody(self->options_.max_commit_bytes)
               .AdmitPer(commits, tenant(false)),
           bind(&HubRoutes::Commit));
  r.Handle(Verb::post, repo + "/lfs-files/duplicate", RouteOptions().Name("hub_lfs_duplicate").MaxBody(small),
           bind(&HubRoutes::DuplicateLfs));
  r.Handle(Verb::get, repo + "/lfs-files", RouteOptions().Name("hub_lfs_files"),
           bind(&HubRoutes::ListLfsFiles));
  r.Handle(Verb::post, repo + "/lfs-files/batch",
           RouteOptions()
               .Name("hub_lfs_files_delete")
               .Auth(http::Permission::kWrite)
               .MaxBody(small)
               .AdmitPer(commits, tenant(false)),  // a history rewrite is a commit to every ref
           bind(&HubRoutes::DeleteLfsFiles));
  r.Handle(Verb::post, repo + "/super-squash/{branch}",
           RouteOptions()
               .Name("hub_super_squash")
               .Auth(http::Permission::kWrite)
               .MaxBody(small)
               .AdmitPer(commits, tenant(false)),
           bind(&HubRoutes::SuperSquash));
  r.Handle(Verb::get, repo + "/xet-write-token/{rev}", RouteOptions().Name("hub_xet_write_token"),
           with([](HubRoutes& h, const std::shared_ptr<Exchange>& ex) { h.XetToken(ex, true); }));
  r.Handle(Verb::get, repo + "/xet-read-token/{rev}", RouteOptions().Name("hub_xet_read_token"),
           with([](HubRoutes& h, const std::shared_ptr<Exchange>& ex) { h.XetToken(ex, false); }));
  r.Handle(Verb::get, "/{ns}/{name}/resolve/{rev}/{path...}", RouteOptions().Name("hub_resolve"),
           bind(&HubRoutes::Resolve));
  // Repository ids without a namespace ("gpt2", which huggingface_hub still accepts): none exist here, and
  // they say so in the words the client tells apart (repo_exists answers False).
  // Through a mirror, the upstream's answer stands: a redirect to the id it gives (huggingface_hub follows
  // relative redirects), as the Hub redirects "gpt2" to "openai-community/gpt2".
  const auto no_namespace = [self](const std::shared_ptr<Exchange>& ex) {
    if (self->options_.mirror == nullptr) {
      return ex->Respond(HubErrorResponse(404, "RepoNotFound", "repository ids are namespace/name"));
    }
    std::optional<hub::RepoType> type = hub::RepoType::kModel;
    if (const std::string& t = ex->request().Param("types"); !t.empty()) type = hub::TypeFromPlural(t);
    const std::string name = ex->request().Param("name");
    if (!type || *type == hub::RepoType::kBucket || !hub::ValidName(name)) {
      return ex->Respond(HubErrorResponse(404, "RepoNotFound", "Repository not found"));
    }
    ex->Offload([self, ex, type = *type, name] {
      auto id = self->options_.mirror->Canonical(type, name);
      if (!id) return ex->Respond(HubErrorResponse(id.error()));
      // The request's own target with the namespace put before the name ("/gpt2/resolve/…" →
      // "/openai-community/gpt2/resolve/…", "/api/models/gpt2/…" → "/api/models/openai-community/gpt2/…").
      const std::string& target = ex->request().target;
      const std::string api = "/api/" + std::string(hub::Plural(type)) + "/";
      std::string location;
      if (target.starts_with(api)) {
        location = api + PercentEncode(id->ns) + "/" + target.substr(api.size());
      } else {
        location = "/" + PercentEncode(id->ns) + target;
      }
      // The name may differ in case or be another (a renamed repository): the rest of the path is kept.
      const std::string old_name = "/" + PercentEncode(name);
      const size_t at = location.find(old_name, location.find(PercentEncode(id->ns)));
      if (at != std::string::npos && id->name != name) {
        location.replace(at, old_name.size(), "/" + PercentEncode(id->name));
      }
      Response moved = HubErrorResponse(307, "", "moved to " + id->str());
      moved.Header("Location", location);
      ex->Respond(std::move(moved));
    });
  };
  r.Handle(Verb::get, "/api/{types}/{name}", RouteOptions().Name("hub_repo_info"), no_namespace);
  r.Handle(Verb::get, "/api/{types}/{name}/revision/{rev}", RouteOptions().Name("hub_repo_info"),
           no_namespace);
  r.Handle(Verb::get, "/{name}/resolve/{rev}/{path...}", RouteOptions().Name("hub_resolve"), no_namespace);
  r.Handle(Verb::get, "/{types}/{ns}/{name}/resolve/{rev}/{path...}", RouteOptions().Name("hub_resolve"),
           bind(&HubRoutes::Resolve));
}

}  // namespace

void RegisterHubRoutes(http::Server& server, hub::HubService& hub, hub::BucketService& buckets,
                       files::FileService& files, const HubRouteOptions& options) {
  HubRoutes::Register(std::make_shared<HubRoutes>(server, hub, buckets, files, options));
}

}  // namespace cairn::api

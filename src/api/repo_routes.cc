// The Hub's repositories as wholes (hub_context.h): create, delete and move (/api/repos/...), list
// (/api/{types}, paged by Link), info at the default branch or a revision (/api/{types}/{ns}/{name}
// [/revision/{rev}]), settings (visibility), and the xet tokens hf_xet asks for before it uploads or reads
// their files (/xet-write-token/{rev}, /xet-read-token/{rev}).
//
// Creating a name that is taken answers 409 with the repository's url (huggingface_hub's exist_ok). Reads go
// through the pull-through mirror when there is one. Handlers only read the shared HubContext; the services
// do the locking.
#include <charconv>
#include <optional>
#include <string>

#include "api/hub_context.h"
#include "common/percent_encode.h"

namespace cairn::api::hub_routes {
namespace {

// The caller and the repository a create or delete body names (and whether it asks for a private one);
// answers the request itself when there is none.
std::optional<RepoRequest> RepoInBodyOf(const HubContext& c, const std::shared_ptr<Exchange>& ex,
                                        bool* is_private) {
  auto caller = CallerOf(c.server, ex->request());
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

void CreateRepo(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  bool is_private = false;
  auto rr = RepoInBodyOf(c, ex, &is_private);
  if (!rr) return;
  ex->Offload([&c, ex, rr = std::move(*rr), is_private] {
    ex->Respond(CreatedAnswer(c.hub.CreateRepo(rr.caller, rr.id, is_private),
                              json::object{{"url", c.RepoUrl(rr.id)}, {"name", rr.id.str()}}));
  });
}

void DeleteRepo(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  bool is_private = false;
  auto rr = RepoInBodyOf(c, ex, &is_private);
  if (!rr) return;
  ex->Offload([&c, ex, caller = rr->caller, id = rr->id] {
    auto st = c.hub.DeleteRepo(caller, id);
    ex->Respond(Done(st));
  });
}

void MoveRepo(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  auto caller = CallerOf(c.server, ex->request());
  if (!caller) return ex->Respond(HubErrorResponse(401, "", caller.error().message));
  auto move = ParseMoveBody(ex->request().body);
  if (!move) return ex->Respond(HubErrorResponse(400, "", move.error().message));
  ex->Offload([&c, ex, caller = *caller, a = move->from, b = move->to] {
    auto st = c.hub.MoveRepo(caller, a, b);
    if (!st) return ex->Respond(HubErrorResponse(st.error()));
    ex->Respond(JsonAnswer(json::object{{"url", c.RepoUrl(b)}}));
  });
}

void ListRepos(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  const auto& req = ex->request();
  auto caller = CallerOf(c.server, req);
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
  if (auto cur = req.Query("cursor"); cur && !cur->empty()) cursor = std::string(*cur);
  ex->Offload([&c, ex, caller = *caller, type = *type, author, search, limit, cursor] {
    auto page = c.hub.ListRepos(caller, type, author, cursor, limit);
    if (!page) return ex->Respond(HubErrorResponse(page.error()));
    json::array out;
    for (const auto& r : *page) {
      const std::string id = r.record.ns + "/" + r.record.name;
      if (search && id.find(*search) == std::string::npos) continue;
      if (c.options.mirror != nullptr && hub::IsMirrored(r.record) && !c.options.mirror->MayRead(caller))
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
      std::string next = c.options.public_url + "/api/" + std::string(hub::Plural(type)) +
                         "?limit=" + std::to_string(limit) +
                         "&cursor=" + PercentEncode(last.ns + "/" + last.name);
      if (author) next += "&author=" + PercentEncode(*author);
      if (search) next += "&search=" + PercentEncode(*search);
      resp.Header("Link", "<" + next + ">; rel=\"next\"");
    }
    ex->Respond(std::move(resp));
  });
}

void Settings(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  auto settings = ParseSettingsBody(ex->request().body);
  if (!settings) return ex->Respond(HubErrorResponse(400, "", settings.error().message));
  auto rr = RepoOf(c.server, ex);
  if (!rr) return;
  ex->Offload([&c, ex, rr = std::move(*rr), is_private = *settings] {
    auto st = c.hub.UpdateSettings(rr.caller, rr.id, is_private);
    ex->Respond(Done(st));
  });
}

void RepoInfo(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  const std::string revision = ex->request().Param("rev");
  const bool blobs = QueryTrue(ex->request(), "blobs");
  c.WithRepo(ex, false, [&c, ex, revision, blobs](const RepoRequest& rr, const hub::Repo& repo) {
    auto oid = c.ResolveIn(repo, revision.empty() ? c.hub.options().default_branch : revision);
    if (!oid) return ex->Respond(HubErrorResponse(oid.error()));
    auto commit = c.hub.ReadCommit(repo, *oid);
    if (!commit) return ex->Respond(HubErrorResponse(commit.error()));
    auto files = c.hub.List(repo, *oid, "", true);
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

void XetToken(const HubContext& c, const std::shared_ptr<Exchange>& ex, bool write) {
  c.WithRepo(ex, write, [&c, ex, write](const RepoRequest& rr, const hub::Repo& repo) {
    c.MintCasToken(ex, rr.caller, repo, write);
  });
}

}  // namespace

void RegisterRepoRoutes(const std::shared_ptr<const HubContext>& ctx) {
  auto& r = ctx->server.router();
  const uint64_t small = 1 << 20;
  r.Handle(Verb::post, "/api/repos/create", RouteOptions().Name("hub_repo_create").MaxBody(small),
           Bind(ctx, &CreateRepo));
  r.Handle(Verb::delete_, "/api/repos/delete", RouteOptions().Name("hub_repo_delete").MaxBody(small),
           Bind(ctx, &DeleteRepo));
  r.Handle(Verb::post, "/api/repos/move", RouteOptions().Name("hub_repo_move").MaxBody(small),
           Bind(ctx, &MoveRepo));
  r.Handle(Verb::get, "/api/{types}", RouteOptions().Name("hub_repo_list"), Bind(ctx, &ListRepos));
  const std::string repo = "/api/{types}/{ns}/{name}";
  r.Handle(Verb::get, repo, RouteOptions().Name("hub_repo_info"), Bind(ctx, &RepoInfo));
  r.Handle(Verb::get, repo + "/revision/{rev}", RouteOptions().Name("hub_repo_info"), Bind(ctx, &RepoInfo));
  r.Handle(Verb::put, repo + "/settings", RouteOptions().Name("hub_settings").MaxBody(small),
           Bind(ctx, &Settings));
  r.Handle(Verb::get, repo + "/xet-write-token/{rev}", RouteOptions().Name("hub_xet_write_token"),
           Bind(ctx, &XetToken, true));
  r.Handle(Verb::get, repo + "/xet-read-token/{rev}", RouteOptions().Name("hub_xet_read_token"),
           Bind(ctx, &XetToken, false));
}

}  // namespace cairn::api::hub_routes

// The Hub's routes about a repository's revisions (hub_context.h), under /api/{types}/{ns}/{name}: what one
// holds (/tree/{rev}[/{path}], paged by Link at the commit resolved; /paths-info/{rev}, which leaves out
// missing paths), which there are (/refs), the history (/commits/{rev}, pages bounded by their messages'
// bytes), and branches and tags made and removed (/branch/{branch}, /tag/{rev}).
//
// A revision that does not resolve answers 404 RevisionNotFound; a bad cursor, page or skip answers 400.
// Handlers only read the shared HubContext; the services do the locking.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string>

#include "api/hub_context.h"
#include "common/percent_encode.h"

namespace cairn::api::hub_routes {
namespace {

// The messages one page of a commit listing carries, at most (the page ends early past it).
constexpr size_t kCommitPageTextBytes = 4 << 20;

json::object EntryJson(const hub::PathInfo& p) {
  json::object o;
  o["type"] = p.is_dir ? "directory" : "file";
  o["oid"] = p.oid.hex();
  o["size"] = p.is_dir ? 0 : p.size;
  o["path"] = p.path;
  if (p.lfs) {
    o["lfs"] = {
        {"oid", p.lfs->sha256}, {"size", p.lfs->size}, {"pointerSize", hub::EncodeLfsPointer(*p.lfs).size()}};
  }
  if (p.xet) o["xetHash"] = p.xet->hex();
  return o;
}

void Tree(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  const auto& req = ex->request();
  const std::string revision = req.Param("rev");
  const std::string path = req.Param("path");
  const bool recursive = QueryTrue(req, "recursive");
  size_t cursor = 0;
  if (auto cur = req.Query("cursor")) {
    const auto [end, ec] = std::from_chars(cur->data(), cur->data() + cur->size(), cursor);
    if (ec != std::errc() || end != cur->data() + cur->size())
      return ex->Respond(HubErrorResponse(400, "", "bad cursor"));
  }
  c.WithRepo(ex, false,
             [&c, ex, revision, path, recursive, cursor](const RepoRequest& rr, const hub::Repo& repo) {
               auto oid = c.ResolveIn(repo, revision);
               if (!oid) return ex->Respond(HubErrorResponse(oid.error()));
               auto entries = c.hub.List(repo, *oid, path, recursive);
               if (!entries) return ex->Respond(HubErrorResponse(entries.error()));
               constexpr size_t kPage = 1000;
               json::array out;
               for (size_t i = cursor; i < entries->size() && i < cursor + kPage; ++i)
                 out.push_back(EntryJson((*entries)[i]));
               Response resp = JsonAnswer(out);
               if (cursor + kPage < entries->size()) {
                 // The next page of the same commit, whatever the branch does meanwhile.
                 std::string next = c.options.public_url + "/api/" + std::string(hub::Plural(rr.id.type)) +
                                    "/" + rr.id.str() + "/tree/" + oid->hex();
                 if (!path.empty()) next += "/" + PercentEncode(path);
                 next += std::string("?recursive=") + (recursive ? "true" : "false") +
                         "&expand=false&cursor=" + std::to_string(cursor + kPage);
                 resp.Header("Link", "<" + next + ">; rel=\"next\"");
               }
               ex->Respond(std::move(resp));
             });
}

void PathsInfo(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  auto paths = ParsePathsInfoBody(ex->request().body);
  if (!paths) return ex->Respond(HubErrorResponse(400, "", paths.error().message));
  const std::string revision = ex->request().Param("rev");
  c.WithRepo(ex, false,
             [&c, ex, revision, paths = std::move(*paths)](const RepoRequest&, const hub::Repo& repo) {
               auto oid = c.ResolveIn(repo, revision);
               if (!oid) return ex->Respond(HubErrorResponse(oid.error()));
               json::array out;
               for (const std::string& p : paths) {
                 auto info = c.hub.Stat(repo, *oid, p);
                 if (!info) {
                   if (info.error().code == ErrorCode::kNotFound) continue;  // missing paths are left out
                   return ex->Respond(HubErrorResponse(info.error()));
                 }
                 out.push_back(EntryJson(*info));
               }
               ex->Respond(JsonAnswer(out));
             });
}

void Refs(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  const bool prs = QueryTrue(ex->request(), "include_prs");
  c.WithRepo(ex, false, [&c, ex, prs](const RepoRequest&, const hub::Repo& repo) {
    auto refs = c.hub.ListRefs(repo);
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

void Commits(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
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
  c.WithRepo(ex, false, [&c, ex, revision, first, limit](const RepoRequest& rr, const hub::Repo& repo) {
    auto head = c.ResolveIn(repo, revision);
    if (!head) return ex->Respond(HubErrorResponse(head.error()));
    // A page holds at most kCommitPageTextBytes of messages: its memory does not grow with what was stored.
    auto listed = c.hub.ListCommits(repo, *head, first, limit, kCommitPageTextBytes);
    if (!listed) return ex->Respond(HubErrorResponse(listed.error()));
    json::array out;
    for (const auto& lc : listed->commits) {
      const std::string title = lc.commit.title();
      std::string message =
          lc.commit.message.size() > title.size() ? lc.commit.message.substr(title.size()) : "";
      while (!message.empty() && message.front() == '\n') message.erase(0, 1);
      out.push_back(json::object{{"id", lc.oid.hex()},
                                 {"authors", json::array{json::object{{"user", lc.commit.author.name}}}},
                                 {"date", IsoDate(lc.commit.committer.time)},
                                 {"title", title},
                                 {"message", message}});
    }
    Response resp = JsonAnswer(out);
    if (listed->more) {
      resp.Header("Link", "<" + c.options.public_url + "/api/" + std::string(hub::Plural(rr.id.type)) + "/" +
                              rr.id.str() + "/commits/" + head->hex() +
                              "?skip=" + std::to_string(first + listed->commits.size()) +
                              "&limit=" + std::to_string(limit) + ">; rel=\"next\"");
    }
    ex->Respond(std::move(resp));
  });
}

void Branch(const HubContext& c, const std::shared_ptr<Exchange>& ex, bool create) {
  const std::string branch = ex->request().Param("branch");
  std::optional<std::string> start;
  if (create) {
    auto body = ParseBranchBody(ex->request().body);
    if (!body) return ex->Respond(HubErrorResponse(400, "", body.error().message));
    start = std::move(*body);
  }
  c.WithRepo(ex, true, [&c, ex, branch, start, create](const RepoRequest& rr, const hub::Repo& repo) {
    auto st = create ? c.hub.CreateRef(rr.caller, repo, index::RefKind::kBranch, branch, start, false)
                     : c.hub.DeleteRef(rr.caller, repo, index::RefKind::kBranch, branch);
    ex->Respond(Done(st));
  });
}

void Tag(const HubContext& c, const std::shared_ptr<Exchange>& ex, bool create) {
  // Creating: the URL names the revision, the body the tag. Deleting: the URL names the tag.
  const std::string at = ex->request().Param("rev");
  std::string tag = at;
  if (create) {
    auto name = ParseTagBody(ex->request().body);
    if (!name) return ex->Respond(HubErrorResponse(400, "", name.error().message));
    tag = std::move(*name);
  }
  c.WithRepo(ex, true, [&c, ex, tag, at, create](const RepoRequest& rr, const hub::Repo& repo) {
    auto st = create ? c.hub.CreateRef(rr.caller, repo, index::RefKind::kTag, tag, at, false)
                     : c.hub.DeleteRef(rr.caller, repo, index::RefKind::kTag, tag);
    ex->Respond(Done(st));
  });
}

}  // namespace

void RegisterRevisionRoutes(const std::shared_ptr<const HubContext>& ctx) {
  auto& r = ctx->server.router();
  const uint64_t small = 1 << 20;
  const std::string repo = "/api/{types}/{ns}/{name}";
  r.Handle(Verb::get, repo + "/tree/{rev}", RouteOptions().Name("hub_tree"), Bind(ctx, &Tree));
  r.Handle(Verb::get, repo + "/tree/{rev}/{path...}", RouteOptions().Name("hub_tree"), Bind(ctx, &Tree));
  r.Handle(Verb::post, repo + "/paths-info/{rev}", RouteOptions().Name("hub_paths_info").MaxBody(small),
           Bind(ctx, &PathsInfo));
  r.Handle(Verb::get, repo + "/refs", RouteOptions().Name("hub_refs"), Bind(ctx, &Refs));
  r.Handle(Verb::get, repo + "/commits/{rev}", RouteOptions().Name("hub_commits"), Bind(ctx, &Commits));
  r.Handle(Verb::post, repo + "/branch/{branch}", RouteOptions().Name("hub_branch").MaxBody(small),
           Bind(ctx, &Branch, true));
  r.Handle(Verb::delete_, repo + "/branch/{branch}", RouteOptions().Name("hub_branch"),
           Bind(ctx, &Branch, false));
  r.Handle(Verb::post, repo + "/tag/{rev}", RouteOptions().Name("hub_tag").MaxBody(small),
           Bind(ctx, &Tag, true));
  r.Handle(Verb::delete_, repo + "/tag/{rev}", RouteOptions().Name("hub_tag"), Bind(ctx, &Tag, false));
}

}  // namespace cairn::api::hub_routes

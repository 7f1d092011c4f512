// The Hub's routes that write a repository's history (hub_context.h), under /api/{types}/{ns}/{name}: the
// preupload check (/preupload/{rev}: which files go inline, which are unchanged), the commit itself
// (/commit/{rev}, NDJSON), large files lent to another repository (/lfs-files/duplicate), and the purges
// (hub/purge.cc): listing and deleting large files (/lfs-files, /lfs-files/batch) and squashing a branch
// (/super-squash/{branch}).
//
// A commit, a large-file deletion and a squash take a slot of the commit gate (max_concurrent_commits, shared
// fairly between namespaces; 503 with Retry-After past it) once a write token is checked, before their bodies
// are read; pull requests are refused (400). Handlers only read the shared HubContext; the services do the
// locking.
#include <optional>
#include <string>

#include "api/hub_context.h"

namespace cairn::api::hub_routes {
namespace {

void Preupload(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  auto asked = ParsePreuploadBody(ex->request().body);
  if (!asked) return ex->Respond(HubErrorResponse(400, "", asked.error().message));
  const std::string revision = ex->request().Param("rev");
  c.WithRepo(
      ex, true, [&c, ex, revision, asked = std::move(*asked)](const RepoRequest&, const hub::Repo& repo) {
        // A namespace whose quota is used up hears so before it uploads anything (huggingface_hub shows it).
        if (auto st = c.hub.CheckRoom(repo); !st) return ex->Respond(HubErrorResponse(st.error()));
        auto head = c.hub.Resolve(repo, revision);
        json::array out;
        for (const PreuploadFile& a : asked) {
          const bool inline_file = c.hub.Inline(a.size, a.sample);
          json::object entry{
              {"path", a.path}, {"uploadMode", inline_file ? "regular" : "lfs"}, {"shouldIgnore", false}};
          entry["oid"] = nullptr;
          // What the path holds now, so that an unchanged file is not sent again.
          if (head && hub::ValidPath(a.path)) {
            if (auto info = c.hub.Stat(repo, *head, a.path); info && !info->is_dir) {
              if (info->lfs && !inline_file) entry["oid"] = info->lfs->sha256;
              if (!info->lfs && inline_file) entry["oid"] = info->oid.hex();
            }
          }
          out.push_back(std::move(entry));
        }
        ex->Respond(JsonAnswer(json::object{{"files", std::move(out)}}));
      });
}

void Commit(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  const auto& req = ex->request();
  if (QueryTrue(req, "create_pr"))
    return ex->Respond(HubErrorResponse(400, "", "pull requests are not supported by cairn"));
  auto commit = ParseCommitBody(req.body, c.hub.options().max_inline_bytes);
  if (!commit) return ex->Respond(HubErrorResponse(400, "", commit.error().message));
  commit->branch = req.Param("rev");
  if (commit->branch.starts_with("refs/heads/")) commit->branch.erase(0, 11);
  c.WithRepo(ex, true, [&c, ex, commit = std::move(*commit)](const RepoRequest& rr, const hub::Repo& repo) {
    auto made = c.hub.CreateCommit(rr.caller, repo, commit);
    if (!made) return ex->Respond(HubErrorResponse(made.error()));
    ex->Respond(JsonAnswer(json::object{{"commitUrl", c.RepoUrl(rr.id) + "/commit/" + made->oid.hex()},
                                        {"commitOid", made->oid.hex()},
                                        {"pullRequestUrl", nullptr},
                                        {"success", true}}));
  });
}

// Cross-repository copies of large files: the source (this route's repository) lends its files to the
// target's scope; the commit that follows names them by SHA-256.
void DuplicateLfs(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  auto body = ParseDuplicateBody(ex->request().body);
  if (!body) return ex->Respond(HubErrorResponse(400, "", body.error().message));
  c.WithRepo(ex, false,
             [&c, ex, to = std::move(body->target), wanted = std::move(body->files)](const RepoRequest& rr,
                                                                                     const hub::Repo&) {
               auto target_repo = c.hub.Open(rr.caller, to, true);
               if (!target_repo) return ex->Respond(HubErrorResponse(target_repo.error()));
               json::array failed;
               for (const DuplicateBody::File& w : wanted) {
                 if (auto st = c.hub.ShareLarge(rr.caller, rr.id, w.xet, w.sha256, *target_repo); !st) {
                   failed.push_back(json::object{{"sha256", w.sha256}, {"error", st.error().message}});
                 }
               }
               ex->Respond(JsonAnswer(json::object{{"failed", std::move(failed)}}));
             });
}

// ---- Purge (hub/purge.cc): writers only; each removes references, a later collection frees the bytes.

void SuperSquash(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  auto message = ParseSquashBody(ex->request().body);
  if (!message) return ex->Respond(HubErrorResponse(400, "", message.error().message));
  std::string branch = ex->request().Param("branch");
  if (branch.starts_with("refs/heads/")) branch.erase(0, 11);
  c.WithRepo(ex, true,
             [&c, ex, branch, message = std::move(*message)](const RepoRequest& rr, const hub::Repo& repo) {
               auto made = c.hub.SuperSquash(rr.caller, repo, branch,
                                             message.value_or("Super-squash branch '" + branch + "'"));
               if (!made) return ex->Respond(HubErrorResponse(made.error()));
               ex->Respond(JsonAnswer(json::object{{"commitOid", made->oid.hex()}}));
             });
}

void ListLfsFiles(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  std::optional<std::string> cursor;
  if (auto cur = ex->request().Query("cursor"); cur && !cur->empty()) cursor = std::string(*cur);
  constexpr size_t kPage = 1000;
  c.WithRepo(ex, true, [&c, ex, cursor](const RepoRequest& rr, const hub::Repo& repo) {
    auto page = c.hub.ListLfsFiles(repo, cursor, kPage);
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
      resp.Header("Link", "<" + c.options.public_url + "/api/" + std::string(hub::Plural(rr.id.type)) + "/" +
                              rr.id.str() + "/lfs-files?cursor=" + *page->next + ">; rel=\"next\"");
    }
    ex->Respond(std::move(resp));
  });
}

void DeleteLfsFiles(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  auto body = ParseLfsDeletionBody(ex->request().body);
  if (!body) return ex->Respond(HubErrorResponse(400, "", body.error().message));
  c.WithRepo(ex, true, [&c, ex, body = std::move(*body)](const RepoRequest& rr, const hub::Repo& repo) {
    ex->Respond(Done(c.hub.DeleteLfsFiles(rr.caller, repo, body.sha256s, body.rewrite_history)));
  });
}

}  // namespace

void RegisterCommitRoutes(const std::shared_ptr<const HubContext>& ctx) {
  auto& r = ctx->server.router();
  const uint64_t small = 1 << 20;
  const std::string repo = "/api/{types}/{ns}/{name}";
  r.Handle(Verb::post, repo + "/preupload/{rev}", RouteOptions().Name("hub_preupload").MaxBody(4 * small),
           Bind(ctx, &Preupload));
  r.Handle(Verb::post, repo + "/commit/{rev}",
           RouteOptions()
               .Name("hub_commit")
               .Auth(http::Permission::kWrite)  // before the body is read or a slot is taken
               .MaxBody(ctx->options.max_commit_bytes)
               .AdmitPer(ctx->commits, CommitTenant(false)),
           Bind(ctx, &Commit));
  r.Handle(Verb::post, repo + "/lfs-files/duplicate", RouteOptions().Name("hub_lfs_duplicate").MaxBody(small),
           Bind(ctx, &DuplicateLfs));
  r.Handle(Verb::get, repo + "/lfs-files", RouteOptions().Name("hub_lfs_files"), Bind(ctx, &ListLfsFiles));
  r.Handle(Verb::post, repo + "/lfs-files/batch",
           RouteOptions()
               .Name("hub_lfs_files_delete")
               .Auth(http::Permission::kWrite)
               .MaxBody(small)
               .AdmitPer(ctx->commits, CommitTenant(false)),  // a history rewrite is a commit to every ref
           Bind(ctx, &DeleteLfsFiles));
  r.Handle(Verb::post, repo + "/super-squash/{branch}",
           RouteOptions()
               .Name("hub_super_squash")
               .Auth(http::Permission::kWrite)
               .MaxBody(small)
               .AdmitPer(ctx->commits, CommitTenant(false)),
           Bind(ctx, &SuperSquash));
}

}  // namespace cairn::api::hub_routes

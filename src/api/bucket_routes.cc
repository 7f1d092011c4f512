// The Hub's buckets (hub/bucket_service.h), flat stores of files without history, as huggingface_hub's
// bucket API calls them: list, create, info, delete and settings under /api/buckets/{ns}[/{name}] ("me" for
// the caller's namespace), the tree and paths-info of their files, batches of additions, copies and
// deletions, the xet tokens that upload and read their files, and downloads at /buckets/{ns}/{name}/resolve/
// {path}.
//
// A name no bucket can have answers 404 (400 when creating one). A batch answers 200 with the operations that
// failed, 422 when they all did; batches share the commits' admission gate. Handlers only read the shared
// HubContext; the services do the locking.
#include <optional>
#include <string>
#include <vector>

#include "api/file_routes.h"
#include "api/hub_context.h"
#include "common/percent_encode.h"
#include "http/media_type.h"

namespace cairn::api::hub_routes {
namespace {

// The caller and the bucket named by the route's {ns}/{name}; answers the request itself when there is none.
std::optional<RepoRequest> BucketOf(const HubContext& c, const std::shared_ptr<Exchange>& ex,
                                    bool creating = false) {
  const auto& req = ex->request();
  auto caller = CallerOf(c.server, req);
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

// Runs `fn(request, bucket)` on a worker with the bucket opened for reading or writing.
template <typename Fn>
void WithBucket(const HubContext& c, const std::shared_ptr<Exchange>& ex, bool write, Fn fn) {
  auto rr = BucketOf(c, ex);
  if (!rr) return;
  ex->Offload([&c, ex, write, rr = std::move(*rr), fn = std::move(fn)] {
    auto bucket = c.hub.Open(rr.caller, rr.id, write);
    if (!bucket) return ex->Respond(HubErrorResponse(bucket.error()));
    fn(rr, *bucket);
  });
}

json::object BucketJson(const hub::Repo& bucket, const index::BucketTotals& totals) {
  const auto& r = bucket.record;
  return json::object{{"id", r.ns + "/" + r.name},
                      {"private", r.is_private},
                      {"createdAt", IsoDate(r.created_at)},
                      {"size", totals.bytes},
                      {"totalFiles", totals.files}};
}

json::object BucketFileJson(const index::BucketFile& f) {
  json::object o{{"type", "file"},
                 {"path", f.path},
                 {"size", f.size},
                 {"xetHash", f.file.hex()},
                 {"mtime", IsoDateMs(f.mtime_ms)},
                 {"uploadedAt", IsoDate(f.uploaded_at)}};
  if (f.content_type) o["contentType"] = *f.content_type;
  return o;
}

void BucketCreate(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  auto is_private = ParseBucketCreateBody(ex->request().body);
  if (!is_private) return ex->Respond(HubErrorResponse(400, "", is_private.error().message));
  auto rr = BucketOf(c, ex, true);
  if (!rr) return;
  ex->Offload([&c, ex, rr = std::move(*rr), is_private = *is_private] {
    ex->Respond(CreatedAnswer(
        c.hub.CreateRepo(rr.caller, rr.id, is_private),
        json::object{{"url", c.options.public_url + "/buckets/" + rr.id.str()}, {"id", rr.id.str()}}));
  });
}

void BucketInfo(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  WithBucket(c, ex, false, [&c, ex](const RepoRequest&, const hub::Repo& bucket) {
    auto totals = c.buckets.Totals(bucket);
    if (!totals) return ex->Respond(HubErrorResponse(totals.error()));
    ex->Respond(JsonAnswer(BucketJson(bucket, *totals)));
  });
}

void BucketList(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  const auto& req = ex->request();
  auto caller = CallerOf(c.server, req);
  if (!caller) return ex->Respond(HubErrorResponse(401, "", caller.error().message));
  std::string ns = req.Param("ns");
  if (ns == "me") ns = hub::NamespaceOf(caller->scope);
  std::optional<std::string> search;
  if (auto q = req.Query("search"); q && !q->empty()) search = std::string(*q);
  std::optional<std::string> cursor;
  if (auto cur = req.Query("cursor"); cur && !cur->empty()) cursor = std::string(*cur);
  ex->Offload([&c, ex, caller = *caller, ns, search, cursor] {
    constexpr size_t kPage = 100;
    auto page = c.hub.ListRepos(caller, hub::RepoType::kBucket, ns, cursor, kPage);
    if (!page) return ex->Respond(HubErrorResponse(page.error()));
    json::array out;
    for (const auto& b : *page) {
      if (search && b.record.name.find(*search) == std::string::npos) continue;
      auto totals = c.buckets.Totals(b);
      if (!totals) return ex->Respond(HubErrorResponse(totals.error()));
      out.push_back(BucketJson(b, *totals));
    }
    Response r = JsonAnswer(out);
    if (page->size() == kPage) {
      std::string next = c.options.public_url + "/api/buckets/" + PercentEncode(ns) +
                         "?cursor=" + PercentEncode(page->back().record.ns + "/" + page->back().record.name);
      if (search) next += "&search=" + PercentEncode(*search);
      r.Header("Link", "<" + next + ">; rel=\"next\"");
    }
    ex->Respond(std::move(r));
  });
}

void BucketDelete(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  auto rr = BucketOf(c, ex);
  if (!rr) return;
  ex->Offload([&c, ex, rr = std::move(*rr)] {
    auto st = c.hub.DeleteRepo(rr.caller, rr.id);
    ex->Respond(Done(st));
  });
}

void BucketSettings(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  auto is_private = ParseBucketSettingsBody(ex->request().body);
  if (!is_private) return ex->Respond(HubErrorResponse(400, "", is_private.error().message));
  auto rr = BucketOf(c, ex);
  if (!rr) return;
  ex->Offload([&c, ex, rr = std::move(*rr), is_private = *is_private] {
    auto st = c.hub.UpdateSettings(rr.caller, rr.id, is_private);
    ex->Respond(Done(st));
  });
}

void BucketTree(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  const auto& req = ex->request();
  const std::string prefix = req.Param("path");
  // Absent means recursive, as the Hub answers.
  const bool recursive = !req.Query("recursive") || QueryTrue(req, "recursive");
  std::optional<std::string> cursor;
  if (auto cur = req.Query("cursor"); cur && !cur->empty()) cursor = std::string(*cur);
  WithBucket(c, ex, false,
             [&c, ex, prefix, recursive, cursor](const RepoRequest& rr, const hub::Repo& bucket) {
               constexpr size_t kPage = 1000;
               auto page = c.buckets.List(bucket, prefix, recursive, cursor, kPage);
               if (!page) return ex->Respond(HubErrorResponse(page.error()));
               json::array out;
               for (const auto& e : page->entries) {
                 out.push_back(e.is_dir ? json::object{{"type", "directory"}, {"path", e.path}}
                                        : BucketFileJson(e.file));
               }
               Response r = JsonAnswer(out);
               if (page->next) {
                 std::string next = c.options.public_url + "/api/buckets/" + rr.id.str() + "/tree";
                 if (!prefix.empty()) next += "/" + PercentEncode(prefix);
                 next += std::string("?recursive=") + (recursive ? "true" : "false") +
                         "&cursor=" + PercentEncode(*page->next);
                 r.Header("Link", "<" + next + ">; rel=\"next\"");
               }
               ex->Respond(std::move(r));
             });
}

void BucketPathsInfo(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  auto paths = ParseBucketPathsInfoBody(ex->request().body);
  if (!paths) return ex->Respond(HubErrorResponse(400, "", paths.error().message));
  WithBucket(c, ex, false, [&c, ex, paths = std::move(*paths)](const RepoRequest&, const hub::Repo& bucket) {
    auto files = c.buckets.Stat(bucket, paths);
    if (!files) return ex->Respond(HubErrorResponse(files.error()));
    json::array out;
    for (const auto& f : *files) out.push_back(BucketFileJson(f));
    ex->Respond(JsonAnswer(out));
  });
}

void BucketBatch(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  auto ops = ParseBucketBatchBody(ex->request().body);
  if (!ops) return ex->Respond(HubErrorResponse(400, "", ops.error().message));
  WithBucket(c, ex, true, [&c, ex, ops = std::move(*ops)](const RepoRequest& rr, const hub::Repo& bucket) {
    // Copies from elsewhere: the source lends the file to this bucket's scope first (the caller must read
    // it).
    std::vector<hub::BucketOpFailure> refused;
    std::vector<hub::BucketOp> doable;
    for (hub::BucketOp op : ops) {
      if (op.kind == hub::BucketOp::Kind::kCopy && op.source && op.file &&
          !(op.source->type == hub::RepoType::kBucket && op.source->ns == bucket.record.ns &&
            op.source->name == bucket.record.name)) {
        // An empty file has no upload to lend: reading the source is all it takes.
        Status st = Ok{};
        if (op.file->is_zero()) {
          if (auto src = c.hub.Open(rr.caller, *op.source, false); !src) st = src.error();
        } else {
          st = c.hub.ShareLarge(rr.caller, *op.source, *op.file, std::nullopt, bucket);
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
    auto failed = c.buckets.Apply(rr.caller, bucket, doable);
    if (!failed) return ex->Respond(HubErrorResponse(failed.error()));
    failed->insert(failed->begin(), refused.begin(), refused.end());
    json::array list;
    for (const auto& f : *failed) list.push_back(json::object{{"path", f.path}, {"error", f.error}});
    const bool all = failed->size() == refused.size() + doable.size() && !failed->empty();
    ex->Respond(JsonAnswer(json::object{{"failed", std::move(list)}}, all ? 422 : 200));
  });
}

void BucketToken(const HubContext& c, const std::shared_ptr<Exchange>& ex, bool write) {
  WithBucket(c, ex, write, [&c, ex, write](const RepoRequest& rr, const hub::Repo& bucket) {
    c.MintCasToken(ex, rr.caller, bucket, write);
  });
}

void BucketResolve(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  const std::string path = ex->request().Param("path");
  WithBucket(c, ex, false, [&c, ex, path](const RepoRequest& rr, const hub::Repo& bucket) {
    auto f = c.buckets.StatOne(bucket, path);
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
      auto stored = c.hub.OpenLarge(bucket, f->file);
      if (!stored) return ex->Respond(HubErrorResponse(stored.error()));
      r = ServeStoredFile(c.files, ex->request(), std::move(*stored), etag, c.options.max_ranges,
                          f->content_type);
    }
    r.Header("X-Xet-Hash", f->file.hex())
        .Header("X-Linked-Size", std::to_string(f->size))
        .Header("Link", "<" + c.options.public_url + "/api/buckets/" + rr.id.str() +
                            "/xet-read-token>; rel=\"xet-auth\"");
    ex->Respond(std::move(r));
  });
}

}  // namespace

void RegisterBucketRoutes(const std::shared_ptr<const HubContext>& ctx) {
  auto& r = ctx->server.router();
  const uint64_t small = 1 << 20;
  const std::string bucket = "/api/buckets/{ns}/{name}";
  r.Handle(Verb::get, "/api/buckets/{ns}", RouteOptions().Name("hub_bucket_list"), Bind(ctx, &BucketList));
  r.Handle(Verb::post, bucket, RouteOptions().Name("hub_bucket_create").MaxBody(small),
           Bind(ctx, &BucketCreate));
  r.Handle(Verb::get, bucket, RouteOptions().Name("hub_bucket_info"), Bind(ctx, &BucketInfo));
  r.Handle(Verb::delete_, bucket, RouteOptions().Name("hub_bucket_delete"), Bind(ctx, &BucketDelete));
  r.Handle(Verb::put, bucket + "/settings", RouteOptions().Name("hub_bucket_settings").MaxBody(small),
           Bind(ctx, &BucketSettings));
  r.Handle(Verb::get, bucket + "/tree", RouteOptions().Name("hub_bucket_tree"), Bind(ctx, &BucketTree));
  r.Handle(Verb::get, bucket + "/tree/{path...}", RouteOptions().Name("hub_bucket_tree"),
           Bind(ctx, &BucketTree));
  r.Handle(Verb::post, bucket + "/paths-info", RouteOptions().Name("hub_bucket_paths_info").MaxBody(small),
           Bind(ctx, &BucketPathsInfo));
  r.Handle(Verb::post, bucket + "/batch",
           RouteOptions()
               .Name("hub_bucket_batch")
               .Auth(http::Permission::kWrite)
               .MaxBody(4 * small)
               .AdmitPer(ctx->commits, CommitTenant(true)),
           Bind(ctx, &BucketBatch));
  r.Handle(Verb::get, bucket + "/xet-write-token", RouteOptions().Name("hub_bucket_xet_write_token"),
           Bind(ctx, &BucketToken, true));
  r.Handle(Verb::get, bucket + "/xet-read-token", RouteOptions().Name("hub_bucket_xet_read_token"),
           Bind(ctx, &BucketToken, false));
  r.Handle(Verb::get, "/buckets/{ns}/{name}/resolve/{path...}", RouteOptions().Name("hub_bucket_resolve"),
           Bind(ctx, &BucketResolve));
}

}  // namespace cairn::api::hub_routes

// A bucket's pages (hub/bucket_service.h): /buckets/{ns}/{name} and /buckets/{ns}/{name}/tree/{path} list a
// folder of it (its files and folders one level down, a page at a time by name), each file a download (the
// bucket's resolve route, or a signed link: FileUrl). Access is the API's: a private bucket the visitor may
// not read is the same 404 page as one that does not exist.
#include <algorithm>
#include <utility>

#include "web/page_context.h"

namespace cairn::web {

namespace {

using http::Exchange;

constexpr size_t kBucketPage = 200;
constexpr uint64_t kLinkSeconds = 15 * 60;  // a file's link from the page (as hub/download_link.h's)

// Where a browser gets a bucket's file: its download route for a public bucket when there is no user-content
// origin; else a signed link to the file (files/file_link.h, what the bucket reads) there or on cairn's
// origin, since a browser sends no token.
std::string FileUrl(const PageContext& ctx, const hub::Repo& bucket, const std::string& bucket_url,
                    const std::string& path, const index::BucketFile& file) {
  std::string plain = bucket_url + "/resolve/" + UrlPath(path);
  const bool empty = file.size == 0;  // no Xet file holds it
  if (empty || (ctx.options.content_url.empty() && !bucket.record.is_private)) return plain;
  const auto signer = ctx.files.links();
  auto link =
      signer->Sign(file.file, bucket.record.read_scope, std::min(kLinkSeconds, signer->max_ttl_seconds()),
                   path.substr(path.rfind('/') + 1));
  if (!link) return plain;
  return ctx.options.content_url + "/v1/files/" + file.file.hex() + "?" + link->query;
}

void RenderBucket(const PageContext& ctx, const std::shared_ptr<Exchange>& ex) {
  const http::Request& req = ex->request();
  const Signed who = ctx.Identify(req);
  const std::string& ns = req.Param("ns");
  const std::string& name = req.Param("name");
  const std::string path = req.Param("path");
  const auto missing = [&] { ex->Respond(ErrorPage(404, "No such bucket.", who.visitor)); };
  if (!hub::ValidName(ns) || !hub::ValidName(name)) return missing();
  auto bucket = ctx.hub.Open(who.caller, {hub::RepoType::kBucket, ns, name}, false);
  if (!bucket) return missing();
  std::optional<std::string> after;
  if (std::string a = QueryValue(req, "after"); !a.empty()) after = std::move(a);
  const std::string prefix = path.empty() ? std::string() : path + "/";
  auto listed = ctx.options.buckets->List(*bucket, prefix, false, after, kBucketPage);
  auto totals = ctx.options.buckets->Totals(*bucket);
  if (!listed || !totals) {
    const Error& e = listed ? totals.error() : listed.error();
    return ex->Respond(ErrorPage(http::HttpStatusOf(e.code), e.message, who.visitor));
  }
  if (!path.empty() && listed->entries.empty() && !after) {
    return ex->Respond(ErrorPage(404, "No such folder: " + path, who.visitor));
  }
  View v;
  v.set("ns", ns);
  v.set("name", name);
  const std::string bucket_url = "/buckets/" + UrlPath(ns) + "/" + UrlPath(name);
  v.set("bucket_url", bucket_url);
  v.set("private", bucket->record.is_private);
  v.set("files", std::to_string(totals->files));
  v.set("bytes", HumanSize(totals->bytes));
  v.set("crumbs", Crumbs(path, false));
  View entries{View::type::list};
  for (const hub::BucketEntry& e : listed->entries) {
    View row;
    std::string shown = e.path;
    while (!shown.empty() && shown.back() == '/') shown.pop_back();
    row.set("name", shown.substr(shown.rfind('/') + 1));
    row.set("url", UrlPath(shown));
    row.set("dir", e.is_dir);
    if (!e.is_dir) row.set("download", FileUrl(ctx, *bucket, bucket_url, shown, e.file));
    row.set("size", e.is_dir ? std::string() : HumanSize(e.file.size));
    row.set("uploaded", e.is_dir || e.file.uploaded_at == 0 ? std::string() : DateText(e.file.uploaded_at));
    entries.push_back(row);
  }
  v.set("entries", entries);
  if (listed->next) v.set("more", PercentEncode(*listed->next));
  const std::string title = ns + "/" + name + (path.empty() ? "" : " · " + path);
  ex->Respond(PageAnswer(200, title, Render("bucket.html", v), who.visitor));
}

}  // namespace

void RegisterBucketPages(const std::shared_ptr<const PageContext>& ctx) {
  if (ctx->options.buckets == nullptr) return;
  auto& r = ctx->server.router();
  const auto handler = [ctx](const std::shared_ptr<Exchange>& ex) {
    ex->Offload([ctx, ex] { RenderBucket(*ctx, ex); });
  };
  r.Handle(http::Verb::get, "/buckets/{ns}/{name}", http::RouteOptions().Name("page_bucket"), handler);
  r.Handle(http::Verb::get, "/buckets/{ns}/{name}/tree/{path...}", http::RouteOptions().Name("page_bucket"),
           handler);
}

}  // namespace cairn::web

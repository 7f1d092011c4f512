// The Hub's file downloads (hub_context.h): /{ns}/{name}/resolve/{rev}/{path} and the same with /datasets/
// or /spaces/ before it. Small files answer from their blobs, large ones from the CAS (file_routes.h), with
// ranges, ETag, X-Repo-Commit and, for large files, the xet hash and the Link to the read token; a mirrored
// repository's large file not yet fetched is streamed as it arrives. Also the ids without a namespace
// ("gpt2"), on these routes and on repository info: 404, or through a mirror a redirect to upstream's id.
//
// Registered after every /api/ route (/api/models/resolve/x/tree/main is a tree of the repository
// resolve/x, not a download) and in this order among themselves: the router takes the first match. A folder
// answers 404 EntryNotFound; a stream that fails mid-way is cut short (never a complete body of fewer bytes).
// Handlers only read the shared HubContext; the services do the locking.
#include <algorithm>
#include <boost/beast/core/string.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/file_routes.h"
#include "api/hub_context.h"
#include "common/percent_encode.h"
#include "http/media_type.h"
#include "http/range.h"
#include "hub/download_link.h"

namespace cairn::api::hub_routes {
namespace {

// Small files' bytes as a source for range answers.
class MemorySource final : public http::ByteSource {
 public:
  explicit MemorySource(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  http::Status ReadAt(uint64_t offset, std::span<uint8_t> out) const override {
    if (offset + out.size() > bytes_.size()) return IoError("read past the end");
    std::copy_n(bytes_.begin() + static_cast<std::ptrdiff_t>(offset), out.size(), out.begin());
    return http::Ok{};
  }

 private:
  std::vector<uint8_t> bytes_;
};

// Sends a mirrored file being fetched as its bytes arrive (chunked: pending.spool), on this request thread:
// all of it, or `range` of it (206).
void StreamArriving(const std::shared_ptr<Exchange>& ex, const hub::PathInfo& info,
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

// A small file's bytes (its blob `oid` holds them), whole or the ranges asked.
Response SmallFileAnswer(const HubContext& c, const http::Request& req, const hub::ObjectId& oid,
                         std::vector<uint8_t> bytes) {
  const uint64_t size = bytes.size();
  std::vector<http::ByteRange> ranges;
  if (auto range = req.Header("Range"); !range.empty()) {
    auto parsed = http::ParseRange(range, size, c.options.max_ranges);
    if (!parsed) {
      Response r = Response::ErrorJson(HttpStatusOf(parsed.error().code), parsed.error().message);
      if (parsed.error().code == ErrorCode::kUnsatisfiable)
        r.Header("Content-Range", "bytes */" + std::to_string(size));
      return r;
    }
    ranges = std::move(*parsed);
  }
  Response r = http::RangeResponse(std::make_shared<const MemorySource>(std::move(bytes)), size, ranges,
                                   "application/octet-stream");
  r.Header("ETag", "\"" + oid.hex() + "\"").Header("Accept-Ranges", "bytes");
  http::SetStoredBytesHeaders(r, std::nullopt);
  return r;
}

bool OnContentHost(const HubContext& c, const http::Request& req) {
  const std::string& host = c.server.options().content_host;
  return !host.empty() && boost::beast::iequals(req.Header("Host"), host);
}

// Who reads: the token's caller, or a download link's (hub/download_link.h), which reads that one file alone.
// On the user-content origin only linked downloads are served. Answers the request itself when refused.
std::optional<RepoRequest> ResolveCaller(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  const http::Request& req = ex->request();
  const bool linked = hub::CarriesDownloadLink(req.query);
  if (!linked && OnContentHost(c, req)) {
    ex->Respond(HubErrorResponse(404, "", "only download links are served here"));
    return std::nullopt;
  }
  auto rr = RepoOf(c.server, ex);
  if (!rr || !linked) return rr;
  auto caller =
      hub::VerifyDownload(*c.files.repo_links(), rr->id, req.Param("rev"), req.Param("path"), req.query);
  if (!caller) {
    ex->Respond(HubErrorResponse(403, "", caller.error().message));
    return std::nullopt;
  }
  caller->client = req.remote;
  rr->caller = std::move(*caller);
  return rr;
}

// A browser's visit (it says where the answer goes: Sec-Fetch-Dest) without a token or a link, when a
// user-content origin is configured: sent there with a link, so that no stored file is ever served on cairn's
// own origin to a browser. Clients (no Sec-Fetch-Dest) are answered here as always.
bool SendsToContentOrigin(const HubContext& c, const http::Request& req) {
  return !c.options.content_url.empty() && req.method == http::Verb::get &&
         !req.Header("Sec-Fetch-Dest").empty() && req.Header("Authorization").empty() &&
         !hub::CarriesDownloadLink(req.query);
}

void Resolve(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  const std::string revision = ex->request().Param("rev");
  const std::string path = ex->request().Param("path");
  auto asked = ResolveCaller(c, ex);
  if (!asked) return;
  c.WithRepo(
      ex, std::move(*asked), false, [&c, ex, revision, path](const RepoRequest& rr, const hub::Repo& repo) {
        auto oid = c.ResolveIn(repo, revision);
        if (!oid) return ex->Respond(HubErrorResponse(oid.error()));
        auto info = c.hub.Stat(repo, *oid, path);
        if (!info) return ex->Respond(HubErrorResponse(info.error()));
        if (info->is_dir) return ex->Respond(HubErrorResponse(404, "EntryNotFound", path + " is a folder"));
        const auto& req = ex->request();
        if (SendsToContentOrigin(c, req)) {
          auto link = hub::SignDownload(*c.files.repo_links(), rr.id, *oid, path);
          if (!link) return ex->Respond(HubErrorResponse(link.error()));
          Response moved = HubErrorResponse(302, "", "served from the user-content origin");
          moved.Header("Location", c.options.content_url + *link).Header("Cache-Control", "no-store");
          return ex->Respond(std::move(moved));
        }
        const std::string xet_auth = "<" + c.options.public_url + "/api/" +
                                     std::string(hub::Plural(rr.id.type)) + "/" + rr.id.str() +
                                     "/xet-read-token/" + oid->hex() + ">; rel=\"xet-auth\"";
        if (info->lfs && hub::IsMirrored(repo.record)) {
          // A mirrored repository's large file, fetched now when it was not yet. A HEAD is answered as soon
          // as upstream described it (hf_xet then waits at the reconstruction); anything else waits for the
          // bytes.
          if (c.options.mirror == nullptr && !info->xet) {
            return ex->Respond(
                HubErrorResponse(503, "", path + " is mirrored and was not fetched; mirroring is off"));
          }
          if (c.options.mirror != nullptr && !info->xet) {
            auto pending = c.options.mirror->Begin(repo, *oid, *info);
            if (!pending) return ex->Respond(HubErrorResponse(pending.error()));
            if (!pending->held && pending->spool && req.method == http::Verb::get) {
              // A plain download of a cold file: its bytes as they arrive (huggingface_hub without hf_xet
              // reads with a 10-second timeout, and resumes a cut download with a range).
              const auto header = req.Header("Range");
              if (header.empty()) return StreamArriving(ex, *info, *oid, *pending, xet_auth, std::nullopt);
              auto ranges = http::ParseRange(header, info->size);
              if (!ranges)
                return ex->Respond(
                    HubErrorResponse(HttpStatusOf(ranges.error().code), "", ranges.error().message));
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
          if (c.options.mirror != nullptr) {
            auto file = c.options.mirror->Large(repo, *oid, *info);
            if (!file) return ex->Respond(HubErrorResponse(file.error()));
            info->xet = *file;
          }
        }
        Response r;
        if (info->xet) {
          auto stored = c.hub.OpenLarge(repo, *info->xet);
          if (!stored) return ex->Respond(HubErrorResponse(stored.error()));
          const std::string etag = "\"" + info->lfs->sha256 + "\"";
          r = ServeStoredFile(c.files, req, std::move(*stored), etag, c.options.max_ranges);
          r.Header("X-Linked-Etag", etag)
              .Header("X-Linked-Size", std::to_string(info->size))
              .Header("X-Xet-Hash", info->xet->hex())
              .Header("Link", xet_auth);
        } else {
          auto blob = c.hub.ReadBlob(repo, info->oid);
          if (!blob) return ex->Respond(HubErrorResponse(blob.error()));
          r = SmallFileAnswer(c, req, info->oid, std::move(*blob));
        }
        r.Header("X-Repo-Commit", oid->hex());
        ex->Respond(std::move(r));
      });
}

// Repository ids without a namespace ("gpt2", which huggingface_hub still accepts): none exist here, and
// they say so in the words the client tells apart (repo_exists answers False).
// Through a mirror, the upstream's answer stands: a redirect to the id it gives (huggingface_hub follows
// relative redirects), as the Hub redirects "gpt2" to "openai-community/gpt2".
void NoNamespace(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  if (c.options.mirror == nullptr) {
    return ex->Respond(HubErrorResponse(404, "RepoNotFound", "repository ids are namespace/name"));
  }
  std::optional<hub::RepoType> type = hub::RepoType::kModel;
  if (const std::string& t = ex->request().Param("types"); !t.empty()) type = hub::TypeFromPlural(t);
  const std::string name = ex->request().Param("name");
  if (!type || *type == hub::RepoType::kBucket || !hub::ValidName(name)) {
    return ex->Respond(HubErrorResponse(404, "RepoNotFound", "Repository not found"));
  }
  ex->Offload([&c, ex, type = *type, name] {
    auto id = c.options.mirror->Canonical(type, name);
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
}

}  // namespace

void RegisterResolveRoutes(const std::shared_ptr<const HubContext>& ctx) {
  auto& r = ctx->server.router();
  r.Handle(Verb::get, "/{ns}/{name}/resolve/{rev}/{path...}",
           RouteOptions().Name("hub_resolve").UserContent(), Bind(ctx, &Resolve));
  r.Handle(Verb::get, "/api/{types}/{name}", RouteOptions().Name("hub_repo_info"), Bind(ctx, &NoNamespace));
  r.Handle(Verb::get, "/api/{types}/{name}/revision/{rev}", RouteOptions().Name("hub_repo_info"),
           Bind(ctx, &NoNamespace));
  r.Handle(Verb::get, "/{name}/resolve/{rev}/{path...}", RouteOptions().Name("hub_resolve"),
           Bind(ctx, &NoNamespace));
  r.Handle(Verb::get, "/{types}/{ns}/{name}/resolve/{rev}/{path...}",
           RouteOptions().Name("hub_resolve").UserContent(), Bind(ctx, &Resolve));
}

}  // namespace cairn::api::hub_routes

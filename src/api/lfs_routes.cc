#include "api/lfs_routes.h"

#include <boost/json.hpp>
#include <charconv>
#include <utility>

#include "api/errors.h"
#include "api/requests.h"
#include "api/worker_sink.h"

namespace cairn::api {
namespace {

using http::Exchange;
using http::Response;

Response LfsErrorOf(const Error& e) {
  return LfsError(HttpStatusOf(e.code), e.message);
}

// The grant of the link the request carries, for the object its path names.
Result<lfs::UploadGrant> GrantOf(const lfs::LfsService& lfs, const http::Request& req) {
  return lfs.Check(req.Param("oid"), req.query);
}

class LfsRoutes {
 public:
  LfsRoutes(lfs::LfsService& lfs, LfsRouteOptions options) : lfs_(lfs), options_(std::move(options)) {}

  http::Result<std::unique_ptr<http::BodySink>> PutObject(const std::shared_ptr<Exchange>& ex) {
    auto grant = GrantOf(lfs_, ex->request());
    if (!grant) return grant.error();
    if (auto st = CheckRoom(grant->scope); !st) return st.error();
    auto ingest = lfs_.BeginUpload(*grant);
    if (!ingest) return ingest.error();
    std::shared_ptr<lfs::FileIngest> shared = std::move(*ingest);
    return std::unique_ptr<http::BodySink>(std::make_unique<WorkerSink>(
        ex, [shared](std::span<const uint8_t> data) { return shared->Feed(data); },
        [shared](const std::shared_ptr<Exchange>& done) {
          auto ingested = shared->Finish();
          if (!ingested) return done->Respond(LfsErrorOf(ingested.error()));
          done->Respond(Response::Json(200, "{}"));
        },
        LfsErrorOf));
  }

  http::Result<std::unique_ptr<http::BodySink>> PutPart(const std::shared_ptr<Exchange>& ex) {
    auto grant = GrantOf(lfs_, ex->request());
    if (!grant) return grant.error();
    const std::string& n = ex->request().Param("part");
    uint32_t number = 0;
    const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), number);
    if (ec != std::errc() || end != n.data() + n.size()) return Malformed("a part number is a number");
    if (auto st = CheckRoom(grant->scope); !st) return st.error();
    auto writer = lfs_.BeginPart(*grant, number);
    if (!writer) return writer.error();
    std::shared_ptr<lfs::PartWriter> shared = std::move(*writer);
    return std::unique_ptr<http::BodySink>(std::make_unique<WorkerSink>(
        ex, [shared](std::span<const uint8_t> data) { return shared->Write(data); },
        [shared](const std::shared_ptr<Exchange>& done) {
          auto etag = shared->Finish();
          if (!etag) return done->Respond(LfsErrorOf(etag.error()));
          Response r = Response::Json(200, "{}");
          r.Header("ETag", *etag);
          done->Respond(std::move(r));
        },
        LfsErrorOf));
  }

  void Complete(const std::shared_ptr<Exchange>& ex) {
    auto grant = GrantOf(lfs_, ex->request());
    if (!grant) return ex->Respond(LfsErrorOf(grant.error()));
    auto body = ParseLfsCompletionBody(ex->request().body);
    if (!body) return ex->Respond(LfsError(422, body.error().message));
    if (body->oid != grant->oid) return ex->Respond(LfsError(422, "the body names another object"));
    ex->Offload([this, ex, grant = std::move(*grant), parts = std::move(body->parts)] {
      auto done = lfs_.CompleteParts(grant, parts);
      if (!done) return ex->Respond(LfsErrorOf(done.error()));
      ex->Respond(Response::Json(200, "{}"));
    });
  }

  void Verify(const std::shared_ptr<Exchange>& ex) {
    auto grant = GrantOf(lfs_, ex->request());
    if (!grant) return ex->Respond(LfsErrorOf(grant.error()));
    auto body = ParseLfsVerifyBody(ex->request().body);
    if (!body) return ex->Respond(LfsError(422, body.error().message));
    if (body->oid != grant->oid) return ex->Respond(LfsError(422, "the body names another object"));
    ex->Offload([this, ex, scope = grant->scope, object = std::move(*body)] {
      auto stored = lfs_.Stored(scope, object.oid, object.size);
      if (!stored) return ex->Respond(LfsErrorOf(stored.error()));
      if (!*stored) return ex->Respond(LfsError(404, "Object does not exist"));
      ex->Respond(Response::Json(200, "{}"));
    });
  }

 private:
  Status CheckRoom(const std::string& scope) {
    if (options_.quota == nullptr) return Ok{};
    return options_.quota->CheckRoomForScope(scope);
  }

  lfs::LfsService& lfs_;
  LfsRouteOptions options_;
};

}  // namespace

void RegisterLfsRoutes(http::Server& server, lfs::LfsService& lfs, const LfsRouteOptions& options) {
  auto routes = std::make_shared<LfsRoutes>(lfs, options);
  auto& r = server.router();
  // The links are the credentials: no Auth on these routes.
  // An upload's link is checked from the header, before it takes a slot of the gate: a forged or expired
  // link holds none.
  const auto upload = [&options, &lfs](const char* name) {
    auto o = http::RouteOptions().Name(name).Check([&lfs](http::Request& req) -> std::optional<Response> {
      if (auto grant = GrantOf(lfs, req); !grant) return LfsErrorOf(grant.error());
      return std::nullopt;
    });
    return options.uploads ? o.Admit(options.uploads) : o;
  };
  r.HandleStream(http::Verb::put, "/v1/lfs/{oid}", upload("lfs_upload").MaxBody(UINT64_MAX),
                 [routes](const std::shared_ptr<Exchange>& ex) { return routes->PutObject(ex); });
  r.HandleStream(http::Verb::put, "/v1/lfs/{oid}/parts/{part}",
                 upload("lfs_upload_part").MaxBody(lfs.part_bytes()),
                 [routes](const std::shared_ptr<Exchange>& ex) { return routes->PutPart(ex); });
  r.Handle(http::Verb::post, "/v1/lfs/{oid}",
           http::RouteOptions().Name("lfs_upload_complete").MaxBody((kMaxLfsParts + 1) * 400),
           [routes](const std::shared_ptr<Exchange>& ex) { routes->Complete(ex); });
  r.Handle(http::Verb::post, "/v1/lfs/{oid}/verify", http::RouteOptions().Name("lfs_verify").MaxBody(4096),
           [routes](const std::shared_ptr<Exchange>& ex) { routes->Verify(ex); });
}

}  // namespace cairn::api

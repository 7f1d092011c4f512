#include "api/lfs_routes.h"

#include <boost/json.hpp>
#include <charconv>
#include <cstring>

#include "api/errors.h"
#include "api/requests.h"

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

// Streams a body into `write` on the worker pool and calls `finish` there once all of it is written. The body
// is read straight into batches of kBatch bytes: one batch is written on a worker while the next one is read
// (two in memory at most), so receiving overlaps the work and a worker is asked once per batch, not once per
// 64 KiB piece.
class WorkerSink final : public http::BodySink {
 public:
  using Write = std::function<Status(std::span<const uint8_t>)>;
  using Finish = std::function<void(const std::shared_ptr<Exchange>&)>;
  static constexpr size_t kBatch = 4 << 20;

  WorkerSink(std::shared_ptr<Exchange> ex, Write write, Finish finish) : s_(std::make_shared<State>()) {
    s_->ex = std::move(ex);
    s_->write = std::move(write);
    s_->finish = std::move(finish);
    s_->batch.resize(kBatch);
  }

  // The body lands in the batch being gathered, in place.
  std::span<uint8_t> ReceiveBuffer() override { return {s_->batch.data() + s_->filled, kBatch - s_->filled}; }

  // On the connection's strand, as are OnEnd and the workers' completions: the state needs no lock.
  void OnData(std::span<const uint8_t> data, Next next) override {
    if (!s_->failed) return next(ToHttp(s_->failed.error()));
    uint8_t* at = s_->batch.data() + s_->filled;
    if (data.data() != at) std::memcpy(at, data.data(), data.size());  // the server's buffer, not ours
    s_->filled += data.size();
    if (s_->filled < kBatch) return next(http::Ok{});
    if (s_->busy) {  // read on once the worker is done with the batch before
      s_->waiting = std::move(next);
      return;
    }
    Dispatch(s_);
    next(http::Ok{});
  }

  void OnEnd(std::shared_ptr<Exchange> ex) override {
    if (!s_->failed) return ex->Respond(LfsErrorOf(s_->failed.error()));
    s_->end = std::move(ex);
    if (!s_->busy) Dispatch(s_);
  }

 private:
  struct State {
    std::shared_ptr<Exchange> ex;
    Write write;
    Finish finish;
    std::vector<uint8_t> batch;  // kBatch bytes, `filled` of them gathered
    size_t filled = 0;
    std::vector<uint8_t> spare;  // the batch a worker writes, then the next one to fill
    bool busy = false;           // a worker holds a batch
    Next waiting;                // the piece after a full batch, held while busy
    std::shared_ptr<Exchange> end;
    Status failed = Ok{};
  };

  // Hands the gathered batch to a worker (none busy); the last one also finishes.
  static void Dispatch(const std::shared_ptr<State>& s) {
    s->busy = true;
    auto batch = std::make_shared<std::vector<uint8_t>>(std::move(s->batch));
    const size_t filled = std::exchange(s->filled, 0);
    s->batch = std::move(s->spare);
    s->batch.resize(kBatch);
    const bool last = s->end != nullptr;
    auto result = std::make_shared<Status>(Ok{});
    const bool queued = s->ex->Offload(
        [s, batch, filled, result, last] {
          if (filled > 0) *result = s->write({batch->data(), filled});
          if (last && *result) s->finish(s->end);
        },
        [s, batch, result, last] {
          s->busy = false;
          s->spare = std::move(*batch);
          if (!*result) {
            s->failed = *result;
            if (last) return s->end->Respond(LfsErrorOf(result->error()));
            if (s->waiting) std::exchange(s->waiting, nullptr)(ToHttp(result->error()));
            return;
          }
          if (last) return;
          if (s->end) return Dispatch(s);  // the body ended while this batch was written
          if (s->waiting) {
            if (s->filled >= kBatch) Dispatch(s);
            std::exchange(s->waiting, nullptr)(http::Ok{});
          }
        });
    if (!queued) {  // answered 503 already
      s->busy = false;
      s->failed = Unavailable("the server is busy");
      if (s->waiting) std::exchange(s->waiting, nullptr)(http::Error{503, "the server is busy"});
    }
  }

  std::shared_ptr<State> s_;
};

class LfsRoutes {
 public:
  LfsRoutes(lfs::LfsService& lfs, LfsRouteOptions options) : lfs_(lfs), options_(options) {}

  http::Result<std::unique_ptr<http::BodySink>> PutObject(const std::shared_ptr<Exchange>& ex) {
    auto grant = GrantOf(lfs_, ex->request());
    if (!grant) return ToHttp(grant.error());
    if (auto st = CheckRoom(grant->scope); !st) return ToHttp(st.error());
    auto ingest = lfs_.BeginUpload(*grant);
    if (!ingest) return ToHttp(ingest.error());
    std::shared_ptr<lfs::FileIngest> shared = std::move(*ingest);
    return std::unique_ptr<http::BodySink>(std::make_unique<WorkerSink>(
        ex, [shared](std::span<const uint8_t> data) { return shared->Feed(data); },
        [shared](const std::shared_ptr<Exchange>& done) {
          auto ingested = shared->Finish();
          if (!ingested) return done->Respond(LfsErrorOf(ingested.error()));
          done->Respond(Response::Json(200, "{}"));
        }));
  }

  http::Result<std::unique_ptr<http::BodySink>> PutPart(const std::shared_ptr<Exchange>& ex) {
    auto grant = GrantOf(lfs_, ex->request());
    if (!grant) return ToHttp(grant.error());
    const std::string& n = ex->request().Param("part");
    uint32_t number = 0;
    const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), number);
    if (ec != std::errc() || end != n.data() + n.size()) return http::Error{400, "a part number is a number"};
    if (auto st = CheckRoom(grant->scope); !st) return ToHttp(st.error());
    auto writer = lfs_.BeginPart(*grant, number);
    if (!writer) return ToHttp(writer.error());
    std::shared_ptr<lfs::PartWriter> shared = std::move(*writer);
    return std::unique_ptr<http::BodySink>(std::make_unique<WorkerSink>(
        ex, [shared](std::span<const uint8_t> data) { return shared->Write(data); },
        [shared](const std::shared_ptr<Exchange>& done) {
          auto etag = shared->Finish();
          if (!etag) return done->Respond(LfsErrorOf(etag.error()));
          Response r = Response::Json(200, "{}");
          r.Header("ETag", *etag);
          done->Respond(std::move(r));
        }));
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
  r.HandleStream(http::Verb::put, "/v1/lfs/{oid}",
                 http::RouteOptions().Name("lfs_upload").MaxBody(UINT64_MAX),
                 [routes](const std::shared_ptr<Exchange>& ex) { return routes->PutObject(ex); });
  r.HandleStream(http::Verb::put, "/v1/lfs/{oid}/parts/{part}",
                 http::RouteOptions().Name("lfs_upload_part").MaxBody(lfs.part_bytes()),
                 [routes](const std::shared_ptr<Exchange>& ex) { return routes->PutPart(ex); });
  r.Handle(http::Verb::post, "/v1/lfs/{oid}",
           http::RouteOptions().Name("lfs_upload_complete").MaxBody((kMaxLfsParts + 1) * 400),
           [routes](const std::shared_ptr<Exchange>& ex) { routes->Complete(ex); });
  r.Handle(http::Verb::post, "/v1/lfs/{oid}/verify", http::RouteOptions().Name("lfs_verify").MaxBody(4096),
           [routes](const std::shared_ptr<Exchange>& ex) { routes->Verify(ex); });
}

}  // namespace cairn::api

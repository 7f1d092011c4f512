#include "api/cas_routes.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "api/errors.h"
#include "api/requests.h"
#include "http/range.h"
#include "xet/shard.h"
#include "xet/xorb.h"

namespace cairn::api {
namespace {

using http::Exchange;
using http::Permission;
using http::Response;
using http::RouteOptions;
using http::Verb;

// How long a reconstruction of a file the mirror is fetching waits for it (a worker held meanwhile).
constexpr std::chrono::seconds kAwaitFile{60};

// A range of a stored xorb read in order: one GET of the store per range.
class XorbStream final : public http::ByteStream {
 public:
  explicit XorbStream(std::unique_ptr<store::BlobReader> reader) : reader_(std::move(reader)) {}
  http::Status Read(std::span<uint8_t> out) override { return reader_->Read(out); }

 private:
  std::unique_ptr<store::BlobReader> reader_;
};

// A stored xorb read through the service, for stores that have no file to sendfile from (S3).
class XorbSource final : public http::ByteSource {
 public:
  XorbSource(cas::CasService& service, const xet::XorbHash& xorb) : service_(service), xorb_(xorb) {}
  http::Status ReadAt(uint64_t offset, std::span<uint8_t> out) const override {
    return service_.ReadXorb(xorb_, offset, out);
  }
  std::unique_ptr<http::ByteStream> Stream(uint64_t offset, uint64_t length) const override {
    return std::make_unique<XorbStream>(service_.OpenXorbRange(xorb_, offset, length));
  }

 private:
  cas::CasService& service_;
  const xet::XorbHash xorb_;
};

std::optional<xet::Hash> HashParam(const http::Request& r, std::string_view name) {
  return xet::Hash::FromHex(r.Param(name));
}

// Transfer URLs expire no later than the token that asked for them: what is left of its life, measured by
// the clock that checked it (the service counts it from its own).
uint64_t RemainingLife(const http::Principal& who) {
  if (who.expires <= 0) return UINT64_MAX;
  return static_cast<uint64_t>(std::max<int64_t>(who.expires - who.verified_at, 1));
}

void Reconstruction(cas::CasService& service, const std::shared_ptr<Exchange>& ex, cas::ApiVersion version,
                    const CasRouteOptions& options) {
  const auto& req = ex->request();
  const auto file = HashParam(req, "file");
  if (!file) return ex->Respond(Response::ErrorJson(400, "file id must be 64 hex digits"));
  std::optional<cas::ByteRange> range;
  if (auto h = req.Header("Range"); !h.empty()) {
    range = ParseReconstructionRange(h);
    if (!range) return ex->Respond(Response::ErrorJson(416, "malformed Range header"));
  }
  const std::string scope = req.principal->scope;
  const uint64_t max_ttl = RemainingLife(*req.principal);
  ex->Offload([&service, ex, file = *file, scope, range, version, max_ttl, relay = options.relay,
               await_file = options.await_file] {
    auto answer = service.Reconstruct(file, scope, range, version, max_ttl);
    const auto not_found = [&] { return !answer && answer.error().code == ErrorCode::kNotFound; };
    // A file not found may be in transit (the mirror): its relay answers, or it is waited for.
    const auto relayed = [&] {
      if (!not_found() || relay == nullptr) return;
      if (auto plan = relay->Plan(file, scope, range))
        answer = service.AnswerRelayed(std::move(*plan), version, max_ttl);
    };
    relayed();
    // Stored by now, or relayed — or its relay failed, and the file is waited for again (it comes another
    // way: through resolve), for as long as the mirror is fetching it, however many relays come and go
    // meanwhile (a busy machine sees several), up to kAwaitFile.
    const auto give_up = std::chrono::steady_clock::now() + kAwaitFile;
    while (not_found() && await_file && std::chrono::steady_clock::now() < give_up && await_file(file)) {
      answer = service.Reconstruct(file, scope, range, version, max_ttl);
      relayed();
      if (not_found()) std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a relay just gone
    }
    if (!answer) {
      return ex->Respond(ErrorResponse(answer.error()));
    }
    switch (answer->status) {
      case cas::ReconstructionStatus::kOk:
        return ex->Respond(Response::Json(200, std::move(answer->body)));
      case cas::ReconstructionStatus::kRangeNotSatisfiable:
        return ex->Respond(Response::ErrorJson(416, answer->detail));
      case cas::ReconstructionStatus::kMissingXorb:
        return ex->Respond(Response::ErrorJson(500, answer->detail));
    }
  });
}

void BatchReconstruction(cas::CasService& service, const std::shared_ptr<Exchange>& ex) {
  auto files = ParseBatchFileIds(ex->request().query);
  if (!files) return ex->Respond(Response::ErrorJson(400, files.error().message));
  const std::string scope = ex->request().principal->scope;
  const uint64_t max_ttl = RemainingLife(*ex->request().principal);
  ex->Offload([&service, ex, files = std::move(*files), scope, max_ttl] {
    auto answer = service.ReconstructBatch(files, scope, max_ttl);
    if (!answer) {
      return ex->Respond(ErrorResponse(answer.error()));
    }
    if (answer->status != cas::ReconstructionStatus::kOk)
      return ex->Respond(Response::ErrorJson(500, answer->detail));
    ex->Respond(Response::Json(200, std::move(answer->body)));
  });
}

void Dedup(cas::CasService& service, const std::shared_ptr<Exchange>& ex) {
  const auto chunk = HashParam(ex->request(), "hash");
  if (!chunk) return ex->Respond(Response::ErrorJson(400, "chunk hash must be 64 hex digits"));
  const std::string scope = ex->request().principal->scope;
  ex->Offload([&service, ex, chunk = *chunk, scope] {
    auto shard = service.DedupShard(chunk, scope);
    if (!shard) {
      return ex->Respond(ErrorResponse(shard.error()));
    }
    ex->Respond(Response::Binary(200, std::string(shard->begin(), shard->end())));
  });
}

// The body streams into a XorbUpload: written to disk as it arrives, validated and committed at its end on a
// worker thread.
class XorbSink final : public http::BodySink {
 public:
  XorbSink(std::unique_ptr<cas::XorbUpload> upload, quota::QuotaService* quota, std::string scope)
      : upload_(std::move(upload)), quota_(quota), scope_(std::move(scope)) {}

  std::span<uint8_t> ReceiveBuffer() override { return upload_->Space(); }

  void OnData(std::span<const uint8_t> data, Next next) override {
    auto st = upload_->Append(data);  // in place: nothing to copy
    if (!st) return next(st.error());
    next(http::Ok{});
  }

  void OnEnd(std::shared_ptr<Exchange> ex) override {
    ex->Offload([ex, upload = std::shared_ptr<cas::XorbUpload>(std::move(upload_)), quota = quota_,
                 scope = std::move(scope_)] {
      // Nothing is stored for a namespace whose quota is used up (a request thread: the check reads the
      // index).
      if (quota != nullptr) {
        if (auto st = quota->CheckRoomForScope(scope); !st) return ex->Respond(ErrorResponse(st.error()));
      }
      auto inserted = upload->Finish();
      if (!inserted) return ex->Respond(ErrorResponse(inserted.error()));
      ex->Respond(Response::Json(200, *inserted ? R"({"was_inserted":true})" : R"({"was_inserted":false})"));
    });
  }

 private:
  std::unique_ptr<cas::XorbUpload> upload_;
  quota::QuotaService* quota_;
  std::string scope_;
};

http::Result<std::unique_ptr<http::BodySink>> PutXorb(cas::CasService& service, quota::QuotaService* quota,
                                                      const std::shared_ptr<Exchange>& ex) {
  const auto hash = HashParam(ex->request(), "hash");
  if (!hash) return Malformed("xorb hash must be 64 hex digits");
  auto upload = service.BeginXorb(*hash);
  if (!upload) return upload.error();
  return std::unique_ptr<http::BodySink>(
      std::make_unique<XorbSink>(std::move(*upload), quota, ex->request().principal->scope));
}

void PutShardV1(cas::CasService& service, const std::shared_ptr<Exchange>& ex) {
  const std::string scope = ex->request().principal->scope;
  ex->Offload([&service, ex, scope] {
    const auto& body = ex->request().body;
    auto outcome = service.PutShard({reinterpret_cast<const uint8_t*>(body.data()), body.size()}, scope);
    if (!outcome) return ex->Respond(ErrorResponse(outcome.error()));
    ex->Respond(Response::Json(200, outcome->registered ? R"({"result":1})" : R"({"result":0})"));
  });
}

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out.append(" ");
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
  return out;
}

// /v2/shards: NDJSON progress frames, the last frame repeated at least every 15 s as a heartbeat, then one
// terminal frame (result or error). Once the 200 is sent, failures can only be error frames.
void PutShardV2(cas::CasService& service, const std::shared_ptr<Exchange>& ex) {
  const std::string scope = ex->request().principal->scope;
  auto stream = ex->StartStream(200, {{"Content-Type", "application/x-ndjson"}});
  ex->Offload([&service, ex, stream, scope] {
    struct Beat {
      std::mutex mu;
      std::condition_variable cv;
      std::string last = "{\"type\":\"validating\",\"verified\":0,\"total\":0}\n";
      bool done = false;
    } beat;
    stream->Write(beat.last);
    std::thread heartbeat([&] {
      std::unique_lock lock(beat.mu);
      while (!beat.cv.wait_for(lock, std::chrono::seconds(15), [&] { return beat.done; }))
        stream->Write(beat.last);
    });
    const auto emit = [&](std::string frame) {
      std::lock_guard lock(beat.mu);
      beat.last = frame;
      stream->Write(std::move(frame));
    };
    const auto& body = ex->request().body;
    auto outcome =
        service.PutShard({reinterpret_cast<const uint8_t*>(body.data()), body.size()}, scope,
                         [&](const cas::ShardProgress& p) {
                           switch (p.stage) {
                             case cas::ShardProgress::Stage::kValidating:
                               // Frames for every file of a large shard would be noise: report about every
                               // 1/64 of the work.
                               if (p.verified == 0 || p.verified == p.total ||
                                   p.verified % std::max<uint64_t>(1, p.total / 64) == 0) {
                                 emit("{\"type\":\"validating\",\"verified\":" + std::to_string(p.verified) +
                                      ",\"total\":" + std::to_string(p.total) + "}\n");
                               }
                               break;
                             case cas::ShardProgress::Stage::kStoring:
                               emit("{\"type\":\"committing\",\"stage\":\"uploading\"}\n");
                               break;
                             case cas::ShardProgress::Stage::kCommitting:
                               emit("{\"type\":\"committing\",\"stage\":\"syncing\"}\n");
                               break;
                           }
                         });
    {
      std::lock_guard lock(beat.mu);
      beat.done = true;
    }
    beat.cv.notify_all();
    heartbeat.join();
    if (outcome) {
      stream->Write("{\"type\":\"result\"}\n");
    } else {
      const bool retryable = Retryable(outcome.error());
      stream->Write("{\"type\":\"error\",\"message\":" + JsonString(outcome.error().message) +
                    ",\"retryable\":" + (retryable ? "true" : "false") + "}\n");
    }
    stream->Finish();
  });
}

// The first bytes of a remote store's answer are read before the header goes out: a store that cannot be
// reached then answers 503 (retried by the clients) instead of a response cut short after a 206.
constexpr uint64_t kReadBeforeHeader = 4ULL << 20;

void Transfer(cas::CasService& service, cas::Relay* relay, const std::shared_ptr<Exchange>& ex);

void TransferRoute(cas::CasService& service, cas::Relay* relay, const std::shared_ptr<Exchange>& ex) {
  // open + sendfile: fine on the network thread
  if (service.local_store()) return Transfer(service, relay, ex);
  ex->Offload([&service, relay, ex] { Transfer(service, relay, ex); });  // round trips to the store
}

// A transfer of a xorb the store does not hold, which a relay may be sending on: one range, as the relay's
// answers sign them (hf_xet asks one range per request).
// `grant`: what the URL grants, its signature checked.
void RelayedTransfer(cas::Relay& relay, const cas::TransferGrant& grant,
                     const std::shared_ptr<Exchange>& ex) {
  const auto& req = ex->request();
  std::vector<cas::ByteRange> ranges = grant.ranges;
  if (auto h = req.Header("Range"); !h.empty()) {
    ranges.clear();
    if (!cas::ParseRangeHeader(h, UINT64_MAX, &ranges))
      return ex->Respond(Response::ErrorJson(416, "unsatisfiable Range header"));
    if (!cas::RangesGranted(ranges, grant.ranges))
      return ex->Respond(ErrorResponse(Denied("range outside the signed ranges")));
  }
  std::shared_ptr<const cas::RelayedRange> relayed;
  if (ranges.size() == 1) relayed = relay.Open(grant.xorb, ranges[0].start, ranges[0].end);
  // A URL this server signed for a relay that is gone (it failed, or its time passed): a 403 makes the client
  // ask for the reconstruction again, which the stored file (or a new relay) answers.
  if (!relayed)
    return ex->Respond(ErrorResponse(Denied("xorb " + grant.xorb.hex() + " is no longer relayed here")));
  // The answer waits, on the worker pool, for the range to arrive and verify: bytes that fail their checks
  // get a 503 before any header went out (the client asks again), never a cut 206.
  ex->Offload([ex, relayed = std::move(relayed), range = ranges[0]] {
    auto bytes = relayed->AwaitBytes();
    if (!bytes) return ex->Respond(ErrorResponse(bytes.error()));
    const uint64_t length = relayed->length();
    Response r;
    r.status = 206;
    r.Header("Content-Type", "application/octet-stream");
    r.Header("Content-Range",
             "bytes " + std::to_string(range.start) + "-" + std::to_string(range.end) + "/*");
    r.body.emplace_back(http::FileSegment{
        .file = std::make_shared<const http::File>(std::move(bytes->fd), bytes->offset + length),
        .offset = bytes->offset,
        .length = length});
    ex->Respond(std::move(r));
  });
}

void Transfer(cas::CasService& service, cas::Relay* relay, const std::shared_ptr<Exchange>& ex) {
  const auto& req = ex->request();
  const size_t q = req.target.find('?');
  const std::string_view query =
      q == std::string::npos ? std::string_view() : std::string_view(req.target).substr(q + 1);
  std::optional<std::string_view> range;
  if (auto h = req.Header("Range"); !h.empty()) range = h;
  cas::TransferGrant grant;
  auto plan = service.Transfer(req.Param("xorb"), query, range, &grant);
  if (!plan && plan.error().code == ErrorCode::kNotFound && relay != nullptr) {
    // Waiting for relayed bytes is a request thread's work.
    (void)ex->Offload([relay, grant = std::move(grant), ex] { RelayedTransfer(*relay, grant, ex); });
    return;
  }
  if (!plan) {
    // kDenied (expired, tampered, outside the signed ranges) is a 403: the client asks for fresh URLs.
    return ex->Respond(ErrorResponse(plan.error()));
  }
  const uint64_t size = plan->blob.size;
  std::vector<http::ByteRange> ranges;
  for (const auto& r : plan->ranges) ranges.push_back({r.start, r.end});
  if (!plan->blob.fd.valid()) {
    auto source = std::make_shared<const XorbSource>(service, plan->xorb);
    const bool head = req.method == http::Verb::head;
    auto r = http::RangeResponse(source, size, ranges, "application/octet-stream");
    return ex->Respond(head ? std::move(r) : http::ReadBeforeHeader(std::move(r), kReadBeforeHeader));
  }
  auto file = std::make_shared<const http::File>(std::move(plan->blob.fd), size);
  ex->Respond(http::RangeResponse(file, 0, size, ranges, "application/octet-stream"));
}

}  // namespace

void RegisterCasRoutes(http::Server& server, cas::CasService& service, const CasRouteOptions& options) {
  auto& r = server.router();
  // The CAS routes serve what the token's scope holds: a CAS token's (the Hub mints them for a repository's
  // scope) or an access token's.
  const auto read = [](const char* name) {
    return RouteOptions().Name(name).Auth(Permission::kRead, http::kCasRouteTokens);
  };
  const auto uploads = options.uploads
                           ? options.uploads
                           : std::make_shared<http::AdmissionGate>(options.max_concurrent_uploads);
  server.metrics().Gauge("cairn_uploads_in_flight", "Xorb and shard uploads being received or processed",
                         [uploads] { return static_cast<double>(uploads->in_flight()); });
  const auto write = [&uploads](const char* name) {
    return RouteOptions().Name(name).Auth(Permission::kWrite, http::kCasRouteTokens).Admit(uploads);
  };

  r.Handle(Verb::get, "/v2/reconstructions/{file}", read("reconstruction_v2"),
           [&service, options](const std::shared_ptr<Exchange>& ex) {
             Reconstruction(service, ex, cas::ApiVersion::kV2, options);
           });
  r.Handle(Verb::get, "/v1/reconstructions/{file}", read("reconstruction_v1"),
           [&service, options](const std::shared_ptr<Exchange>& ex) {
             Reconstruction(service, ex, cas::ApiVersion::kV1, options);
           });
  r.Handle(Verb::get, "/v1/reconstructions", read("reconstruction_batch"),
           [&service](const std::shared_ptr<Exchange>& ex) { BatchReconstruction(service, ex); });
  r.Handle(Verb::get, "/v1/chunks/{prefix}/{hash}", read("dedup"),
           [&service](const std::shared_ptr<Exchange>& ex) { Dedup(service, ex); });
  r.HandleStream(Verb::post, "/v1/xorbs/{prefix}/{hash}",
                 write("xorb_upload").MaxBody(xet::kMaxXorbUploadBytes),
                 [&service, quota = options.quota](const std::shared_ptr<Exchange>& ex) {
                   return PutXorb(service, quota, ex);
                 });
  // hf_xet >= 1.8 asks for an upload grant (a presigned URL) before each xorb; a 404, and only a 404, makes
  // it POST the xorb to the route above at once, without retrying (its remote_client.rs). cairn takes xorbs
  // through itself, where they are validated before they are stored, so it offers no grants.
  r.Handle(
      Verb::post, "/v1/xorb-grants/{prefix}/{hash}",
      RouteOptions().Name("xorb_grant").Auth(Permission::kWrite, http::kCasRouteTokens).MaxBody(4096),
      [](const std::shared_ptr<Exchange>& ex) {
        ex->Respond(ErrorResponse(NotFound("upload grants are not offered: POST the xorb to /v1/xorbs/")));
      });
  r.Handle(Verb::post, "/v1/shards", write("shard_v1").MaxBody(xet::kMaxShardBytes),
           [&service](const std::shared_ptr<Exchange>& ex) { PutShardV1(service, ex); });
  r.Handle(Verb::post, "/v2/shards", write("shard_v2").MaxBody(xet::kMaxShardBytes),
           [&service](const std::shared_ptr<Exchange>& ex) { PutShardV2(service, ex); });
  r.Handle(Verb::post, "/v1/telemetry", read("telemetry").MaxBody(1 << 20),
           [](const std::shared_ptr<Exchange>& ex) { ex->Respond(Response::Json(200, "{}")); });
  r.Handle(Verb::get, "/v1/transfer/{xorb}", RouteOptions().Name("transfer"),
           [&service, relay = options.relay](const std::shared_ptr<Exchange>& ex) {
             TransferRoute(service, relay, ex);
           });
}

}  // namespace cairn::api

#include "api/git_routes.h"

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <filesystem>
#include <thread>

#include "api/errors.h"
#include "api/person_tokens.h"
#include "api/requests.h"
#include "api/worker_sink.h"
#include "common/printable.h"
#include "common/spool_file.h"
#include "git/pkt_line.h"
#include "git/zlib.h"

namespace cairn::api {

namespace {

using http::Exchange;
using http::Response;
using http::RouteOptions;
using http::Verb;

constexpr std::string_view kRealm = "Basic realm=\"cairn\"";

// git's HTTP answers are never cached (as git http-backend sends them).
void NoCache(Response& r) {
  r.Header("Cache-Control", "no-cache, max-age=0, must-revalidate");
  r.Header("Pragma", "no-cache");
  r.Header("Expires", "Fri, 01 Jan 1980 00:00:00 GMT");
}

Response Text(unsigned status, std::string_view message) {
  Response r = Response::Text(status, Printable(message, 1000) + "\n");
  NoCache(r);
  return r;
}

Response Unauthorized(std::string_view message) {
  Response r = Text(401, message);
  r.Header("WWW-Authenticate", std::string(kRealm));
  return r;
}

// A push's credentials, checked from its header (RouteOptions::check) so that no body is read for a push
// that will be refused: 401 with git's challenge when they are missing or invalid, 403 for a token that
// cannot write. Whether the token may write to this repository is the handler's (it asks the Hub).
std::optional<Response> CheckPushCredentials(const http::Authenticator* auth, http::Request& req) {
  const std::string_view header = req.Header("Authorization");
  if (header.empty()) return Unauthorized("Authentication required");
  auto token = http::CredentialOf(header);
  if (!token || auth == nullptr)
    return Unauthorized("Invalid credentials: the password must be a cairn token");
  auto who = auth->Authenticate("Bearer " + *token, http::Permission::kWrite, http::kAccessTokens);
  if (!who && who.error().code == ErrorCode::kDenied) {
    return Text(403, "You are not authorized to push to this repository (a write token is needed)");
  }
  if (!who) return Unauthorized("Invalid credentials: the password must be a cairn token");
  req.principal = std::move(*who);
  return std::nullopt;
}

// The address of a request's client ("ip:port" → "ip"): what fetches share their gate by.
std::string ClientAddress(std::string_view remote) {
  const size_t colon = remote.rfind(':');
  return std::string(colon == std::string_view::npos ? remote : remote.substr(0, colon));
}

class GitRoutes {
 public:
  GitRoutes(http::Server& server, hub::HubService& hub, files::FileService& files, index::RepoIndex& index,
            GitRouteOptions options)
      : server_(server), hub_(hub), files_(files), index_(index), options_(std::move(options)) {}

  void InfoRefs(const std::shared_ptr<Exchange>& ex) {
    const auto& req = ex->request();
    const auto service = req.Query("service");
    std::optional<hub::Repo> repo;
    if (service != "git-receive-pack") {
      repo = OpenRepo(ex);
      if (!repo) return;
    }
    if (!service)
      return ex->Respond(Text(403, "cairn serves git over smart HTTP only (git 1.6.6 and later)"));
    if (*service == "git-receive-pack") {
      auto writable = OpenRepo(ex, nullptr, true);
      if (!writable) return;
      auto rp = ReceivePackOf(*writable);
      if (!rp) return ex->Respond(HubErrorResponse(rp.error()));
      Response r = Response::Binary(200, rp->Advertise(), "application/x-git-receive-pack-advertisement");
      NoCache(r);
      return ex->Respond(std::move(r));
    }
    if (*service != "git-upload-pack") return ex->Respond(Text(403, "unknown service"));
    auto up = UploadPackOf(*repo);
    if (!up) return ex->Respond(HubErrorResponse(up.error()));
    Response r = Response::Binary(200, V2(req) ? up->AdvertiseV2() : up->AdvertiseV0(),
                                  "application/x-git-upload-pack-advertisement");
    NoCache(r);
    ex->Respond(std::move(r));
  }

  void UploadPack(const std::shared_ptr<Exchange>& ex) {
    auto repo = OpenRepo(ex);
    if (!repo) return;
    const auto& req = ex->request();
    if (req.Header("Content-Type") != "application/x-git-upload-pack-request") {
      return ex->Respond(Text(415, "expected Content-Type: application/x-git-upload-pack-request"));
    }
    auto up = UploadPackOf(*repo);
    if (!up) return ex->Respond(HubErrorResponse(up.error()));
    auto shared = std::make_shared<git::UploadPack>(std::move(*up));
    const bool v2 = V2(req);
    const bool gzip = req.Header("Content-Encoding") == "gzip";
    ex->Offload([this, ex, shared, v2, gzip] {
      std::string inflated;
      std::string_view body = ex->request().body;
      if (gzip) {
        auto got = git::Gunzip(body, options_.max_inflated_bytes);
        if (!got.ok()) return ex->Respond(ToHttpAnswer(got.error()));
        inflated = std::move(*got);
        body = inflated;
      }
      std::shared_ptr<http::ResponseStream> stream;
      const git::Sink sink = [&](std::string&& bytes) {
        if (!stream) {
          http::HeaderList headers{{"Content-Type", "application/x-git-upload-pack-result"},
                                   {"Cache-Control", "no-cache, max-age=0, must-revalidate"}};
          stream = ex->StartStream(200, std::move(headers));
        }
        // A slow reader: wait rather than queue a whole pack in memory.
        while (stream->open() && stream->pending_bytes() > options_.max_pending_bytes) {
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        return stream->Write(std::move(bytes));
      };
      auto st = v2 ? shared->ServeV2(body, sink) : shared->ServeV0(body, sink);
      if (stream) return stream->Finish();  // a failure after the first byte went in band
      if (!st.ok()) ex->Respond(ToHttpAnswer(st.error()));
    });
  }

  // The body goes to a spool file as it arrives; the push is served from its mapping once all of it is there.
  http::Result<std::unique_ptr<http::BodySink>> ReceivePack(const std::shared_ptr<Exchange>& ex) {
    hub::Caller caller;
    auto repo = OpenRepo(ex, &caller, true);
    if (!repo) return cairn::Unauthorized("refused");  // answered; the body is not read
    if (ex->request().Header("Content-Type") != "application/x-git-receive-pack-request") {
      ex->Respond(Text(415, "expected Content-Type: application/x-git-receive-pack-request"));
      return Malformed("refused");  // answered (415); the body is not read
    }
    auto spool = SpoolFile::Create(SpoolDir());
    if (!spool) return spool.error();
    auto body = std::make_shared<SpoolFile>(std::move(*spool));
    const auto answer = [](const Error& e) {
      return ToHttpAnswer(e, "application/x-git-receive-pack-result");
    };
    return std::unique_ptr<http::BodySink>(std::make_unique<WorkerSink>(
        ex, [body](std::span<const uint8_t> data) { return body->Append(data); },
        [this, body, caller, repo = std::move(*repo), answer](const std::shared_ptr<Exchange>& done) {
          auto request = body->Map();
          if (!request) return done->Respond(answer(request.error()));
          // The refs as they are once the body is in, not when it began.
          auto rp = ReceivePackOf(repo);
          if (!rp) return done->Respond(HubErrorResponse(rp.error()));
          auto served = rp->Serve(caller, *request);
          if (!served) return done->Respond(answer(served.error()));
          Response r = Response::Binary(200, std::move(*served), "application/x-git-receive-pack-result");
          NoCache(r);
          done->Respond(std::move(r));
        },
        answer));
  }

  // git-lfs's batch API. Downloads: each object as a signed link to the stored Xet file. Uploads: nothing for
  // an object the repository's scope holds already, else signed upload links (lfs/lfs_service.h) — or, when
  // the client offers Xet (huggingface_hub 0.32 to 1.19 with hf_xet), "transfer": "xet", and the client
  // uploads through the CAS instead.
  void LfsBatch(const std::shared_ptr<Exchange>& ex) {
    auto body = ParseLfsBatchBody(ex->request().body);
    const bool upload = body && body->operation == "upload";
    hub::Caller caller;
    auto repo = OpenRepo(ex, &caller, upload);
    if (!repo) return;
    if (!body) return ex->Respond(LfsError(422, body.error().message));
    if (body->hash_algo != "sha256") return ex->Respond(LfsError(409, "only sha256 objects are stored here"));
    const auto offered = [&](std::string_view t) {
      return std::find(body->transfers.begin(), body->transfers.end(), t) != body->transfers.end();
    };
    if (!body->transfers.empty() && !offered("basic")) {
      return ex->Respond(LfsError(422, "no transfer this server offers (basic) was asked for"));
    }
    if (upload && options_.lfs == nullptr) {
      return ex->Respond(LfsError(501, "uploads through git-lfs are not enabled on this server"));
    }
    // A link lives no longer than the token that asked for it.
    uint64_t ttl = std::min(options_.lfs_link_ttl_seconds, upload ? options_.lfs->max_link_ttl_seconds()
                                                                  : files_.links()->max_ttl_seconds());
    if (!caller.anonymous() && server_.authenticator() != nullptr) {
      const int64_t left = caller.expires - server_.authenticator()->now();
      ttl = std::min<uint64_t>(ttl, static_cast<uint64_t>(std::max<int64_t>(left, 1)));
    }
    if (upload && offered("xet")) {
      boost::json::array objects;
      for (const auto& o : body->objects) objects.push_back({{"oid", o.oid}, {"size", o.size}});
      return ex->Respond(LfsAnswer("xet", std::move(objects)));
    }
    const bool multipart = offered("multipart");
    ex->Offload([this, ex, repo = *repo, body = std::move(*body), ttl, multipart] {
      boost::json::array objects;
      bool parts = false;
      for (const auto& o : body.objects) {
        auto out = body.operation == "upload" ? UploadObject(repo, o, ttl, multipart, parts)
                                              : DownloadObject(repo, o, ttl);
        if (!out) return ex->Respond(LfsError(HttpStatusOf(out.error().code), out.error().message));
        objects.push_back(std::move(*out));
      }
      ex->Respond(LfsAnswer(parts ? "multipart" : "basic", std::move(objects)));
    });
  }

  // git-lfs asks before a push which of the files it pushes are locked by others; locks are not kept here,
  // so none are (an answer, rather than a 404, spares the user git-lfs's warning).
  void LfsLocksVerify(const std::shared_ptr<Exchange>& ex) {
    if (!OpenRepo(ex, nullptr, true)) return;
    Response r = Response::Json(200, R"({"ours":[],"theirs":[]})");
    r.Header("Content-Type", "application/vnd.git-lfs+json");
    ex->Respond(std::move(r));
  }

 private:
  static Response LfsAnswer(std::string_view transfer, boost::json::array objects) {
    boost::json::object answer{
        {"transfer", transfer}, {"objects", std::move(objects)}, {"hash_algo", "sha256"}};
    Response r = Response::Json(200, boost::json::serialize(answer));
    r.Header("Content-Type", "application/vnd.git-lfs+json");
    return r;
  }

  http::Result<boost::json::object> DownloadObject(const hub::Repo& repo, const LfsBatchObject& o,
                                                   uint64_t ttl) {
    boost::json::object out{{"oid", o.oid}, {"size", o.size}};
    auto stored = hub_.OpenLargeBySha256(repo, o.oid);
    if (!stored && stored.error().code == ErrorCode::kNotFound && options_.mirror != nullptr &&
        hub::IsMirrored(repo.record)) {
      // A mirrored repository's large file not fetched yet: fetched now, by its SHA-256.
      auto fetched = options_.mirror->LargeBySha256(repo, hub::LfsPointer{o.oid, o.size});
      if (fetched) stored = hub_.OpenLargeBySha256(repo, o.oid);
      if (!fetched && fetched.error().code != ErrorCode::kNotFound) {
        return Unavailable(fetched.error().message);
      }
    }
    if (!stored) {
      if (stored.error().code != ErrorCode::kNotFound) return Unavailable(stored.error().message);
      out["error"] = {{"code", 404}, {"message", "Object does not exist"}};
    } else if (stored->size != o.size) {
      out["error"] = {{"code", 422}, {"message", "the object's size is " + std::to_string(stored->size)}};
    } else {
      auto link = files_.links()->Sign(stored->hash, repo.record.read_scope, ttl, "");
      if (!link) return IoError(link.error().message);
      out["authenticated"] = true;
      out["actions"] = {
          {"download",
           {{"href", options_.public_url + "/v1/files/" + stored->hash.hex() + "?" + link->query},
            {"expires_in", ttl}}}};
    }
    return out;
  }

  http::Result<boost::json::object> UploadObject(const hub::Repo& repo, const LfsBatchObject& o, uint64_t ttl,
                                                 bool multipart, bool& parts) {
    boost::json::object out{{"oid", o.oid}, {"size", o.size}};
    auto stored = options_.lfs->Stored(repo.record.scope, o.oid, o.size);
    if (!stored) return stored.error();
    if (*stored) return out;  // no actions: held already
    auto plan = options_.lfs->PlanUpload(repo.record.scope, o.oid, o.size, ttl, multipart);
    if (!plan) {
      out["error"] = {{"code", HttpStatusOf(plan.error().code)}, {"message", plan.error().message}};
      return out;
    }
    boost::json::object upload{{"href", plan->href}, {"expires_in", plan->expires_in}};
    if (!plan->header.empty()) {
      boost::json::object header;
      for (const auto& [k, v] : plan->header) header[k] = v;
      upload["header"] = std::move(header);
      parts = true;
    }
    out["authenticated"] = true;
    out["actions"] = {{"upload", std::move(upload)},
                      {"verify", {{"href", plan->verify_href}, {"expires_in", plan->expires_in}}}};
    return out;
  }

  static bool V2(const http::Request& req) {
    return req.Header("Git-Protocol").find("version=2") != std::string_view::npos;
  }

  // A failure before anything was sent: the client's mistakes as git's "ERR" line, which git prints as the
  // remote's error; the server's as its HTTP status.
  static Response ToHttpAnswer(const Error& e,
                               std::string content_type = "application/x-git-upload-pack-result") {
    if (HttpStatusOf(e.code) >= 500) return Text(HttpStatusOf(e.code), e.message);
    std::string body;
    git::AppendPkt(body, "ERR " + Printable(e.message, 1000) + "\n");
    Response r = Response::Binary(200, std::move(body), std::move(content_type));
    NoCache(r);
    return r;
  }

  // The repository the URL names, if the caller may read it; otherwise answered (401 to an anonymous caller
  // whether it is private or missing).
  std::optional<hub::Repo> OpenRepo(const std::shared_ptr<Exchange>& ex, hub::Caller* caller_out = nullptr,
                                    bool write = false) {
    const auto& req = ex->request();
    hub::Caller caller;
    if (const std::string_view header = req.Header("Authorization"); !header.empty()) {
      auto token = http::CredentialOf(header);
      const http::Authenticator* auth = server_.authenticator();
      std::optional<http::Principal> who;
      if (token && auth != nullptr) {
        auto checked = auth->Authenticate("Bearer " + *token, http::Permission::kRead, http::kAccessTokens);
        if (checked) who = *checked;
      }
      if (!who) {
        ex->Respond(Unauthorized("Invalid credentials: the password must be a cairn token"));
        return std::nullopt;
      }
      caller = CallerFrom(*who);
      caller.client = req.remote;
    }
    std::optional<hub::RepoType> type = hub::RepoType::kModel;
    if (const std::string& t = req.Param("types"); !t.empty()) type = hub::TypeFromPlural(t);
    std::string name = req.Param("name");
    if (name.ends_with(".git")) name.resize(name.size() - 4);
    const auto not_found = [&] {
      ex->Respond(caller.anonymous() ? Unauthorized("Authentication required")
                                     : Text(404, "Repository not found"));
      return std::nullopt;
    };
    if (!type || *type == hub::RepoType::kBucket || !hub::ValidName(req.Param("ns")) ||
        !hub::ValidName(name)) {
      return not_found();
    }
    // A push needs credentials whatever the repository: git asks for them on this 401.
    if (write && caller.anonymous()) {
      ex->Respond(Unauthorized("Authentication required"));
      return std::nullopt;
    }
    const hub::RepoId id{*type, req.Param("ns"), name};
    auto repo = (options_.mirror != nullptr && !write) ? options_.mirror->Open(caller, id)
                                                       : hub_.Open(caller, id, write);
    if (!repo) {
      if (repo.error().code == ErrorCode::kNotFound && options_.mirror != nullptr) {
        // Renamed upstream: git follows the redirect to the new name.
        if (auto to = options_.mirror->RenamedTo(id)) {
          if (auto target = RenamedTarget(req.target, id, *to)) {
            Response moved = Text(307, "moved to " + to->str() + "\n");
            moved.Header("Location", *target);
            ex->Respond(std::move(moved));
            return std::nullopt;
          }
        }
      }
      if (repo.error().code == ErrorCode::kNotFound) return not_found();
      if (repo.error().code == ErrorCode::kUnauthorized) {
        ex->Respond(Unauthorized("Authentication required"));
        return std::nullopt;
      }
      if (repo.error().code == ErrorCode::kDenied) {
        ex->Respond(Text(403,
                         "You are not authorized to push to this repository (a write token of its "
                         "namespace or of the repository is needed)"));
        return std::nullopt;
      }
      ex->Respond(HubErrorResponse(repo.error()));
      return std::nullopt;
    }
    // A mirrored repository's refs as upstream has them now (within the mirror's revision TTL).
    if (options_.mirror != nullptr && !write) options_.mirror->Refresh(*repo);
    if (caller_out != nullptr) *caller_out = caller;
    return *repo;
  }

  std::string SpoolDir() const {
    if (!options_.spool_dir.empty()) return options_.spool_dir;
    return (std::filesystem::temp_directory_path() / "cairn-git-push").string();
  }

  Result<git::ReceivePack> ReceivePackOf(const hub::Repo& repo) {
    auto refs = hub_.ListRefs(repo);
    if (!refs) return refs.error();
    return git::ReceivePack(hub_, index_, repo, std::move(*refs), hub_.options().default_branch,
                            options_.pack_limits);
  }

  Result<git::UploadPack> UploadPackOf(const hub::Repo& repo) {
    auto refs = hub_.ListRefs(repo);
    if (!refs) return refs.error();
    return git::UploadPack(index_, repo.record.id, std::move(*refs), hub_.options().default_branch,
                           options_.limits);
  }

  http::Server& server_;
  hub::HubService& hub_;
  files::FileService& files_;
  index::RepoIndex& index_;
  const GitRouteOptions options_;
};

}  // namespace

void RegisterGitRoutes(http::Server& server, hub::HubService& hub, files::FileService& files,
                       index::RepoIndex& index, const GitRouteOptions& options) {
  auto routes = std::make_shared<GitRoutes>(server, hub, files, index, options);
  auto& r = server.router();
  const auto bind = [routes](void (GitRoutes::*fn)(const std::shared_ptr<Exchange>&)) {
    return [routes, fn](const std::shared_ptr<Exchange>& ex) { ((*routes).*fn)(ex); };
  };
  // One gate for both URL forms: a push holds a spool file and, once its body is in, a worker.
  const auto pushes = std::make_shared<http::AdmissionGate>(options.max_concurrent_pushes);
  const auto fetches = std::make_shared<http::AdmissionGate>(options.max_concurrent_fetches);
  for (const std::string prefix : {"/{ns}/{name}", "/{types}/{ns}/{name}"}) {
    r.Handle(Verb::get, prefix + "/info/refs", RouteOptions().Name("git_info_refs"),
             bind(&GitRoutes::InfoRefs));
    r.Handle(Verb::post, prefix + "/git-upload-pack",
             RouteOptions()
                 .Name("git_upload_pack")
                 .MaxBody(options.max_request_bytes)
                 .AdmitPer(fetches, [](const http::Request& req) { return ClientAddress(req.remote); }),
             bind(&GitRoutes::UploadPack));
    // Credentials and admission from the header; the body streamed to a spool file.
    r.HandleStream(Verb::post, prefix + "/git-receive-pack",
                   RouteOptions()
                       .Name("git_receive_pack")
                       .MaxBody(options.max_push_bytes)
                       .Check([srv = &server](http::Request& req) {
                         return CheckPushCredentials(srv->authenticator(), req);
                       })
                       .AdmitPer(pushes, [](const http::Request& req) { return req.principal->scope; }),
                   [routes](const std::shared_ptr<Exchange>& ex) { return routes->ReceivePack(ex); });
    r.Handle(Verb::post, prefix + "/info/lfs/objects/batch",
             RouteOptions().Name("lfs_batch").MaxBody(1 << 20), bind(&GitRoutes::LfsBatch));
    r.Handle(Verb::post, prefix + "/info/lfs/locks/verify",
             RouteOptions().Name("lfs_locks_verify").MaxBody(1 << 20), bind(&GitRoutes::LfsLocksVerify));
  }
}

}  // namespace cairn::api

#include "api/file_routes.h"

#include <boost/json.hpp>
#include <charconv>

#include "api/errors.h"
#include "api/requests.h"
#include "common/percent_encode.h"
#include "http/media_type.h"
#include "http/range.h"

namespace cairn::api {
namespace {

using http::Exchange;
using http::Response;

// Bytes read before the header goes out: the first fetch unit is verified (and a store out of reach
// noticed) while an error answer is still possible.
constexpr uint64_t kFileReadBeforeHeader = 1ULL << 20;

// One range of a stored file, read through a verified reader with read-ahead.
class FileStream final : public http::ByteStream {
 public:
  explicit FileStream(std::unique_ptr<files::FileReader> reader) : reader_(std::move(reader)) {}
  http::Status Read(std::span<uint8_t> out) override {
    auto st = reader_->Read(out);
    if (!st) return st.error();
    return http::Ok{};
  }
  // The verified chunks go to the socket from the reader's buffers: no copy.
  bool lends() const override { return true; }
  http::Status Lend(uint64_t length, http::LentBytes& out) override {
    auto st = reader_->Lend(length, out.owner, out.pieces);
    if (!st) return st.error();
    return http::Ok{};
  }

 private:
  std::unique_ptr<files::FileReader> reader_;
};

// A stored file as a source of bytes for range answers: each range gets a reader of its own.
class FileSource final : public http::ByteSource {
 public:
  FileSource(files::FileService& files, files::StoredFile file) : files_(files), file_(std::move(file)) {}

  http::Status ReadAt(uint64_t offset, std::span<uint8_t> out) const override {
    if (out.empty()) return http::Ok{};
    auto stream = Open(offset, out.size());
    if (!stream) return stream.error();
    return (*stream)->Read(out);
  }
  std::unique_ptr<http::ByteStream> Stream(uint64_t offset, uint64_t length) const override {
    auto stream = Open(offset, length);
    if (!stream) return std::make_unique<FailedStream>(stream.error());
    return std::move(*stream);
  }

 private:
  // A reader that could not be opened reports why on its first read.
  class FailedStream final : public http::ByteStream {
   public:
    explicit FailedStream(http::Error e) : error_(std::move(e)) {}
    http::Status Read(std::span<uint8_t> /*out*/) override { return error_; }

   private:
    http::Error error_;
  };

  http::Result<std::unique_ptr<http::ByteStream>> Open(uint64_t offset, uint64_t length) const {
    auto reader = files_.Open(file_, offset, length);
    if (!reader) return reader.error();
    return std::unique_ptr<http::ByteStream>(std::make_unique<FileStream>(std::move(*reader)));
  }

  files::FileService& files_;
  const files::StoredFile file_;
};

// Whether an If-None-Match or If-Range list names `etag` (weak tags compare equal here: the bytes of a
// file hash never change).
bool ListsEtag(std::string_view header, std::string_view etag) {
  while (!header.empty()) {
    const size_t comma = header.find(',');
    std::string_view item = header.substr(0, comma);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (item.starts_with("W/")) item.remove_prefix(2);
    if (item == "*" || item == etag) return true;
    if (comma == std::string_view::npos) break;
    header.remove_prefix(comma + 1);
  }
  return false;
}

// Content-Disposition for a name given in a link: a plain ASCII fallback and the exact name (RFC 6266).
std::string Disposition(const std::string& name) {
  std::string ascii;
  for (const char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    ascii.push_back(c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '%' ? ch : '_');
  }
  return "attachment; filename=\"" + ascii + "\"; filename*=UTF-8''" + PercentEncode(name, kAttrCharMarks);
}

// The download itself, once the file is found: conditionals, ranges, headers, and the first bytes read.
Response Download(files::FileService& files, const http::Request& req, files::StoredFile file,
                  const std::string& etag, const std::string& name, size_t max_ranges,
                  std::optional<std::string_view> content_type = std::nullopt) {
  const auto with_headers = [&](Response r) {
    r.Header("ETag", etag).Header("Accept-Ranges", "bytes").Header("Cache-Control", "private, max-age=0");
    if (!name.empty()) r.Header("Content-Disposition", Disposition(name));
    return r;
  };
  if (auto inm = req.Header("If-None-Match"); !inm.empty() && ListsEtag(inm, etag)) {
    Response r;
    r.status = 304;
    return with_headers(std::move(r));
  }
  std::vector<http::ByteRange> ranges;
  const std::string_view range = req.Header("Range");
  // If-Range names the representation the client has part of: another one (or a date, which cairn does
  // not serve) means the whole file.
  const std::string_view if_range = req.Header("If-Range");
  if (!range.empty() && (if_range.empty() || ListsEtag(if_range, etag))) {
    auto parsed = http::ParseRange(range, file.size, max_ranges);
    if (!parsed) {
      Response r = Response::ErrorJson(HttpStatusOf(parsed.error().code), parsed.error().message);
      if (parsed.error().code == ErrorCode::kUnsatisfiable)
        r.Header("Content-Range", "bytes */" + std::to_string(file.size));
      return with_headers(std::move(r));
    }
    ranges = std::move(*parsed);
  }
  const uint64_t size = file.size;
  auto source = std::make_shared<const FileSource>(files, std::move(file));
  Response r = with_headers(http::RangeResponse(source, size, ranges, "application/octet-stream"));
  // Stored bytes, never a page of cairn's origin: nosniff, a sandboxing CSP, active types as downloads.
  http::SetStoredBytesHeaders(r, content_type);
  if (req.method == http::Verb::head) return r;
  return http::ReadBeforeHeader(std::move(r), kFileReadBeforeHeader);
}

// Who may read: a link's grant, or a read token's scope.
struct Reader {
  std::string scope;
  std::string name;
};

http::Result<Reader> Authorize(const http::Server& server, const files::FileService& files,
                               const http::Request& req, const xet::FileHash& hash) {
  if (req.Query("s")) {
    auto grant = files.links()->Verify(hash, req.query);
    if (!grant) {
      return grant.error();  // kDenied: 403; kMalformed: 400
    }
    return Reader{grant->scope, grant->name};
  }
  const http::Authenticator* auth = server.authenticator();
  if (auth == nullptr) return cairn::Unauthorized("this server checks no tokens");
  auto who = auth->Authenticate(req.Header("Authorization"), http::Permission::kRead, http::kCasRouteTokens);
  if (!who) return who.error();
  return Reader{who->scope, ""};
}

void FileByHash(const http::Server& server, files::FileService& files, const std::shared_ptr<Exchange>& ex,
                size_t max_ranges) {
  const auto hash = xet::Hash::FromHex(ex->request().Param("file"));
  if (!hash) return ex->Respond(Response::ErrorJson(400, "file hash must be 64 hex digits"));
  auto reader = Authorize(server, files, ex->request(), *hash);
  if (!reader) return ex->Fail(reader.error());
  ex->Offload([&files, ex, hash = *hash, reader = std::move(*reader), max_ranges] {
    auto file = files.Find(hash, reader.scope);
    if (!file) {
      return ex->Respond(ErrorResponse(file.error()));
    }
    const std::string etag = "\"" + file->hash.hex() + "\"";
    ex->Respond(Download(files, ex->request(), std::move(*file), etag, reader.name, max_ranges));
  });
}

void FileBySha256(files::FileService& files, const std::shared_ptr<Exchange>& ex, size_t max_ranges) {
  const auto sha = xet::Hash::FromHex(ex->request().Param("sha256"));
  if (!sha) return ex->Respond(Response::ErrorJson(400, "SHA-256 must be 64 hex digits"));
  const std::string scope = ex->request().principal->scope;
  ex->Offload([&files, ex, sha = *sha, scope, max_ranges] {
    // Parsed as a Xet hash, the usual digest text gives the form shards store (xet::FileRecord::sha256).
    auto file = files.FindBySha256(sha, scope);
    if (!file) {
      return ex->Respond(ErrorResponse(file.error()));
    }
    const std::string etag = "\"" + file->hash.hex() + "\"";
    ex->Respond(Download(files, ex->request(), std::move(*file), etag, "", max_ranges));
  });
}

void MintLink(files::FileService& files, const std::shared_ptr<Exchange>& ex, const std::string& base) {
  auto body = ParseLinkBody(ex->request().body);
  if (!body) return ex->Respond(Response::ErrorJson(400, body.error().message));
  const std::string scope = ex->request().principal->scope;
  // A link lives no longer than the token that asked for it (a one-hour CAS token mints no 30-day link).
  // Past the server's longest link it is refused as asked (the signer says why); within it, cut to the token.
  const http::Principal& who = *ex->request().principal;
  int64_t ttl = body->ttl_seconds;
  if (ttl > 0 && static_cast<uint64_t>(ttl) <= files.links()->max_ttl_seconds())
    ttl = std::min(ttl, std::max<int64_t>(who.expires - who.verified_at, 1));
  ex->Offload([&files, ex, hash = body->file, ttl, name = body->name, scope, base] {
    if (auto file = files.Find(hash, scope); !file) {  // a link only to what the asker may read
      return ex->Respond(ErrorResponse(file.error()));
    }
    auto link = files.links()->Sign(hash, scope, ttl > 0 ? static_cast<uint64_t>(ttl) : 0, name);
    if (!link) return ex->Respond(ErrorResponse(link.error()));
    boost::json::object out;
    out["url"] = base + "/v1/files/" + hash.hex() + "?" + link->query;
    out["expires"] = link->expires;
    ex->Respond(Response::Json(201, boost::json::serialize(out)));
  });
}

void ListFiles(files::FileService& files, const std::shared_ptr<Exchange>& ex) {
  const auto& req = ex->request();
  std::optional<xet::FileHash> cursor;
  if (auto c = req.Query("cursor"); c && !c->empty()) {
    cursor = xet::Hash::FromHex(*c);
    if (!cursor) return ex->Respond(Response::ErrorJson(400, "cursor must be a file hash (64 hex digits)"));
  }
  size_t limit = 1000;
  if (auto l = req.Query("limit")) {
    const auto [end, ec] = std::from_chars(l->data(), l->data() + l->size(), limit);
    if (ec != std::errc() || end != l->data() + l->size() || limit == 0 ||
        limit > index::Index::kMaxListedFiles - 1)
      return ex->Respond(Response::ErrorJson(
          400, "limit must be 1 to " + std::to_string(index::Index::kMaxListedFiles - 1)));
  }
  const std::string scope = req.principal->scope;
  ex->Offload([&files, ex, scope, cursor, limit] {
    auto page = files.List(scope, cursor, limit);
    if (!page) return ex->Respond(ErrorResponse(page.error()));
    boost::json::array list;
    for (const auto& f : page->files) {
      boost::json::object o;
      o["hash"] = f.hash.hex();
      o["size"] = f.size;
      if (f.sha256) {
        o["sha256"] = f.sha256->hex();
      } else {
        o["sha256"] = nullptr;
      }
      o["created_at"] = f.created_at;
      list.push_back(std::move(o));
    }
    boost::json::object out;
    out["files"] = std::move(list);
    if (page->next) {
      out["next_cursor"] = page->next->hex();
    } else {
      out["next_cursor"] = nullptr;
    }
    if (page->totals) {
      out["totals"] = {{"files", page->totals->files}, {"bytes", page->totals->bytes}};
      out["server_dedup_ratio"] = page->dedup_ratio;
    }
    ex->Respond(Response::Json(200, boost::json::serialize(out)));
  });
}

// The token's scope stops seeing the file; the bytes stay for a garbage collector. A repository's scope is
// refused whole: its files leave with commits and with the repository, which keep the Hub's records true.
void Unregister(files::FileService& files, index::RepoIndex& repos, const std::shared_ptr<Exchange>& ex) {
  const auto hash = xet::Hash::FromHex(ex->request().Param("file"));
  if (!hash) return ex->Respond(ErrorResponse(Malformed("file hash must be 64 hex digits")));
  const std::string scope = ex->request().principal->scope;
  ex->Offload([&files, &repos, ex, hash = *hash, scope] {
    auto repo = repos.FindRepoByScope(scope);
    if (repo) {
      return ex->Respond(ErrorResponse(
          Conflict("the token's scope is a repository's: its files are removed by commits, or by deleting "
                   "the repository, not by DELETE /v1/files")));
    }
    if (repo.error().code != ErrorCode::kNotFound) return ex->Respond(ErrorResponse(repo.error()));
    auto removed = files.Unregister(hash, scope);
    if (!removed) return ex->Respond(ErrorResponse(removed.error()));
    // Unknown and not visible to the scope alike, as a download answers.
    if (!*removed) return ex->Respond(ErrorResponse(NotFound("file " + hash.hex() + " is unknown")));
    Response r;
    r.status = 204;
    ex->Respond(std::move(r));
  });
}

}  // namespace

http::Response ServeStoredFile(files::FileService& files, const http::Request& req, files::StoredFile file,
                               const std::string& etag, size_t max_ranges,
                               std::optional<std::string_view> content_type) {
  return Download(files, req, std::move(file), etag, "", max_ranges, content_type);
}

void RegisterFileRoutes(http::Server& server, files::FileService& files, index::RepoIndex& repos,
                        const FileRouteOptions& options) {
  auto& r = server.router();
  std::string base = options.public_url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  const size_t max_ranges = options.max_ranges;
  // Links authorize themselves, so this route checks its token itself.
  // Links (and tokens) read stored files on the user-content origin too: nothing of cairn's runs there.
  r.Handle(http::Verb::get, "/v1/files/{file}", http::RouteOptions().Name("file_download").UserContent(),
           [&server, &files, max_ranges](const std::shared_ptr<Exchange>& ex) {
             FileByHash(server, files, ex, max_ranges);
           });
  r.Handle(http::Verb::get, "/v1/files",
           http::RouteOptions().Name("file_list").Auth(http::Permission::kRead, http::kCasRouteTokens),
           [&files](const std::shared_ptr<Exchange>& ex) { ListFiles(files, ex); });
  r.Handle(
      http::Verb::get, "/v1/files/by-sha256/{sha256}",
      http::RouteOptions().Name("file_download_sha256").Auth(http::Permission::kRead, http::kCasRouteTokens),
      [&files, max_ranges](const std::shared_ptr<Exchange>& ex) { FileBySha256(files, ex, max_ranges); });
  r.Handle(
      http::Verb::post, "/v1/links",
      http::RouteOptions().Name("link").Auth(http::Permission::kRead, http::kCasRouteTokens).MaxBody(4096),
      [&files, base](const std::shared_ptr<Exchange>& ex) { MintLink(files, ex, base); });
  r.Handle(http::Verb::delete_, "/v1/files/{file}",
           http::RouteOptions()
               .Name("file_unregister")
               .Auth(http::Permission::kWrite, http::kCasRouteTokens)
               .MaxBody(4096),
           [&files, &repos](const std::shared_ptr<Exchange>& ex) { Unregister(files, repos, ex); });

  auto& m = server.metrics();
  m.Gauge("cairn_file_corrupt_chunks", "Stored chunks that failed verification while a file was served",
          [&files] { return static_cast<double>(files.corrupt_chunks()); });
  m.Gauge("cairn_file_readahead_bytes", "Bytes plain downloads hold read ahead, all together",
          [&files] { return static_cast<double>(files.budget().in_use()); });
  m.Gauge("cairn_file_readahead_capacity_bytes", "The server-wide read-ahead budget (readahead_total_bytes)",
          [&files] { return static_cast<double>(files.budget().capacity()); });
}

}  // namespace cairn::api

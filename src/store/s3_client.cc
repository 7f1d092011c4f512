#include "store/s3_client.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <random>
#include <thread>

#include "common/base64.h"
#include "common/hex.h"
#include "common/percent_encode.h"

namespace cairn::store {
namespace {

// curl_global_init once per process, before the first handle (thread-safe since C++11 statics).
void GlobalInit() {
  static const bool done = [] { return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; }();
  (void)done;
}

bool Retryable(long status) {
  return status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

std::string Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  return std::string(s);
}

}  // namespace

std::string_view S3XmlValue(std::string_view doc, std::string_view tag, size_t* from) {
  const std::string open = "<" + std::string(tag) + ">";
  const std::string close = "</" + std::string(tag) + ">";
  const size_t start = from != nullptr ? *from : 0;
  const size_t a = doc.find(open, start);
  if (a == std::string_view::npos) return {};
  const size_t b = doc.find(close, a + open.size());
  if (b == std::string_view::npos) return {};
  if (from != nullptr) *from = b + close.size();
  return doc.substr(a + open.size(), b - a - open.size());
}

std::string S3QueryString(std::vector<std::pair<std::string, std::string>> params) {
  for (auto& [k, v] : params) {
    k = PercentEncode(k);
    v = PercentEncode(v);
  }
  std::sort(params.begin(), params.end());
  std::string out;
  for (const auto& [k, v] : params) {
    if (!out.empty()) out += '&';
    out += k;
    out += '=';
    out += v;
  }
  return out;
}

// A curl handle driven through a multi handle of its own, whose connection cache keeps the connection
// alive between requests (curl_easy_perform would keep it in a hidden multi handle of the easy one's).
struct S3Client::Handle {
  CURL* curl = curl_easy_init();
  CURLM* multi = curl_multi_init();
  ~Handle() {
    if (multi != nullptr) curl_multi_cleanup(multi);
    if (curl != nullptr) curl_easy_cleanup(curl);
  }
  // Closes the connection (after a transfer abandoned part way, whose bytes still come).
  void Disconnect() {
    if (multi != nullptr) curl_multi_cleanup(multi);
    multi = curl_multi_init();
  }
};

namespace {

// Per-attempt state reached from curl's callbacks.
struct Exchange {
  const S3Request* req = nullptr;
  S3Response* res = nullptr;
  size_t max_body = 0;
  bool overflow = false;
};

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* ex = static_cast<Exchange*>(user);
  const size_t len = size * n;
  S3Response& res = *ex->res;
  // An error document goes to `body` even when the caller gave a buffer: it is not the object's bytes.
  const bool to_caller = !ex->req->into.empty() && res.status >= 200 && res.status < 300;
  if (to_caller) {
    if (len > ex->req->into.size() - res.received) {
      ex->overflow = true;
      return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
    }
    std::memcpy(ex->req->into.data() + res.received, data, len);
  } else {
    if (res.body.size() + len > ex->max_body) {
      ex->overflow = true;
      return 0;
    }
    res.body.append(data, len);
  }
  res.received += len;
  return len;
}

// The status code of an HTTP status line ("HTTP/1.1 206 Partial Content"); 0 when there is none.
long StatusOfLine(std::string_view line) {
  const size_t sp = line.find(' ');
  return sp == std::string_view::npos ? 0
                                      : std::strtol(std::string(line.substr(sp + 1, 3)).c_str(), nullptr, 10);
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* ex = static_cast<Exchange*>(user);
  const std::string_view line(data, size * n);
  const size_t colon = line.find(':');
  if (line.starts_with("HTTP/")) {
    // A status line (again after 100 Continue): the body callback needs the status to know where bytes go.
    ex->res->status = StatusOfLine(line);
    ex->res->etag.clear();
    ex->res->content_range.clear();
    return size * n;
  }
  if (colon == std::string_view::npos) return size * n;
  std::string name(line.substr(0, colon));
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  const std::string value = Trim(line.substr(colon + 1));
  if (name == "etag") {
    ex->res->etag = value;
  } else if (name == "content-length") {
    ex->res->content_length = std::strtoull(value.c_str(), nullptr, 10);
  } else if (name == "content-range") {
    ex->res->content_range = value;
  } else if (name == "retry-after") {
    ex->res->retry_after = value;
  }
  return size * n;
}

// A multi-piece body, read in order by curl's read callback.
struct PieceReader {
  const std::vector<std::span<const uint8_t>>& pieces;
  size_t piece = 0;
  size_t offset = 0;
};

size_t ReadPieces(char* out, size_t size, size_t n, void* user) {
  auto* r = static_cast<PieceReader*>(user);
  size_t written = 0;
  const size_t room = size * n;
  while (written < room && r->piece < r->pieces.size()) {
    const auto& p = r->pieces[r->piece];
    const size_t take = std::min(room - written, p.size() - r->offset);
    std::memcpy(out + written, p.data() + r->offset, take);
    written += take;
    r->offset += take;
    if (r->offset == p.size()) {
      ++r->piece;
      r->offset = 0;
    }
  }
  return written;
}

}  // namespace

Result<std::unique_ptr<S3Client>> S3Client::Create(S3Options options) {
  if (options.bucket.empty()) return Malformed("S3: no bucket named");
  for (const char c : options.bucket) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_'))
      return Malformed("S3: bucket name '" + options.bucket + "' has a character buckets cannot have");
  }
  if (options.region.empty()) return Malformed("S3: s3_region is empty");
  if (options.endpoint.empty()) options.endpoint = "https://s3." + options.region + ".amazonaws.com";
  while (options.endpoint.ends_with('/')) options.endpoint.pop_back();
  if (!options.endpoint.starts_with("http://") && !options.endpoint.starts_with("https://"))
    return Malformed("S3: s3_endpoint '" + options.endpoint + "' is not an http:// or https:// URL");
  if (options.access_key.empty() || options.secret_key.empty())
    return Malformed(
        "S3: no credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or s3_access_key_id and "
        "s3_secret_access_key)");
  if (options.max_connections == 0) options.max_connections = 1;
  if (options.max_attempts < 1) options.max_attempts = 1;
  GlobalInit();
  return std::unique_ptr<S3Client>(new S3Client(std::move(options)));
}

S3Client::S3Client(S3Options options) : options_(std::move(options)) {
  const size_t scheme_end = options_.endpoint.find("://") + 3;
  if (options_.path_style) {
    base_ = options_.endpoint;
    path_base_ = "/" + options_.bucket;
  } else {
    base_ = options_.endpoint.substr(0, scheme_end) + options_.bucket + "." +
            options_.endpoint.substr(scheme_end);
  }
  sigv4_ = "aws:amz:" + options_.region + ":s3";
}

S3Client::~S3Client() = default;

std::string S3Client::Url(std::string_view key, std::string_view query) const {
  std::string url = base_ + path_base_ + "/" + std::string(key);
  if (!query.empty()) {
    url += '?';
    url += query;
  }
  return url;
}

std::string S3Client::Describe() const {
  return "s3://" + options_.bucket + " at " + options_.endpoint;
}

S3Client::Handle* S3Client::Acquire() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !idle_.empty() || created_ < options_.max_connections; });
  if (!idle_.empty()) {
    Handle* h = idle_.back();
    idle_.pop_back();
    return h;
  }
  ++created_;
  return NewHandle();
}

S3Client::Handle* S3Client::NewHandle() {
  all_.push_back(std::make_unique<Handle>());
  return all_.back().get();
}

void S3Client::Release(Handle* h) {
  {
    std::lock_guard lock(mu_);
    idle_.push_back(h);
  }
  cv_.notify_one();
}

S3Client::Handle* S3Client::TryAcquireStream() {
  std::lock_guard lock(mu_);
  if (!stream_idle_.empty()) {
    Handle* h = stream_idle_.back();
    stream_idle_.pop_back();
    return h;
  }
  if (stream_created_ >= options_.max_connections) return nullptr;
  ++stream_created_;
  return NewHandle();
}

void S3Client::ReleaseStream(Handle* h) {
  std::lock_guard lock(mu_);
  stream_idle_.push_back(h);
}

// The payload hash of an empty body, signed with every request that has none.
constexpr std::string_view kEmptySha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

void S3Client::Prepare(Handle& h, const std::string& url, curl_slist** headers) const {
  CURL* c = h.curl;
  // Reset keeps the handle's live connections, so the next request reuses them.
  curl_easy_reset(c);
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
  curl_easy_setopt(c, CURLOPT_AWS_SIGV4, sigv4_.c_str());
  curl_easy_setopt(c, CURLOPT_USERNAME, options_.access_key.c_str());
  curl_easy_setopt(c, CURLOPT_PASSWORD, options_.secret_key.c_str());
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.connect_timeout.count()));
  curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
  // No "Expect:" override: curl 7.88 signs the emptied header it then does not send (403 for every body).
  if (!options_.session_token.empty())
    *headers = curl_slist_append(*headers, ("x-amz-security-token: " + options_.session_token).c_str());
}

namespace {

// Runs the transfer set up on `c` to its end, as curl_easy_perform would, on the multi handle `m`.
CURLcode Perform(CURL* c, CURLM* m) {
  if (curl_multi_add_handle(m, c) != CURLM_OK) return CURLE_FAILED_INIT;
  CURLcode rc = CURLE_OK;
  for (int running = 1; running != 0;) {
    if (curl_multi_perform(m, &running) != CURLM_OK) {
      rc = CURLE_RECV_ERROR;
      break;
    }
    // curl's own timers may end the wait sooner.
    if (running != 0 && curl_multi_poll(m, nullptr, 0, 1000, nullptr) != CURLM_OK) {
      rc = CURLE_RECV_ERROR;
      break;
    }
  }
  int left = 0;
  while (CURLMsg* msg = curl_multi_info_read(m, &left)) {
    if (msg->msg == CURLMSG_DONE) rc = msg->data.result;
  }
  curl_multi_remove_handle(m, c);
  return rc;
}

}  // namespace

Result<S3Response> S3Client::Attempt(Handle& h, const S3Request& request, std::string* transport_error) {
  CURL* c = h.curl;
  if (c == nullptr || h.multi == nullptr) return IoError("S3: curl_easy_init failed");
  S3Response res;
  Exchange ex{&request, &res, options_.max_response_bytes, false};
  const std::string url = Url(request.key, request.query);
  curl_slist* headers = nullptr;
  Prepare(h, url, &headers);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, static_cast<long>(options_.stall_timeout.count()));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &ex);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &ex);
  for (const auto& hd : request.headers) headers = curl_slist_append(headers, hd.c_str());

  // The payload hash is signed: curl takes it from this header (it does not hash the body itself).
  uint8_t sha[SHA256_DIGEST_LENGTH];
  PieceReader reader{request.body_pieces, 0, 0};
  uint64_t pieces_size = 0;
  for (const auto& piece : request.body_pieces) pieces_size += piece.size();
  if (request.sha256) {
    std::memcpy(sha, request.sha256->data(), sizeof sha);
  } else {
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
    EVP_DigestUpdate(ctx, request.body.data(), request.body.size());  // one of the two is empty
    for (const auto& piece : request.body_pieces) EVP_DigestUpdate(ctx, piece.data(), piece.size());
    unsigned int sha_len = sizeof sha;
    EVP_DigestFinal_ex(ctx, sha, &sha_len);
    EVP_MD_CTX_free(ctx);
  }
  headers = curl_slist_append(headers, ("x-amz-content-sha256: " + HexEncode(sha)).c_str());
  if (request.checksum)
    headers = curl_slist_append(headers, ("x-amz-checksum-sha256: " + Base64Encode(sha)).c_str());

  const std::string method(request.method);
  if (method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (!request.body_pieces.empty()) {
    // A PUT of several pieces: curl reads them through the callback, as they lie in the caller's memory.
    curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(pieces_size));
    curl_easy_setopt(c, CURLOPT_READFUNCTION, ReadPieces);
    curl_easy_setopt(c, CURLOPT_READDATA, &reader);
    headers = curl_slist_append(headers, "Content-Type: application/octet-stream");
  } else if (method == "PUT" || method == "POST") {
    // POSTFIELDS: curl sends the caller's memory as it is, without a copy.
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    curl_easy_setopt(c, CURLOPT_POSTFIELDS,
                     request.body.empty() ? "" : reinterpret_cast<const char*>(request.body.data()));
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
    bool typed = false;
    for (const auto& hd : request.headers) typed = typed || strncasecmp(hd.c_str(), "content-type:", 13) == 0;
    if (!typed) headers = curl_slist_append(headers, "Content-Type: application/octet-stream");
  } else if (method != "GET") {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
  }
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);

  const CURLcode rc = Perform(c, h.multi);
  curl_slist_free_all(headers);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &res.status);
  if (ex.overflow) {
    return LimitExceeded("S3: " + method + " " + request.key + ": the response is larger than expected");
  }
  if (rc != CURLE_OK) {
    *transport_error = std::string(curl_easy_strerror(rc));
    return res;
  }
  if (res.status >= 300 && !res.body.empty()) {
    res.error_code = std::string(S3XmlValue(res.body, "Code"));
    res.error_message = std::string(S3XmlValue(res.body, "Message"));
  }
  return res;
}

std::chrono::milliseconds S3Client::Backoff(int attempt) const {
  thread_local std::mt19937_64 rng(std::random_device{}());
  // Full jitter: a random wait up to base * 2^(attempt-1), capped.
  const auto cap = std::min<int64_t>(options_.backoff_cap.count(), options_.backoff_base.count()
                                                                       << std::min(attempt - 1, 20));
  std::uniform_int_distribution<int64_t> wait(cap / 4, std::max<int64_t>(cap, 1));
  return std::chrono::milliseconds(wait(rng));
}

Result<S3Response> S3Client::Send(const S3Request& request) {
  std::string last;
  for (int attempt = 0; attempt < options_.max_attempts; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(Backoff(attempt));
    Handle* h = Acquire();
    std::string transport;
    auto res = Attempt(*h, request, &transport);
    Release(h);
    if (!res) return res.error();
    if (!transport.empty()) {
      last = transport;
      continue;
    }
    if (Retryable(res->status)) {
      last = "HTTP " + std::to_string(res->status) + (res->error_code.empty() ? "" : " " + res->error_code);
      continue;
    }
    return res;
  }
  return Unavailable("S3 store " + Describe() + " unavailable: " + std::string(request.method) + " " +
                     (request.key.empty() ? "/" : request.key) + " failed " +
                     std::to_string(options_.max_attempts) + " times (last: " + last + ")");
}

// ---- S3RangeReader

std::unique_ptr<S3RangeReader> S3Client::OpenRange(std::string key, uint64_t offset, uint64_t length) {
  return std::unique_ptr<S3RangeReader>(new S3RangeReader(*this, std::move(key), offset, length));
}

S3RangeReader::S3RangeReader(S3Client& client, std::string key, uint64_t offset, uint64_t length)
    : client_(client), key_(std::move(key)), fetched_(offset), end_(offset + length) {}

S3RangeReader::~S3RangeReader() {
  Drop(false);
}

size_t S3RangeReader::OnHeader(char* data, size_t size, size_t n, void* self) {
  auto* r = static_cast<S3RangeReader*>(self);
  const std::string_view line(data, size * n);
  if (line.starts_with("HTTP/")) {
    r->status_ = StatusOfLine(line);
    r->content_range_.clear();
  } else if (line.size() > 14 && strncasecmp(line.data(), "content-range:", 14) == 0) {
    r->content_range_ = Trim(line.substr(14));
  }
  return size * n;
}

size_t S3RangeReader::OnData(char* data, size_t size, size_t n, void* self) {
  auto* r = static_cast<S3RangeReader*>(self);
  const size_t len = size * n;
  if (r->status_ < 200 || r->status_ >= 300) {
    if (r->error_body_.size() < (64U << 10)) r->error_body_.append(data, std::min<size_t>(len, 64U << 10));
    return len;
  }
  if (!r->checked_) {
    // The bytes must be the ones asked for: a 206 from where the GET started, or a 200 (the whole object)
    // when it started at 0.
    r->checked_ = true;
    const std::string want = "bytes " + std::to_string(r->get_start_) + "-";
    if (r->status_ == 206 ? !r->content_range_.starts_with(want) : r->get_start_ != 0) {
      r->bad_ = "answered HTTP " + std::to_string(r->status_) + " with Content-Range '" + r->content_range_ +
                "' to a GET of bytes " + std::to_string(r->get_start_) + "-";
      return 0;  // aborts the transfer
    }
  }
  const size_t take = static_cast<size_t>(std::min<uint64_t>(len, r->end_ - r->fetched_));
  if (take < len && r->status_ == 206) {
    r->bad_ = "sent more bytes than the range has";
    return 0;
  }
  const size_t room = r->out_.size() - r->filled_;
  if (take > 0 && room == 0) {
    r->paused_ = true;  // the caller has what it asked for: curl keeps these bytes, and reads no more
    return CURL_WRITEFUNC_PAUSE;
  }
  const size_t direct = std::min(take, room);
  std::memcpy(r->out_.data() + r->filled_, data, direct);
  r->filled_ += direct;
  r->spill_.append(data + direct, take - direct);  // at most one hand-over (CURLOPT_BUFFERSIZE)
  r->fetched_ += take;
  r->attempts_ = 0;
  r->last_byte_ = std::chrono::steady_clock::now();
  return take < len ? 0 : len;  // the rest of a whole object (a 200) is not needed: ends the transfer
}

Result<bool> S3RangeReader::Start() {
  h_ = client_.TryAcquireStream();
  if (h_ == nullptr) return false;
  if (h_->curl == nullptr) h_->curl = curl_easy_init();  // a handle whose set-up failed before: again
  if (h_->multi == nullptr) h_->multi = curl_multi_init();
  if (h_->curl == nullptr || h_->multi == nullptr) {
    client_.ReleaseStream(h_);
    h_ = nullptr;
    return false;  // read with requests of their own instead
  }
  get_start_ = fetched_;
  status_ = 0;
  content_range_.clear();
  error_body_.clear();
  checked_ = false;
  last_byte_ = std::chrono::steady_clock::now();
  CURL* c = h_->curl;
  const std::string url = client_.Url(key_);
  client_.Prepare(*h_, url, &headers_);
  headers_ = curl_slist_append(
      headers_, ("Range: bytes=" + std::to_string(fetched_) + "-" + std::to_string(end_ - 1)).c_str());
  headers_ = curl_slist_append(headers_, ("x-amz-content-sha256: " + std::string(kEmptySha256)).c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers_);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnData);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, this);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, this);
  curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 256L << 10);  // fewer, larger hand-overs
  if (curl_multi_add_handle(h_->multi, c) != CURLM_OK) {
    Drop(false);
    return IoError("S3: curl_multi_add_handle failed");
  }
  return true;
}

Status S3RangeReader::ReadOnce(std::span<uint8_t> out) {
  S3Request req;
  req.key = key_;
  req.headers.push_back("Range: bytes=" + std::to_string(fetched_) + "-" +
                        std::to_string(fetched_ + out.size() - 1));
  req.into = out;
  auto res = client_.Send(req);
  if (!res) {
    if (res.error().code == ErrorCode::kLimit)  // more bytes than asked for: the range was ignored
      return IoError("S3 store " + client_.Describe() + ": GET " + key_ + ": the store ignored the range");
    return res.error();
  }
  if (res->status == 404) return NotFound("S3: GET " + key_ + ": no such object");
  if (res->status == 416 || ((res->status == 200 || res->status == 206) && res->received != out.size()))
    return Inconsistent("S3: GET " + key_ + ": the range is not inside the object");
  if (res->status != 206 && !(res->status == 200 && fetched_ == 0))
    return IoError("S3 store " + client_.Describe() + ": GET " + key_ + ": HTTP " +
                   std::to_string(res->status) + " " + res->error_code);
  fetched_ += out.size();
  return Ok{};
}

void S3RangeReader::Drop(bool reusable) {
  if (h_ == nullptr) return;
  curl_multi_remove_handle(h_->multi, h_->curl);
  if (!reusable) h_->Disconnect();
  curl_slist_free_all(headers_);
  headers_ = nullptr;
  client_.ReleaseStream(h_);
  h_ = nullptr;
}

Status S3RangeReader::Failed(std::string why, bool retryable) {
  Drop(false);
  last_ = std::move(why);
  if (retryable && ++attempts_ < client_.options().max_attempts) {
    std::this_thread::sleep_for(client_.Backoff(attempts_));
    return Ok{};  // the next round of Read starts a GET from fetched_
  }
  spent_ = true;
  return retryable
             ? Unavailable("S3 store " + client_.Describe() + " unavailable: GET " + key_ + " failed " +
                           std::to_string(client_.options().max_attempts) + " times (last: " + last_ + ")")
             : IoError("S3 store " + client_.Describe() + ": GET " + key_ + ": " + last_);
}

Status S3RangeReader::Read(std::span<uint8_t> out) {
  if (spent_) return IoError("S3: GET " + key_ + ": the reader failed before");
  size_t n = std::min(out.size(), spill_.size() - spill_at_);
  std::memcpy(out.data(), spill_.data() + spill_at_, n);
  spill_at_ += n;
  if (spill_at_ == spill_.size()) {
    spill_.clear();
    spill_at_ = 0;
  }
  if (out.size() - n > end_ - fetched_) {
    spent_ = true;
    return Inconsistent("S3: GET " + key_ + ": read past the end of the range");
  }
  last_byte_ = std::chrono::steady_clock::now();  // a stall counts from when bytes were asked for
  // Drive the GET until `out` is full, and on to the end of its answer once every byte of the range
  // arrived (so that the connection can serve the next request).
  while (n < out.size() || (h_ != nullptr && fetched_ == end_)) {
    if (h_ == nullptr) {
      auto started = Start();
      if (!started.ok()) {
        spent_ = true;
        return started.error();
      }
      if (!*started) {
        // Every stream connection is some other reader's: this read is one ranged GET on the request pool,
        // whose handles are held for one request only, so waiting for one never waits on a reader.
        if (auto st = ReadOnce(out.subspan(n)); !st.ok()) {
          spent_ = true;
          return st;
        }
        attempts_ = 0;  // bytes arrived
        n = out.size();
        continue;
      }
    }
    out_ = out.subspan(n);
    filled_ = 0;
    int running = 1;
    std::string failure;  // of the GET in flight, for Failed below
    if (paused_) {
      paused_ = false;
      // Hands over what curl kept, into out_ (the write callback may refuse it: bad_).
      if (const CURLcode pc = curl_easy_pause(h_->curl, CURLPAUSE_CONT); pc != CURLE_OK)
        failure = curl_easy_strerror(pc);
    } else if (const CURLMcode mc = curl_multi_perform(h_->multi, &running); mc != CURLM_OK) {
      failure = curl_multi_strerror(mc);
    }
    n += filled_;
    out_ = {};
    filled_ = 0;
    if (failure.empty() && running == 0) {
      if (auto st = Finished(); !st.ok()) return st;
      continue;
    }
    if (failure.empty() && (n < out.size() || fetched_ == end_)) {
      if (const CURLMcode mc = curl_multi_poll(h_->multi, nullptr, 0, 1000, nullptr); mc != CURLM_OK) {
        failure = curl_multi_strerror(mc);
      } else if (std::chrono::steady_clock::now() - last_byte_ > client_.options().stall_timeout) {
        failure = "no byte for " + std::to_string(client_.options().stall_timeout.count()) + " s";
      }
    }
    if (failure.empty()) continue;
    if (!bad_.empty()) return Failed(bad_, false);
    if (fetched_ == end_ && n == out.size()) {
      Drop(false);  // every byte asked for is here: only the end of the answer went wrong
      break;
    }
    if (auto st = Failed(failure, true); !st.ok()) return st;
  }
  return Ok{};
}

Status S3RangeReader::Finished() {
  CURLcode rc = CURLE_OK;
  int left = 0;
  while (CURLMsg* msg = curl_multi_info_read(h_->multi, &left)) {
    if (msg->msg == CURLMSG_DONE) rc = msg->data.result;
  }
  const bool clean = rc == CURLE_OK;
  const bool success = status_ >= 200 && status_ < 300;
  if (!bad_.empty()) return Failed(bad_, false);
  if (fetched_ == end_ && success) {
    Drop(clean);  // complete: the connection is reused if curl finished the answer cleanly
    return Ok{};
  }
  const auto refusal = [&](Error e) {
    spent_ = true;
    Drop(clean);
    return e;
  };
  if (status_ == 404) return refusal(NotFound("S3: GET " + key_ + ": no such object"));
  if (status_ == 416)
    return refusal(Inconsistent("S3: GET " + key_ + ": the range is not inside the object"));
  if (!clean) return Failed(curl_easy_strerror(rc), true);  // cut short: resumed from fetched_
  // A whole answer, shorter than the range: the object ends before the range does.
  if (success) return refusal(Inconsistent("S3: GET " + key_ + ": the object ends before the range does"));
  return Failed("HTTP " + std::to_string(status_) + " " + std::string(S3XmlValue(error_body_, "Code")),
                Retryable(status_));
}

namespace {

void Sha256(std::string_view data, uint8_t out[32]) {
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), out);
}

void Hmac(std::span<const uint8_t> key, std::string_view data, uint8_t out[32]) {
  unsigned int len = 32;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
}

}  // namespace

std::string PresignGet(const S3Client& client, std::string_view key, uint64_t now_unix,
                       uint64_t expires_seconds, std::string_view tag) {
  const S3Options& o = client.options();
  const auto t = static_cast<time_t>(now_unix);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[17];
  char date[9];
  if (std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm) == 0 ||
      std::strftime(date, sizeof date, "%Y%m%d", &tm) == 0)
    return {};
  const std::string scope = std::string(date) + "/" + o.region + "/s3/aws4_request";

  // Host as the URL names it (scheme and path stripped).
  const std::string url = client.Url(key);
  const size_t host_start = url.find("://") + 3;
  const size_t path_start = url.find('/', host_start);
  const std::string host = url.substr(host_start, path_start - host_start);
  const std::string path = url.substr(path_start);

  std::vector<std::pair<std::string, std::string>> params = {
      {"X-Amz-Algorithm", "AWS4-HMAC-SHA256"},
      {"X-Amz-Credential", o.access_key + "/" + scope},
      {"X-Amz-Date", stamp},
      {"X-Amz-Expires", std::to_string(std::clamp<uint64_t>(expires_seconds, 1, 604800))},
      {"X-Amz-SignedHeaders", "host"},
  };
  if (!o.session_token.empty()) params.emplace_back("X-Amz-Security-Token", o.session_token);
  if (!tag.empty()) params.emplace_back("x-cairn-tag", std::string(tag));
  const std::string query = S3QueryString(params);
  const std::string canonical =
      "GET\n" + path + "\n" + query + "\nhost:" + host + "\n\nhost\nUNSIGNED-PAYLOAD";
  uint8_t digest[32];
  Sha256(canonical, digest);
  const std::string to_sign =
      "AWS4-HMAC-SHA256\n" + std::string(stamp) + "\n" + scope + "\n" + HexEncode(digest);

  // The signing key depends on the day alone: derived once per thread and day (four HMACs saved per URL).
  struct DayKey {
    const S3Client* client = nullptr;
    char date[9] = {};
    uint8_t key[32] = {};
  };
  thread_local DayKey day;
  if (day.client != &client || std::memcmp(day.date, date, sizeof date) != 0) {
    const std::string secret = "AWS4" + o.secret_key;
    uint8_t k1[32], k2[32], k3[32];
    Hmac({reinterpret_cast<const uint8_t*>(secret.data()), secret.size()}, date, k1);
    Hmac(k1, o.region, k2);
    Hmac(k2, "s3", k3);
    Hmac(k3, "aws4_request", day.key);
    day.client = &client;
    std::memcpy(day.date, date, sizeof date);
  }
  uint8_t sig[32];
  Hmac(day.key, to_sign, sig);
  return url + "?" + query + "&X-Amz-Signature=" + HexEncode(sig);
}

}  // namespace cairn::store

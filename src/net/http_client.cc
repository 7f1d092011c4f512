#include "net/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <random>
#include <thread>

namespace cairn::net {
namespace {

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* headers = static_cast<std::map<std::string, std::string>*>(user);
  const std::string_view line(data, size * n);
  const size_t colon = line.find(':');
  if (line.starts_with("HTTP/")) {
    headers->clear();  // a new response (after a redirect or a 100 Continue)
  } else if (colon != std::string_view::npos) {
    std::string name(line.substr(0, colon));
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' '))
      value.remove_suffix(1);
    (*headers)[name] = std::string(value);
  }
  return size * n;
}

// A streamed answer: a 2xx body goes to the sink, another status's is kept (bounded).
struct Streamed {
  HttpResponse* response;
  const HttpClient::Sink* sink;
  uint64_t delivered = 0;
  bool stopped = false;
};

size_t OnStreamedBody(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<Streamed*>(user);
  const size_t bytes = size * n;
  // The status is the last "HTTP/" line's: the answer these bytes belong to (a redirect's body is not sent).
  if (s->response->status >= 200 && s->response->status < 300) {
    if (!(*s->sink)(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data), bytes))) {
      s->stopped = true;
      return 0;  // stops the transfer
    }
    s->delivered += bytes;
  } else if (s->response->body.size() < (64U << 10)) {
    s->response->body.append(data, std::min(bytes, (64U << 10) - s->response->body.size()));
  }
  return bytes;
}

// Headers of a streamed answer: kept across redirects (a Hub's 302 carries X-Xet-Hash, the CDN's answer does
// not), the status of the latest answer noted so that the body callback knows where the bytes go.
size_t OnStreamedHeader(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<Streamed*>(user);
  const std::string_view line(data, size * n);
  if (line.starts_with("HTTP/")) {
    const size_t sp = line.find(' ');
    long status = 0;
    if (sp != std::string_view::npos) {
      for (size_t i = sp + 1; i < line.size() && i < sp + 4 && line[i] >= '0' && line[i] <= '9'; ++i)
        status = status * 10 + (line[i] - '0');
    }
    s->response->status = status;
    return size * n;
  }
  return OnHeader(data, size, n, &s->response->headers);
}

}  // namespace

struct HttpClient::Impl {
  Impl() : curl(curl_easy_init()) {
    // A private CA (a server's own HTTPS certificate): the variable OpenSSL, Python and hf_xet read too.
    // NOLINTNEXTLINE(concurrency-mt-unsafe): the environment is never written while clients run
    if (const char* ca = std::getenv("SSL_CERT_FILE"); ca != nullptr && *ca != '\0') ca_file = ca;
  }
  ~Impl() { curl_easy_cleanup(curl); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  CURL* curl;
  std::string ca_file;  // empty: libcurl's default CA bundle
  std::mt19937_64 rng{std::random_device{}()};
};

bool IsTransientStatus(long status) {
  return status == 408 || status == 429 || (status >= 500 && status != 501);
}

std::vector<std::string> BearerHeader(const std::string& token) {
  if (token.empty()) return {};
  return {"Authorization: Bearer " + token};
}

void HttpClient::Pause(std::chrono::milliseconds& delay, const HttpResponse& last) {
  ++retried_;
  // Full jitter: anywhere up to the current back-off, so that many clients do not retry in step.
  std::uniform_int_distribution<int64_t> pick(delay.count() / 2, delay.count());
  auto wait = std::chrono::milliseconds(pick(impl_->rng));
  if (auto it = last.headers.find("retry-after"); it != last.headers.end()) {
    int64_t seconds = 0;
    for (const char c : it->second) {
      if (c < '0' || c > '9' || seconds > 86400) break;
      seconds = seconds * 10 + (c - '0');
    }
    wait = std::max(wait, std::min(std::chrono::milliseconds(seconds * 1000), policy_.max_delay * 4));
  }
  std::this_thread::sleep_for(wait);
  delay = std::min(policy_.max_delay, delay * 2);
}

HttpClient::HttpClient(RetryPolicy policy) : impl_(std::make_unique<Impl>()), policy_(policy) {}
HttpClient::~HttpClient() = default;

Result<HttpResponse> HttpClient::Retry(const std::string& what, int attempts, const Perform& perform,
                                       const std::function<bool()>& may_retry) {
  if (impl_->curl == nullptr) return IoError("libcurl could not be initialized");
  std::string last = "no attempt";
  auto delay = policy_.base_delay;
  HttpResponse last_answer;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    if (attempt > 0) Pause(delay, last_answer);
    CURL* c = impl_->curl;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (!impl_->ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, impl_->ca_file.c_str());
    HttpResponse r;
    const auto rc = static_cast<CURLcode>(perform(c, r));
    if (rc != CURLE_OK) {
      last = std::string(curl_easy_strerror(rc));
      if (!may_retry()) break;
      continue;
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    if (IsTransientStatus(r.status) && attempt + 1 < attempts) {
      last = "HTTP " + std::to_string(r.status);
      last_answer = std::move(r);
      continue;
    }
    return r;
  }
  return Unavailable(what + " failed after " + std::to_string(attempts) + " attempts: " + last);
}

Result<HttpResponse> HttpClient::Send(const std::string& method, const std::string& url,
                                      const std::vector<std::string>& headers, std::string_view body,
                                      bool retries) {
  const auto perform = [&](void* handle, HttpResponse& r) -> int {
    CURL* c = handle;
    curl_slist* list = nullptr;
    for (const auto& h : headers) list = curl_slist_append(list, h.c_str());
    list = curl_slist_append(list, "Expect:");  // no 100-continue round trip
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnBody);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, OnHeader);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r.headers);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, static_cast<long>(policy_.timeout.count()));
    curl_easy_setopt(c, CURLOPT_USERAGENT, "cairn-client/1");
    if (method == "HEAD") {
      curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else if (method != "GET") {
      curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
      // A DELETE without a body sends none (no Content-Length: 0, no form Content-Type libcurl would add).
      if (method == "POST" || method == "PUT" || !body.empty()) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
      }
    }
    const CURLcode rc = curl_easy_perform(c);
    curl_slist_free_all(list);
    return rc;
  };
  return Retry(method + " " + url.substr(0, url.find('?')), retries ? std::max(1, policy_.attempts) : 1,
               perform, [] { return true; });
}

Result<HttpResponse> HttpClient::Fetch(const std::string& url, const std::vector<std::string>& headers,
                                       const Sink& sink) {
  bool stopped = false;
  uint64_t delivered = 0;
  const auto perform = [&](void* handle, HttpResponse& r) -> int {
    CURL* c = handle;
    Streamed streamed{&r, &sink};
    curl_slist* list = nullptr;
    for (const auto& h : headers) list = curl_slist_append(list, h.c_str());
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnStreamedBody);
    // Large reads: a streamed body is bulk (a file, a xorb range); 16 KiB reads cost a syscall each.
    curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 512L * 1024);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &streamed);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, OnStreamedHeader);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &streamed);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    // No whole-transfer timeout (a large file takes what it takes); a stalled one is cut instead.
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "cairn-mirror/1");
    const CURLcode rc = curl_easy_perform(c);
    curl_slist_free_all(list);
    stopped = streamed.stopped;
    delivered += streamed.delivered;
    return rc;
  };
  // Once bytes went to the sink, a failure is the caller's to resume (where they end).
  auto answer = Retry("GET " + url.substr(0, url.find('?')), std::max(1, policy_.attempts), perform,
                      [&] { return !stopped && delivered == 0; });
  if (stopped) return IoError("the transfer of " + url.substr(0, url.find('?')) + " was stopped");
  return answer;
}

}  // namespace cairn::net

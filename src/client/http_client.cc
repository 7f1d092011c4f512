#include "client/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <random>
#include <thread>

namespace cairn::client {
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

HttpClient::HttpClient(RetryPolicy policy) : impl_(std::make_unique<Impl>()), policy_(policy) {}
HttpClient::~HttpClient() = default;

xet::Result<HttpResponse> HttpClient::Send(const std::string& method, const std::string& url,
                                           const std::vector<std::string>& headers, std::string_view body,
                                           bool retries) {
  if (impl_->curl == nullptr) return xet::IoError("libcurl could not be initialized");
  std::string last = "no attempt";
  auto delay = policy_.base_delay;
  const int attempts = retries ? std::max(1, policy_.attempts) : 1;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    if (attempt > 0) {
      ++retried_;
      // Full jitter: anywhere up to the current back-off, so that many clients do not retry in step.
      std::uniform_int_distribution<int64_t> pick(delay.count() / 2, delay.count());
      std::this_thread::sleep_for(std::chrono::milliseconds(pick(impl_->rng)));
      delay = std::min(policy_.max_delay, delay * 2);
    }
    CURL* c = impl_->curl;
    curl_easy_reset(c);
    HttpResponse r;
    curl_slist* list = nullptr;
    for (const auto& h : headers) list = curl_slist_append(list, h.c_str());
    list = curl_slist_append(list, "Expect:");  // no 100-continue round trip
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    if (!impl_->ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, impl_->ca_file.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnBody);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, OnHeader);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r.headers);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, static_cast<long>(policy_.timeout.count()));
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
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
    if (rc != CURLE_OK) {
      last = std::string(curl_easy_strerror(rc));
      continue;
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    if (IsTransientStatus(r.status) && attempt + 1 < attempts) {
      last = "HTTP " + std::to_string(r.status);
      continue;
    }
    return r;
  }
  return xet::Unavailable(method + " " + url.substr(0, url.find('?')) + " failed after " +
                          std::to_string(attempts) + " attempts: " + last);
}

}  // namespace cairn::client

// A blocking HTTP/1.1 client for cairn's own commands (`cairn get`, `put`, `ls`, `rm`, `stat`), on libcurl.
//
// Each HttpClient keeps one curl handle, so requests made through it reuse their connection. Failures the
// stock client treats as transient are retried with jittered exponential back-off: transport errors
// (refused, reset, timed out, cut short), 408, 429 and 5xx other than 501; every other status is returned to
// the caller as it came. A bearer token is sent only where the caller asks (capability URLs carry none).
//
// Thread-safety: one thread at a time per HttpClient; make one per thread. Failures: kUnavailable when the
// server could not be reached (or kept failing transiently) within the retry budget, with the last cause.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "xet/result.h"

namespace cairn::client {

struct RetryPolicy {
  int attempts = 8;                           // tries in all
  std::chrono::milliseconds base_delay{250};  // the first back-off; doubled each time, with jitter
  std::chrono::milliseconds max_delay{8000};
  std::chrono::seconds timeout{300};  // one request, connect to last byte
};

struct HttpResponse {
  long status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // names lower-cased
};

class HttpClient {
 public:
  explicit HttpClient(RetryPolicy policy = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // `headers` as "Name: value". `body` is sent for POST/PUT, and for other methods when it is not empty (a
  // DELETE without one sends no body). `retries` covers the idempotent requests; uploads pass their own
  // judgement.
  xet::Result<HttpResponse> Send(const std::string& method, const std::string& url,
                                 const std::vector<std::string>& headers, std::string_view body = {},
                                 bool retries = true);

  // How many times a request was sent again (all requests so far).
  int retried() const { return retried_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  RetryPolicy policy_;
  int retried_ = 0;
};

// Whether a status is one the stock client retries.
bool IsTransientStatus(long status);

// "Authorization: Bearer T" (empty for an empty token).
std::vector<std::string> BearerHeader(const std::string& token);

}  // namespace cairn::client

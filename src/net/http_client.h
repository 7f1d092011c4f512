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
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace cairn::net {

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
  Result<HttpResponse> Send(const std::string& method, const std::string& url,
                            const std::vector<std::string>& headers, std::string_view body = {},
                            bool retries = true);

  // A GET whose 2xx body goes to `sink` as it arrives (any other status's body is kept in the response, at
  // most 64 KiB), following redirects (libcurl sends no Authorization header to another host). Retried as
  // Send retries while no byte has reached the sink; a failure after that is returned as kUnavailable, and
  // the caller may ask for the rest with a Range header. A sink returning false stops the transfer (kIo).
  using Sink = std::function<bool(std::span<const uint8_t>)>;
  Result<HttpResponse> Fetch(const std::string& url, const std::vector<std::string>& headers,
                             const Sink& sink);

  // How many times a request was sent again (all requests so far).
  int retried() const { return retried_; }

 private:
  struct Impl;
  // Sleeps before attempt `attempt` (> 0): the back-off `delay` (then doubled), or what the last answer's
  // Retry-After asked when that is longer (at most max_delay × 4).
  void Pause(std::chrono::milliseconds& delay, const HttpResponse& last);
  // Sends with `perform(curl handle, response)` (which sets the request's options, performs it and returns
  // libcurl's code) up to `attempts` times: again after a transport failure while `may_retry()`, and after a
  // transient status; kUnavailable naming `what` when every attempt failed.
  using Perform = std::function<int(void*, HttpResponse&)>;
  Result<HttpResponse> Retry(const std::string& what, int attempts, const Perform& perform,
                             const std::function<bool()>& may_retry);
  std::unique_ptr<Impl> impl_;
  RetryPolicy policy_;
  int retried_ = 0;
};

// Whether a status is one the stock client retries.
bool IsTransientStatus(long status);

// "Authorization: Bearer T" (empty for an empty token).
std::vector<std::string> BearerHeader(const std::string& token);

}  // namespace cairn::net

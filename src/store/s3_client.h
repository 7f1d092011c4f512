// Signed requests to an S3-compatible object store (AWS S3, SeaweedFS, Ceph RGW, MinIO, R2, B2...) on
// libcurl, with curl's own AWS SigV4 signing (CURLOPT_AWS_SIGV4). This is the transport under S3Store; it
// knows objects and buckets, not blobs.
//
// Contract:
//  - Ownership: the client owns a bounded pool of curl handles (each keeps its connection alive between
//    requests); at most `max_connections` requests are in flight, further callers wait for a handle. Range
//    readers have a pool of their own, as large, which nothing waits for: up to 2 × max_connections in all.
//  - Thread-safety: every method may be called concurrently from any thread.
//  - Retries: transport failures (refused, reset, timed out), 429 and 5xx are retried with full-jitter
//    exponential back-off, up to `max_attempts` tries in all; a body is always sent whole again. When every
//    attempt failed, Send answers kUnavailable (the store cannot be reached now: the API answers 503). Any
//    other status (2xx, 3xx, 4xx) is returned as a response for the caller to judge.
//  - Bounds: a response body goes into the caller's buffer (never past its end) or, capped at
//    `max_response_bytes`, into the response; a longer body fails the request with kLimit.
//  - Nothing throws.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

struct curl_slist;  // <curl/curl.h>

namespace cairn::store {

struct S3Options {
  std::string endpoint;  // scheme://host[:port]; empty: https://s3.<region>.amazonaws.com
  std::string region = "us-east-1";
  std::string bucket;
  bool path_style = false;  // endpoint/bucket/key instead of bucket.endpoint/key (SeaweedFS, MinIO, Ceph)
  std::string access_key;
  std::string secret_key;
  std::string session_token;  // temporary credentials (x-amz-security-token)
  size_t max_connections = 64;
  std::chrono::milliseconds connect_timeout{5000};
  // A transfer that moves no byte for this long is abandoned (and retried): stalls, not slow links.
  std::chrono::seconds stall_timeout{30};
  int max_attempts = 5;
  std::chrono::milliseconds backoff_base{100};  // first retry waits up to this, doubling up to backoff_cap
  std::chrono::milliseconds backoff_cap{3000};
  size_t max_response_bytes = 16ULL << 20;  // listing pages and error documents
};

struct S3Request {
  std::string_view method = "GET";  // GET, HEAD, PUT, POST, DELETE
  std::string key;  // object key (not encoded; keys here are [A-Za-z0-9._/-]); empty: the bucket
  // Already canonical (names sorted, names and values URI-encoded, "name=value" joined by '&'): curl signs
  // the query as it is in the URL. Build it with S3QueryString.
  std::string query;
  std::vector<std::string> headers;  // "Name: value", signed with the request
  // Sent from the caller's memory (not copied). Its SHA-256 is signed as x-amz-content-sha256, so the store
  // recomputes it and refuses a body corrupted on the way.
  std::span<const uint8_t> body;
  // Or a PUT body made of these pieces, in order (sent from the caller's memory through a read callback).
  std::vector<std::span<const uint8_t>> body_pieces;
  // The body is an object's (or a part's) bytes: also send its SHA-256 as x-amz-checksum-sha256, which the
  // store checks and keeps with the object.
  bool checksum = false;
  // The body's SHA-256 when the caller has it already (hashed as the bytes arrived): not computed again here.
  std::optional<std::array<uint8_t, 32>> sha256;
  std::span<uint8_t> into;  // a body expected to fit here exactly (ranged GETs); else `body` below
};

struct S3Response {
  long status = 0;
  std::string body;     // when the request had no `into`
  size_t received = 0;  // bytes of the body (into `into` or `body`)
  std::string etag;     // ETag header, quotes kept
  uint64_t content_length = 0;
  std::string content_range;  // Content-Range header, if any
  std::string retry_after;    // Retry-After header, if any
  // The error document's <Code> and <Message> (empty for a success or a HEAD).
  std::string error_code;
  std::string error_message;
};

// "name=value&..." from unencoded pairs, sorted by name, every byte but A-Za-z0-9-_.~ percent-encoded, as
// SigV4's canonical query wants it (a name without a value becomes "name=").
std::string S3QueryString(std::vector<std::pair<std::string, std::string>> params);

// The text between <tag> and </tag> of an S3 XML document, searched from *from (0 when null), which is then
// moved past the closing tag; empty when there is none. Enough for the flat answers S3 gives (no escaping in
// what cairn reads: hex keys, upload ids, tokens, error codes).
std::string_view S3XmlValue(std::string_view doc, std::string_view tag, size_t* from = nullptr);

class S3RangeReader;

class S3Client {
 public:
  // Checks the options (an endpoint URL, a bucket name, credentials present); contacts nothing.
  static Result<std::unique_ptr<S3Client>> Create(S3Options options);
  ~S3Client();
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  Result<S3Response> Send(const S3Request& request);
  // A reader of the object's bytes [offset, offset + length) (length > 0): one ranged GET, started by the
  // first Read. Contacts nothing until then.
  std::unique_ptr<S3RangeReader> OpenRange(std::string key, uint64_t offset, uint64_t length);

  // https://bucket.host/key or http://host/bucket/key.
  std::string Url(std::string_view key, std::string_view query = {}) const;
  // "s3://bucket at http://host:port" for messages (never credentials).
  std::string Describe() const;
  const S3Options& options() const { return options_; }

 private:
  friend class S3RangeReader;
  struct Handle;
  explicit S3Client(S3Options options);
  Handle* Acquire();
  void Release(Handle* h);
  // Handles of range readers: a pool of its own, never waited for (a reader holds its handle between reads,
  // so a request waiting on readers could wait on itself); nullptr when all max_connections are taken.
  Handle* TryAcquireStream();
  void ReleaseStream(Handle* h);
  Handle* NewHandle();  // owned by all_; mu_ held
  // Signing, timeouts and headers common to every request; `headers` gets the signed payload hash.
  void Prepare(Handle& h, const std::string& url, curl_slist** headers) const;
  // One attempt; `transport_error` is set (and the result ok) when curl failed before a status arrived.
  Result<S3Response> Attempt(Handle& h, const S3Request& request, std::string* transport_error);
  // The wait before retry number `attempt` (1, 2, ...): full jitter, capped.
  std::chrono::milliseconds Backoff(int attempt) const;

  const S3Options options_;
  std::string base_;       // scheme://host[:port] with the bucket as a subdomain unless path style
  std::string path_base_;  // "/bucket" in path style, else ""
  std::string sigv4_;      // "aws:amz:<region>:s3"
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Handle*> idle_;
  size_t created_ = 0;
  std::vector<Handle*> stream_idle_;
  size_t stream_created_ = 0;
  std::vector<std::unique_ptr<Handle>> all_;
};

// An object's bytes [offset, offset + length), from one ranged GET read as the caller asks for them: curl
// reads the socket only inside Read, so a slow reader holds the store back through TCP flow control instead
// of bytes piling up in memory, and the store serves one request per range rather than one per block. A GET
// that fails, stalls (no byte for stall_timeout) or ends early is resumed from the first byte not yet
// received, with the retries and back-off of Send (counted from the last byte that arrived).
//
// Holds one of the client's stream handles (and its connection) from the first Read until the range has been
// read or the reader is destroyed; a reader dropped part way closes that connection. When all max_connections
// stream handles are held by other readers, each Read is a ranged GET of its own instead (as without
// streams). Thread-compatible: one thread at a time; the client must outlive it.
class S3RangeReader {
 public:
  ~S3RangeReader();
  S3RangeReader(const S3RangeReader&) = delete;
  S3RangeReader& operator=(const S3RangeReader&) = delete;

  // Fills `out` exactly with the range's next bytes. Errors: kUnavailable (the store cannot be reached: every
  // attempt failed), kNotFound (no object), kInconsistent (the range is not inside the object; or `out` runs
  // past the range's end), kIo (any other refusal, or a store that answered other bytes than asked for).
  // After an error the reader is spent.
  Status Read(std::span<uint8_t> out);

 private:
  friend class S3Client;
  S3RangeReader(S3Client& client, std::string key, uint64_t offset, uint64_t length);
  Result<bool> Start();  // a GET of [fetched_, end_) on a stream handle; false when none is free
  Status ReadOnce(std::span<uint8_t> out);  // the next out.size() bytes in one request of their own
  void Drop(bool reusable);  // ends the GET in flight; its connection is kept only when `reusable`
  Status Failed(std::string why, bool retryable);  // the GET in flight failed: retry or give up
  Status Finished();                               // curl ended the GET in flight: judge how
  static size_t OnData(char* data, size_t size, size_t n, void* self);
  static size_t OnHeader(char* data, size_t size, size_t n, void* self);

  S3Client& client_;
  const std::string key_;
  uint64_t fetched_;    // the absolute offset up to which bytes have arrived (delivered or spilled)
  const uint64_t end_;  // exclusive
  S3Client::Handle* h_ = nullptr;  // while a GET is in flight
  curl_slist* headers_ = nullptr;
  uint64_t get_start_ = 0;  // where the GET in flight started
  long status_ = 0;
  std::string content_range_;
  std::string error_body_;  // an error document (bounded)
  std::string bad_;         // why the body was refused (other bytes than asked for)
  bool checked_ = false;    // the answer's status and Content-Range were judged (at its first body byte)
  std::span<uint8_t> out_;  // where OnData copies to during Read
  size_t filled_ = 0;
  std::string spill_;  // bytes past `out_` (curl hands over up to its buffer size at once)
  size_t spill_at_ = 0;
  bool paused_ = false;  // curl holds bytes that did not fit `out_` (CURL_WRITEFUNC_PAUSE)
  int attempts_ = 0;     // failed attempts since the last byte arrived
  std::string last_;     // the last failure
  std::chrono::steady_clock::time_point last_byte_;
  bool spent_ = false;
};

// SigV4 presigning of a GET (query-string authentication): curl signs headers only, so this is the one place
// that computes a signature itself. The URL grants a GET of the whole object until it expires. `tag`, when
// not empty, is signed into the URL as the parameter x-cairn-tag (the store ignores it): URLs for different
// ranges of one object then differ, as clients that key their download plans by URL need.
std::string PresignGet(const S3Client& client, std::string_view key, uint64_t now_unix,
                       uint64_t expires_seconds, std::string_view tag = {});

}  // namespace cairn::store

// What a route handler sees and produces.
//
// A request arrives as an Exchange: the parsed Request plus the means to answer it. Every answering method
// (Respond, StartStream, ResponseStream::Write/Finish, Offload) is thread-safe: it posts to the connection's
// strand, so a handler may answer from a worker thread. An Exchange is answered exactly once; an Exchange
// dropped without an answer answers 500 when it is destroyed. Nothing here may outlive the Server.
//
// Body models (chosen per route, see router.h):
//  - buffered: the server reads the whole body (bounded by the route's max_body, 413 above) into
//    Request::body before calling the Handler;
//  - streamed: the StreamHandler runs as soon as the header is read (and authenticated) and returns a
//    BodySink that receives the body in pieces as they arrive (in its own memory if it offers some), with
//    backpressure (the next piece is read only after the sink calls `next`).
// Response models: a buffered Response whose body is a list of parts, each a string, a FileSegment (sent
// with sendfile(2)) or a SourceSegment (read in blocks off the network threads), or a chunked stream
// (ResponseStream) produced incrementally.
//
// Response headers: one value per name, and nothing that could split the header (a name that is not a token,
// a control character in a value) — Response::Header refuses it, and the server drops it from whatever list
// it sends (SendableHeaders), logging the name.
#pragma once

#include <atomic>
#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/verb.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/media_type.h"
#include "common/unique_fd.h"
#include "http/auth.h"
#include "http/result.h"
#include "http/status.h"

namespace cairn {
class WorkQueue;
}  // namespace cairn

namespace cairn::http {

using cairn::WorkQueue;
using Verb = boost::beast::http::verb;
using HeaderList = std::vector<std::pair<std::string, std::string>>;

// A read-only open file, shared by the responses that send from it. Closed when the last owner lets go.
class File {
 public:
  static Result<std::shared_ptr<const File>> Open(const std::string& path);
  File(UniqueFd fd, uint64_t size) : fd_(std::move(fd)), size_(size) {}
  int fd() const { return fd_.get(); }
  uint64_t size() const { return size_; }

 private:
  UniqueFd fd_;
  uint64_t size_;
};

// `length` bytes of `file` from `offset`, sent with sendfile(2).
struct FileSegment {
  std::shared_ptr<const File> file;
  uint64_t offset = 0;
  uint64_t length = 0;
};
// Bytes a stream lends instead of copying: `pieces`, in order, stay valid while `owner` lives.
struct LentBytes {
  std::shared_ptr<const void> owner;
  std::vector<std::span<const uint8_t>> pieces;
};

// Bytes read in order from where it was opened (an object store's ranged GET, read as it goes): Read fills
// `out` exactly with the next bytes. Called on the worker pool, one call at a time.
class ByteStream {
 public:
  virtual ~ByteStream() = default;
  virtual Status Read(std::span<uint8_t> out) = 0;
  // A stream that holds its bytes in memory anyway (verified chunks) may lend them: Lend gives the next
  // `length` bytes as pieces of its own memory, which the server writes to the socket from there, instead
  // of a copy. Used instead of Read where lends() is true; same calling rules and failures.
  virtual bool lends() const { return false; }
  virtual Status Lend(uint64_t /*length*/, LentBytes& /*out*/) {
    return IoError("this stream does not lend");
  }
};

// Bytes the server reads with blocking calls (a blob in an object store) rather than sends from a file.
// ReadAt runs on the worker pool, one call at a time per segment, and must fill `out` exactly: a failure
// once the header is sent can only cut the response short (the connection closes).
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual Status ReadAt(uint64_t offset, std::span<uint8_t> out) const = 0;
  // A stream of [offset, offset + length), where reading on costs less than a read per block (one request
  // to a store instead of one per block); nullptr (the default): the server reads blocks with ReadAt.
  virtual std::unique_ptr<ByteStream> Stream(uint64_t /*offset*/, uint64_t /*length*/) const {
    return nullptr;
  }
};

// `length` bytes of `source` from `offset`, read in blocks on the worker pool (one block read ahead of the
// socket) and written as they arrive: through `stream` when set (opened at `offset` by whoever read the
// bytes before it) or the source gives one, else with ReadAt.
struct SourceSegment {
  std::shared_ptr<const ByteSource> source;
  uint64_t offset = 0;
  uint64_t length = 0;
  std::shared_ptr<ByteStream> stream;
};
using BodyPart = std::variant<std::string, FileSegment, SourceSegment>;

// RFC 9110 §5.6.2: tchar is "!#$%&'*+-.^_`|~", a digit or a letter; a token one or more of them. What a
// header's name, and each name in a media type, must be.
using ::cairn::IsTchar;  // common/media_type.h
bool IsToken(std::string_view s);
// A header value the server sends: no control character but HTAB (0x00-0x08, 0x0a-0x1f, 0x7f), since CR, LF
// or NUL would end the header or start another. Bytes 0x80-0xff (obs-text) pass: they split nothing.
bool ValidHeaderValue(std::string_view v);
// The headers of `headers` the server sends: one that Response::Header would refuse is dropped (its name
// appended to `refused`), and of a name given more than once (case-insensitive) the last value is kept, in
// the first one's place — but every Set-Cookie (AddHeader) is kept. For lists built by hand
// (Response::headers is public, StartStream takes one).
HeaderList SendableHeaders(HeaderList headers, std::vector<std::string>& refused);

struct Response {
  unsigned status = 200;
  // Set with Header. Content-Length, Transfer-Encoding, Connection, Keep-Alive, X-Request-Id and Server are
  // the server's: a handler's own are dropped.
  HeaderList headers;
  std::vector<BodyPart> body;  // sent in order; Content-Length is their total
  std::string error;           // an error answer's message, for the server's request log (not sent as is)
  // Names of the headers Header refused (never their values, which may be anything): the server logs each.
  std::vector<std::string> refused_headers;

  // Sets header `name` to `value`, replacing one of the same name (case-insensitive): a list-valued header is
  // set whole. Refuses, leaving the header as it was and recording the name in refused_headers, a name that
  // is not a token or a value that is not ValidHeaderValue: values often come from clients or stored records,
  // and none may split the answer's header (response splitting).
  Response& Header(std::string name, std::string value);
  // Adds header `name` beside any of the same name, checked as Header checks: for Set-Cookie, which is sent
  // once per cookie and never joined.
  Response& AddHeader(std::string name, std::string value);
  uint64_t ContentLength() const;

  static Response Json(unsigned status, std::string json);
  static Response Json(unsigned status, std::vector<std::string> parts);  // sent in order, never joined
  static Response Text(unsigned status, std::string text,
                       std::string content_type = "text/plain; charset=utf-8");
  static Response Binary(unsigned status, std::string bytes,
                         std::string content_type = "application/octet-stream");
  // {"error": message}, with Retry-After: 1 on a 503
  static Response ErrorJson(unsigned status, std::string_view message);
  static Response FromError(const Error& e) { return ErrorJson(HttpStatusOf(e.code), e.message); }
};

struct Request {
  Verb method = Verb::unknown;
  std::string target;                                      // as sent: path and query
  std::string path;                                        // percent-decoded
  std::vector<std::pair<std::string, std::string>> query;  // percent-decoded, in order (keys may repeat)
  boost::beast::http::fields headers;
  std::map<std::string, std::string, std::less<>> params;  // pattern captures, e.g. {"hash": "..."}
  std::string body;                                        // buffered routes only
  std::string request_id;
  std::string route;                   // the route's name (metrics label)
  std::optional<Principal> principal;  // set when the route requires a permission
  std::string remote;                  // peer address
  std::shared_ptr<void> admission;     // the route's admission ticket, held while the request lives

  std::string_view Header(std::string_view name) const;
  // A capture by name; empty when the pattern has no such capture.
  const std::string& Param(std::string_view name) const;
  // The first query value for `key`, if any.
  std::optional<std::string_view> Query(std::string_view key) const;
};

namespace detail {
// The connection side of an Exchange (implemented by the server's session). Thread-safe.
class Connection {
 public:
  virtual ~Connection() = default;
  virtual void SendResponse(uint64_t gen, Response r) = 0;
  virtual void StartChunked(uint64_t gen, unsigned status, HeaderList headers) = 0;
  virtual void SendChunk(uint64_t gen, std::string data) = 0;
  virtual void EndChunked(uint64_t gen) = 0;
  virtual void AbortChunked(uint64_t gen) = 0;          // closes the connection: the body stays unfinished
  virtual void Dispatch(std::function<void()> fn) = 0;  // run on the connection's strand
  virtual WorkQueue& workers() = 0;
  virtual bool open() const = 0;
  virtual uint64_t pending_bytes() const = 0;  // queued for the socket, not yet written
  // The request is answered with `status` (the server's refusal observer hears of it: server.h).
  virtual void Answering(const Request& req, unsigned status) = 0;
};
}  // namespace detail

// An incrementally produced (chunked) response body. Each Write is sent as one HTTP chunk.
class ResponseStream {
 public:
  ResponseStream(std::shared_ptr<detail::Connection> conn, uint64_t gen)
      : conn_(std::move(conn)), gen_(gen) {}
  ~ResponseStream();  // finishes the body if Finish was not called
  ResponseStream(const ResponseStream&) = delete;
  ResponseStream& operator=(const ResponseStream&) = delete;

  // Queues `data` (empty writes are ignored). False once the connection is gone or the stream finished:
  // producers should stop then.
  bool Write(std::string data);
  // Ends the body (the terminating zero chunk). Idempotent.
  void Finish();
  // Ends the response without finishing its body: the connection is closed, and the client sees a transfer
  // cut short (which it retries), never a complete body. For a producer that failed midway. Idempotent; a
  // finished stream stays finished.
  void Abort();
  // Bytes queued but not yet written to the socket: a producer can pace itself on this.
  uint64_t pending_bytes() const { return conn_->pending_bytes(); }
  bool open() const { return !finished_.load() && conn_->open(); }

 private:
  std::shared_ptr<detail::Connection> conn_;
  uint64_t gen_;
  std::atomic<bool> finished_{false};
};

class Exchange {
 public:
  Exchange(std::shared_ptr<detail::Connection> conn, uint64_t gen, Request req)
      : conn_(std::move(conn)), gen_(gen), req_(std::move(req)) {}
  ~Exchange();
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  Request& request() { return req_; }
  const Request& request() const { return req_; }

  // Answers the request. Later answers are ignored.
  void Respond(Response r);
  void Fail(const Error& e) { Respond(Response::FromError(e)); }
  // Sends `status` and `headers` now with Transfer-Encoding: chunked; the body follows through the stream.
  std::shared_ptr<ResponseStream> StartStream(unsigned status, HeaderList headers);
  // Runs `work` on the worker pool, then `then` (if any) on the connection's strand. When the pool's queue is
  // full, answers 503 and returns false (neither function runs).
  bool Offload(std::function<void()> work, std::function<void()> then = {});
  // Runs `fn` on the connection's strand.
  void Post(std::function<void()> fn) { conn_->Dispatch(std::move(fn)); }
  bool answered() const { return answered_.load(); }
  // False once the client went away.
  bool open() const { return conn_->open(); }

 private:
  bool Claim() { return !answered_.exchange(true); }

  std::shared_ptr<detail::Connection> conn_;
  uint64_t gen_;
  Request req_;
  std::atomic<bool> answered_{false};
};

// Receives a streamed request body.
class BodySink {
 public:
  // Thread-safe. Status ok: deliver the next piece (or finish); an error: stop reading, answer it, close.
  using Next = std::function<void(Status)>;
  virtual ~BodySink() = default;
  // Where the next piece may be received (on the connection's strand, before each read): memory of the
  // sink's, so that the body lands where the sink keeps it instead of being copied there in OnData. Empty
  // (the default): the server's own buffer.
  virtual std::span<uint8_t> ReceiveBuffer() { return {}; }
  // A piece of the body, in order, on the connection's strand: a prefix of the ReceiveBuffer, or of the
  // server's buffer. `data` stays valid until `next` is called.
  virtual void OnData(std::span<const uint8_t> data, Next next) = 0;
  // The whole body arrived; answer through `ex` (now or later, from any thread).
  virtual void OnEnd(std::shared_ptr<Exchange> ex) = 0;
  // The body will not complete (client gone, too slow, over the limit, the sink's own error). The server
  // answers if it still can; the sink only cleans up (temp files...).
  virtual void OnAbort(const Error& /*why*/) {}
};

// A buffered route's handler: Request::body holds the whole body.
using Handler = std::function<void(std::shared_ptr<Exchange>)>;
// A streamed route's handler, called after the header: returns the sink for the body, or an error answered
// at once (the body is not read; the connection closes).
using StreamHandler = std::function<Result<std::unique_ptr<BodySink>>(const std::shared_ptr<Exchange>&)>;

}  // namespace cairn::http

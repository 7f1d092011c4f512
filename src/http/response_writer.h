// One connection's answers, from header to last byte: the header serialized (the handler's fields as
// SendableHeaders allows them, never one the server owns), a chunked body framed, and every part driven to
// the socket in order: strings gathered into one write, files by sendfile(2) on plain TCP, byte sources (and
// files under TLS, which encrypts in user space) read in blocks on the worker pool ahead of the socket, at
// most kSourceBlocksAhead blocks in memory.
//
// Internal to the server (session.h's Session owns one per connection). Thread-safety: every method on the
// connection's strand, except Reserve and pending, which any thread may call. The writer never closes the
// connection itself: it asks its Port to (Fail) and says when a response is whole (Complete).
#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/work_queue.h"
#include "http/handler.h"

namespace cairn::http {

class ResponseWriter {
 public:
  // The connection, as the writer sees it. Called on the connection's strand.
  class Port {
   public:
    virtual ~Port() = default;
    // Writes all of `bufs` through the connection (TLS or plain) under the write timeout; the buffers stay
    // valid until `done` runs.
    virtual void Write(const std::vector<boost::asio::const_buffer>& bufs,
                       std::function<void(boost::beast::error_code, size_t)> done) = 0;
    // The TCP socket (plain connections: sendfile(2), waiting until it is writable).
    virtual boost::asio::ip::tcp::socket& socket() = 0;
    // Keeps the connection (and so this writer) alive while held: what callbacks that may outlive it hold.
    virtual std::shared_ptr<void> Hold() = 0;
    // Runs `fn` on the connection's strand, holding the connection.
    virtual void Dispatch(std::function<void()> fn) = 0;
    virtual WorkQueue& workers() = 0;
    // The response cannot be completed (the peer went, a body read failed): close the connection.
    virtual void Fail() = 0;
    // The response is complete and every byte of it written.
    virtual void Complete() = 0;
  };

  // `tls`: files are sent as sources (no sendfile under TLS). `ex`: the connection's executor.
  ResponseWriter(Port& port, bool tls, const boost::asio::any_io_executor& ex,
                 std::chrono::milliseconds write_timeout);

  // A new request: its answers carry no body when `head` (a HEAD request); `request_id` names it in the log.
  void Begin(bool head, std::string request_id);

  // An answer's header: `status`, the handler's `headers` (each name in `refused`, and each SendableHeaders
  // refuses, logged once without its value), then the server's own fields.
  boost::beast::http::response<boost::beast::http::empty_body> Header(unsigned status, HeaderList headers,
                                                                      std::vector<std::string> refused,
                                                                      bool keep_alive) const;

  // One whole answer under `header` (Content-Length set here from the body).
  void Send(boost::beast::http::response<boost::beast::http::empty_body> header, std::vector<BodyPart> body,
            uint64_t content_length);
  // A chunked answer: the header now, then Chunk per piece, then End.
  void StartChunked(boost::beast::http::response<boost::beast::http::empty_body> header);
  void Chunk(std::string data);  // `data.size()` was Reserved by the caller
  void EndChunked();

  // Any thread: `n` bytes are about to be queued (a chunk on its way to the strand).
  void Reserve(uint64_t n) { pending_ += n; }
  // On the strand: Reserved bytes that will not be queued after all (the request they were for is over).
  void Unreserve(uint64_t n) { pending_ -= n; }
  // Any thread: bytes queued for the socket, not yet written.
  uint64_t pending() const { return pending_.load(); }
  uint64_t bytes_out() const { return bytes_out_; }

  // The connection is closing: drop what is queued, answer no callback.
  void Abort();

 private:
  struct SourceBlock;

  void Queue(std::string s);
  void StartWrite();
  void SendFile(uint64_t sent_this_turn);
  void SendSource();
  bool RequestBlock(SourceSegment& seg);

  Port& port_;
  const bool tls_;
  const std::chrono::milliseconds write_timeout_;
  boost::asio::steady_timer send_timer_;
  std::string request_id_;
  bool head_ = false;
  bool closed_ = false;

  std::deque<BodyPart> out_;
  std::vector<std::string> inflight_;
  std::deque<std::shared_ptr<SourceBlock>> source_blocks_;  // requested blocks of the front SourceSegment
  bool source_blocks_only_ = false;  // the front SourceSegment's source gives no stream: ReadAt per block
  bool stream_reading_ = false;      // a block of the front SourceSegment's stream is being read
  bool source_waiting_ = false;      // SendSource waits for the front block's read
  bool writing_ = false;
  bool out_complete_ = false;
  bool chunked_ = false;
  uint64_t bytes_out_ = 0;
  std::atomic<uint64_t> pending_{0};
};

}  // namespace cairn::http

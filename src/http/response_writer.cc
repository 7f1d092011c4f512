#include "http/response_writer.h"

#include <spdlog/spdlog.h>
#include <sys/sendfile.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/write.hpp>
#include <cerrno>
#include <sstream>
#include <string_view>
#include <system_error>
#include <utility>

#include "common/hex.h"
#include "common/posix_io.h"
#include "common/printable.h"

namespace cairn::http {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

constexpr uint64_t kSendfileTurn = 8ull << 20;  // bytes sent before yielding the strand
// A SourceSegment is read in blocks this large, this many ahead of the socket (memory per connection).
constexpr uint64_t kSourceBlockBytes = 4ull << 20;
constexpr size_t kSourceBlocksAhead = 2;

// Headers only the server writes: a handler's own would duplicate them or contradict the framing.
bool ServerOwnedHeader(std::string_view name) {
  for (const std::string_view owned :
       {"Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Server", "X-Request-Id"})
    if (beast::iequals(name, owned)) return true;
  return false;
}

// A file's bytes for a connection that cannot sendfile(2) them (TLS encrypts in user space): read in blocks
// on the worker pool, as a store's blobs are.
class FileSource final : public ByteSource {
 public:
  explicit FileSource(std::shared_ptr<const File> file) : file_(std::move(file)) {}
  Status ReadAt(uint64_t offset, std::span<uint8_t> out) const override {
    const int err = PreadFull(file_->fd(), offset, out);
    if (err == kShortFile) return IoError("reading a file: shorter than promised");
    if (err != 0)
      return IoError("reading a file: " + std::error_code(err, std::generic_category()).message());
    return Ok{};
  }

 private:
  std::shared_ptr<const File> file_;
};

std::string Serialized(const bhttp::response<bhttp::empty_body>& header) {
  std::ostringstream out;
  out << header.base();
  return std::move(out).str();
}

}  // namespace

// One block of a SourceSegment, read on the worker pool.
struct ResponseWriter::SourceBlock {
  std::unique_ptr<uint8_t[]> data;  // or, from a stream that lends its bytes, `lent`
  LentBytes lent;
  size_t size = 0;
  bool done = false;  // the read finished (set on the strand)
  Status status = Ok{};
};

ResponseWriter::ResponseWriter(Port& port, bool tls, const asio::any_io_executor& ex,
                               std::chrono::milliseconds write_timeout)
    : port_(port), tls_(tls), write_timeout_(write_timeout), send_timer_(ex) {}

void ResponseWriter::Begin(bool head, std::string request_id) {
  head_ = head;
  request_id_ = std::move(request_id);
  out_complete_ = false;
  chunked_ = false;
  bytes_out_ = 0;
}

bhttp::response<bhttp::empty_body> ResponseWriter::Header(unsigned status, HeaderList headers,
                                                          std::vector<std::string> refused,
                                                          bool keep_alive) const {
  bhttp::response<bhttp::empty_body> res{static_cast<bhttp::status>(status), 11};
  for (auto& [name, value] : SendableHeaders(std::move(headers), refused))
    if (!ServerOwnedHeader(name)) res.insert(name, value);
  std::sort(refused.begin(), refused.end());
  refused.erase(std::unique(refused.begin(), refused.end()), refused.end());
  for (const auto& name : refused)
    spdlog::warn(
        "request {}: response header \"{}\" refused (not a token, or a control character in its value)",
        request_id_, Printable(name, 64));
  res.set(bhttp::field::server, "cairn");
  res.set("X-Request-Id", request_id_);
  res.keep_alive(keep_alive);
  return res;
}

void ResponseWriter::Queue(std::string s) {
  if (s.empty()) return;
  out_.emplace_back(std::move(s));
}

void ResponseWriter::Send(bhttp::response<bhttp::empty_body> header, std::vector<BodyPart> body,
                          uint64_t content_length) {
  if (header.result() == bhttp::status::no_content) {
    // RFC 9110 8.6: a 204 has no body and carries no Content-Length.
    body.clear();
    content_length = 0;
  } else {
    header.set(bhttp::field::content_length, std::to_string(content_length));
  }
  std::string head = Serialized(header);
  pending_ += head.size() + (head_ ? 0 : content_length);
  Queue(std::move(head));
  if (head_) body.clear();  // HEAD: the GET answer's header, Content-Length included, without its body
  for (auto& part : body) {
    if (auto* s = std::get_if<std::string>(&part)) {
      Queue(std::move(*s));
    } else {
      if (auto* f = std::get_if<FileSegment>(&part); f != nullptr && tls_)
        part = SourceSegment{std::make_shared<FileSource>(f->file), f->offset, f->length, nullptr};
      const uint64_t n = std::holds_alternative<FileSegment>(part) ? std::get<FileSegment>(part).length
                                                                   : std::get<SourceSegment>(part).length;
      if (n > 0) out_.push_back(std::move(part));
    }
  }
  out_complete_ = true;
  StartWrite();
}

void ResponseWriter::StartChunked(bhttp::response<bhttp::empty_body> header) {
  header.chunked(true);
  chunked_ = true;
  std::string head = Serialized(header);
  pending_ += head.size();
  Queue(std::move(head));
  StartWrite();
}

void ResponseWriter::Chunk(std::string data) {
  if (closed_ || !chunked_ || out_complete_ || head_) {
    pending_ -= data.size();
    return;
  }
  const std::string size_line = HexNumber(data.size()) + "\r\n";
  pending_ += size_line.size() + 2;
  Queue(size_line);
  Queue(std::move(data));
  Queue("\r\n");
  StartWrite();
}

void ResponseWriter::EndChunked() {
  if (closed_ || !chunked_ || out_complete_) return;
  if (!head_) {
    pending_ += 5;
    Queue("0\r\n\r\n");
  }
  out_complete_ = true;
  StartWrite();
}

void ResponseWriter::Abort() {
  closed_ = true;
  send_timer_.cancel();
  out_.clear();
}

void ResponseWriter::StartWrite() {
  if (writing_ || closed_) return;
  if (out_.empty()) {
    if (out_complete_) port_.Complete();
    return;
  }
  writing_ = true;
  if (std::holds_alternative<FileSegment>(out_.front())) return SendFile(0);
  if (std::holds_alternative<SourceSegment>(out_.front())) return SendSource();
  std::vector<asio::const_buffer> bufs;
  while (!out_.empty() && std::holds_alternative<std::string>(out_.front()) && bufs.size() < 64) {
    inflight_.push_back(std::move(std::get<std::string>(out_.front())));
    out_.pop_front();
  }
  for (const auto& s : inflight_) bufs.emplace_back(asio::buffer(s));
  port_.Write(bufs, [this, life = port_.Hold()](beast::error_code ec, size_t n) {
    writing_ = false;
    inflight_.clear();
    pending_ -= n;
    bytes_out_ += n;
    if (ec) return port_.Fail();
    StartWrite();
  });
}

// Sends the FileSegment at the front of the queue with sendfile(2), waiting for writability as needed.
// Plain TCP only (a TLS connection's file segments became SourceSegments).
void ResponseWriter::SendFile(uint64_t sent_this_turn) {
  auto& seg = std::get<FileSegment>(out_.front());
  asio::ip::tcp::socket& socket = port_.socket();
  const int sock = socket.native_handle();
  while (seg.length > 0) {
    if (sent_this_turn >= kSendfileTurn) {  // let other connections on this thread run
      asio::post(socket.get_executor(), [this, life = port_.Hold()] { SendFile(0); });
      return;
    }
    auto off = static_cast<off_t>(seg.offset);
    const ssize_t n = ::sendfile(sock, seg.file->fd(), &off, std::min<uint64_t>(seg.length, 1u << 30));
    if (n > 0) {
      const auto sent = static_cast<uint64_t>(n);
      seg.offset += sent;
      seg.length -= sent;
      pending_ -= sent;
      bytes_out_ += sent;
      sent_this_turn += sent;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      send_timer_.expires_after(write_timeout_);
      send_timer_.async_wait([this, life = port_.Hold()](beast::error_code ec) {
        if (!ec) port_.Fail();  // no progress within the write timeout
      });
      socket.async_wait(asio::ip::tcp::socket::wait_write, [this, life = port_.Hold()](beast::error_code ec) {
        send_timer_.cancel();
        if (ec || closed_) return port_.Fail();
        SendFile(0);
      });
      return;
    }
    // n == 0: the file is shorter than promised; errors: the peer is gone. The response cannot be completed.
    spdlog::warn("request {}: sendfile failed ({}); closing", request_id_,
                 n == 0 ? "short file" : std::error_code(errno, std::generic_category()).message());
    return port_.Fail();
  }
  out_.pop_front();
  writing_ = false;
  StartWrite();
}

// Sends the SourceSegment at the front of the queue: the next blocks are read on the worker pool while the
// one before them is written.
void ResponseWriter::SendSource() {
  if (closed_) return;
  auto& seg = std::get<SourceSegment>(out_.front());
  while (source_blocks_.size() < kSourceBlocksAhead && seg.length > 0 && RequestBlock(seg)) {
  }
  if (source_blocks_.empty()) {
    out_.pop_front();
    source_blocks_only_ = false;
    writing_ = false;
    return StartWrite();
  }
  std::shared_ptr<SourceBlock> block = source_blocks_.front();
  if (!block->done) {
    source_waiting_ = true;  // the read's completion resumes here
    return;
  }
  if (!block->status) {
    // The header is sent: the response can only be cut short. The client sees a short body and retries.
    spdlog::warn("request {}: reading the response body failed ({}); closing", request_id_,
                 block->status.error().message);
    return port_.Fail();
  }
  source_blocks_.pop_front();
  if (seg.length > 0) RequestBlock(seg);
  std::vector<asio::const_buffer> bufs;
  if (block->data) {
    bufs.emplace_back(block->data.get(), block->size);
  } else {
    bufs.reserve(block->lent.pieces.size());
    for (const auto& p : block->lent.pieces) bufs.emplace_back(p.data(), p.size());
  }
  port_.Write(bufs, [this, life = port_.Hold(), block](beast::error_code ec, size_t n) {
    pending_ -= n;
    bytes_out_ += n;
    if (ec) return port_.Fail();
    SendSource();
  });
}

// Asks the worker pool for the segment's next block; false when it cannot yet (a stream is read one block at
// a time, in order: its next block is asked for when the read before it completes).
bool ResponseWriter::RequestBlock(SourceSegment& seg) {
  if (!seg.stream && !source_blocks_only_) {
    seg.stream = seg.source->Stream(seg.offset, seg.length);
    source_blocks_only_ = !seg.stream;
  }
  if (seg.stream && stream_reading_) return false;
  auto block = std::make_shared<SourceBlock>();
  block->size = static_cast<size_t>(std::min<uint64_t>(seg.length, kSourceBlockBytes));
  if (!seg.stream || !seg.stream->lends())
    block->data = std::make_unique_for_overwrite<uint8_t[]>(block->size);
  const uint64_t offset = seg.offset;
  seg.offset += block->size;
  seg.length -= block->size;
  source_blocks_.push_back(block);
  stream_reading_ = seg.stream != nullptr;
  const bool queued =
      port_.workers().Post([this, life = port_.Hold(), src = seg.source, stream = seg.stream, offset, block] {
        Status st = !stream       ? src->ReadAt(offset, {block->data.get(), block->size})
                    : block->data ? stream->Read({block->data.get(), block->size})
                                  : stream->Lend(block->size, block->lent);
        port_.Dispatch([this, block, streamed = stream != nullptr, st = std::move(st)]() mutable {
          block->status = std::move(st);
          block->done = true;
          if (streamed) stream_reading_ = false;
          if (source_waiting_) {
            source_waiting_ = false;
            SendSource();
          } else if (streamed && block->status && !closed_ && !out_.empty() &&
                     std::holds_alternative<SourceSegment>(out_.front())) {
            // The front segment is this stream's until its blocks are sent: read on ahead.
            auto& front = std::get<SourceSegment>(out_.front());
            if (source_blocks_.size() < kSourceBlocksAhead && front.length > 0) RequestBlock(front);
          }
        });
      });
  if (!queued) {
    block->status = Unavailable("the worker queue is full");
    block->done = true;
    stream_reading_ = false;
  }
  return true;
}

}  // namespace cairn::http

#include "git/zlib.h"

#include <zlib.h>

#include <algorithm>

namespace cairn::git {

struct Deflater::State {
  z_stream z{};
  bool ready = false;
};

Deflater::Deflater(int level) : state_(std::make_unique<State>()) {
  state_->ready = deflateInit(&state_->z, level) == Z_OK;
}

Deflater::~Deflater() {
  if (state_->ready) deflateEnd(&state_->z);
}

Status Deflater::Deflate(std::span<const uint8_t> in, std::string& out) {
  if (!state_->ready) return IoError("zlib: deflate could not start (out of memory)");
  z_stream& z = state_->z;
  if (deflateReset(&z) != Z_OK) return IoError("zlib: deflate reset failed");
  const size_t start = out.size();
  out.resize(start + deflateBound(&z, static_cast<uLong>(in.size())));
  z.next_in = const_cast<Bytef*>(in.data());  // zlib's API is not const-correct; it does not write
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data() + start);
  z.avail_out = static_cast<uInt>(out.size() - start);
  const int rc = deflate(&z, Z_FINISH);
  if (rc != Z_STREAM_END) return IoError("zlib: deflate failed");
  out.resize(out.size() - z.avail_out);
  return Ok{};
}

Result<std::vector<uint8_t>> InflateExact(std::span<const uint8_t> in, size_t size, size_t* consumed) {
  z_stream z{};
  if (inflateInit(&z) != Z_OK) return IoError("zlib: inflate could not start");
  std::vector<uint8_t> out(size);
  uint8_t spare = 0;                          // where a stream that gives more than `size` shows it
  z.next_in = const_cast<Bytef*>(in.data());  // zlib's API is not const-correct; it does not write
  z.avail_in = static_cast<uInt>(std::min<size_t>(in.size(), UINT32_MAX));
  z.next_out = size != 0 ? out.data() : &spare;
  z.avail_out = size != 0 ? static_cast<uInt>(size) : 1;
  int rc = inflate(&z, Z_FINISH);
  if ((rc == Z_OK || rc == Z_BUF_ERROR) && z.avail_out == 0 && size != 0) {
    // `size` bytes out and the stream not at its end: one more byte tells a longer stream from a finished
    // one.
    z.next_out = &spare;
    z.avail_out = 1;
    rc = inflate(&z, Z_FINISH);
  }
  const bool exact = rc == Z_STREAM_END && z.total_out == size;
  *consumed = z.total_in;
  inflateEnd(&z);
  if (!exact) return Malformed("pack: an object does not inflate to the size its header gives");
  return out;
}

Result<std::string> Gunzip(std::string_view in, size_t max_out) {
  z_stream z{};
  // 15 + 32: a zlib or a gzip header, detected.
  if (inflateInit2(&z, 15 + 32) != Z_OK) return IoError("zlib: inflate could not start");
  std::string out;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (out.size() >= max_out) {
      inflateEnd(&z);
      return LimitExceeded("the request inflates past " + std::to_string(max_out) + " bytes");
    }
    const size_t start = out.size();
    out.resize(std::min(max_out, start + std::max<size_t>(64 << 10, start)));
    z.next_out = reinterpret_cast<Bytef*>(out.data() + start);
    z.avail_out = static_cast<uInt>(out.size() - start);
    rc = inflate(&z, Z_NO_FLUSH);
    out.resize(out.size() - z.avail_out);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&z);
      return Malformed("the request's gzip stream is broken");
    }
    if (rc == Z_OK && z.avail_in == 0 && z.avail_out != 0) {
      inflateEnd(&z);
      return Malformed("the request's gzip stream is cut short");
    }
  }
  const bool trailing = z.avail_in != 0;
  inflateEnd(&z);
  if (trailing) return Malformed("bytes after the request's gzip stream");
  return out;
}

}  // namespace cairn::git

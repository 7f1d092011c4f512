#include "http/range.h"

#include <charconv>
#include <random>
#include <string>

#include "common/hex.h"
#include "common/media_type.h"

namespace cairn::http {
namespace {

bool ParseU64(std::string_view s, uint64_t* out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

std::string Boundary() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string b = "cairn-";
  for (int i = 0; i < 24; ++i) b += kLowerHexDigits[rng() % 16];
  return b;
}

}  // namespace

Result<std::vector<ByteRange>> ParseRange(std::string_view header, uint64_t size, size_t max_ranges) {
  header = TrimOws(header);
  if (header.substr(0, 6) != "bytes=") return Malformed("Range must use the bytes unit");
  header.remove_prefix(6);
  std::vector<ByteRange> out;
  size_t specs = 0;
  while (true) {
    const size_t comma = header.find(',');
    const std::string_view spec = TrimOws(header.substr(0, comma));
    if (++specs > max_ranges) return Malformed("too many ranges");
    const size_t dash = spec.find('-');
    if (dash == std::string_view::npos) return Malformed("malformed Range");
    const std::string_view a = spec.substr(0, dash);
    const std::string_view b = spec.substr(dash + 1);
    uint64_t first = 0;
    uint64_t last = 0;
    if (a.empty()) {  // suffix: the last b bytes
      uint64_t n = 0;
      if (!ParseU64(b, &n)) return Malformed("malformed Range");
      if (n > 0 && size > 0) out.push_back({n >= size ? 0 : size - n, size - 1});
    } else {
      if (!ParseU64(a, &first)) return Malformed("malformed Range");
      if (b.empty()) {
        last = size == 0 ? 0 : size - 1;
      } else if (!ParseU64(b, &last) || last < first) {
        return Malformed("malformed Range");
      }
      if (first < size) out.push_back({first, std::min(last, size - 1)});
    }
    if (comma == std::string_view::npos) break;
    header.remove_prefix(comma + 1);
  }
  if (out.empty()) return Unsatisfiable("range not satisfiable");
  return out;
}

namespace {

// `length` bytes of the representation from `offset`, as a body part.
using PartOf = std::function<BodyPart(uint64_t offset, uint64_t length)>;

Response RangeResponseOf(const PartOf& part_of, uint64_t size, const std::vector<ByteRange>& ranges,
                         std::string_view content_type) {
  Response r;
  r.Header("Accept-Ranges", "bytes");
  if (ranges.empty()) {
    r.status = 200;
    r.Header("Content-Type", std::string(content_type));
    if (size > 0) r.body.push_back(part_of(0, size));
    return r;
  }
  r.status = 206;
  const std::string total = std::to_string(size);
  if (ranges.size() == 1) {
    const ByteRange& br = ranges.front();
    r.Header("Content-Type", std::string(content_type));
    r.Header("Content-Range",
             "bytes " + std::to_string(br.first) + "-" + std::to_string(br.last) + "/" + total);
    r.body.push_back(part_of(br.first, br.length()));
    return r;
  }
  const std::string boundary = Boundary();
  r.Header("Content-Type", "multipart/byteranges; boundary=" + boundary);
  bool first_part = true;
  for (const ByteRange& br : ranges) {
    std::string head = first_part ? "--" : "\r\n--";
    first_part = false;
    head += boundary;
    head += "\r\nContent-Type: ";
    head += content_type;
    head += "\r\nContent-Range: bytes ";
    head += std::to_string(br.first);
    head += '-';
    head += std::to_string(br.last);
    head += '/';
    head += total;
    head += "\r\n\r\n";
    r.body.emplace_back(std::move(head));
    r.body.push_back(part_of(br.first, br.length()));
  }
  r.body.emplace_back("\r\n--" + boundary + "--\r\n");
  return r;
}

}  // namespace

Response RangeResponse(const std::shared_ptr<const File>& file, uint64_t base, uint64_t size,
                       const std::vector<ByteRange>& ranges, std::string_view content_type) {
  return RangeResponseOf(
      [&](uint64_t offset, uint64_t length) {
        return FileSegment{file, base + offset, length};
      },
      size, ranges, content_type);
}

Response RangeResponse(const std::shared_ptr<const ByteSource>& source, uint64_t size,
                       const std::vector<ByteRange>& ranges, std::string_view content_type) {
  return RangeResponseOf(
      [&](uint64_t offset, uint64_t length) {
        return SourceSegment{source, offset, length, nullptr};
      },
      size, ranges, content_type);
}

Response ReadBeforeHeader(Response r, uint64_t max_bytes) {
  for (size_t i = 0; i < r.body.size(); ++i) {
    auto* seg = std::get_if<SourceSegment>(&r.body[i]);
    if (seg == nullptr || seg->length == 0) continue;  // an empty representation: nothing to read
    const uint64_t n = std::min(seg->length, max_bytes);
    std::string first(n, '\0');
    // The segment's one stream (one store request for the whole range) reads these bytes first and the rest
    // after them.
    std::shared_ptr<ByteStream> stream = seg->source->Stream(seg->offset, seg->length);
    const std::span<uint8_t> into(reinterpret_cast<uint8_t*>(first.data()), first.size());
    auto st = stream ? stream->Read(into) : seg->source->ReadAt(seg->offset, into);
    if (!st) return Response::FromError(st.error());
    SourceSegment rest{seg->source, seg->offset + n, seg->length - n, std::move(stream)};
    r.body[i] = std::move(first);
    if (rest.length > 0) r.body.insert(r.body.begin() + static_cast<ptrdiff_t>(i) + 1, std::move(rest));
    break;
  }
  return r;
}

}  // namespace cairn::http

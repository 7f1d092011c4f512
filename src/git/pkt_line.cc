#include "git/pkt_line.h"

#include <algorithm>

#include "common/hex.h"

namespace cairn::git {

namespace {

// A pkt-line's length: four lowercase hex digits (the caller keeps it below 65,536).
void AppendLength(std::string& out, size_t length) {
  AppendHexByte(out, static_cast<uint8_t>(length >> 8));
  AppendHexByte(out, static_cast<uint8_t>(length));
}

}  // namespace

Result<std::optional<Pkt>> PktReader::Next() {
  if (pos_ == in_.size()) return std::optional<Pkt>{};
  if (in_.size() - pos_ < 4) return Malformed("pkt-line: a cut length");
  size_t length = 0;
  for (size_t i = 0; i < 4; ++i) {
    const int v = HexValue(in_[pos_ + i]);
    if (v < 0) return Malformed("pkt-line: a length that is not hex");
    length = length << 4 | static_cast<size_t>(v);
  }
  if (length < 4) {
    if (length == 3) return Malformed("pkt-line: length 3");
    pos_ += 4;
    static constexpr PktKind kSpecial[] = {PktKind::kFlush, PktKind::kDelim, PktKind::kResponseEnd};
    return std::optional<Pkt>{Pkt{kSpecial[length], {}}};
  }
  if (length > in_.size() - pos_) {
    return Malformed("pkt-line: a packet runs past the end of the request");
  }
  Pkt pkt{PktKind::kData, in_.substr(pos_ + 4, length - 4)};
  pos_ += length;
  return std::optional<Pkt>{pkt};
}

std::string_view Line(std::string_view payload) {
  if (!payload.empty() && payload.back() == '\n') payload.remove_suffix(1);
  return payload;
}

void AppendPkt(std::string& out, std::string_view payload) {
  payload = payload.substr(0, kMaxPktPayload);
  AppendLength(out, payload.size() + 4);
  out.append(payload);
}

void AppendFlush(std::string& out) {
  out.append("0000");
}
void AppendDelim(std::string& out) {
  out.append("0001");
}

void AppendSideBand(std::string& out, uint8_t band, std::string_view bytes) {
  while (!bytes.empty()) {
    const size_t n = std::min(bytes.size(), kMaxSideBandData);
    AppendLength(out, n + 5);
    out.push_back(static_cast<char>(band));
    out.append(bytes.substr(0, n));
    bytes.remove_prefix(n);
  }
}

}  // namespace cairn::git

// git's pkt-line framing (gitprotocol-common.txt): four hex digits giving the packet's length (themselves
// included), then the payload; "0000" is a flush, "0001" a delimiter, "0002" a response end (protocol v2).
// Side-band framing (gitprotocol-pack.txt, side-band-64k): each data packet's first byte names the band
// (1 pack data, 2 progress, 3 a fatal error).
//
// Pure functions and a reader over bytes it does not own: no I/O, no threads. The reader is bounded by the
// bytes given and refuses a length that is not four hex digits, is 3 (a packet shorter than its header), or
// runs past the input (kMalformed); it never reads past its input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/error.h"

namespace cairn::git {

inline constexpr size_t kMaxPktLength = 65520;                  // git's LARGE_PACKET_MAX
inline constexpr size_t kMaxPktPayload = kMaxPktLength - 4;     // 65516
inline constexpr size_t kMaxSideBandData = kMaxPktPayload - 1;  // a band byte precedes the data

enum class PktKind : uint8_t { kData, kFlush, kDelim, kResponseEnd };

struct Pkt {
  PktKind kind = PktKind::kData;
  std::string_view payload;  // a data packet's bytes (a view into the reader's input)
};

class PktReader {
 public:
  explicit PktReader(std::string_view in) : in_(in) {}
  // The next packet, or nullopt at the end of the input.
  Result<std::optional<Pkt>> Next();
  bool done() const { return pos_ == in_.size(); }
  // Where the next packet starts: what follows the packets read (a push's pack follows its commands' flush).
  size_t position() const { return pos_; }

 private:
  std::string_view in_;
  size_t pos_ = 0;
};

// A data line without its one trailing "\n" (git writes one; it is optional on reading).
std::string_view Line(std::string_view payload);

// Appends one data packet (payload at most kMaxPktPayload bytes; longer is a programming error: cut).
void AppendPkt(std::string& out, std::string_view payload);
void AppendFlush(std::string& out);
void AppendDelim(std::string& out);
// Appends `bytes` on side band `band`, in as many packets as it takes.
void AppendSideBand(std::string& out, uint8_t band, std::string_view bytes);

}  // namespace cairn::git

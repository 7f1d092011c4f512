// Fuzzes the media type grammar (http::ValidMediaType, IsActiveMediaType) and the one header writer
// (Response::Header, SendableHeaders, SetStoredBytesHeaders) with what a client may send as a Content-Type.
// The input is the candidate value; its bytes up to the first ':' also serve as a header name.
// Checks: an accepted media type is at most 256 bytes, ASCII without control characters, with exactly one '/'
// before any ';'; an invalid one counts as active; whatever the writers were given, no header they keep
// has a name that is not a token or a value with CR, LF, NUL or another control character but HTAB, and no
// name is there twice; stored bytes always go out with a valid Content-Type (theirs, octet-stream, or a
// multipart/byteranges already set) and nosniff, an active one as an attachment.
#include <boost/beast/core/string.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/fuzz_check.h"
#include "http/handler.h"
#include "http/media_type.h"

namespace {

using cairn::http::HeaderList;

// Every name a token, every value free of control characters but HTAB, no name twice.
void CheckHeaders(const HeaderList& headers) {
  for (size_t i = 0; i < headers.size(); ++i) {
    FUZZ_CHECK(cairn::http::IsToken(headers[i].first));
    for (const char c : headers[i].second) {
      const auto b = static_cast<unsigned char>(c);
      FUZZ_CHECK(b == '\t' || (b >= 0x20 && b != 0x7f));
    }
    for (size_t j = i + 1; j < headers.size(); ++j)
      FUZZ_CHECK(!boost::beast::iequals(headers[i].first, headers[j].first));
  }
}

// The value of `name` in `headers`; empty when it is not there.
std::string_view ValueOf(const HeaderList& headers, std::string_view name) {
  for (const auto& [n, v] : headers)
    if (boost::beast::iequals(n, name)) return v;
  return {};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  if (cairn::http::ValidMediaType(input)) {
    FUZZ_CHECK(!input.empty() && input.size() <= cairn::http::kMaxMediaTypeBytes);
    for (const char c : input) {
      const auto b = static_cast<unsigned char>(c);
      FUZZ_CHECK(b < 0x80 && (b == '\t' || (b >= 0x20 && b != 0x7f)));
    }
    const std::string_view essence = input.substr(0, input.find(';'));
    FUZZ_CHECK(essence.find('/') != std::string_view::npos && essence.find('/') == essence.rfind('/'));
  } else {
    FUZZ_CHECK(cairn::http::IsActiveMediaType(input));
  }

  const std::string_view name = input.substr(0, input.find(':'));
  const std::string_view rest = input.substr(std::min(name.size() + 1, input.size()));
  cairn::http::Response r;
  r.Header("Content-Type", std::string(input))
      .Header(std::string(name), std::string(rest))
      .Header("content-type", std::string(rest))
      .Header("Content-Disposition", std::string(rest));
  CheckHeaders(r.headers);
  // Refusals name the header, never carry the value.
  for (const auto& refused : r.refused_headers)
    FUZZ_CHECK(refused == "Content-Type" || refused == name || refused == "content-type" ||
               refused == "Content-Disposition");

  cairn::http::SetStoredBytesHeaders(r, input);
  CheckHeaders(r.headers);
  const std::string_view type = ValueOf(r.headers, "Content-Type");
  FUZZ_CHECK(cairn::http::ValidMediaType(type));
  // A multipart/byteranges answer keeps its type (its parts carry the stored one).
  FUZZ_CHECK(type == input || type == "application/octet-stream" ||
             boost::beast::iequals(type.substr(0, 20), "multipart/byteranges"));
  FUZZ_CHECK(ValueOf(r.headers, "X-Content-Type-Options") == "nosniff");
  if (cairn::http::IsActiveMediaType(type))
    FUZZ_CHECK(boost::beast::iequals(ValueOf(r.headers, "Content-Disposition").substr(0, 10), "attachment"));

  // A list built by hand (the server's last line of defence): the same rules.
  std::vector<std::string> refused;
  HeaderList by_hand = {
      {std::string(name), std::string(rest)}, {"X-A", std::string(input)}, {"x-a", std::string(rest)}};
  CheckHeaders(cairn::http::SendableHeaders(std::move(by_hand), refused));
  FUZZ_CHECK(refused.size() <= 3);
  return 0;
}

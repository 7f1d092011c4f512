#include <boost/json.hpp>
#include <iostream>

#include "cli/commands.h"
#include "cli/file_io.h"
#include "xet/xorb.h"

namespace cairn::cli {
namespace {

const char* FooterName(xet::FooterVersion v) {
  switch (v) {
    case xet::FooterVersion::kV1:
      return "v1";
    case xet::FooterVersion::kV0:
      return "v0";
    case xet::FooterVersion::kNone:
      break;
  }
  return "none";
}

}  // namespace

int RunXorbVerify(const XorbOptions& o) {
  std::string error;
  auto data = ReadWholeFile(o.file, &error);
  if (!data) {
    std::cerr << "cairn xorb verify: " << error << "\n";
    return 1;
  }
  std::optional<xet::XorbHash> expected;
  if (!o.hash.empty()) {
    expected = xet::Hash::FromHex(o.hash);
    if (!expected) {
      std::cerr << "cairn xorb verify: --hash must be 64 hex digits\n";
      return 2;
    }
  }
  xet::ValidateOptions vo;
  vo.expected_hash = expected ? &*expected : nullptr;
  auto v = xet::ValidateXorb(*data, vo);
  if (!v) {
    std::cerr << "cairn xorb verify: " << o.file << ": " << v.error().message << "\n";
    return 1;
  }
  if (!o.json) {
    std::cout << v->hash.hex() << "  " << v->layout.chunks.size() << " chunks  ok\n";
    return 0;
  }
  boost::json::array chunks;
  for (const auto& c : v->layout.chunks) {
    chunks.push_back({{"hash", c.hash.hex()}, {"size", c.unpacked_size}, {"end", c.end_offset}});
  }
  boost::json::object out{{"hash", v->hash.hex()},
                          {"num_chunks", v->layout.chunks.size()},
                          {"chunks", std::move(chunks)},
                          {"footer", FooterName(v->footer)},
                          {"compression",
                           {{"none", v->chunks_by_scheme[0]},
                            {"lz4", v->chunks_by_scheme[1]},
                            {"bg4_lz4", v->chunks_by_scheme[2]}}}};
  std::cout << boost::json::serialize(out) << "\n";
  return 0;
}

}  // namespace cairn::cli

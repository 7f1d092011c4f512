#include <boost/json.hpp>
#include <iostream>

#include "cli/commands.h"
#include "cli/file_io.h"
#include "xet/xorb.h"

namespace cairn::cli {
namespace {

struct XorbOptions {
  std::string file;
  std::string hash;
  bool json = false;
};

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

int Verify(const XorbOptions& o) {
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

}  // namespace

void RegisterXorb(CLI::App& app) {
  auto opts = std::make_shared<XorbOptions>();
  auto* xorb = app.add_subcommand("xorb", "Inspect xorb objects")->require_subcommand(1);
  auto* verify =
      xorb->add_subcommand("verify", "Decode and hash every chunk; check the xorb hash and any footer");
  verify->add_option("file", opts->file, "Xorb object (footer-less upload or stored with a footer)")
      ->required();
  verify->add_option("--hash", opts->hash, "Expected xorb hash (64 hex digits)");
  verify->add_flag("--json", opts->json, "Print the layout as JSON");
  verify->callback([opts] {
    if (int rc = Verify(*opts); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace cairn::cli

// Fuzzes the Hub commit body parser (api::ParseCommitBody: huggingface_hub's NDJSON commit, a header line and
// one line per operation). The input is the body. Checks: a parsed commit's inline files are no larger than
// the inline limit allows (they are refused before decoding), its LFS files name a SHA-256, and every
// operation has a path; a refusal says why.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <variant>

#include "api/requests.h"
#include "common/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr int64_t kMaxInline = 4096;  // small, so that inputs reach past it
  const auto commit =
      cairn::api::ParseCommitBody(std::string_view(reinterpret_cast<const char*>(data), size), kMaxInline);
  if (!commit) {
    FUZZ_CHECK(!commit.error().message.empty());
    return 0;
  }
  FUZZ_CHECK(commit->operations.size() <= size / 2);
  for (const auto& op : commit->operations) {
    if (const auto* add = std::get_if<cairn::hub::AddInline>(&op)) {
      FUZZ_CHECK(add->content.size() <= static_cast<size_t>(kMaxInline) + 3);
    } else if (const auto* lfs = std::get_if<cairn::hub::AddLfs>(&op)) {
      FUZZ_CHECK(cairn::hub::IsSha256Hex(lfs->pointer.sha256));
    }
  }
  if (commit->parent) FUZZ_CHECK(commit->parent->hex().size() == 40);
  return 0;
}

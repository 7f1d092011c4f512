// Fuzzes what the CAS routes parse besides xorbs and shards: the reconstruction Range header
// (api::ParseReconstructionRange) and a batch reconstruction's file_id values (api::ParseBatchFileIds). The
// input is the header; its lines are also the values of a query's "file_id" keys (every other line under
// another key). Checks: a range is never inverted; a batch names 1 to 1000 files, one per file_id value.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/requests.h"
#include "common/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (const auto range = cairn::api::ParseReconstructionRange(text)) FUZZ_CHECK(range->start <= range->end);

  std::vector<std::pair<std::string, std::string>> query;
  size_t ids = 0;
  for (std::string_view rest = text; !rest.empty();) {
    const size_t nl = rest.find('\n');
    const bool file_id = query.size() % 2 == 0;
    ids += file_id ? 1 : 0;
    query.emplace_back(file_id ? "file_id" : "other", std::string(rest.substr(0, nl)));
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
  }
  if (const auto files = cairn::api::ParseBatchFileIds(query)) {
    FUZZ_CHECK(files->size() == ids && ids >= 1 && ids <= 1000);
  }
  return 0;
}

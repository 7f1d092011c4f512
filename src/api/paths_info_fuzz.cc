// Fuzzes the paths-info body parsers: a repository's (api::ParsePathsInfoBody: a form or JSON) and a bucket's
// (api::ParseBucketPathsInfoBody: JSON). The input is the body, given to both. Checks: at most 1000 paths; a
// JSON body both accept gives both the same paths.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "api/requests.h"
#include "common/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const auto repo = cairn::api::ParsePathsInfoBody(body);
  const auto bucket = cairn::api::ParseBucketPathsInfoBody(body);
  if (repo) FUZZ_CHECK(repo->size() <= 1000);
  if (bucket) {
    FUZZ_CHECK(bucket->size() <= 1000);
    FUZZ_CHECK(repo && *repo == *bucket);
  }
  return 0;
}

// Fuzzes the bucket batch body parser (api::ParseBucketBatchBody: huggingface_hub's NDJSON of addFile,
// copyFile and deleteFile lines). The input is the body. Checks: at most kMaxOps operations; additions and
// copies name a file hash, copies a source "ns/name", modification times lie in the years 1970-9999.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "api/requests.h"
#include "common/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto ops =
      cairn::api::ParseBucketBatchBody(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!ops) {
    FUZZ_CHECK(!ops.error().message.empty());
    return 0;
  }
  FUZZ_CHECK(ops->size() <= cairn::hub::BucketService::kMaxOps);
  for (const auto& op : *ops) {
    using Kind = cairn::hub::BucketOp::Kind;
    FUZZ_CHECK(op.kind == Kind::kDelete || op.file.has_value());
    FUZZ_CHECK((op.kind == Kind::kCopy) == op.source.has_value());
    FUZZ_CHECK(op.mtime_ms >= 0 && op.mtime_ms <= 253402300799999);
  }
  return 0;
}

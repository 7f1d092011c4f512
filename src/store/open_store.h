// Choosing the blob store from a URL: `file:PATH` (a directory on a local file system, the default) or
// `s3://BUCKET[/PREFIX]` (an S3-compatible bucket, with the connection settings in S3Options). Any other text
// is refused with a message that names both forms.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "store/blob_store.h"
#include "store/s3_client.h"

namespace cairn::store {

struct StoreLocation {
  enum class Kind { kFile, kS3 };
  Kind kind = Kind::kFile;
  std::string path;    // file: the directory
  std::string bucket;  // s3:
  std::string prefix;  // s3: "" or ending in '/'
};

// Parses a store URL (nothing is contacted).
Result<StoreLocation> ParseStoreUrl(std::string_view url);

struct OpenStoreOptions {
  S3Options s3;  // for s3:// (its bucket is taken from the URL)
  size_t s3_part_bytes = 128ULL << 20;
  std::string s3_public_endpoint;  // presigned URLs name this endpoint instead of s3.endpoint (when set)
};

// Opens the store at `url`: creates a local directory as needed; checks that an S3 bucket answers with the
// credentials given (one clear error when it does not).
Result<std::unique_ptr<BlobStore>> OpenStore(std::string_view url, const OpenStoreOptions& options = {});

}  // namespace cairn::store

// Objects by key in one bucket, for what is not a blob: a backup's snapshot files, its manifests and lock
// (backup/space.h). S3Store lists and deletes its blobs through the same helpers.
//
// Contract: each call is one or a few S3Client requests (retried as the client retries); nothing is cached.
// Thread-safety: as S3Client. Failures: kUnavailable when the store cannot be reached, kIo for an answer
// that refuses (with the store's code and message), kLimit for an object larger than the caller allows.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "store/s3_client.h"

namespace cairn::store {

// "S3 store <where>: <what>: HTTP <status> <code> (<message>)", as a kIo error.
Error S3Refused(const S3Client& client, std::string_view what, const S3Response& res);

// Every key under `prefix` with its size, in the store's order (ascending by key), a page at a time.
Status S3ListKeys(S3Client& client, std::string_view prefix,
                  const std::function<void(std::string_view key, uint64_t size)>& fn);

// Deletes `keys` (DeleteObjects, 1,000 a request); a key already gone is no error.
Status S3DeleteKeys(S3Client& client, std::span<const std::string> keys);

// PUTs `bytes` at `key` with their SHA-256 checked by the store. `if_absent`: only when nothing is there
// (If-None-Match: *); the answer is false when something was.
Result<bool> S3PutObject(S3Client& client, const std::string& key, std::span<const uint8_t> bytes,
                         bool if_absent = false);

// The object at `key` (nullopt when there is none); kLimit past `max_bytes`.
Result<std::optional<std::string>> S3GetObject(S3Client& client, const std::string& key, size_t max_bytes);

// The object at `key` into `out`, which it must fill exactly (kInconsistent otherwise; kNotFound if absent).
Status S3GetObjectInto(S3Client& client, const std::string& key, std::span<uint8_t> out);

}  // namespace cairn::store

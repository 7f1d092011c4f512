// Errors as values. Every fallible protocol function returns Result<T>: either a value or an Error whose
// message says, in words a client can act on, what was wrong with the input. No exceptions cross layer
// boundaries.
#pragma once

#include <string>
#include <utility>
#include <variant>

#include "common/basic_result.h"

namespace cairn::xet {

enum class ErrorCode {
  kMalformed,     // the bytes do not follow the format
  kHashMismatch,  // well-formed, but a recomputed hash differs from the claimed one
  kLimit,         // a size or count limit was exceeded
  kNotFound,      // a referenced object is unknown
  kInconsistent,  // well-formed, but disagrees with data it refers to (sizes, ranges)
  kIo,            // the operating system or a database failed (disk full, permission, corruption)
  kUnavailable,   // a service the server depends on (the database) cannot be reached now: retry later
  kConflict,      // the request was made against a state that has changed since (a name taken, a ref moved)
};

struct Error {
  ErrorCode code;
  std::string message;
};

template <typename T>
using Result = BasicResult<T, Error>;

// Result<void> equivalent.
struct Ok {};
using Status = Result<Ok>;

inline Error Malformed(std::string m) {
  return {ErrorCode::kMalformed, std::move(m)};
}
inline Error HashMismatch(std::string m) {
  return {ErrorCode::kHashMismatch, std::move(m)};
}
inline Error LimitExceeded(std::string m) {
  return {ErrorCode::kLimit, std::move(m)};
}
inline Error Inconsistent(std::string m) {
  return {ErrorCode::kInconsistent, std::move(m)};
}
inline Error NotFound(std::string m) {
  return {ErrorCode::kNotFound, std::move(m)};
}
inline Error IoError(std::string m) {
  return {ErrorCode::kIo, std::move(m)};
}
inline Error Unavailable(std::string m) {
  return {ErrorCode::kUnavailable, std::move(m)};
}
inline Error Conflict(std::string m) {
  return {ErrorCode::kConflict, std::move(m)};
}

}  // namespace cairn::xet

// Errors as values, the one model of every layer: a fallible call returns Result<T>, either a value or an
// Error whose code says what kind of failure it is and whose message says, in words a client can act on, what
// went wrong. No exceptions cross layer boundaries.
//
// Each code means one thing, so that one table (http/status.h) answers every failure with one HTTP status
// wherever it comes from. A caller that learns more than its callee knew (a store's "not found" met while
// reading a file the index promised) says so with another code, not with an override at the route.
#pragma once

#include <string>
#include <utility>

#include "common/basic_result.h"

namespace cairn {

enum class ErrorCode {
  // The request is wrong (400 unless said otherwise); sending it again changes nothing.
  kMalformed,         // the input does not follow its format
  kHashMismatch,      // well-formed input, but a hash recomputed from it differs from the one it claims
  kLimit,             // the input passes a size or count limit
  kInconsistent,      // well-formed input that disagrees with what it refers to (sizes, ranges)
  kUnknownReference,  // the input names an object the server does not hold (a shard's xorb)
  kNotFound,          // 404: the object asked for is unknown, or not visible to the asker
  kUnauthorized,  // 401: no credential, or one that is no credential of this server's (malformed, expired)
  kDenied,  // 403: the credential does not cover this (a token's scope or permission; a signed transfer URL
            // or
            // link that expired or was altered)
  kQuota,   // 403: the namespace's storage quota has no room for what the request would store
  kUnsatisfiable,  // 416: a byte range outside what is stored
  kConflict,       // 409: made against a state that has changed since (a name taken, a ref moved)
  kStale,          // 412: the request's stated precondition no longer holds (a parent that is not the head)
  // The server failed (5xx).
  kDamaged,  // 500: stored data is missing or fails its own checks (a xorb gone, a chunk that does not hash)
  kIo,       // 500: the operating system or a database failed (disk full, permission, corruption)
  kUnavailable,  // 503: a service the server depends on (the database, the store) cannot be reached now
};

struct Error {
  ErrorCode code;
  std::string message;
  // What a client tells this failure apart from others of its code by, where one does (the Hub's
  // X-Error-Code: RepoNotFound, RevisionNotFound, ...); empty otherwise.
  std::string reason = {};
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
inline Error UnknownReference(std::string m) {
  return {ErrorCode::kUnknownReference, std::move(m)};
}
inline Error NotFound(std::string m) {
  return {ErrorCode::kNotFound, std::move(m)};
}
inline Error Unauthorized(std::string m) {
  return {ErrorCode::kUnauthorized, std::move(m)};
}
inline Error Denied(std::string m) {
  return {ErrorCode::kDenied, std::move(m)};
}
inline Error QuotaExceeded(std::string m) {
  return {ErrorCode::kQuota, std::move(m)};
}
inline Error Unsatisfiable(std::string m) {
  return {ErrorCode::kUnsatisfiable, std::move(m)};
}
inline Error Conflict(std::string m) {
  return {ErrorCode::kConflict, std::move(m)};
}
inline Error Stale(std::string m) {
  return {ErrorCode::kStale, std::move(m)};
}
inline Error Damaged(std::string m) {
  return {ErrorCode::kDamaged, std::move(m)};
}
inline Error IoError(std::string m) {
  return {ErrorCode::kIo, std::move(m)};
}
inline Error Unavailable(std::string m) {
  return {ErrorCode::kUnavailable, std::move(m)};
}

// Whether the server failed rather than the request (a 5xx).
inline bool ServerFault(const Error& e) {
  return e.code == ErrorCode::kDamaged || e.code == ErrorCode::kIo || e.code == ErrorCode::kUnavailable;
}

// Whether trying the same request again later may succeed.
inline bool Retryable(const Error& e) {
  return e.code == ErrorCode::kIo || e.code == ErrorCode::kUnavailable;
}

}  // namespace cairn

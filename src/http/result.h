// Errors as values for the server layer (the src/xet/result.h pattern): a fallible call returns Result<T>,
// either a value or an Error that already carries the HTTP status it maps to, so handlers and the server can
// answer it without a translation table.
#pragma once

#include <string>
#include <utility>
#include <variant>

#include "common/basic_result.h"

namespace cairn::http {

struct Error {
  unsigned status = 500;  // the HTTP status this failure answers with (400, 401, 403, 404, 413, 416, 500...)
  std::string message;    // for the client: what was wrong, in words it can act on
};

template <typename T>
using Result = BasicResult<T, Error>;

struct Ok {};
using Status = Result<Ok>;

inline Error BadRequest(std::string m) {
  return {400, std::move(m)};
}
inline Error Unauthorized(std::string m) {
  return {401, std::move(m)};
}
inline Error Forbidden(std::string m) {
  return {403, std::move(m)};
}
inline Error NotFoundError(std::string m) {
  return {404, std::move(m)};
}
inline Error InternalError(std::string m) {
  return {500, std::move(m)};
}

}  // namespace cairn::http

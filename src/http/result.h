// Errors as values for the server layer (the src/xet/result.h pattern): a fallible call returns Result<T>,
// either a value or an Error that already carries the HTTP status it maps to, so handlers and the server can
// answer it without a translation table.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace cairn::http {

struct Error {
  unsigned status = 500;  // the HTTP status this failure answers with (400, 401, 403, 404, 413, 416, 500...)
  std::string message;    // for the client: what was wrong, in words it can act on
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor): implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

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

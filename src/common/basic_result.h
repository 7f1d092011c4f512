// Errors as values: a fallible call returns a value or an error, never throws across a layer. Each layer
// picks its error type (Error with a code, http::Error with a status) and aliases Result<T> over this
// template.
#pragma once

#include <utility>
#include <variant>

namespace cairn {

template <typename T, typename E>
class [[nodiscard]] BasicResult {
 public:
  BasicResult(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor): implicit by design
  BasicResult(E error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  const E& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, E> v_;
};

}  // namespace cairn

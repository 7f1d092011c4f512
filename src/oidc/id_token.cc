#include "oidc/id_token.h"

#include <boost/json.hpp>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/base64.h"

namespace cairn::oidc {

namespace json = boost::json;

namespace {

Error Refused(std::string why) {
  return Unauthorized("invalid id token: " + std::move(why));
}

std::optional<json::object> DecodeObject(std::string_view part) {
  auto bytes = Base64Decode(part, /*url_safe=*/true);
  if (!bytes) return std::nullopt;
  boost::system::error_code ec;
  json::value v =
      json::parse(std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()), ec);
  if (ec || !v.is_object()) return std::nullopt;
  return std::move(v.as_object());
}

std::string StringOr(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v != nullptr && v->is_string() ? std::string(v->as_string()) : std::string();
}

// A NumericDate (seconds since the epoch): an integer or a finite number, truncated.
std::optional<int64_t> NumericDate(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  if (v == nullptr) return std::nullopt;
  if (v->is_int64()) return v->as_int64();
  if (v->is_uint64() && v->as_uint64() <= static_cast<uint64_t>(INT64_MAX)) {
    return static_cast<int64_t>(v->as_uint64());
  }
  if (v->is_double() && std::isfinite(v->as_double()) && std::fabs(v->as_double()) < 9e15) {
    return static_cast<int64_t>(v->as_double());
  }
  return std::nullopt;
}

// A scalar claim as text; nullopt for objects, lists and null.
std::optional<std::string> ScalarText(const json::value& v) {
  if (v.is_string()) return std::string(v.as_string());
  if (v.is_bool()) return v.as_bool() ? "true" : "false";
  if (v.is_int64() || v.is_uint64()) return json::serialize(v);
  return std::nullopt;
}

}  // namespace

Result<IdToken> ParseIdToken(std::string_view text) {
  if (text.empty() || text.size() > kMaxIdTokenBytes) return Refused("empty or too long");
  const size_t dot1 = text.find('.');
  const size_t dot2 = dot1 == std::string_view::npos ? dot1 : text.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos || text.find('.', dot2 + 1) != std::string_view::npos) {
    return Refused("not a signed JWT (three parts)");
  }
  auto header = DecodeObject(text.substr(0, dot1));
  auto payload = DecodeObject(text.substr(dot1 + 1, dot2 - dot1 - 1));
  auto signature = Base64Decode(text.substr(dot2 + 1), /*url_safe=*/true);
  if (!header || !payload || !signature || signature->empty()) return Refused("not a JWT");
  IdToken out;
  out.alg = StringOr(*header, "alg");
  out.kid = StringOr(*header, "kid");
  out.iss = StringOr(*payload, "iss");
  out.sub = StringOr(*payload, "sub");
  if (const auto* aud = payload->if_contains("aud"); aud != nullptr && aud->is_string()) {
    out.aud.emplace_back(aud->as_string());
  } else if (aud != nullptr && aud->is_array()) {
    for (const auto& a : aud->as_array()) {
      if (a.is_string()) out.aud.emplace_back(a.as_string());
    }
  }
  const auto exp = NumericDate(*payload, "exp");
  if (out.alg.empty() || out.iss.empty() || out.aud.empty() || !exp) {
    return Refused("it lacks alg, iss, aud or exp");
  }
  out.exp = *exp;
  out.nbf = NumericDate(*payload, "nbf").value_or(0);
  out.iat = NumericDate(*payload, "iat").value_or(0);
  for (const auto& [key, value] : *payload) {
    if (auto t = ScalarText(value)) {
      out.claims.emplace(std::string(key), std::move(*t));
    } else if (value.is_array()) {
      auto& list = out.lists[std::string(key)];
      for (const auto& item : value.as_array()) {
        if (item.is_string()) list.emplace_back(item.as_string());
      }
    }
  }
  out.signing_input = std::string(text.substr(0, dot2));
  out.signature = std::move(*signature);
  return out;
}

}  // namespace cairn::oidc

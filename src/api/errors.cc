#include "api/errors.h"

#include <boost/json/serialize.hpp>
#include <string>

#include "common/printable.h"

namespace cairn::api {

unsigned HttpStatusOf(hub::ErrorKind kind) {
  switch (kind) {
    case hub::ErrorKind::kBadRequest:
      return 400;
    case hub::ErrorKind::kUnauthorized:
      return 401;
    case hub::ErrorKind::kForbidden:
      return 403;
    case hub::ErrorKind::kNotFound:
      return 404;
    case hub::ErrorKind::kConflict:
      return 409;
    case hub::ErrorKind::kStale:
      return 412;
    case hub::ErrorKind::kUnavailable:
      return 503;
    case hub::ErrorKind::kInternal:
      return 500;
  }
  return 500;
}

http::Response ErrorResponse(const Error& e) {
  return http::Response::ErrorJson(HttpStatusOf(e.code), e.message);
}

http::Response HubErrorResponse(unsigned status, std::string_view code, std::string_view message) {
  http::Response r = http::Response::ErrorJson(status, message);
  r.Header("X-Error-Message", Printable(message, 512));
  if (!code.empty()) r.Header("X-Error-Code", std::string(code));
  return r;
}

http::Response HubErrorResponse(const hub::Error& e) {
  return HubErrorResponse(HttpStatusOf(e.kind), e.code, e.message);
}

http::Response HubErrorResponse(const hub::Error& e, boost::json::object body) {
  http::Response r = HubErrorResponse(e);
  body["error"] = e.message;
  r.body = {boost::json::serialize(body)};
  return r;
}

http::Response LfsError(unsigned status, std::string_view message) {
  http::Response r =
      http::Response::Json(status, boost::json::serialize(boost::json::object{{"message", message}}));
  r.Header("Content-Type", "application/vnd.git-lfs+json");
  if (status == 503) r.Header("Retry-After", "1");
  return r;
}

}  // namespace cairn::api

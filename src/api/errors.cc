#include "api/errors.h"

#include <boost/json/serialize.hpp>
#include <string>

#include "common/printable.h"

namespace cairn::api {

http::Response ErrorResponse(const Error& e) {
  return http::Response::ErrorJson(HttpStatusOf(e.code), e.message);
}

http::Response HubErrorResponse(unsigned status, std::string_view code, std::string_view message) {
  http::Response r = http::Response::ErrorJson(status, message);
  r.Header("X-Error-Message", Printable(message, 512));
  if (!code.empty()) r.Header("X-Error-Code", std::string(code));
  return r;
}

http::Response HubErrorResponse(const Error& e) {
  return HubErrorResponse(HttpStatusOf(e.code), e.reason, e.message);
}

http::Response HubErrorResponse(const Error& e, boost::json::object body) {
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

// hf auth login (people/device_flow.h), the API's half: POST /oauth/device (form: client_id) answers
// {device_code, user_code, verification_uri, verification_uri_complete, interval, expires_in}; POST
// /oauth/token with grant_type urn:ietf:params:oauth:grant-type:device_code (device_code, client_id) or
// refresh_token (refresh_token, client_id) answers {access_token, token_type, expires_in, refresh_token} or
// the OAuth error (400 {error, error_description}). The person approves the code on the pages' /device.

#include "api/hub_context.h"
#include "http/form.h"

namespace cairn::api::hub_routes {
namespace {

constexpr std::string_view kDeviceCodeGrant = "urn:ietf:params:oauth:grant-type:device_code";
constexpr std::string_view kRefreshGrant = "refresh_token";

http::Response Issued(const people::DeviceFlow::Issued& issued) {
  http::Response r = JsonAnswer(json::object{{"access_token", issued.access_token},
                                             {"token_type", "bearer"},
                                             {"expires_in", issued.expires_in},
                                             {"refresh_token", issued.refresh_token}});
  r.Header("Cache-Control", "no-store");
  return r;
}

void StartDevice(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  if (c.options.device == nullptr)
    return ex->Respond(OAuthError(404, "invalid_request", "no device sign-in here"));
  auto form = http::ParseForm(ex->request().body);
  if (!form) return ex->Respond(OAuthError(400, "invalid_request", "the body is a form with client_id"));
  const std::string client_id(http::FormField(*form, "client_id"));
  ex->Offload([&c, ex, client_id] {
    auto started = c.options.device->Start(client_id);
    if (!started) return ex->Respond(OAuthError(started.error()));
    const std::string verify = c.options.public_url + "/device";
    http::Response r =
        JsonAnswer(json::object{{"device_code", started->device_code},
                                {"user_code", started->user_code},
                                {"verification_uri", verify},
                                {"verification_uri_complete", verify + "?user_code=" + started->user_code},
                                {"interval", started->interval},
                                {"expires_in", started->expires_in}});
    r.Header("Cache-Control", "no-store");
    ex->Respond(std::move(r));
  });
}

}  // namespace

bool DeviceGrantAsked(const HubContext& c, const std::shared_ptr<Exchange>& ex,
                      const http::FormFields& form) {
  const std::string_view grant = http::FormField(form, "grant_type");
  if (grant != kDeviceCodeGrant && grant != kRefreshGrant) return false;
  if (c.options.device == nullptr) {
    ex->Respond(OAuthError(400, "unsupported_grant_type", "no device sign-in here"));
    return true;
  }
  const bool refresh = grant == kRefreshGrant;
  std::string secret(http::FormField(form, refresh ? "refresh_token" : "device_code"));
  ex->Offload([&c, ex, refresh, secret = std::move(secret)] {
    const std::string& client = ex->request().remote;
    auto issued =
        refresh ? c.options.device->Refresh(secret, client) : c.options.device->Poll(secret, client);
    if (!issued) return ex->Respond(OAuthError(issued.error()));
    ex->Respond(Issued(*issued));
  });
  return true;
}

void RegisterDeviceRoutes(const std::shared_ptr<const HubContext>& ctx) {
  ctx->server.router().Handle(Verb::post, "/oauth/device",
                              RouteOptions().Name("oauth_device").MaxBody(16 << 10), Bind(ctx, &StartDevice));
}

}  // namespace cairn::api::hub_routes

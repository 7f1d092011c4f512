// A device's sign-in, the pages' half (people/device_flow.h): GET /device[?user_code=] shows the code a
// program asked with and whom it would act as, to a signed-in person (others are sent to sign in first);
// POST /device approves or denies it (the session's form token, cairn's origin).
#include <utility>

#include "http/form.h"
#include "web/page_context.h"

namespace cairn::web {

namespace {

using http::Exchange;
using http::Verb;

http::Response DevicePage(unsigned status, const Signed& who, View v) {
  v.set("user", who.visitor.user);
  v.set("csrf", who.visitor.csrf);
  return PageAnswer(status, "Sign in a device", Render("device.html", v), who.visitor);
}

void ShowDevice(const PageContext& ctx, const std::shared_ptr<Exchange>& ex, const Signed& who) {
  View v;
  const std::string typed = QueryValue(ex->request(), "user_code");
  if (typed.empty()) {
    v.set("enter", true);
    return ex->Respond(DevicePage(200, who, v));
  }
  auto pending = ctx.options.device->Pending(typed);
  if (!pending) {
    v.set("error", pending.error().message);
    v.set("enter", true);
    return ex->Respond(DevicePage(404, who, v));
  }
  View ask;
  ask.set("code", pending->user_code);
  v.set("ask", ask);
  ex->Respond(DevicePage(200, who, v));
}

void DecideDevice(const PageContext& ctx, const std::shared_ptr<Exchange>& ex, const Signed& who,
                  const http::FormFields& form) {
  const bool approve = http::FormField(form, "decision") == "approve";
  const people::Actor actor{
      .actor = who.caller.user, .token_id = who.caller.token_id, .client = ex->request().remote};
  auto st = ctx.options.device->Decide(actor, who.user_id, http::FormField(form, "user_code"), approve);
  View v;
  if (!st) {
    v.set("error", st.error().message);
    v.set("enter", true);
    return ex->Respond(DevicePage(404, who, v));
  }
  v.set("done", std::string(approve ? "Approved: the program is signed in as you. You may close this page."
                                    : "Denied: the program gets nothing."));
  ex->Respond(DevicePage(200, who, v));
}

}  // namespace

void RegisterDevicePages(const std::shared_ptr<const PageContext>& ctx) {
  if (ctx->options.device == nullptr) return;  // no device sign-in here: /device is a 404
  auto& r = ctx->server.router();
  r.Handle(Verb::get, "/device", http::RouteOptions().Name("page_device"),
           [ctx](const std::shared_ptr<Exchange>& ex) {
             AsSignedIn(ctx, ex, false,
                        [ctx, ex](const Signed& who, const http::FormFields&) { ShowDevice(*ctx, ex, who); });
           });
  r.Handle(Verb::post, "/device", http::RouteOptions().Name("page_device").MaxBody(16 << 10),
           [ctx](const std::shared_ptr<Exchange>& ex) {
             AsSignedIn(ctx, ex, true, [ctx, ex](const Signed& who, const http::FormFields& form) {
               DecideDevice(*ctx, ex, who, form);
             });
           });
}

}  // namespace cairn::web

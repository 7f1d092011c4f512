// Signing in and out (page_context.h, people/sign_in.h): GET /login shows the form, POST /login checks the
// password and starts a session, GET /login/oidc sends the browser to the company's provider and GET
// /login/oidc/callback starts a session for whoever it signed in (oidc/single_sign_on.h), POST /logout ends
// it. Every post must come from cairn's own pages: its
// Origin (when the browser sends one) is cairn's, and it carries the form token — the session's for a
// signed-in visitor, or for the sign-in form the random one of the form cookie (a double-submitted token,
// so that no other site can sign a visitor in as someone else).
#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <array>
#include <utility>

#include "common/hex.h"
#include "common/percent_encode.h"
#include "http/form.h"
#include "web/page_context.h"

namespace cairn::web {

namespace {

using http::Exchange;
using http::Verb;

constexpr int64_t kFormCookieLife = 24 * 3600;
constexpr size_t kMaxNext = 2048;

// Where to go after signing in: a path of this site ("/..." but not "//..." or "/\\...", which browsers
// read as another host), or the home page.
std::string SafeNext(std::string_view next) {
  if (next.empty() || next.size() > kMaxNext || next.front() != '/' || next.starts_with("//") ||
      next.starts_with("/\\")) {
    return "/";
  }
  for (const char c : next) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return "/";
  }
  return std::string(next);
}

http::Response Redirect(std::string_view to) {
  http::Response r = http::Response::Text(303, "", "text/plain; charset=utf-8");
  r.Header("Location", std::string(to));
  r.Header("Cache-Control", "no-store");
  return r;
}

bool IsFormToken(std::string_view t) {
  if (t.size() != 64) return false;
  for (const char c : t) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string NewFormToken() {
  std::array<uint8_t, 32> raw{};
  if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1) return {};
  return HexEncode(raw);
}

bool SameToken(std::string_view a, std::string_view b) {
  return !a.empty() && a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

http::Response LoginPage(const PageContext& ctx, unsigned status, const std::string& token,
                         std::string_view next, std::string_view username, std::string_view error) {
  View v;
  v.set("csrf", token);
  v.set("next", SafeNext(next));
  v.set("username", std::string(username));
  if (!error.empty()) v.set("error", std::string(error));
  v.set("password", ctx.options.sign_in != nullptr);
  if (ctx.options.sso != nullptr) {
    v.set("oidc", ctx.options.sso->settings().display_name);
    v.set("next_query", PercentEncode(SafeNext(next)));
  }
  http::Response r = PageAnswer(status, "Sign in", Render("login.html", v), Visitor{});
  r.Header("Set-Cookie", ctx.SetCookie(ctx.FormCookie(), token, kFormCookieLife));
  r.Header("Cache-Control", "no-store");
  return r;
}

void ShowLogin(const std::shared_ptr<const PageContext>& ctx, const std::shared_ptr<Exchange>& ex) {
  ex->Offload([ctx, ex] {
    const http::Request& req = ex->request();
    const Signed who = ctx->Identify(req);
    if (who.visitor.signed_in()) return ex->Respond(Redirect(SafeNext(QueryValue(req, "next"))));
    if (ctx->options.sign_in == nullptr) {
      return ex->Respond(ErrorPage(404, "This server signs nobody in.", who.visitor));
    }
    std::string token = CookieValue(req, ctx->FormCookie());
    if (!IsFormToken(token)) token = NewFormToken();
    ex->Respond(LoginPage(*ctx, 200, token, QueryValue(req, "next"), "", ""));
  });
}

// The sign-in page's form as posted, when it came from that page in this browser (its Origin, and the token
// the form cookie holds); nullopt otherwise.
std::optional<http::FormFields> SignInForm(const PageContext& ctx, const http::Request& req) {
  auto form = http::ParseForm(req.body);
  const std::string token = CookieValue(req, ctx.FormCookie());
  if (!form || !ctx.SameOrigin(req) || !IsFormToken(token) ||
      !SameToken(token, http::FormField(*form, "csrf")))
    return std::nullopt;
  return form;
}

http::Response NotFromSignInPage() {
  return ErrorPage(403, "This form was not sent from this site's sign-in page: open it again.", {});
}

void Login(const std::shared_ptr<const PageContext>& ctx, const std::shared_ptr<Exchange>& ex) {
  ex->Offload([ctx, ex] {
    const http::Request& req = ex->request();
    if (ctx->options.sign_in == nullptr)
      return ex->Respond(ErrorPage(404, "This server signs nobody in.", {}));
    auto form = SignInForm(*ctx, req);
    if (!form) return ex->Respond(NotFromSignInPage());
    const std::string token = CookieValue(req, ctx->FormCookie());
    const std::string_view name = http::FormField(*form, "username");
    const std::string_view next = http::FormField(*form, "next");
    auto session =
        ctx->options.sign_in->WithPassword(name, http::FormField(*form, "password"), ClientHost(req.remote));
    if (!session) {
      const unsigned status = session.error().code == ErrorCode::kDenied ? 429 : 401;
      return ex->Respond(LoginPage(*ctx, status, token, next, name, session.error().message));
    }
    http::Response r = Redirect(SafeNext(next));
    r.Header("Set-Cookie", ctx->SetCookie(ctx->SessionCookie(), session->cookie,
                                          people::SignInService::kSessionLife.count()));
    ex->Respond(std::move(r));
  });
}

// GET /login/oidc: a new attempt, its secrets in the flow cookie, and the browser sent to the provider. A
// link rather than a form: CSP's form-action would stop a form's redirect to the provider, and starting an
// attempt changes nothing (another site sending a browser here signs it in as itself, if at all).
void StartSso(const std::shared_ptr<const PageContext>& ctx, const std::shared_ptr<Exchange>& ex) {
  ex->Offload([ctx, ex] {
    const http::Request& req = ex->request();
    if (ctx->options.sso == nullptr)
      return ex->Respond(ErrorPage(404, "This server has no company sign-in.", {}));
    auto started = ctx->options.sso->Begin(SafeNext(QueryValue(req, "next")));
    if (!started) {
      return ex->Respond(ErrorPage(http::HttpStatusOf(started.error().code),
                                   "The sign-in provider cannot be reached now: " + started.error().message,
                                   {}));
    }
    http::Response r = Redirect(started->url);
    r.Header("Set-Cookie",
             ctx->SetCookie(ctx->SsoCookie(), started->cookie, oidc::SingleSignOn::kAttemptLife));
    ex->Respond(std::move(r));
  });
}

// GET /login/oidc/callback: the provider's answer, for the attempt the flow cookie holds.
void FinishSso(const std::shared_ptr<const PageContext>& ctx, const std::shared_ptr<Exchange>& ex) {
  ex->Offload([ctx, ex] {
    const http::Request& req = ex->request();
    if (ctx->options.sso == nullptr)
      return ex->Respond(ErrorPage(404, "This server has no company sign-in.", {}));
    const std::string clear = ctx->SetCookie(ctx->SsoCookie(), "", 0);  // an attempt is answered once
    std::string token = CookieValue(req, ctx->FormCookie());
    if (!IsFormToken(token)) token = NewFormToken();
    const std::string refused = QueryValue(req, "error");
    if (!refused.empty()) {
      http::Response r = LoginPage(*ctx, 401, token, "/", "", "The sign-in provider did not sign you in.");
      r.AddHeader("Set-Cookie", clear);
      return ex->Respond(std::move(r));
    }
    auto done = ctx->options.sso->Finish(CookieValue(req, ctx->SsoCookie()), QueryValue(req, "state"),
                                         QueryValue(req, "code"), ClientHost(req.remote));
    if (!done) {
      http::Response r =
          LoginPage(*ctx, http::HttpStatusOf(done.error().code), token, "/", "", done.error().message);
      r.AddHeader("Set-Cookie", clear);
      return ex->Respond(std::move(r));
    }
    http::Response r = Redirect(SafeNext(done->next));
    r.AddHeader("Set-Cookie", clear);
    r.AddHeader("Set-Cookie", ctx->SetCookie(ctx->SessionCookie(), done->session.cookie,
                                             done->session.expires - done->began));
    ex->Respond(std::move(r));
  });
}

void Logout(const std::shared_ptr<const PageContext>& ctx, const std::shared_ptr<Exchange>& ex) {
  ex->Offload([ctx, ex] {
    const http::Request& req = ex->request();
    const Signed who = ctx->Identify(req);
    if (!who.visitor.signed_in()) return ex->Respond(Redirect("/"));
    auto form = http::ParseForm(req.body);
    if (!form || !ctx->SameOrigin(req) ||
        !people::SignInService::CsrfMatches(who.cookie, http::FormField(*form, "csrf"))) {
      return ex->Respond(ErrorPage(403, "This form was not sent from this site's pages.", who.visitor));
    }
    if (auto st = ctx->options.sign_in->SignOut(who.cookie, req.remote); !st) {
      return ex->Respond(ErrorPage(http::HttpStatusOf(st.error().code), st.error().message, who.visitor));
    }
    http::Response r = Redirect("/");
    r.Header("Set-Cookie", ctx->SetCookie(ctx->SessionCookie(), "", 0));
    ex->Respond(std::move(r));
  });
}

}  // namespace

void RegisterSignInPages(const std::shared_ptr<const PageContext>& ctx) {
  auto& r = ctx->server.router();
  const uint64_t small = 16 << 10;
  r.Handle(Verb::get, "/login", http::RouteOptions().Name("page_login"),
           [ctx](const std::shared_ptr<Exchange>& ex) { ShowLogin(ctx, ex); });
  r.Handle(Verb::post, "/login", http::RouteOptions().Name("page_login").MaxBody(small),
           [ctx](const std::shared_ptr<Exchange>& ex) { Login(ctx, ex); });
  // Registered with or without company sign-in (unlike the pages of other optional services, which another
  // page's 404 answers when absent): /login/oidc/callback matches no other page, and would otherwise get the
  // router's JSON 404 instead of a page saying there is no company sign-in here.
  r.Handle(Verb::get, "/login/oidc", http::RouteOptions().Name("page_login_oidc"),
           [ctx](const std::shared_ptr<Exchange>& ex) { StartSso(ctx, ex); });
  r.Handle(Verb::get, "/login/oidc/callback", http::RouteOptions().Name("page_login_oidc"),
           [ctx](const std::shared_ptr<Exchange>& ex) { FinishSso(ctx, ex); });
  r.Handle(Verb::post, "/logout", http::RouteOptions().Name("page_logout").MaxBody(small),
           [ctx](const std::shared_ptr<Exchange>& ex) { Logout(ctx, ex); });
}

}  // namespace cairn::web

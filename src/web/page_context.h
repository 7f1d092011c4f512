// What the page files share (page_routes.h is their entry point): the services, who asks, the repository a
// route names opened for reading, the header every repository page starts with, and a file's first bytes.
// Failures answer the request with an error page and return; nothing here throws.
//
// Thread safety: a PageContext is made once before the server starts and only read afterwards; handlers run
// on the server's workers (Offload), which the index's reads may block.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/lru_cache.h"
#include "common/percent_encode.h"
#include "http/form.h"
#include "http/server.h"
#include "hub/hub_service.h"
#include "web/page_routes.h"
#include "web/safetensors.h"
#include "web/view.h"

namespace cairn::web {

struct PageContext {
  http::Server& server;
  hub::HubService& hub;
  files::FileService& files;
  PageOptions options;  // public_url without a trailing '/'
  // The tensors of safetensors files the cards have read, by the file's blob id (its content): a card does
  // not read a header twice.
  std::shared_ptr<LruCache<hub::ObjectId, TensorCounts, hub::ObjectIdHash>> tensors;
  // Parts of repository pages rendered from a commit (Kept).
  struct KeptPart {
    std::string html;
    std::chrono::steady_clock::time_point made;
  };
  std::shared_ptr<LruCache<std::string, KeptPart, std::hash<std::string>>> kept;

  // Who the request comes from: the person its session cookie speaks for, or nobody.
  Signed Identify(const http::Request& req) const;
  // The session cookie's name, and the anonymous form cookie's (the sign-in form's token): "__Host-" ones
  // under HTTPS, which the browser keeps to this origin, Secure, on every path.
  std::string SessionCookie() const;
  std::string FormCookie() const;
  // The cookie a company sign-in's attempt waits in (oidc/single_sign_on.h's Flow).
  std::string SsoCookie() const;
  bool secure() const { return options.public_url.starts_with("https://"); }
  // The Set-Cookie value of `name` set to `value` for `max_age` seconds (0: removed).
  std::string SetCookie(std::string_view name, std::string_view value, int64_t max_age) const;
  // Whether a form post comes from cairn's own pages by its Origin (or Referer) header: a browser sends one
  // with every post; a missing one is allowed (the form token decides), another origin is not.
  bool SameOrigin(const http::Request& req) const;
};

// The value of cookie `name` in the request's Cookie header ("" when absent).
std::string CookieValue(const http::Request& req, std::string_view name);
// The client's address without its port, as failed sign-ins are counted by.
std::string ClientHost(std::string_view remote);

// A repository page's request: who asks, the repository opened for them and the revision the route names
// (the default branch when it names none), resolved.
struct RepoPage {
  Signed who;
  hub::Repo repo;
  std::string rev;  // as the URL gave it (or the default branch)
  hub::ObjectId commit;
  std::string url;  // "/alice/model", "/datasets/alice/data"
};

// Runs `fn(page)` on a worker with the repository of the route's {types}/{ns}/{name} open for the visitor at
// its {rev}; answers a 404 page itself when there is none, the visitor may not read it, or the revision is
// unknown.
void WithRepoPage(const std::shared_ptr<const PageContext>& ctx, const std::shared_ptr<http::Exchange>& ex,
                  std::function<void(const RepoPage&)> fn);

// A route's handler that runs `render` on the route's repository page (WithRepoPage).
using RepoPageRender = void (*)(const PageContext&, const std::shared_ptr<http::Exchange>&, const RepoPage&);
http::Handler RepoPageHandler(const std::shared_ptr<const PageContext>& ctx, RepoPageRender render);

// The header of a repository's pages, with tab `tab` ("card", "files", "history") marked current.
std::string RepoHeader(const RepoPage& page, std::string_view tab);

// A repository's page: its header (tab `tab` current) above `body`, in the layout, titled `title`; its
// images may come from the user-content origin.
http::Response RepoPageAnswer(const PageContext& ctx, const RepoPage& page, std::string_view tab,
                              std::string_view title, std::string_view body);

// The HTML `render` makes of what a page shows at its commit, kept for a minute (PageContext::kept) by the
// repository, the commit, the URL's repository path and revision, and `what` (the part and its parameters):
// a page read often then costs only its header, its live parts and the layout. Stored objects never change;
// the minute bounds what may beside them (a large file's link arriving or purged). Nothing of the visitor is
// in it and access is checked before; a failure is returned, not kept.
Result<std::shared_ptr<const PageContext::KeptPart>> Kept(const PageContext& ctx, const RepoPage& page,
                                                          std::string_view what,
                                                          const std::function<Result<std::string>()>& render);

// Where a browser gets `path` of the page's repository at the page's commit: a signed link
// (hub/download_link.h) on the user-content origin when there is one, else on cairn's own for a private
// repository (a browser has no token to send); the download route at the page's revision for a public one.
std::string FileUrl(const PageContext& ctx, const RepoPage& page, std::string_view path);

// Whether `text` is shown as text: valid UTF-8 with no NUL (a cut at `cut_at_end` may split the last
// character, which is then not held against it).
bool LooksLikeText(std::string_view text, bool cut_at_end);

// The first `max` bytes of the file `info` (a small file's blob, or a ranged read of its Xet file).
Result<std::string> ReadHead(const PageContext& ctx, const hub::Repo& repo, const hub::PathInfo& info,
                             uint64_t max);

// The links to each folder on the way to `path` ("a/b/c": a, a/b, and a/b/c unless `last_is_file`): a
// list of {name, url}.
View Crumbs(std::string_view path, bool last_is_file);

// The value of query parameter `key` ("" when absent), and a page number from ?p= (0 when absent or bad).
std::string QueryValue(const http::Request& req, std::string_view key);
size_t PageNumber(const http::Request& req);

// "2026-12-01 19:18 UTC", and "2026-12-01T19:18:42Z" (a <time> element's datetime).
std::string DateText(int64_t unix_seconds);
std::string IsoTime(int64_t unix_seconds);

// Runs `fn(who, form)` on a worker for a signed-in visitor, or answers: a GET without a session is sent to
// sign in first (and back), a post without one is refused, and a post's form must come from cairn's pages
// (its Origin, and the session's form token).
template <typename Fn>
void AsSignedIn(const std::shared_ptr<const PageContext>& ctx, const std::shared_ptr<http::Exchange>& ex,
                bool post, Fn fn) {
  ex->Offload([ctx, ex, post, fn = std::move(fn)] {
    const http::Request& req = ex->request();
    const Signed who = ctx->Identify(req);
    if (!who.visitor.signed_in()) {
      if (post) return ex->Respond(ErrorPage(403, "Sign in first.", who.visitor));
      http::Response r = http::Response::Text(303, "", "text/plain; charset=utf-8");
      r.Header("Location", "/login?next=" + PercentEncode(req.target));
      return ex->Respond(std::move(r));
    }
    http::FormFields form;
    if (post) {
      auto parsed = http::ParseForm(req.body);
      if (!parsed || !ctx->SameOrigin(req) ||
          !people::SignInService::CsrfMatches(who.cookie, http::FormField(*parsed, "csrf"))) {
        return ex->Respond(ErrorPage(403, "This form was not sent from this site's pages.", who.visitor));
      }
      form = std::move(*parsed);
    }
    fn(who, form);
  });
}

// Registered by page_routes.cc, one file each.
void RegisterRepoPages(const std::shared_ptr<const PageContext>& ctx);      // repo_pages.cc
void RegisterHistoryPages(const std::shared_ptr<const PageContext>& ctx);   // history_pages.cc
void RegisterListPages(const std::shared_ptr<const PageContext>& ctx);      // list_pages.cc
void RegisterSignInPages(const std::shared_ptr<const PageContext>& ctx);    // sign_in_pages.cc
void RegisterDevicePages(const std::shared_ptr<const PageContext>& ctx);    // device_pages.cc
void RegisterTokenPages(const std::shared_ptr<const PageContext>& ctx);     // token_pages.cc
void RegisterOperatorPages(const std::shared_ptr<const PageContext>& ctx);  // operator_pages.cc
void RegisterBucketPages(const std::shared_ptr<const PageContext>& ctx);    // bucket_pages.cc

}  // namespace cairn::web

#include "web/page_context.h"

#include <ctime>
#include <utility>

#include "common/percent_encode.h"
#include "common/utf8.h"
#include "files/file_reader.h"
#include "hub/download_link.h"
#include "people/reach.h"

namespace cairn::web {

Signed PageContext::Identify(const http::Request& req) const {
  if (options.sign_in == nullptr) return {};
  std::string cookie = CookieValue(req, SessionCookie());
  if (cookie.empty()) return {};
  auto who = options.sign_in->Resolve(cookie);
  if (!who) return {};
  std::vector<ScopeAccess> reach = people::ReachOf(who->person);
  bool writes = false;
  for (const ScopeAccess& s : reach) writes = writes || s.access >= Access::kWrite;
  return Signed{
      .caller = hub::Caller{.scope = who->person.user,
                            .write = writes,
                            .expires = who->person.expires,
                            .user = who->person.user,
                            .reach = std::move(reach),
                            .token_id = who->person.token_id,
                            .client = req.remote},
      .visitor = Visitor{.user = who->person.user, .csrf = who->csrf, .is_operator = who->person.is_operator},
      .cookie = std::move(cookie),
      .user_id = who->person.user_id};
}

std::string PageContext::SessionCookie() const {
  return secure() ? "__Host-cairn_session" : "cairn_session";
}
std::string PageContext::FormCookie() const {
  return secure() ? "__Host-cairn_form" : "cairn_form";
}
std::string PageContext::SsoCookie() const {
  return secure() ? "__Host-cairn_sso" : "cairn_sso";
}

std::string PageContext::SetCookie(std::string_view name, std::string_view value, int64_t max_age) const {
  std::string out = std::string(name) + "=" + std::string(value) +
                    "; Path=/; HttpOnly; SameSite=Lax; Max-Age=" + std::to_string(max_age);
  if (secure()) out += "; Secure";
  return out;
}

bool PageContext::SameOrigin(const http::Request& req) const {
  std::string_view from = req.Header("Origin");
  if (from.empty()) from = req.Header("Referer");
  if (from.empty()) return true;
  // The public URL's origin: its scheme, host and port, without a path.
  const size_t scheme = options.public_url.find("://");
  const size_t path = options.public_url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  const std::string_view origin = std::string_view(options.public_url).substr(0, path);
  return from == origin ||
         (from.starts_with(origin) && from.size() > origin.size() && from[origin.size()] == '/');
}

std::string CookieValue(const http::Request& req, std::string_view name) {
  std::string_view header = req.Header("Cookie");
  while (!header.empty()) {
    const size_t end = header.find(';');
    std::string_view pair = header.substr(0, end);
    header = end == std::string_view::npos ? std::string_view() : header.substr(end + 1);
    while (!pair.empty() && pair.front() == ' ') pair.remove_prefix(1);
    if (pair.size() > name.size() && pair.starts_with(name) && pair[name.size()] == '=') {
      return std::string(pair.substr(name.size() + 1));
    }
  }
  return {};
}

std::string ClientHost(std::string_view remote) {
  if (remote.starts_with('[')) return std::string(remote.substr(0, remote.find(']') + 1));
  const size_t colon = remote.rfind(':');
  return std::string(colon == std::string_view::npos ? remote : remote.substr(0, colon));
}

namespace {

std::optional<hub::RepoId> RepoIdOf(const http::Request& req) {
  hub::RepoId id;
  if (const std::string& types = req.Param("types"); !types.empty()) {
    auto type = hub::TypeFromPlural(types);
    if (!type || *type == hub::RepoType::kBucket || *type == hub::RepoType::kModel) return std::nullopt;
    id.type = *type;
  }
  id.ns = req.Param("ns");
  id.name = req.Param("name");
  if (!hub::ValidName(id.ns) || !hub::ValidName(id.name)) return std::nullopt;
  return id;
}

}  // namespace

void WithRepoPage(const std::shared_ptr<const PageContext>& ctx, const std::shared_ptr<http::Exchange>& ex,
                  std::function<void(const RepoPage&)> fn) {
  ex->Offload([ctx, ex, fn = std::move(fn)] {
    const http::Request& req = ex->request();
    Signed who = ctx->Identify(req);
    auto id = RepoIdOf(req);
    if (!id) return ex->Respond(ErrorPage(404, "No such repository.", who.visitor));
    auto repo = ctx->options.mirror_open ? ctx->options.mirror_open(who.caller, *id)
                                         : ctx->hub.Open(who.caller, *id, false);
    if (!repo) {
      const unsigned status =
          repo.error().code == ErrorCode::kNotFound ? 404 : http::HttpStatusOf(repo.error().code);
      return ex->Respond(
          ErrorPage(status, status == 404 ? "No such repository." : repo.error().message, who.visitor));
    }
    std::string rev = req.Param("rev");
    if (rev.empty()) rev = ctx->hub.options().default_branch;
    auto commit = ctx->options.mirror_resolve && hub::IsMirrored(repo->record)
                      ? ctx->options.mirror_resolve(*repo, rev)
                      : ctx->hub.Resolve(*repo, rev);
    if (!commit) return ex->Respond(ErrorPage(404, "No such revision: " + rev, who.visitor));
    RepoPage page{.who = std::move(who),
                  .repo = std::move(*repo),
                  .rev = std::move(rev),
                  .commit = *commit,
                  .url = "/" + UrlPath(hub::RepoPath(id.value()))};
    fn(page);
  });
}

http::Handler RepoPageHandler(const std::shared_ptr<const PageContext>& ctx, RepoPageRender render) {
  return [ctx, render](const std::shared_ptr<http::Exchange>& ex) {
    WithRepoPage(ctx, ex, [ctx, ex, render](const RepoPage& page) { render(*ctx, ex, page); });
  };
}

std::string RepoHeader(const RepoPage& page, std::string_view tab) {
  const hub::RepoId id = page.repo.id();
  View v;
  static constexpr std::string_view kKinds[] = {"Model", "Dataset", "Space", "Bucket"};
  const auto kind = static_cast<size_t>(id.type);
  v.set("kind", std::string(kind < std::size(kKinds) ? kKinds[kind] : "Repository"));
  v.set("card_label", std::string(id.type == hub::RepoType::kDataset ? "Dataset card" : "Model card"));
  v.set("ns", id.ns);
  v.set("name", id.name);
  v.set("repo_url", page.url);
  v.set("rev_url", PercentEncode(page.rev));
  v.set("private", page.repo.record.is_private);
  v.set("on_" + std::string(tab), true);
  return Render("repo_header.html", v);
}

http::Response RepoPageAnswer(const PageContext& ctx, const RepoPage& page, std::string_view tab,
                              std::string_view title, std::string_view body) {
  std::string main = RepoHeader(page, tab);
  main += body;
  http::Response r = PageAnswer(200, title, main, page.who.visitor);
  if (!ctx.options.content_url.empty()) SecureHeaders(r, ctx.options.content_url);
  return r;
}

std::string FileUrl(const PageContext& ctx, const RepoPage& page, std::string_view path) {
  std::string plain = page.url + "/resolve/" + PercentEncode(page.rev) + "/" + UrlPath(path);
  if (ctx.options.content_url.empty() && !page.repo.record.is_private) return plain;
  auto link = hub::SignDownload(*ctx.files.repo_links(), page.repo.id(), page.commit, path);
  if (!link) return plain;  // a path the signer refuses: the route answers as it would
  return ctx.options.content_url + *link;
}

Result<std::shared_ptr<const PageContext::KeptPart>> Kept(
    const PageContext& ctx, const RepoPage& page, std::string_view what,
    const std::function<Result<std::string>()>& render) {
  constexpr auto kKeptFor = std::chrono::minutes(1);
  std::string key = std::to_string(page.repo.record.id);
  const std::string commit = page.commit.hex();  // a named string: the list below holds views of it
  for (const std::string_view part :
       {std::string_view(commit), std::string_view(page.url), std::string_view(page.rev), what}) {
    key += '\0';
    key += part;
  }
  const auto now = std::chrono::steady_clock::now();
  if (auto hit = ctx.kept->Get(key); hit && now - hit->made < kKeptFor) return hit;
  auto html = render();
  if (!html) return html.error();
  auto part = std::make_shared<const PageContext::KeptPart>(PageContext::KeptPart{std::move(*html), now});
  ctx.kept->Put(key, part, key.size() + part->html.size() + 64);
  return part;
}

bool LooksLikeText(std::string_view text, bool cut_at_end) {
  if (text.find('\0') != std::string_view::npos) return false;
  if (ValidUtf8(text)) return true;
  if (!cut_at_end) return false;
  // A character cut by the end: at most 3 bytes of it are missing.
  for (size_t drop = 1; drop <= 3 && drop < text.size(); ++drop) {
    if (ValidUtf8(text.substr(0, text.size() - drop))) return true;
  }
  return false;
}

Result<std::string> ReadHead(const PageContext& ctx, const hub::Repo& repo, const hub::PathInfo& info,
                             uint64_t max) {
  if (!info.xet) {
    if (info.lfs) return Error{ErrorCode::kNotFound, "the large file's bytes are not held here"};
    auto blob = ctx.hub.ReadBlob(repo, info.oid);
    if (!blob) return blob.error();
    return std::string(blob->begin(),
                       blob->begin() + static_cast<ptrdiff_t>(std::min<uint64_t>(max, blob->size())));
  }
  auto stored = ctx.hub.OpenLarge(repo, *info.xet);
  if (!stored) return stored.error();
  const uint64_t length = std::min<uint64_t>(max, stored->size);
  if (length == 0) return std::string();
  auto reader = ctx.files.Open(*stored, 0, length);
  if (!reader) return reader.error();
  std::string out(length, '\0');
  if (auto st = (*reader)->Read(std::span(reinterpret_cast<uint8_t*>(out.data()), out.size())); !st) {
    return st.error();
  }
  return out;
}

std::string QueryValue(const http::Request& req, std::string_view key) {
  for (const auto& [k, v] : req.query) {
    if (k == key) return v;
  }
  return {};
}

size_t PageNumber(const http::Request& req) {
  const std::string p = QueryValue(req, "p");
  if (p.empty() || p.size() > 6) return 0;
  size_t n = 0;
  for (const char c : p) {
    if (c < '0' || c > '9') return 0;
    n = n * 10 + static_cast<size_t>(c - '0');
  }
  return n;
}

namespace {

std::string FormatTime(int64_t unix_seconds, const char* format) {
  const auto t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::array<char, 32> buf{};
  const size_t n = std::strftime(buf.data(), buf.size(), format, &tm);
  return std::string(buf.data(), n);
}

}  // namespace

std::string DateText(int64_t unix_seconds) {
  return FormatTime(unix_seconds, "%Y-%m-%d %H:%M UTC");
}
std::string IsoTime(int64_t unix_seconds) {
  return FormatTime(unix_seconds, "%Y-%m-%dT%H:%M:%SZ");
}

View Crumbs(std::string_view path, bool last_is_file) {
  View list{View::type::list};
  size_t start = 0;
  while (start < path.size()) {
    const size_t slash = path.find('/', start);
    const size_t end = slash == std::string_view::npos ? path.size() : slash;
    if (end == path.size() && last_is_file) break;
    View c;
    c.set("name", std::string(path.substr(start, end - start)));
    c.set("url", UrlPath(path.substr(0, end)));
    list.push_back(c);
    start = end + 1;
  }
  return list;
}

}  // namespace cairn::web

// Lists of repositories (page_context.h): the home page (what the visitor may see of each kind), /models,
// /datasets, /spaces and /buckets paged by name, and a namespace's page /{ns}.
#include <algorithm>
#include <optional>
#include <utility>

#include "common/percent_encode.h"
#include "web/page_context.h"

namespace cairn::web {

namespace {

using http::Exchange;
using http::Verb;

constexpr size_t kHomeRepos = 20;  // of each kind on the home page and a namespace's
constexpr size_t kListPage = 100;  // on a list page

struct Kind {
  hub::RepoType type;
  const char* title;
  const char* path;  // its list page
};
constexpr Kind kKinds[] = {{hub::RepoType::kModel, "Models", "/models"},
                           {hub::RepoType::kDataset, "Datasets", "/datasets"},
                           {hub::RepoType::kSpace, "Spaces", "/spaces"},
                           {hub::RepoType::kBucket, "Buckets", "/buckets"}};

// A section of up to `limit` repositories of `kind` (of `author` when given, after `after`), with a link to
// more when there may be more: `more_url` followed by the last one's name.
struct Section {
  View view;
  size_t count = 0;
};
Result<Section> ListSection(const PageContext& ctx, const hub::Caller& caller, const Kind& kind,
                            const std::optional<std::string>& author, const std::optional<std::string>& after,
                            size_t limit, const std::string& more_url) {
  auto repos = ctx.hub.ListRepos(caller, kind.type, author, after, limit + 1);
  if (!repos) return repos.error();
  Section s;
  s.view.set("title", std::string(kind.title));
  View list{View::type::list};
  for (size_t i = 0; i < repos->size() && i < limit; ++i) {
    const hub::RepoId id = (*repos)[i].id();
    View r;
    r.set("path", UrlPath(hub::RepoPath(id)));
    r.set("label", id.str());
    r.set("private", (*repos)[i].record.is_private);
    list.push_back(r);
    ++s.count;
  }
  s.view.set("has_repos", s.count > 0);
  s.view.set("repos", list);
  if (repos->size() > limit) s.view.set("more", more_url + PercentEncode((*repos)[limit - 1].id().str()));
  return s;
}

void Respond(const std::shared_ptr<Exchange>& ex, const Signed& who, const std::string& heading,
             const View& sections, const std::string& intro = {}, const std::optional<View>& members = {}) {
  View v;
  v.set("heading", heading);
  if (!intro.empty()) v.set("intro", intro);
  v.set("sections", sections);
  if (members) {
    v.set("has_members", true);
    v.set("members", *members);
  }
  ex->Respond(PageAnswer(200, heading, Render("list.html", v), who.visitor));
}

void Home(const std::shared_ptr<const PageContext>& ctx, const std::shared_ptr<Exchange>& ex) {
  ex->Offload([ctx, ex] {
    const Signed who = ctx->Identify(ex->request());
    View sections{View::type::list};
    for (const Kind& kind : kKinds) {
      auto s = ListSection(*ctx, who.caller, kind, std::nullopt, std::nullopt, kHomeRepos,
                           std::string(kind.path) + "?after=");
      if (!s)
        return ex->Respond(ErrorPage(http::HttpStatusOf(s.error().code), s.error().message, who.visitor));
      sections.push_back(s->view);
    }
    Respond(ex, who, "cairn", sections,
            who.visitor.signed_in() ? "Repositories you may read."
                                    : "Public repositories. Sign in to see yours.");
  });
}

void KindList(const std::shared_ptr<const PageContext>& ctx, const std::shared_ptr<Exchange>& ex,
              const Kind* kind) {
  ex->Offload([ctx, ex, kind] {
    const Signed who = ctx->Identify(ex->request());
    std::optional<std::string> after;
    if (std::string a = QueryValue(ex->request(), "after"); !a.empty()) after = std::move(a);
    auto s = ListSection(*ctx, who.caller, *kind, std::nullopt, after, kListPage,
                         std::string(kind->path) + "?after=");
    if (!s) return ex->Respond(ErrorPage(http::HttpStatusOf(s.error().code), s.error().message, who.visitor));
    View sections{View::type::list};
    sections.push_back(s->view);
    Respond(ex, who, kind->title, sections);
  });
}

// Whether `who` manages organization `org`'s members: its admins and the site's operators.
bool ManagesMembers(const std::vector<people::Membership>& members, const Signed& who) {
  return who.visitor.is_operator ||
         std::any_of(members.begin(), members.end(), [&](const people::Membership& m) {
           return m.account.name == who.visitor.user && m.role == people::OrgRole::kAdmin;
         });
}

// The members of organization `ns` and their roles, for its members and the site's operators (with the forms
// that change them for those who manage them); nullopt for anybody else, or when `ns` is no organization.
std::optional<View> MembersOf(const PageContext& ctx, const Signed& who, const std::string& ns) {
  if (ctx.options.people == nullptr || !who.visitor.signed_in()) return std::nullopt;
  auto members = ctx.options.people->Members(ns);
  if (!members) return std::nullopt;
  const bool member = std::any_of(members->begin(), members->end(), [&](const people::Membership& m) {
    return m.account.name == who.visitor.user;
  });
  if (!member && !who.visitor.is_operator) return std::nullopt;
  const bool manage = ManagesMembers(*members, who);
  View rows{View::type::list};
  for (const people::Membership& m : *members) {
    View row;
    row.set("name", m.account.name);
    row.set("role", std::string(people::OrgRoleName(m.role)));
    if (manage) {
      row.set("manage", true);
      row.set("org", ns);
      row.set("csrf", who.visitor.csrf);
    }
    rows.push_back(row);
  }
  View out;
  out.set("rows", rows);
  if (manage) {
    out.set("manage", true);
    out.set("org", ns);
    out.set("csrf", who.visitor.csrf);
  }
  return out;
}

// POST /organizations/{org}/members: an admin (or an operator) sets user `user`'s role ("read", "write",
// "admin", or "none": no member). Anybody else gets the 404 page, as for an organization they cannot manage.
void ChangeMember(const PageContext& ctx, const std::shared_ptr<Exchange>& ex, const Signed& who,
                  const http::FormFields& form) {
  const std::string& org = ex->request().Param("org");
  auto members = ctx.options.people->Members(org);
  if (!members || !ManagesMembers(*members, who))
    return ex->Respond(ErrorPage(404, "No such organization.", who.visitor));
  const std::string_view role_text = http::FormField(form, "role");
  const auto role = people::ParseOrgRole(role_text);
  if (!role && role_text != "none")
    return ex->Respond(ErrorPage(400, "A role is read, write, admin or none.", who.visitor));
  const people::Actor actor{
      .actor = who.visitor.user, .token_id = who.caller.token_id, .client = ex->request().remote};
  if (auto st = ctx.options.people->SetRole(actor, org, http::FormField(form, "user"), role); !st) {
    return ex->Respond(ErrorPage(http::HttpStatusOf(st.error().code), st.error().message, who.visitor));
  }
  http::Response r = http::Response::Text(303, "", "text/plain; charset=utf-8");
  r.Header("Location", "/" + PercentEncode(org));
  ex->Respond(std::move(r));
}

void Namespace(const std::shared_ptr<const PageContext>& ctx, const std::shared_ptr<Exchange>& ex) {
  ex->Offload([ctx, ex] {
    const Signed who = ctx->Identify(ex->request());
    const std::string& ns = ex->request().Param("ns");
    if (!hub::ValidName(ns)) return ex->Respond(ErrorPage(404, "No such user or organization.", who.visitor));
    View sections{View::type::list};
    size_t seen = 0;
    for (const Kind& kind : kKinds) {
      auto s = ListSection(*ctx, who.caller, kind, ns, std::nullopt, kHomeRepos,
                           std::string(kind.path) + "?after=");
      if (!s)
        return ex->Respond(ErrorPage(http::HttpStatusOf(s.error().code), s.error().message, who.visitor));
      seen += s->count;
      sections.push_back(s->view);
    }
    std::optional<View> members = MembersOf(*ctx, who, ns);
    if (seen == 0 && who.visitor.user != ns && !members) {
      return ex->Respond(ErrorPage(404, "No such user or organization.", who.visitor));
    }
    Respond(ex, who, ns, sections, {}, members);
  });
}

}  // namespace

void RegisterListPages(const std::shared_ptr<const PageContext>& ctx) {
  auto& r = ctx->server.router();
  r.Handle(Verb::get, "/", http::RouteOptions().Name("page_home"),
           [ctx](const std::shared_ptr<Exchange>& ex) { Home(ctx, ex); });
  for (const Kind& kind : kKinds) {
    r.Handle(Verb::get, kind.path, http::RouteOptions().Name("page_list"),
             [ctx, k = &kind](const std::shared_ptr<Exchange>& ex) { KindList(ctx, ex, k); });
  }
  r.Handle(Verb::get, "/{ns}", http::RouteOptions().Name("page_namespace"),
           [ctx](const std::shared_ptr<Exchange>& ex) { Namespace(ctx, ex); });
  if (ctx->options.people == nullptr) return;
  r.Handle(Verb::post, "/organizations/{org}/members",
           http::RouteOptions().Name("page_members").MaxBody(16 << 10),
           [ctx](const std::shared_ptr<Exchange>& ex) {
             AsSignedIn(ctx, ex, true, [ctx, ex](const Signed& who, const http::FormFields& form) {
               ChangeMember(*ctx, ex, who, form);
             });
           });
}

}  // namespace cairn::web

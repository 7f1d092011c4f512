// An organization's members through the API (hub_context.h): who they are
// (GET /api/organizations/{ns}/members, huggingface_hub's list_organization_members, for its members; 404 to
// anyone else, as an organization they cannot see), and for its admins, each member's role
// (PUT /api/organizations/{ns}/members/{user} {"role"}) and their removal (DELETE ...). A change is seen by
// this node at once and by the others within their refresh (people/directory.h). The last admin stays: the
// index refuses (409) a change that would leave an organization without the admin it had, through the API or
// `cairn org` alike.
#include "api/hub_context.h"
#include "common/printable.h"

namespace cairn::api::hub_routes {
namespace {

// The caller, a person, and how far they reach into the organization; answers the request itself (and
// returns nullopt) when the caller is no member of it.
struct Member {
  hub::Caller caller;
  Access access = Access::kNone;
};
std::optional<Member> MemberOf(const HubContext& c, const std::shared_ptr<Exchange>& ex,
                               const std::string& org) {
  auto caller = PeopleCaller(c, ex);
  if (!caller) return std::nullopt;
  const Access access = hub::AccessToNamespace(*caller, org);
  if (!caller->person() || access == Access::kNone) {
    ex->Respond(HubErrorResponse(404, "", "no organization " + Printable(org, 96) + " of yours"));
    return std::nullopt;
  }
  return Member{.caller = std::move(*caller), .access = access};
}

void ListMembers(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  const std::string org = ex->request().Param("ns");
  if (!MemberOf(c, ex, org)) return;
  ex->Offload([&c, ex, org] {
    auto members = c.options.people_service->Members(org);
    if (!members) return ex->Respond(HubErrorResponse(members.error()));
    json::array out;
    for (const auto& m : *members) {
      out.push_back(
          json::object{{"type", "user"},
                       {"user", m.account.name},
                       {"fullname", m.account.full_name.empty() ? m.account.name : m.account.full_name},
                       {"avatarUrl", ""},
                       {"role", people::OrgRoleName(m.role)}});
    }
    ex->Respond(JsonAnswer(out));
  });
}

// Sets `user`'s role in the organization (nullopt: removes them), for its admins.
void ChangeMember(const HubContext& c, const std::shared_ptr<Exchange>& ex,
                  std::optional<people::OrgRole> role) {
  const std::string org = ex->request().Param("ns");
  const std::string user = ex->request().Param("user");
  auto member = MemberOf(c, ex, org);
  if (!member) return;
  if (member->access != Access::kAdmin) {
    return ex->Respond(HubErrorResponse(403, "", "changing " + org + "'s members is for its admins"));
  }
  ex->Offload([&c, ex, org, user, role, by = member->caller.Actor()] {
    // The last admin stays (409): the index decides it in the change's transaction.
    if (auto st = c.options.people_service->SetRole(by, org, user, role); !st) {
      return ex->Respond(HubErrorResponse(st.error()));
    }
    json::object out{{"user", user}};
    out["role"] = role ? json::value(people::OrgRoleName(*role)) : json::value(nullptr);
    ex->Respond(JsonAnswer(out));
  });
}

void SetMemberRole(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  json::value storage;
  boost::system::error_code ec;
  storage = json::parse(ex->request().body, ec);
  const json::object* o = ec ? nullptr : storage.if_object();
  const json::value* r = o == nullptr ? nullptr : o->if_contains("role");
  const auto role = r != nullptr && r->is_string() ? people::ParseOrgRole(r->get_string()) : std::nullopt;
  if (!role)
    return ex->Respond(HubErrorResponse(400, "", R"(the body is {"role": "read", "write" or "admin"})"));
  ChangeMember(c, ex, role);
}

void RemoveMember(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  ChangeMember(c, ex, std::nullopt);
}

}  // namespace

void RegisterOrgRoutes(const std::shared_ptr<const HubContext>& ctx) {
  auto& r = ctx->server.router();
  r.Handle(Verb::get, "/api/organizations/{ns}/members", RouteOptions().Name("hub_org_members"),
           Bind(ctx, &ListMembers));
  r.Handle(Verb::put, "/api/organizations/{ns}/members/{user}",
           RouteOptions().Name("hub_org_member_set").MaxBody(4096), Bind(ctx, &SetMemberRole));
  r.Handle(Verb::delete_, "/api/organizations/{ns}/members/{user}",
           RouteOptions().Name("hub_org_member_remove"), Bind(ctx, &RemoveMember));
}

}  // namespace cairn::api::hub_routes

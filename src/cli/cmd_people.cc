// `cairn user`, `cairn org` and `cairn token create|ls|revoke`: people, as the operator manages them on the
// index (people/people_service.h). A token's text is printed once, on stdout, and kept nowhere.
#include <algorithm>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "cli/backend.h"
#include "cli/commands.h"
#include "common/printable.h"
#include "config/config.h"
#include "people/directory.h"
#include "people/people_service.h"
#include "people/sign_in.h"

namespace cairn::cli {
namespace {

using people::PeopleService;

// Runs `fn(index)` with the command's index; prints errors as `cairn <what>: ...`.
template <typename F>
int WithIndex(const std::string& what, const PeopleOptions& opts, F fn) {
  const std::string who = "cairn " + what + ": ";
  auto opened = OpenCommandIndex(who, opts.config_file, opts.data_dir, opts.index);
  if (opened.status != 0) return opened.status;
  if (auto st = fn(*opened.index); !st) {
    std::cerr << who << Printable(st.error().message) << "\n";
    return st.error().code == ErrorCode::kMalformed ? 2 : 1;
  }
  return 0;
}

// Runs `fn(service)` with the people of the command's index.
template <typename F>
int WithPeople(const std::string& what, const PeopleOptions& opts, F fn) {
  return WithIndex(what, opts, [&](index::Index& ix) -> Status {
    PeopleService service(ix, Clock::System());
    return fn(service);
  });
}

// Runs `fn(service)` with the sign-in service of the command's index (passwords, linked subjects).
template <typename F>
int WithSignIn(const std::string& what, const PeopleOptions& opts, F fn) {
  return WithIndex(what, opts, [&](index::Index& ix) -> Status {
    people::Directory directory(ix, Clock::System());
    people::SignInService sign_in(ix, directory, Clock::System());
    return fn(sign_in);
  });
}

boost::json::object AccountJson(const people::AccountRecord& a) {
  return {{"name", a.name},          {"type", a.kind == people::AccountKind::kUser ? "user" : "org"},
          {"fullname", a.full_name}, {"operator", a.is_operator},
          {"disabled", a.disabled},  {"created_at", a.created_at}};
}

void PrintAccount(const people::AccountRecord& a, bool json) {
  if (json) {
    std::cout << boost::json::serialize(AccountJson(a)) << "\n";
    return;
  }
  std::cout << a.name << (a.full_name.empty() ? "" : "  (" + Printable(a.full_name) + ")")
            << (a.is_operator ? "  operator" : "") << (a.disabled ? "  disabled" : "") << "\n";
}

void PrintMembers(const std::vector<people::Membership>& members, bool json) {
  for (const auto& m : members) {
    if (json) {
      boost::json::object o = AccountJson(m.account);
      o["role"] = people::OrgRoleName(m.role);
      std::cout << boost::json::serialize(o) << "\n";
    } else {
      std::cout << "  " << m.account.name << "  " << people::OrgRoleName(m.role) << "\n";
    }
  }
}

void PrintToken(const people::TokenRecord& t, const std::string& owner, bool json) {
  const char* state = t.revoked_at != 0                               ? "revoked"
                      : t.expires_at <= Clock::System().UnixSeconds() ? "expired"
                                                                      : "live";
  if (json) {
    boost::json::object o{{"id", t.id},
                          {"owner", owner},
                          {"name", t.name},
                          {"role", people::TokenRoleName(t.role)},
                          {"state", state},
                          {"created_at", t.created_at},
                          {"expires_at", t.expires_at},
                          {"last_used_at", t.last_used_at},
                          {"revoked_at", t.revoked_at}};
    if (!t.grants.empty()) o["grants"] = t.grants;
    std::cout << boost::json::serialize(o) << "\n";
    return;
  }
  std::cout << t.id << "  " << owner << "  " << Printable(t.name) << "  " << people::TokenRoleName(t.role)
            << "  " << state << "  expires_at=" << t.expires_at << "  last_used_at=" << t.last_used_at
            << "\n";
}

Status BadRole(const std::string& role, const char* allowed) {
  return Malformed("--role " + role + ": one of " + allowed);
}

}  // namespace

int RunUserCreate(const PeopleOptions& opts) {
  return WithPeople("user create", opts, [&](PeopleService& people) -> Status {
    auto made = people.CreateUser(CommandActor(), opts.name, opts.full_name, opts.is_operator);
    if (!made) return made.error();
    PrintAccount(*made, opts.json);
    return Ok{};
  });
}

int RunUserList(const PeopleOptions& opts) {
  return WithPeople("user ls", opts, [&](PeopleService& people) -> Status {
    auto all = people.List(people::AccountKind::kUser);
    if (!all) return all.error();
    for (const auto& a : *all) PrintAccount(a, opts.json);
    return Ok{};
  });
}

int RunUserShow(const PeopleOptions& opts) {
  return WithPeople("user show", opts, [&](PeopleService& people) -> Status {
    auto user = people.Find(opts.name, people::AccountKind::kUser);
    if (!user) return user.error();
    PrintAccount(*user, opts.json);
    auto orgs = people.Organizations(opts.name);
    if (!orgs) return orgs.error();
    PrintMembers(*orgs, opts.json);
    return Ok{};
  });
}

int RunUserDisable(const PeopleOptions& opts) {
  return WithPeople("user disable", opts, [&](PeopleService& people) -> Status {
    if (auto st = people.SetDisabled(CommandActor(), opts.name, true); !st) return st;
    std::cout << "disabled " << opts.name << ": every token of theirs is refused\n";
    return Ok{};
  });
}

int RunUserEnable(const PeopleOptions& opts) {
  return WithPeople("user enable", opts, [&](PeopleService& people) -> Status {
    if (auto st = people.SetDisabled(CommandActor(), opts.name, false); !st) return st;
    std::cout << "enabled " << opts.name << "\n";
    return Ok{};
  });
}

int RunUserOperator(const PeopleOptions& opts) {
  return WithPeople("user operator", opts, [&](PeopleService& people) -> Status {
    if (auto st = people.SetOperator(CommandActor(), opts.name, !opts.off); !st) return st;
    std::cout << opts.name << (opts.off ? " is no operator now\n" : " is an operator now\n");
    return Ok{};
  });
}

int RunUserPassword(const PeopleOptions& opts) {
  return WithSignIn("user password", opts, [&](people::SignInService& sign_in) -> Status {
    Status st = Ok{};
    if (opts.off) {
      st = sign_in.RemovePassword(CommandActor(), opts.name);
    } else {
      std::string password;
      std::getline(std::cin, password);
      if (!password.empty() && password.back() == '\r') password.pop_back();
      st = sign_in.SetPassword(CommandActor(), opts.name, password);
    }
    if (!st) return st;
    std::cout << (opts.off ? "removed the password of " : "set the password of ") << opts.name
              << ": their sessions ended\n";
    return Ok{};
  });
}

int RunUserLink(const PeopleOptions& opts) {
  return WithSignIn("user link", opts, [&](people::SignInService& sign_in) -> Status {
    if (opts.off) {
      auto gone = sign_in.Unlink(CommandActor(), opts.issuer, opts.subject);
      if (!gone) return gone.error();
      if (!*gone) return NotFound("no user is linked to that subject");
      std::cout << "unlinked " << Printable(opts.subject) << "\n";
      return Ok{};
    }
    if (opts.subject.empty()) {  // list
      auto linked = sign_in.Identities(opts.name);
      if (!linked) return linked.error();
      for (const auto& l : *linked) std::cout << Printable(l.issuer) << "  " << Printable(l.subject) << "\n";
      return Ok{};
    }
    if (auto st = sign_in.Link(CommandActor(), opts.name, opts.issuer, opts.subject); !st) return st;
    std::cout << "linked " << Printable(opts.subject) << " to " << opts.name
              << ": signing in with the provider signs them in\n";
    return Ok{};
  });
}

int RunOrgCreate(const PeopleOptions& opts) {
  return WithPeople("org create", opts, [&](PeopleService& people) -> Status {
    auto made = people.CreateOrg(CommandActor(), opts.name, opts.full_name);
    if (!made) return made.error();
    PrintAccount(*made, opts.json);
    return Ok{};
  });
}

int RunOrgList(const PeopleOptions& opts) {
  return WithPeople("org ls", opts, [&](PeopleService& people) -> Status {
    auto all = people.List(people::AccountKind::kOrg);
    if (!all) return all.error();
    for (const auto& a : *all) PrintAccount(a, opts.json);
    return Ok{};
  });
}

int RunOrgShow(const PeopleOptions& opts) {
  return WithPeople("org show", opts, [&](PeopleService& people) -> Status {
    auto org = people.Find(opts.name, people::AccountKind::kOrg);
    if (!org) return org.error();
    PrintAccount(*org, opts.json);
    auto members = people.Members(opts.name);
    if (!members) return members.error();
    PrintMembers(*members, opts.json);
    return Ok{};
  });
}

int RunOrgSetRole(const PeopleOptions& opts) {
  return WithPeople("org role", opts, [&](PeopleService& people) -> Status {
    const auto role = people::ParseOrgRole(opts.role);
    if (!role) return BadRole(opts.role, "read, write, admin");
    if (auto st = people.SetRole(CommandActor(), opts.name, opts.user, *role); !st) return st;
    std::cout << opts.user << " is a member of " << opts.name << " (" << opts.role << ")\n";
    return Ok{};
  });
}

int RunOrgRemove(const PeopleOptions& opts) {
  return WithPeople("org remove", opts, [&](PeopleService& people) -> Status {
    if (auto st = people.SetRole(CommandActor(), opts.name, opts.user, std::nullopt); !st) return st;
    std::cout << opts.user << " is no member of " << opts.name << "\n";
    return Ok{};
  });
}

int RunTokenCreate(const PeopleOptions& opts) {
  return WithPeople("token create", opts, [&](PeopleService& people) -> Status {
    const auto role = people::ParseTokenRole(opts.role);
    if (!role) return BadRole(opts.role, "read, write, fineGrained");
    auto life = config::ParseDuration(opts.ttl);
    if (!life) return Malformed("--ttl: " + life.error().message);
    std::string grant_text;
    for (const auto& g : opts.grants) grant_text += (grant_text.empty() ? "" : "\n") + g;
    auto grants = people::ParseGrants(grant_text);
    if (!grants) return Malformed("--grant: " + grants.error().message);
    auto made = people.CreateToken(CommandActor(), opts.user, opts.token_name, *role, *grants, *life);
    if (!made) return made.error();
    std::cerr << "token " << made->record.id << " for " << opts.user << " (" << people::TokenRoleName(*role)
              << "), expires_at=" << made->record.expires_at << "; shown once, kept nowhere\n";
    std::cout << made->text << "\n";
    return Ok{};
  });
}

int RunTokenList(const PeopleOptions& opts) {
  return WithPeople("token ls", opts, [&](PeopleService& people) -> Status {
    std::optional<std::string_view> owner;
    if (!opts.user.empty()) owner = opts.user;
    auto tokens = people.Tokens(owner);
    if (!tokens) return tokens.error();
    auto users = people.List(people::AccountKind::kUser);
    if (!users) return users.error();
    for (const auto& t : *tokens) {
      std::string name = "#" + std::to_string(t.owner);
      for (const auto& u : *users) {
        if (u.id == t.owner) name = u.name;
      }
      PrintToken(t, name, opts.json);
    }
    return Ok{};
  });
}

int RunTokenRevoke(const PeopleOptions& opts) {
  return WithPeople("token revoke", opts, [&](PeopleService& people) -> Status {
    auto revoked = people.Revoke(CommandActor(), opts.id);
    if (!revoked) return revoked.error();
    std::cout << (*revoked ? "revoked " : "already revoked: ") << opts.id << "\n";
    return Ok{};
  });
}

namespace {

void PrintPublisher(const people::PublisherRecord& p, const std::string& ns, bool json) {
  const char* state = p.revoked_at != 0 ? "revoked" : "live";
  if (json) {
    boost::json::object o{{"id", p.id},
                          {"namespace", ns},
                          {"repo", p.repo},
                          {"issuer", p.issuer},
                          {"audience", p.audience},
                          {"claims", p.claims},
                          {"role", people::TokenRoleName(p.role)},
                          {"state", state},
                          {"created_at", p.created_at},
                          {"revoked_at", p.revoked_at}};
    std::cout << boost::json::serialize(o) << "\n";
    return;
  }
  std::string claims = p.claims;
  std::replace(claims.begin(), claims.end(), '\n', ' ');
  std::cout << p.id << "  " << (p.repo.empty() ? ns + "/*" : p.repo) << "  " << people::TokenRoleName(p.role)
            << "  " << state << "  issuer=" << Printable(p.issuer) << "  audience=" << Printable(p.audience)
            << "  claims: " << Printable(claims) << "\n";
}

}  // namespace

int RunPublisherCreate(const PeopleOptions& opts) {
  return WithPeople("publisher create", opts, [&](PeopleService& people) -> Status {
    people::PublisherSpec spec{.ns = opts.name,
                               .repo = opts.repo,
                               .issuer = opts.issuer,
                               .audience = opts.audience,
                               .claims = {},
                               .role = people::TokenRole::kWrite};
    if (opts.role == "read") {
      spec.role = people::TokenRole::kRead;
    } else if (!opts.role.empty() && opts.role != "write") {
      return BadRole(opts.role, "read, write");
    }
    for (const std::string& c : opts.claims) {
      auto claim = people::ParseClaim(c);
      if (!claim) return claim.error();
      spec.claims.push_back(std::move(*claim));
    }
    auto made = people.CreatePublisher(CommandActor(), spec);
    if (!made) return made.error();
    PrintPublisher(*made, opts.name, false);
    return Ok{};
  });
}

int RunPublisherList(const PeopleOptions& opts) {
  return WithPeople("publisher ls", opts, [&](PeopleService& people) -> Status {
    std::optional<std::string_view> ns;
    if (!opts.name.empty()) ns = opts.name;
    auto policies = people.Publishers(ns);
    if (!policies) return policies.error();
    auto accounts = people.List(std::nullopt);
    if (!accounts) return accounts.error();
    for (const auto& p : *policies) {
      std::string name = "#" + std::to_string(p.owner);
      for (const auto& a : *accounts) {
        if (a.id == p.owner) name = a.name;
      }
      PrintPublisher(p, name, opts.json);
    }
    return Ok{};
  });
}

int RunPublisherRevoke(const PeopleOptions& opts) {
  return WithPeople("publisher revoke", opts, [&](PeopleService& people) -> Status {
    auto revoked = people.RevokePublisher(CommandActor(), opts.id);
    if (!revoked) return revoked.error();
    std::cout << (*revoked ? "revoked " : "already revoked: ") << opts.id << "\n";
    return Ok{};
  });
}

}  // namespace cairn::cli

#include "publish/exchange.h"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "people/names.h"
#include "people/publishers.h"

namespace cairn::publish {

namespace {

// A resource's namespace: "acme" for "acme", "acme/model", "datasets/acme/data" and "spaces/acme/app";
// nullopt for any other form.
std::optional<std::string_view> NamespaceOfResource(std::string_view resource) {
  for (std::string_view kind : {"datasets/", "spaces/"}) {
    if (resource.starts_with(kind)) {
      resource.remove_prefix(kind.size());
      const size_t slash = resource.find('/');
      if (slash == std::string_view::npos) return std::nullopt;
      return resource.substr(0, slash);
    }
  }
  const size_t slash = resource.find('/');
  if (slash == std::string_view::npos) {
    if (!people::ValidName(resource)) return std::nullopt;
    return resource;
  }
  return resource.substr(0, slash);
}

bool Covers(const people::Directory::Publisher& p, std::string_view resource) {
  if (p.record.repo.empty()) return true;  // every repository of the namespace, and the namespace itself
  return p.record.repo == resource;
}

bool ClaimsMatch(const index::PublisherRecord& policy, const IdToken& token) {
  if (std::find(token.aud.begin(), token.aud.end(), policy.audience) == token.aud.end()) return false;
  auto claims = people::ParseClaims(policy.claims);
  if (!claims.ok() || claims->empty()) return false;  // a policy without claims trusts no one
  return std::all_of(claims->begin(), claims->end(), [&](const people::Claim& c) {
    const auto it = token.claims.find(c.name);
    return it != token.claims.end() && it->second == c.value;
  });
}

}  // namespace

std::optional<std::string_view> PolicyOfHolder(std::string_view holder) {
  if (!holder.starts_with(kHolderPrefix) || holder.size() == kHolderPrefix.size()) return std::nullopt;
  return holder.substr(kHolderPrefix.size());
}

Result<ExchangeGrant> Exchanger::Exchange(std::string_view subject_token, std::string_view resource,
                                          bool* verified) {
  if (verified != nullptr) *verified = false;
  const auto ns = NamespaceOfResource(resource);
  const bool whole_namespace = ns && *ns == resource;
  if (!ns || !people::ValidName(*ns) || (!whole_namespace && !people::RepoInNamespace(resource, *ns))) {
    return InvalidTarget(
        "resource is a repository (NS/NAME, datasets/NS/NAME, spaces/NS/NAME) or a namespace");
  }
  auto token = ParseIdToken(subject_token);
  if (!token.ok()) return InvalidRequest(token.error().message);
  const auto find = [&] {
    std::vector<people::Directory::Publisher> out;
    for (auto& p : directory_.PublishersOf(*ns)) {
      if (p.record.issuer == token->iss && Covers(p, resource)) out.push_back(std::move(p));
    }
    return out;
  };
  auto candidates = find();
  if (candidates.empty()) {
    // Perhaps made on another node since this one's last refresh (rate-limited, like an unknown token).
    directory_.RefreshForUnknown();
    candidates = find();
  }
  const std::string refused = "no trust policy admits this id token for " + std::string(resource);
  if (candidates.empty()) return InvalidTarget(refused);
  if (auto st = keys_.Verify(*token); !st.ok()) {
    if (st.error().code == ErrorCode::kUnavailable) return st.error();
    return InvalidRequest(st.error().message);
  }
  if (verified != nullptr) *verified = true;
  const int64_t now = clock_.UnixSeconds();
  if (now >= token->exp) return InvalidRequest("invalid id token: expired");
  if (token->nbf != 0 && now + kLeeway < token->nbf) return InvalidRequest("invalid id token: not yet valid");
  if (token->iat != 0 && now + kLeeway < token->iat)
    return InvalidRequest("invalid id token: issued in the future");
  const people::Directory::Publisher* best = nullptr;
  for (const auto& p : candidates) {
    if (!ClaimsMatch(p.record, *token)) continue;
    if (best == nullptr || p.record.role > best->record.role) best = &p;
  }
  if (best == nullptr) return InvalidTarget(refused);
  Access access = best->record.role == index::TokenRole::kWrite ? Access::kWrite : Access::kRead;
  if (whole_namespace) access = Access::kRead;  // a namespace's token reads (as the Hub's does)
  return ExchangeGrant{.resource = std::string(resource),
                       .ns = best->ns,
                       .access = access,
                       .expires = std::min(token->exp, now + kMaxLife),
                       .policy_id = best->record.id,
                       .subject = token->iss + "#" + token->sub};
}

}  // namespace cairn::publish

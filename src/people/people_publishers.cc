// PeopleService's trust policies (people_service.h, publishers.h).
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "people/people_service.h"
#include "people/publishers.h"

namespace cairn::people {

Result<PublisherRecord> PeopleService::CreatePublisher(const Actor& by, const PublisherSpec& spec) {
  if (auto st = CheckPublisherSpec(spec); !st.ok()) return st.error();
  auto owner = Find(spec.ns, std::nullopt);
  if (!owner.ok()) return owner.error();
  auto id = NewPublisherId();
  if (!id.ok()) return id.error();
  PublisherRecord record{.id = *id,
                         .owner = owner->id,
                         .repo = spec.repo,
                         .issuer = spec.issuer,
                         .audience = spec.audience,
                         .claims = FormatClaims(spec.claims),
                         .role = spec.role,
                         .created_at = clock_.UnixSeconds()};
  const auto event = by.Event(record.created_at, "publisher.create", owner->name, "trust policy " + record.id,
                              (spec.repo.empty() ? owner->name + "/*" : spec.repo) + " " +
                                  std::string(TokenRoleName(spec.role)) + " from " + spec.issuer);
  if (auto st = index_.CreatePublisher(record, &event); !st.ok()) return st.error();
  if (auto st = Changed(); !st.ok()) return st.error();
  return record;
}

Result<std::vector<PublisherRecord>> PeopleService::Publishers(std::optional<std::string_view> ns) {
  std::optional<int64_t> owner;
  if (ns) {
    auto found = Find(*ns, std::nullopt);
    if (!found.ok()) return found.error();
    owner = found->id;
  }
  return index_.ListPublishers(owner);
}

Result<PublisherRecord> PeopleService::FindPublisher(std::string_view ns, std::string_view id) {
  auto owner = Find(ns, std::nullopt);
  if (!owner.ok()) return owner.error();
  auto policy = index_.FindPublisher(id);
  if (!policy.ok()) return policy.error();
  if (policy->owner != owner->id)
    return NotFound("no trust policy " + std::string(id) + " of " + owner->name);
  return policy;
}

Result<bool> PeopleService::RevokePublisher(const Actor& by, std::string_view id) {
  auto policy = index_.FindPublisher(id);
  if (!policy.ok()) return policy.error();
  // The namespace the event is filed under: the owner's name.
  const int64_t owner_id = policy->owner;
  auto owner = index_.GetAccounts(std::span<const int64_t>(&owner_id, 1));
  if (!owner.ok()) return owner.error();
  const std::string ns = owner->empty() ? "" : owner->front().name;
  const auto event =
      by.Event(clock_.UnixSeconds(), "publisher.revoke", ns, "trust policy " + std::string(id));
  auto revoked = index_.RevokePublisher(id, clock_.UnixSeconds(), &event);
  if (!revoked.ok()) return revoked.error();
  if (auto st = Changed(); !st.ok()) return st.error();
  return revoked;
}

}  // namespace cairn::people

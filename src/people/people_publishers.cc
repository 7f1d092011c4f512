// PeopleService's trust policies (people_service.h, publishers.h).
#include <optional>
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

Result<bool> PeopleService::RevokePublisher(const Actor& by, std::string_view id) {
  auto all = index_.ListPublishers(std::nullopt);
  if (!all.ok()) return all.error();
  std::string ns;
  for (const PublisherRecord& p : *all) {
    if (p.id != id) continue;
    // The namespace the event is filed under: the owner's name.
    auto accounts = List(std::nullopt);
    if (!accounts.ok()) return accounts.error();
    for (const AccountRecord& a : *accounts) {
      if (a.id == p.owner) ns = a.name;
    }
  }
  const auto event =
      by.Event(clock_.UnixSeconds(), "publisher.revoke", ns, "trust policy " + std::string(id));
  return index_.RevokePublisher(id, clock_.UnixSeconds(), &event);
}

}  // namespace cairn::people

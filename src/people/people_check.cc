#include "people/people_check.h"

#include <map>
#include <optional>
#include <string_view>
#include <utility>

#include "common/printable.h"
#include "people/names.h"
#include "people/people_service.h"
#include "people/publishers.h"

namespace cairn::people {

namespace {

using index::AccountKind;
using index::AccountRecord;

constexpr size_t kShown = 200;  // bytes of a stored value a finding quotes

// The check's state: every account by id (read first), and the findings so far.
class Checker {
 public:
  Checker(index::PeopleIndex& index, PeopleCheckReport& report) : index_(index), report_(report) {}

  Status Run() {
    auto changes = index_.PeopleChangedSince(0);
    if (!changes.ok()) return changes.error();
    report_.generation = changes->generation;
    if (auto st = Accounts(); !st.ok()) return st;
    if (auto st = Members(); !st.ok()) return st;
    if (auto st = Tokens(); !st.ok()) return st;
    return Publishers();
  }

 private:
  void Find(std::string what, const std::string& id, const std::string& detail, bool damage = true) {
    report_.findings.push_back(
        {std::move(what), Printable(id, kShown), Printable(detail, kShown * 2), damage});
  }
  // A row stamped past the generation: no refresh reads it until the generation passes it.
  void CheckStamp(const std::string& what, const std::string& id, int64_t changed) {
    if (changed > report_.generation) {
      Find(what, id,
           "changed at people generation " + std::to_string(changed) + ", past the index's " +
               std::to_string(report_.generation) + ": no node reads it");
    }
  }
  const AccountRecord* Account(int64_t id) const {
    auto it = accounts_.find(id);
    return it == accounts_.end() ? nullptr : &it->second;
  }
  std::string NameOf(int64_t id) const {
    const AccountRecord* a = Account(id);
    return a != nullptr ? a->name : "#" + std::to_string(id);
  }

  Status Accounts() {
    std::optional<std::string> after;
    for (;;) {
      auto page = index_.ListAccounts(std::nullopt, after, index::PeopleIndex::kMaxListed);
      if (!page.ok()) return page.error();
      for (auto& a : *page) {
        if (!ValidName(a.name)) Find("account", a.name, "a name outside the Hub's rules");
        if (a.kind == AccountKind::kOrg && a.is_operator) {
          Find("account", a.name, "an organization marked operator (only users run the site)");
        }
        CheckStamp("account", a.name, a.changed);
        accounts_.emplace(a.id, a);
      }
      report_.accounts += page->size();
      if (page->size() < index::PeopleIndex::kMaxListed) return Ok{};
      after = page->back().name;
    }
  }

  Status Members() {
    for (const auto& [id, org] : accounts_) {
      if (org.kind != AccountKind::kOrg) continue;
      auto members = index_.ListMembers(AccountKind::kOrg, id);
      if (!members.ok()) return members.error();
      bool admin = false;
      for (const auto& m : *members) {
        ++report_.members;
        const AccountRecord* user = Account(m.user);
        const std::string name = org.name + "/" + NameOf(m.user);
        if (user == nullptr || user->kind != AccountKind::kUser)
          Find("member", name, "the member is no user");
        CheckStamp("member", name, m.changed);
        admin = admin || (m.role == index::OrgRole::kAdmin && user != nullptr && !user->disabled);
      }
      if (!admin) {
        Find("account", org.name,
             "an organization without an enabled admin: only an operator changes its members", false);
      }
    }
    return Ok{};
  }

  Status Tokens() {
    std::optional<std::string> after;
    for (;;) {
      auto page = index_.ListTokens(std::nullopt, after, index::PeopleIndex::kMaxListed);
      if (!page.ok()) return page.error();
      for (const auto& t : *page) CheckToken(t);
      report_.tokens += page->size();
      if (page->size() < index::PeopleIndex::kMaxListed) return Ok{};
      after = page->back().id;
    }
  }
  void CheckToken(const index::TokenRecord& t) {
    const AccountRecord* owner = Account(t.owner);
    if (owner == nullptr || owner->kind != AccountKind::kUser) Find("token", t.id, "its owner is no user");
    if (t.role == index::TokenRole::kFineGrained) {
      if (auto grants = ParseGrants(t.grants); !grants.ok()) {
        Find("token", t.id, "its grants do not parse (" + grants.error().message + "): refused on every use");
      }
    }
    CheckStamp("token", t.id, t.changed);
  }

  Status Publishers() {
    auto policies = index_.ListPublishers(std::nullopt);
    if (!policies.ok()) return policies.error();
    for (const auto& p : *policies) CheckPublisher(p);
    report_.publishers = policies->size();
    return Ok{};
  }
  void CheckPublisher(const index::PublisherRecord& p) {
    const AccountRecord* owner = Account(p.owner);
    if (owner == nullptr) {
      Find("publisher", p.id, "its owner is unknown");
    } else if (!p.repo.empty() && !RepoInNamespace(p.repo, owner->name)) {
      Find("publisher", p.id,
           "its repository " + p.repo + " is outside its owner's namespace " + owner->name);
    }
    if (!ValidIssuer(p.issuer))
      Find("publisher", p.id, "its issuer is not https (or loopback http): " + p.issuer);
    auto claims = ParseClaims(p.claims);
    if (!claims.ok() || claims->empty()) {
      Find("publisher", p.id, "it requires no claims it can state: it would trust every token of its issuer");
    }
    CheckStamp("publisher", p.id, p.changed);
  }

  index::PeopleIndex& index_;
  PeopleCheckReport& report_;
  std::map<int64_t, AccountRecord> accounts_;
};

}  // namespace

Result<PeopleCheckReport> CheckPeople(index::PeopleIndex& index) {
  PeopleCheckReport report;
  Checker checker(index, report);
  if (auto st = checker.Run(); !st.ok()) return st.error();
  return report;
}

}  // namespace cairn::people

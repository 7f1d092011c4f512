#include "cas/grant.h"

#include <string_view>

#include "xet/hashing.h"

namespace cairn::cas {

namespace {
constexpr std::string_view kGrantMagic = "cairn-grant 1\nshard ";
constexpr std::string_view kRevocationMagic = "cairn-revocation 1\nfile ";
constexpr std::string_view kScopeTag = "\nscope ";

// A grant and a revocation are one shape: a magic line naming what they are about, then the scope.
std::vector<uint8_t> EncodeScopeRecord(std::string_view magic, const xet::Hash& about,
                                       std::string_view scope) {
  std::string text;
  text.append(magic).append(about.hex()).append(kScopeTag);
  text.append(std::to_string(scope.size())).append("\n").append(scope);
  return {text.begin(), text.end()};
}

struct ScopeRecord {
  xet::Hash about;
  std::string scope;
};

Result<ScopeRecord> ParseScopeRecord(std::span<const uint8_t> bytes, std::string_view magic,
                                     const std::string& what) {
  if (bytes.size() > kMaxScopeRecordSize)
    return Malformed(what + " larger than " + std::to_string(kMaxScopeRecordSize));
  std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (!text.starts_with(magic) || text.size() < magic.size() + 64 + kScopeTag.size())
    return Malformed("not a " + what);
  auto about = xet::Hash::FromHex(text.substr(magic.size(), 64));
  text.remove_prefix(magic.size() + 64);
  if (!about || !text.starts_with(kScopeTag)) return Malformed(what + ": bad hash");
  text.remove_prefix(kScopeTag.size());
  // The scope's length, in decimal, then a newline and exactly that many bytes.
  size_t length = 0, digits = 0;
  while (digits < text.size() && digits < 5 && text[digits] >= '0' && text[digits] <= '9')
    length = length * 10 + static_cast<size_t>(text[digits++] - '0');
  if (digits == 0 || (digits > 1 && text[0] == '0') || digits >= text.size() || text[digits] != '\n')
    return Malformed(what + ": bad scope length");
  text.remove_prefix(digits + 1);
  if (length == 0 || text.size() != length) return Malformed(what + ": the scope is not as long as stated");
  return ScopeRecord{*about, std::string(text)};
}

// Stores a record under the chunk hash of its bytes: always a put, also when the same record is there
// (RecordGrant says why).
Status PutRecord(store::BlobStore& store, store::BlobKind kind, const std::vector<uint8_t>& bytes) {
  auto put = store.Put(kind, xet::ChunkHashOf(bytes), bytes);
  if (!put.ok()) return put.error();
  return Ok{};
}

}  // namespace

std::vector<uint8_t> EncodeGrant(const Grant& grant) {
  return EncodeScopeRecord(kGrantMagic, grant.shard, grant.scope);
}

Result<Grant> ParseGrant(std::span<const uint8_t> bytes) {
  auto r = ParseScopeRecord(bytes, kGrantMagic, "grant");
  if (!r) return r.error();
  return Grant{r->about, std::move(r->scope)};
}

xet::Hash GrantName(const Grant& grant) {
  return xet::ChunkHashOf(EncodeGrant(grant));
}

Status RecordGrant(store::BlobStore& store, const Grant& grant) {
  // Always a put, also when the same grant is there already (every retry, every re-registration): a process
  // that died after naming it may not have synced its directory, and only the put's sync makes it durable
  // before the index commits (PowerLoss.ACrashThenARetryThenAPowerCutLosesNothing in repair_test lost the
  // grant when this skipped the put). An intact grant costs what the shard's put before it costs: a small
  // write and two syncs. CasService skips the call for grants it saw made durable itself.
  return PutRecord(store, store::BlobKind::kGrant, EncodeGrant(grant));
}

std::vector<uint8_t> EncodeRevocation(const Revocation& revocation) {
  return EncodeScopeRecord(kRevocationMagic, revocation.file, revocation.scope);
}

Result<Revocation> ParseRevocation(std::span<const uint8_t> bytes) {
  auto r = ParseScopeRecord(bytes, kRevocationMagic, "revocation");
  if (!r) return r.error();
  return Revocation{r->about, std::move(r->scope)};
}

xet::Hash RevocationName(const Revocation& revocation) {
  return xet::ChunkHashOf(EncodeRevocation(revocation));
}

Status RecordRevocation(store::BlobStore& store, const Revocation& revocation) {
  return PutRecord(store, store::BlobKind::kRevocation, EncodeRevocation(revocation));
}

Status ForgetClearedRevocations(index::CasIndex& index, store::BlobStore& store,
                                std::span<const index::RevocationKey> cleared) {
  if (cleared.empty()) return Ok{};
  std::vector<xet::Hash> names;
  for (const auto& k : cleared) names.push_back(RevocationName({k.file, k.scope}));
  if (auto st = store.DeleteMany(store::BlobKind::kRevocation, names); !st.ok()) return st;
  return index.ForgetRevocations(cleared);
}

Result<size_t> FinishClearedRevocations(index::CasIndex& index, store::BlobStore& store) {
  constexpr size_t kPage = 1000;
  size_t finished = 0;
  std::optional<index::RevocationKey> after;
  for (;;) {
    auto page = index.ListClearedRevocations(after, kPage);
    if (!page.ok()) return page.error();
    if (auto st = ForgetClearedRevocations(index, store, *page); !st.ok()) return st.error();
    finished += page->size();
    if (page->size() < kPage) return finished;
    after = page->back();
  }
}

}  // namespace cairn::cas

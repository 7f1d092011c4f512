#include "cas/grant.h"

#include <string_view>

#include "xet/hashing.h"

namespace cairn::cas {

namespace {
constexpr std::string_view kMagic = "cairn-grant 1\nshard ";
constexpr std::string_view kScopeTag = "\nscope ";
}  // namespace

std::vector<uint8_t> EncodeGrant(const Grant& grant) {
  std::string text;
  text.append(kMagic).append(grant.shard.hex()).append(kScopeTag);
  text.append(std::to_string(grant.scope.size())).append("\n").append(grant.scope);
  return {text.begin(), text.end()};
}

xet::Result<Grant> ParseGrant(std::span<const uint8_t> bytes) {
  if (bytes.size() > kMaxGrantSize)
    return xet::Malformed("grant larger than " + std::to_string(kMaxGrantSize));
  std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (!text.starts_with(kMagic) || text.size() < kMagic.size() + 64 + kScopeTag.size())
    return xet::Malformed("not a grant");
  auto shard = xet::Hash::FromHex(text.substr(kMagic.size(), 64));
  text.remove_prefix(kMagic.size() + 64);
  if (!shard || !text.starts_with(kScopeTag)) return xet::Malformed("grant: bad shard hash");
  text.remove_prefix(kScopeTag.size());
  // The scope's length, in decimal, then a newline and exactly that many bytes.
  size_t length = 0, digits = 0;
  while (digits < text.size() && digits < 5 && text[digits] >= '0' && text[digits] <= '9')
    length = length * 10 + static_cast<size_t>(text[digits++] - '0');
  if (digits == 0 || (digits > 1 && text[0] == '0') || digits >= text.size() || text[digits] != '\n')
    return xet::Malformed("grant: bad scope length");
  text.remove_prefix(digits + 1);
  if (length == 0 || text.size() != length)
    return xet::Malformed("grant: the scope is not as long as stated");
  return Grant{*shard, std::string(text)};
}

xet::Hash GrantName(const Grant& grant) {
  return xet::ChunkHashOf(EncodeGrant(grant));
}

xet::Status RecordGrant(store::BlobStore& store, const Grant& grant) {
  const std::vector<uint8_t> bytes = EncodeGrant(grant);
  // Always a put, also when the same grant is there already (every retry, every re-registration): a process
  // that died after naming it may not have synced its directory, and only the put's sync makes it durable
  // before the index commits (PowerLoss.ACrashThenARetryThenAPowerCutLosesNothing in repair_test lost the
  // grant when this skipped the put). An intact grant costs what the shard's put before it costs: a small
  // write and two syncs. CasService skips the call for grants it saw made durable itself.
  auto put = store.Put(store::BlobKind::kGrant, xet::ChunkHashOf(bytes), bytes);
  if (!put.ok()) return put.error();
  return xet::Ok{};
}

}  // namespace cairn::cas

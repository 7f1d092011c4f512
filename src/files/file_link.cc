#include "files/file_link.h"

#include <charconv>

#include "cas/transfer_url.h"
#include "common/percent_encode.h"
#include "xet/hashing.h"

namespace cairn::files {
namespace {

void AppendField(std::string& out, std::string_view field) {
  out += std::to_string(field.size());
  out += ':';
  out += field;
}

}  // namespace

LinkSigner::LinkSigner(const cas::UrlKeys& url_keys, uint64_t max_ttl_seconds, const Clock& clock,
                       std::string_view purpose)
    : keys_(url_keys.Map([purpose](const xet::Hash& url_key) {
        return xet::KeyedHash(url_key, std::span<const uint8_t>(
                                           reinterpret_cast<const uint8_t*>(purpose.data()), purpose.size()));
      })),
      max_ttl_(max_ttl_seconds),
      clock_(clock) {}

uint64_t LinkSigner::Now() const {
  return static_cast<uint64_t>(clock_.UnixSeconds());
}

xet::Hash LinkSigner::Mac(const xet::Hash& key, std::string_view subject, uint64_t expires,
                          std::string_view scope, std::string_view name) {
  std::string message = "cairn-file-link|";
  AppendField(message, subject);
  AppendField(message, std::to_string(expires));
  AppendField(message, scope);
  AppendField(message, name);
  return xet::KeyedHash(
      key, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(message.data()), message.size()));
}

Result<SignedLink> LinkSigner::Sign(const xet::FileHash& file, const std::string& scope, uint64_t ttl_seconds,
                                    const std::string& name) const {
  return SignSubject(file.hex(), scope, ttl_seconds, name);
}

Result<LinkGrant> LinkSigner::Verify(const xet::FileHash& file,
                                     const std::vector<std::pair<std::string, std::string>>& query) const {
  return VerifySubject(file.hex(), query);
}

Result<SignedLink> LinkSigner::SignSubject(std::string_view subject, const std::string& scope,
                                           uint64_t ttl_seconds, const std::string& name) const {
  if (ttl_seconds == 0 || ttl_seconds > max_ttl_) {
    return LimitExceeded("a link lives from 1 s to " + std::to_string(max_ttl_) + " s (max_link_ttl)");
  }
  if (name.size() > 255 || name.find_first_of(std::string_view("/\\\0\r\n", 5)) != std::string::npos)
    return Malformed("a link's name is a file name: at most 255 bytes, no slashes, NUL or line breaks");
  const uint64_t expires = Now() + ttl_seconds;
  std::string query = "x=" + std::to_string(expires) + "&scope=" + PercentEncode(scope);
  if (!name.empty()) query += "&name=" + PercentEncode(name);
  const auto& key = keys_.current();
  if (key.named()) query += "&k=" + key.id;
  query += "&s=" + Mac(key.material, subject, expires, scope, name).hex();
  return SignedLink{std::move(query), expires};
}

Result<LinkGrant> LinkSigner::VerifySubject(
    std::string_view subject, const std::vector<std::pair<std::string, std::string>>& query) const {
  const std::string* x = nullptr;
  const std::string* scope = nullptr;
  const std::string* name = nullptr;
  const std::string* mac = nullptr;
  const std::string* key_id = nullptr;
  for (const auto& [k, v] : query) {
    const std::string** slot = k == "x"       ? &x
                               : k == "scope" ? &scope
                               : k == "name"  ? &name
                               : k == "k"     ? &key_id
                               : k == "s"     ? &mac
                                              : nullptr;
    if (slot == nullptr) continue;
    if (*slot != nullptr) return Malformed("link parameter " + k + " given twice");
    *slot = &v;
  }
  if (x == nullptr || scope == nullptr || mac == nullptr)
    return Malformed("a link needs the parameters x, scope and s");
  uint64_t expires = 0;
  const auto [end, ec] = std::from_chars(x->data(), x->data() + x->size(), expires);
  if (ec != std::errc() || end != x->data() + x->size()) return Malformed("link expiry x is not a number");
  const auto* key = keys_.Find(key_id ? *key_id : "");
  if (key == nullptr) return Denied("the link was signed with an unknown or retired key");
  const std::string expected = Mac(key->material, subject, expires, *scope, name ? *name : "").hex();
  if (!cas::ConstantTimeEqual(expected, *mac)) return Denied("the link's signature does not match");
  if (Now() >= expires) return Denied("the link expired");
  return LinkGrant{*scope, name ? *name : "", expires};
}

}  // namespace cairn::files

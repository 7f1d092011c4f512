#include "people/publishers.h"

#include <openssl/rand.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/hex.h"
#include "common/utf8.h"
#include "people/names.h"

namespace cairn::people {

namespace {

bool ValidClaimName(std::string_view name) {
  if (name.empty() || name.size() > kMaxClaimName) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '-' || c == '.' || c == ':';
    if (!ok) return false;
  }
  return true;
}

// UTF-8 without control characters (a value is one line of a record and of a listing).
bool ValidClaimValue(std::string_view value) {
  if (value.empty() || value.size() > kMaxClaimValue || !ValidUtf8(value) || HasC1Control(value))
    return false;
  for (char ch : value) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

bool LoopbackHost(std::string_view host) {
  return host == "127.0.0.1" || host == "localhost" || host == "[::1]";
}

}  // namespace

std::string FormatClaims(const std::vector<Claim>& claims) {
  std::string out;
  for (const Claim& c : claims) {
    if (!out.empty()) out += '\n';
    out += c.name + "=" + c.value;
  }
  return out;
}

Result<Claim> ParseClaim(std::string_view text) {
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos || !ValidClaimName(text.substr(0, eq)) ||
      !ValidClaimValue(text.substr(eq + 1))) {
    return Malformed("a claim is NAME=VALUE: a name of at most " + std::to_string(kMaxClaimName) +
                     " letters, digits, '_', '-', '.' or ':', and a value of 1 to " +
                     std::to_string(kMaxClaimValue) + " bytes of text on one line");
  }
  return Claim{.name = std::string(text.substr(0, eq)), .value = std::string(text.substr(eq + 1))};
}

Result<std::vector<Claim>> ParseClaims(std::string_view text) {
  std::vector<Claim> out;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    auto claim = ParseClaim(text.substr(0, end));
    if (!claim.ok()) return claim.error();
    out.push_back(std::move(*claim));
    if (out.size() > kMaxClaims)
      return Malformed("at most " + std::to_string(kMaxClaims) + " claims a policy");
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
  }
  return out;
}

bool ValidIssuer(std::string_view issuer) {
  if (issuer.size() > kMaxIssuer || !ValidClaimValue(issuer)) return false;
  std::string_view rest;
  bool tls = false;
  if (issuer.starts_with("https://")) {
    rest = issuer.substr(8);
    tls = true;
  } else if (issuer.starts_with("http://")) {
    rest = issuer.substr(7);
  } else {
    return false;
  }
  if (rest.find_first_of("?#@ \\") != std::string_view::npos) return false;
  const std::string_view authority = rest.substr(0, rest.find('/'));
  if (authority.empty()) return false;
  if (tls) return true;
  // The host without its port: "[::1]:4444" -> "[::1]", "127.0.0.1:4444" -> "127.0.0.1".
  const size_t colon = authority.rfind(':');
  const bool has_port =
      colon != std::string_view::npos && authority.find(']', colon) == std::string_view::npos;
  return LoopbackHost(has_port ? authority.substr(0, colon) : authority);
}

bool RepoInNamespace(std::string_view repo, std::string_view ns) {
  for (std::string_view kind : {"datasets/", "spaces/"}) {
    if (repo.starts_with(kind)) {
      repo.remove_prefix(kind.size());
      break;
    }
  }
  const size_t slash = repo.find('/');
  if (slash == std::string_view::npos) return false;
  return repo.substr(0, slash) == ns && ValidName(repo.substr(slash + 1));
}

Status CheckPublisherSpec(const PublisherSpec& spec) {
  if (!ValidName(spec.ns)) return Malformed("not a namespace: " + spec.ns);
  if (!spec.repo.empty() && !RepoInNamespace(spec.repo, spec.ns)) {
    return Malformed(
        "a trust policy's repository is one of its namespace's (NS/NAME, datasets/NS/NAME or "
        "spaces/NS/NAME)");
  }
  if (!ValidIssuer(spec.issuer)) {
    return Malformed(
        "an issuer is an https URL (http only on a loopback host), without query or credentials");
  }
  if (!ValidClaimValue(spec.audience)) return Malformed("an audience is 1 to 256 bytes of text on one line");
  if (spec.claims.empty()) {
    // Without one, every token the issuer signs for the audience would do: on a shared CI provider, anyone's.
    return Malformed(
        "a trust policy names at least one claim the id token must carry (say repository=ORG/REPO)");
  }
  if (spec.claims.size() > kMaxClaims) {
    return Malformed("at most " + std::to_string(kMaxClaims) + " claims a policy");
  }
  for (const Claim& c : spec.claims) {
    if (!ValidClaimName(c.name) || !ValidClaimValue(c.value)) return Malformed("not a claim: " + c.name);
  }
  if (spec.role != index::TokenRole::kRead && spec.role != index::TokenRole::kWrite) {
    return Malformed("a trust policy grants read or write");
  }
  return Ok{};
}

Result<std::string> NewPublisherId() {
  std::array<uint8_t, 8> raw{};
  if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1) return IoError("RAND_bytes failed");
  return "tp_" + HexEncode(raw);
}

}  // namespace cairn::people

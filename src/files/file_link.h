// Download links: capability URLs for one stored file, to hand to a browser, curl or a download manager.
//
// Form: /v1/files/<hash>?x=<unix expiry>&scope=<scope>[&name=<file name>][&k=<key id>]&s=<mac>. The MAC is
// keyed BLAKE3 (with a key derived from a URL key, so that no transfer URL's MAC is a link's) over the file
// hash, the expiry, the scope and the name, each length-prefixed. It is signed with the current URL key,
// named by `k` unless that is the legacy key, and checked with the key `k` names (cas/transfer_url.h). A link
// grants reading that one file as that scope sees it until it expires; the name only sets
// Content-Disposition. Nothing in it can be changed without the key.
//
// Thread-safety: const methods, safe from any thread. Failures: kLimit for a lifetime outside 1 s ..
// max_ttl, kMalformed for a name that is not a file name or a link missing its parameters, kDenied for a
// wrong signature, a retired key or an expired link.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cas/transfer_url.h"
#include "common/clock.h"
#include "common/error.h"
#include "xet/hash.h"

namespace cairn::files {

// What a valid link grants.
struct LinkGrant {
  std::string scope;
  std::string name;  // empty: none given
  uint64_t expires = 0;
};

// A signed link: the query string that carries it, and when it expires (unix seconds, the signer's clock).
struct SignedLink {
  std::string query;
  uint64_t expires = 0;
};

class LinkSigner {
 public:
  // `clock` must outlive the signer. `purpose` names what the links grant: it derives the links' keys, so a
  // link signed for one purpose (a download) is never valid for another (an upload, lfs/lfs_service.h).
  LinkSigner(const cas::UrlKeys& url_keys, uint64_t max_ttl_seconds, const Clock& clock = Clock::System(),
             std::string_view purpose = "cairn file links");

  // A link to `file` for `scope`, valid for `ttl_seconds`.
  Result<SignedLink> Sign(const xet::FileHash& file, const std::string& scope, uint64_t ttl_seconds,
                          const std::string& name) const;
  // Checks the link parameters of a request for `file` (x, scope, name, k, s, percent-decoded).
  Result<LinkGrant> Verify(const xet::FileHash& file,
                           const std::vector<std::pair<std::string, std::string>>& query) const;

  // The same for a subject the caller encodes (hub/download_link.h: a repository's file at a commit), with
  // this signer's purpose keeping its links apart from every other signer's.
  Result<SignedLink> SignSubject(std::string_view subject, const std::string& scope, uint64_t ttl_seconds,
                                 const std::string& name) const;
  Result<LinkGrant> VerifySubject(std::string_view subject,
                                  const std::vector<std::pair<std::string, std::string>>& query) const;

  uint64_t max_ttl_seconds() const { return max_ttl_; }

 private:
  uint64_t Now() const;
  static xet::Hash Mac(const xet::Hash& key, std::string_view subject, uint64_t expires,
                       std::string_view scope, std::string_view name);

  cas::UrlKeys keys_;  // the link keys derived from the URL keys
  uint64_t max_ttl_;
  const Clock& clock_;
};

}  // namespace cairn::files

#include "hub/download_link.h"

#include <algorithm>

#include "common/percent_encode.h"

namespace cairn::hub {

namespace {

// What the MAC covers: each part length-prefixed, so no two (repository, revision, path) read alike.
std::string Subject(const RepoId& id, std::string_view rev, std::string_view path) {
  std::string out = "repository-file|";
  const std::string repo = RepoPath(id);  // a named string: the list below holds views of it
  for (const std::string_view part : {std::string_view(repo), rev, path}) {
    out += std::to_string(part.size());
    out += ':';
    out += part;
  }
  return out;
}

}  // namespace

Result<std::string> SignDownload(const files::LinkSigner& signer, const RepoId& id, const ObjectId& commit,
                                 std::string_view path) {
  const std::string rev = commit.hex();
  const uint64_t ttl = std::min(kDownloadLinkSeconds, signer.max_ttl_seconds());
  auto link = signer.SignSubject(Subject(id, rev, path), RepoPath(id), ttl, "");
  if (!link) return link.error();
  return "/" + PercentEncode(RepoPath(id), "-._~/") + "/resolve/" + rev + "/" + PercentEncode(path, "-._~/") +
         "?" + link->query;
}

bool CarriesDownloadLink(const QueryPairs& query) {
  return std::any_of(query.begin(), query.end(), [](const auto& kv) { return kv.first == "s"; });
}

Result<Caller> VerifyDownload(const files::LinkSigner& signer, const RepoId& id, std::string_view rev,
                              std::string_view path, const QueryPairs& query) {
  auto grant = signer.VerifySubject(Subject(id, rev, path), query);
  if (!grant) return grant.error();
  if (grant->scope != RepoPath(id)) return Denied("the link was made for another repository");
  return Caller{.scope = grant->scope,
                .write = false,
                .expires = static_cast<int64_t>(grant->expires),
                .user = "",
                .reach = {},
                .token_id = "",
                .client = ""};
}

}  // namespace cairn::hub

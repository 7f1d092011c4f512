// Links to a repository's file at a commit, for browsers: what the pages hand out so that a file of a private
// repository downloads, and a README's images show, without a token (a browser sends none), from the
// user-content origin when one is configured (docs/web.md).
//
// Form: /{repo path}/resolve/{commit}/{path}?x=…&scope=…[&k=…]&s=…, the download route with the parameters of
// files/file_link.h, signed by FileService::repo_links (keys of their own). The MAC covers the repository,
// the commit, the path and the expiry: a link reads that one file as it is at that commit, as a reader of
// that repository alone, until it expires (kDownloadLinkSeconds after the page that made it) or its URL key
// is retired (`cairn keys rotate --kind url`, then `retire --kind url ID`: every link made before ends). A
// private repository made public or the reverse does not change what a link already made reads; it lives
// minutes.
//
// Pure functions of their arguments; thread-safe. Failures: kDenied for a link that does not match, expired
// or was signed with a retired key; kMalformed for one missing its parameters.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "files/file_link.h"
#include "hub/hub_service.h"

namespace cairn::hub {

inline constexpr uint64_t kDownloadLinkSeconds = 15 * 60;

using QueryPairs = std::vector<std::pair<std::string, std::string>>;

// The link's path and query (without an origin) to `path` of `id` at `commit`.
Result<std::string> SignDownload(const files::LinkSigner& signer, const RepoId& id, const ObjectId& commit,
                                 std::string_view path);

// Whether a download request's query carries a link (its signature parameter).
bool CarriesDownloadLink(const QueryPairs& query);

// The caller a link grants for `path` of `id` at revision `rev`, as the download route names them: a reader
// of that repository alone until the link expires.
Result<Caller> VerifyDownload(const files::LinkSigner& signer, const RepoId& id, std::string_view rev,
                              std::string_view path, const QueryPairs& query);

}  // namespace cairn::hub

// The Hub a mirror copies from (huggingface.co in production; another cairn in the tests): its git
// upload-pack for history (protocol v2: ls-refs, fetch) and its resolve route for a file's bytes, streamed.
//
// The mirror's token, when configured, is sent to the upstream's own host only (libcurl drops the
// Authorization header when a redirect leads elsewhere, as the Hub's resolve does to its CDN) and never
// appears in an error message. Answers are bounded: a ref listing and a pack are read into memory up to
// their limits, a file's bytes go to the caller's sink as they arrive.
//
// Thread-safety: every method may be called concurrently (each call uses an HTTP client of its own).
// Failures: kNotFound when upstream has no such repository, revision or file (or will not show it to the
// mirror's token: 401, 403 and 404 alike); kUnavailable when it cannot be reached or kept failing (429 and
// 5xx are retried with back-off, honouring Retry-After); kMalformed for an answer cairn cannot read.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "hub/git_object.h"
#include "hub/hub_service.h"
#include "net/http_client.h"
#include "xet/reconstruction_answer.h"

namespace cairn::mirror {

struct UpstreamOptions {
  std::string url = "https://huggingface.co";  // no trailing slash
  std::string token;                           // empty: anonymous
  net::RetryPolicy retry{.attempts = 4,
                         .base_delay = std::chrono::milliseconds(250),
                         .max_delay = std::chrono::milliseconds(4000),
                         .timeout = std::chrono::seconds(120)};
  size_t max_refs = 10000;
  uint64_t max_pack_bytes = 1ULL << 30;
};

// A branch or tag of the upstream repository.
struct UpstreamRef {
  index::RefKind kind = index::RefKind::kBranch;
  std::string name;  // without refs/heads/ or refs/tags/
  hub::ObjectId target;
};

// What the upstream said of a file while sending it.
struct UpstreamFile {
  long status = 0;                   // 200, or 206 for a ranged request
  std::optional<xet::FileHash> xet;  // its X-Xet-Hash, when upstream stores it with Xet
};

class Upstream {
 public:
  explicit Upstream(UpstreamOptions options);

  // The id a repository named without a namespace ("gpt2") or by an old name ("ns/old": a renamed repository)
  // has upstream ("openai-community/gpt2", "ns/new"): where the upstream's API redirects its name, or the id
  // its answer gives; kNotFound when upstream has none.
  Result<hub::RepoId> Canonical(hub::RepoType type, std::string_view name) const;
  // The repository's branches and tags (git ls-refs); kNotFound when upstream has no such repository.
  Result<std::vector<UpstreamRef>> ListRefs(const hub::RepoId& repo) const;
  // A pack holding `wants` and what they reach, less what `haves` reach (git fetch, protocol v2, no thin
  // pack): the pack's bytes.
  Result<std::vector<uint8_t>> FetchPack(const hub::RepoId& repo, const std::vector<hub::ObjectId>& wants,
                                         const std::vector<hub::ObjectId>& haves) const;
  // What upstream says of `path` at `commit` before sending it (a HEAD of its resolve route, redirects not
  // followed: the Hub's 302 carries the Xet hash).
  Result<UpstreamFile> Head(const hub::RepoId& repo, const hub::ObjectId& commit,
                            std::string_view path) const;
  // The bytes of `path` at `commit` from `offset` on, handed to `sink` as they arrive.
  Result<UpstreamFile> Download(const hub::RepoId& repo, const hub::ObjectId& commit, std::string_view path,
                                uint64_t offset, const net::HttpClient::Sink& sink) const;

  // The bytes of the LFS object `pointer` names from `offset` on: where they are asked of upstream's git-lfs
  // batch API (download), then fetched from there with the headers it gave.
  Result<UpstreamFile> DownloadObject(const hub::RepoId& repo, const hub::LfsPointer& pointer,
                                      uint64_t offset, const net::HttpClient::Sink& sink) const;

  // Upstream's Xet storage for reading `repo` at `commit`: its CAS URL and a token for it (the Hub's
  // xet-read-token route). kNotFound when upstream has none to give (a repository without Xet).
  struct XetAccess {
    std::string cas_url;  // no trailing slash
    std::string token;
  };
  Result<XetAccess> XetReadToken(const hub::RepoId& repo, const hub::ObjectId& commit) const;
  // The reconstruction of a whole file from upstream's CAS (v2, or v1 where v2 is not served), or of its
  // bytes [bytes->first, bytes->second] (asked once: no retries).
  Result<xet::ParsedReconstruction> Reconstruction(
      const XetAccess& access, const xet::FileHash& file,
      std::optional<std::pair<uint64_t, uint64_t>> bytes = std::nullopt) const;
  // Bytes [first, last] of a transfer URL a reconstruction gave, to `sink` as they arrive (the URL carries
  // its own credentials: no token is sent).
  Status FetchRange(const std::string& url, uint64_t first, uint64_t last,
                    const net::HttpClient::Sink& sink) const;

  const std::string& url() const { return options_.url; }

 private:
  std::vector<std::string> AuthHeaders() const;
  std::string FileUrl(const hub::RepoId& repo, const hub::ObjectId& commit, std::string_view path) const;
  std::string GitUrl(const hub::RepoId& repo) const;
  // One git protocol v2 command to upload-pack; the answer's bytes.
  Result<std::string> GitCommand(const hub::RepoId& repo, const std::string& request,
                                 uint64_t max_bytes) const;

  UpstreamOptions options_;
};

}  // namespace cairn::mirror

// git-upload-pack over smart HTTP (gitprotocol-http.txt): what `git clone` and `git fetch` ask of a
// repository. Protocol v2 (gitprotocol-v2.txt: ls-refs, fetch with shallow and filter) when the client asks
// for it (Git-Protocol: version=2), v0 otherwise. HTTP is stateless: every request carries all the client has
// said so far, and each is answered on its own.
//
// What is served: the repository's branches and tags (HEAD names the default branch), and packs of the
// commits, trees and blobs stored in the index (docs/git.md). A large file's blob is the Git LFS pointer the
// Hub writes; git-lfs fetches its bytes through the LFS API. Any object of the repository may be wanted by id
// (a partial clone fetches its missing blobs so), as the Hub API reads any commit of it by id.
//
// Thread-safety: an UploadPack serves one request on one thread. Ownership: it borrows the index, which must
// outlive it. Failures: values; a malformed request is kMalformed (answer 400), one past a limit kLimit.
// Once the answer has begun (the sink took bytes) a failure is reported in band (an "ERR" side-band packet)
// and returned too.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "hub/git_object.h"
#include "hub/hub_service.h"
#include "index/index.h"

namespace cairn::git {

using hub::ObjectId;

struct UploadPackLimits {
  size_t max_wants = 10000;      // "want" lines in one request
  size_t max_haves = 100000;     // "have" lines in one request
  size_t max_objects = 5000000;  // objects in one pack
};

// The pack's bytes (and the lines around it) in order; false when nobody reads them any more.
using Sink = std::function<bool(std::string&&)>;

class UploadPack {
 public:
  // `refs`: the repository's refs now (hub::HubService::ListRefs); `head`: the branch HEAD names.
  UploadPack(index::RepoIndex& index, int64_t repo, std::vector<hub::RefInfo> refs, std::string head,
             UploadPackLimits limits = {});

  // GET info/refs?service=git-upload-pack: the capabilities (v2) or the refs with v0's capabilities, as the
  // response's whole body.
  std::string AdvertiseV2() const;
  std::string AdvertiseV0() const;

  // POST git-upload-pack with the (decoded) request body: the answer, written to `sink`.
  Status ServeV2(std::string_view request, const Sink& sink);
  Status ServeV0(std::string_view request, const Sink& sink);

 private:
  struct Fetch;
  struct Plan;
  class Planner;
  Status LsRefs(std::string_view args, const Sink& sink);
  Status FetchV2(std::string_view args, const Sink& sink);
  Result<Plan> MakePlan(const Fetch& fetch);
  // The pack of `plan`'s objects on side band 1 (or bare when !side_band).
  Status SendPack(const Plan& plan, bool side_band, const Sink& sink);
  Result<ObjectId> HeadTarget() const;

  index::RepoIndex& index_;
  int64_t repo_;
  std::vector<hub::RefInfo> refs_;
  std::string head_;
  UploadPackLimits limits_;
};

}  // namespace cairn::git

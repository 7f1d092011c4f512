// git-receive-pack over smart HTTP (gitprotocol-pack.txt; a push is v0 whatever the client's protocol): the
// refs with receive-pack's capabilities, and a push — its ref commands, then a pack — read with every bound
// (pack_reader.h), applied through hub::HubService::ApplyPush (which checks every object and ref), and
// answered with report-status ("unpack ok", then "ok <ref>" or "ng <ref> <why>" for each), in side band 1
// when asked.
//
// Thread-safety: a ReceivePack serves one request on one thread. Ownership: it borrows the hub and the index,
// which must outlive it. Failures: a request git could not have sent is kMalformed (answered with git's ERR
// line); a pack that cannot be read is reported in report-status ("unpack …"), as git does; the hub's and the
// index's failures as values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "git/pack_reader.h"
#include "hub/hub_service.h"
#include "index/index.h"

namespace cairn::git {

class ReceivePack {
 public:
  // `refs`: the repository's refs now; `head`: the branch HEAD names.
  ReceivePack(hub::HubService& hub, index::RepoIndex& index, hub::Repo repo, std::vector<hub::RefInfo> refs,
              std::string head, PackLimits limits = {});

  // GET info/refs?service=git-receive-pack: the whole body.
  std::string Advertise() const;
  // POST git-receive-pack with the request body: the answer's body.
  Result<std::string> Serve(const hub::Caller& caller, std::string_view request);

 private:
  hub::HubService& hub_;
  index::RepoIndex& index_;
  hub::Repo repo_;
  std::vector<hub::RefInfo> refs_;
  std::string head_;
  PackLimits limits_;
};

}  // namespace cairn::git

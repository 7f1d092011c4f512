// Fuzzes the API's other JSON bodies, each parser given the same input: repository create/delete
// (api::ParseRepoBody), move, settings, branch, tag, preupload, LFS duplication, bucket create and settings,
// download links (POST /v1/links), git-lfs batches and a person's new token (POST /api/settings/tokens). The
// input is the body. Checks: what parses is what the routes rely on (non-empty lists bounded, "ns/name" split
// at a slash, samples no larger than their base64 text).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "api/requests.h"
#include "common/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace api = cairn::api;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  (void)api::ParseRepoBody(body);
  if (const auto move = api::ParseMoveBody(body)) {
    FUZZ_CHECK(move->from.type == move->to.type);
    FUZZ_CHECK(move->from.ns.find('/') == std::string::npos && move->to.name.find('/') == std::string::npos);
  }
  (void)api::ParseSettingsBody(body);
  if (const auto branch = api::ParseBranchBody(body); branch && body.empty())
    FUZZ_CHECK(!branch->has_value());
  (void)api::ParseTagBody(body);
  if (const auto files = api::ParsePreuploadBody(body)) {
    FUZZ_CHECK(files->size() <= 1000);
    for (const auto& f : *files) FUZZ_CHECK(f.sample.size() <= size);
  }
  if (const auto dup = api::ParseDuplicateBody(body)) {
    FUZZ_CHECK(dup->files.size() <= 1000);
    FUZZ_CHECK(dup->target.type != cairn::hub::RepoType::kBucket);
  }
  if (const auto is_private = api::ParseBucketCreateBody(body); body.empty())
    FUZZ_CHECK(is_private && !*is_private);
  (void)api::ParseBucketSettingsBody(body);
  (void)api::ParseLinkBody(body);
  (void)api::ParseSquashBody(body);
  if (const auto deletions = api::ParseLfsDeletionBody(body)) FUZZ_CHECK(deletions->sha256s.size() <= 1000);
  if (const auto batch = api::ParseLfsBatchBody(body)) {
    FUZZ_CHECK(batch->objects.size() <= api::kMaxLfsObjects && batch->transfers.size() <= 16);
    FUZZ_CHECK(batch->operation == "download" || batch->operation == "upload");
    for (const auto& o : batch->objects) FUZZ_CHECK(cairn::hub::IsSha256Hex(o.oid));
  }
  if (const auto verify = api::ParseLfsVerifyBody(body)) FUZZ_CHECK(cairn::hub::IsSha256Hex(verify->oid));
  if (const auto done = api::ParseLfsCompletionBody(body)) {
    FUZZ_CHECK(cairn::hub::IsSha256Hex(done->oid) && done->parts.size() <= api::kMaxLfsParts);
    for (const auto& [n, etag] : done->parts) FUZZ_CHECK(etag.size() <= 256);
  }
  if (const auto token = api::ParseTokenBody(body)) {
    FUZZ_CHECK(token->grants.size() <= cairn::people::PeopleService::kMaxGrants);
    FUZZ_CHECK(token->name.size() <= size);
  }
  for (const bool form : {false, true}) {
    if (const auto exchange = api::ParseTokenExchangeBody(body, form)) {
      FUZZ_CHECK(!exchange->subject_token.empty() && !exchange->resource.empty());
    }
  }
  if (const auto policy = api::ParsePublisherBody(body, "ns")) {
    FUZZ_CHECK(policy->claims.size() <= cairn::people::kMaxClaims && policy->ns == "ns");
  }
  return 0;
}

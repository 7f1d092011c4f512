// The request bodies (and the few headers and query strings) the API parses, as pure functions: bytes in, the
// parsed request or the reason it is refused out. No I/O, no lookups, no allocation beyond what the bytes
// given describe. A refusal's message is what the route answers with its 400 (the Hub routes add
// X-Error-Message); checks that need the caller, the repository or the store stay in the routes.
//
// The routes (cas_routes.cc, file_routes.cc and the Hub's, hub_context.h) call these; so do the fuzz targets
// beside them (*_fuzz.cc), which feed them anything.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cas/transfer_url.h"
#include "common/basic_result.h"
#include "http/form.h"
#include "hub/bucket_service.h"
#include "hub/hub_service.h"
#include "people/people_service.h"
#include "xet/hash.h"

namespace cairn::api {

struct BodyError {
  std::string message;
};
template <typename T>
using Parsed = BasicResult<T, BodyError>;

// ---- CAS routes

// The reconstruction Range header: "bytes=S-E" (E inclusive, may pass the end) or "bytes=S-"; nullopt when it
// is anything else (416).
std::optional<cas::ByteRange> ParseReconstructionRange(std::string_view header);

// The file_id values of a batch reconstruction's query: 1 to 1000 hashes.
Parsed<std::vector<xet::FileHash>> ParseBatchFileIds(
    const std::vector<std::pair<std::string, std::string>>& query);

// ---- Plain files

// POST /v1/links: {"file_hash": "<64 hex digits>", "ttl_seconds": <integer>, "name": "<file name>"}.
struct LinkBody {
  xet::FileHash file;
  int64_t ttl_seconds = 3600;  // as given: may be zero or negative (the signer refuses those)
  std::string name;
};
Parsed<LinkBody> ParseLinkBody(std::string_view body);

// ---- Hub: repositories

// POST /api/repos/create and DELETE /api/repos/delete: {"name", "organization", "type", "private" or
// "visibility"}.
struct RepoBody {
  hub::RepoType type = hub::RepoType::kModel;
  std::string ns;  // "organization"; empty: the caller's own namespace
  std::string name;
  bool is_private = false;
};
Parsed<RepoBody> ParseRepoBody(std::string_view body);

// POST /api/repos/move: {"fromRepo": "ns/name", "toRepo": "ns/name", "type"}.
struct MoveBody {
  hub::RepoId from;
  hub::RepoId to;
};
Parsed<MoveBody> ParseMoveBody(std::string_view body);

// PUT .../settings: {"visibility" or "private", "gated": false}; the visibility, when the body sets one.
Parsed<std::optional<bool>> ParseSettingsBody(std::string_view body);

// POST .../branch/{branch}: an empty body or {"startingPoint": "<revision>"}.
Parsed<std::optional<std::string>> ParseBranchBody(std::string_view body);

// POST .../tag/{rev}: {"tag": "<name>", "message": ...}; the tag's name.
Parsed<std::string> ParseTagBody(std::string_view body);

// POST .../preupload/{rev}: {"files": [{"path", "sample" (base64), "size"}]}, at most 1000 files.
struct PreuploadFile {
  std::string path;
  uint64_t size = 0;
  std::vector<uint8_t> sample;
};
Parsed<std::vector<PreuploadFile>> ParsePreuploadBody(std::string_view body);

// POST .../commit/{rev}: NDJSON, a header line then one line per operation. The branch and the pull-request
// flag come from the URL, not from here. Inline files larger than `max_inline_bytes` are refused before they
// are decoded.
Parsed<hub::CommitRequest> ParseCommitBody(std::string_view body, int64_t max_inline_bytes);

// POST .../lfs-files/duplicate: {"target": {"type", "name": "ns/name"}, "files": [{"xetHash", "sha256"}]}, at
// most 1000 files.
struct DuplicateBody {
  hub::RepoId target;
  struct File {
    xet::FileHash xet;
    std::string sha256;  // as given: checked against the stored file by the service
  };
  std::vector<File> files;
};
Parsed<DuplicateBody> ParseDuplicateBody(std::string_view body);

// POST .../super-squash/{branch}: {"message": "..."} (an empty body or no message: nullopt).
Parsed<std::optional<std::string>> ParseSquashBody(std::string_view body);

// POST .../lfs-files/batch: {"deletions": {"sha": [...], "rewriteHistory": bool}}, at most 1000 SHA-256s
// (checked by the service); rewriteHistory defaults to true, as huggingface_hub's.
struct LfsDeletionBody {
  std::vector<std::string> sha256s;
  bool rewrite_history = true;
};
Parsed<LfsDeletionBody> ParseLfsDeletionBody(std::string_view body);

// POST .../paths-info/{rev}: a form (paths=a&paths=b&expand=false) or JSON {"paths": [...]}; at most 1000
// paths (JSON values that are not strings are skipped).
Parsed<std::vector<std::string>> ParsePathsInfoBody(std::string_view body);

// ---- Hub: buckets

// POST /api/buckets/{ns}/{name}: an empty body or {"visibility": ...}; whether the bucket is private.
Parsed<bool> ParseBucketCreateBody(std::string_view body);

// PUT /api/buckets/{ns}/{name}/settings: {"private": true|false}.
Parsed<bool> ParseBucketSettingsBody(std::string_view body);

// POST /api/buckets/{ns}/{name}/paths-info: {"paths": [...]}, at most 1000 (non-strings skipped).
Parsed<std::vector<std::string>> ParseBucketPathsInfoBody(std::string_view body);

// POST /api/buckets/{ns}/{name}/batch: NDJSON, one operation per line (addFile, copyFile, deleteFile), at
// most hub::BucketService::kMaxOps.
Parsed<std::vector<hub::BucketOp>> ParseBucketBatchBody(std::string_view body);

// ---- git-lfs (lfs_routes.cc)

// POST {repo}.git/info/lfs/objects/batch (git-lfs docs/api/batch.md): {"operation": "download"|"upload",
// "transfers": [...], "objects": [{"oid", "size"}], "ref": {"name"}, "hash_algo"}; at most kMaxLfsObjects
// objects, each oid 64 lowercase hex digits. `hash_algo` other than sha256 is kept for the route to refuse
// (409).
inline constexpr size_t kMaxLfsObjects = 1000;
struct LfsBatchObject {
  std::string oid;
  uint64_t size = 0;
};
struct LfsBatchBody {
  std::string operation;
  std::vector<std::string> transfers;  // empty: "basic"
  std::vector<LfsBatchObject> objects;
  std::string hash_algo = "sha256";
};
Parsed<LfsBatchBody> ParseLfsBatchBody(std::string_view body);

// POST /v1/lfs/{oid}/verify: {"oid", "size"} (lfs_routes.cc).
Parsed<LfsBatchObject> ParseLfsVerifyBody(std::string_view body);

// POST /v1/lfs/{oid} (multipart completion, as huggingface_hub sends it): {"oid", "parts": [{"partNumber",
// "etag"}]}, at most kMaxLfsParts parts.
inline constexpr size_t kMaxLfsParts = 100000;
struct LfsCompletionBody {
  std::string oid;
  std::vector<std::pair<uint32_t, std::string>> parts;  // as listed
};
Parsed<LfsCompletionBody> ParseLfsCompletionBody(std::string_view body);

// ---- People

// POST /api/settings/tokens: {"name", "role": "read"|"write"|"fineGrained", "expiresIn": seconds (optional),
// "scoped": [{"scope": "acme" or "acme/model" or "datasets/acme/data", "permission": "read"|"write"}] (a
// fine-grained token's, at most PeopleService::kMaxGrants)}. The names and scopes are checked by the service.
struct TokenBody {
  std::string name;
  people::TokenRole role = people::TokenRole::kRead;
  std::optional<int64_t> expires_in;  // seconds; as given (the route checks its range)
  std::vector<people::Grant> grants;
};
Parsed<TokenBody> ParseTokenBody(std::string_view body);

// POST /oauth/token (RFC 8693 token exchange): as huggingface_hub sends it (a JSON object) or as RFC 6749
// has it (application/x-www-form-urlencoded): grant_type, subject_token_type, subject_token, resource. The
// values are checked by the route; a body of neither form, or one lacking a field, is refused.
struct TokenExchangeBody {
  std::string grant_type;
  std::string subject_token_type;
  std::string subject_token;
  std::string resource;
};
Parsed<TokenExchangeBody> ParseTokenExchangeBody(std::string_view body, bool form);
// The same from a form already parsed.
Parsed<TokenExchangeBody> TokenExchangeOf(const http::FormFields& fields);

// POST /api/publishers/{ns}: {"repo": "acme/model" (optional: every repository), "issuer", "audience",
// "claims": {"name": "value", ...}, "role": "read"|"write" (default write)}. Checked by the service.
Parsed<people::PublisherSpec> ParsePublisherBody(std::string_view body, std::string ns);

// A request target naming repository `from` ("/api/models/ns/old/revision/main", "/ns/old/resolve/…",
// "/ns/old.git/info/refs") with `to`'s namespace and name instead (a renamed repository's redirect); nullopt
// when the target does not name `from` where a repository's path goes.
std::optional<std::string> RenamedTarget(std::string_view target, const hub::RepoId& from,
                                         const hub::RepoId& to);

}  // namespace cairn::api

// Plain file downloads and download links over HTTP (docs/api.md, "Plain files"):
//
//   GET|HEAD /v1/files/{file_hash}           the file's bytes; a read token of a scope that sees it, or a
//   link GET|HEAD /v1/files/by-sha256/{sha256}    the same, found by the SHA-256 of its bytes (read token)
//   POST     /v1/links                       {"file_hash", "ttl_seconds", "name"} → {"url", "expires"}
//   DELETE   /v1/files/{file_hash}           the token's scope stops seeing the file (write token): 204; 404
//                                            when it did not see it; 409 for a repository's scope, whose
//                                            files go with commits and with the repository (the Hub's)
//
// Downloads answer 200, or 206 for one range or several (multipart/byteranges), with ETag (the file hash),
// Accept-Ranges, If-None-Match (304), If-Range and, for a link with a name, Content-Disposition. Every chunk
// is verified before it is sent: a corrupt first chunk answers 500 before any header, a later one cuts the
// connection (the client sees a short body). `files` and `repos` must outlive the server.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "files/file_service.h"
#include "http/server.h"
#include "index/index.h"

namespace cairn::api {

struct FileRouteOptions {
  std::string public_url = "http://127.0.0.1:8080";  // base of the links minted
  size_t max_ranges = 64;                            // ranges in one request, at most (400 past it)
};

// The answer to a GET or HEAD of a stored file, as /v1/files gives it (ranges, conditionals, verified bytes),
// with `etag` (quoted) as its entity tag, and the headers every answer with stored bytes carries
// (http::SetStoredBytesHeaders: `content_type` when it is a valid media type, nosniff, a sandboxing CSP, a
// download for active types). For routes that serve stored files under other names (the Hub's).
http::Response ServeStoredFile(files::FileService& files, const http::Request& req, files::StoredFile file,
                               const std::string& etag, size_t max_ranges,
                               std::optional<std::string_view> content_type = std::nullopt);

// `repos` tells a repository's scope from a plain one (DELETE answers 409 for the former).
void RegisterFileRoutes(http::Server& server, files::FileService& files, index::RepoIndex& repos,
                        const FileRouteOptions& options);

}  // namespace cairn::api

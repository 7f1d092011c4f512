#include "mirror/upstream.h"

#include <boost/json.hpp>

#include "common/percent_encode.h"
#include "git/pkt_line.h"

namespace cairn::mirror {
namespace {

// An upstream status as the mirror reports it (the URL without its query: it may carry a signature).
Error StatusError(const std::string& what, long status) {
  const std::string message = what + ": upstream answered HTTP " + std::to_string(status);
  // A redirect where none is followed: the Hub moves a renamed repository's URLs (Canonical tells where).
  if (status == 401 || status == 403 || status == 404 || status == 410 || (status >= 301 && status <= 308))
    return NotFound(message);
  if (net::IsTransientStatus(status)) return Unavailable(message);
  return Malformed(message);
}

// The start of a protocol v2 command: its name and capabilities, up to its arguments.
std::string GitRequest(std::string_view command) {
  std::string request;
  git::AppendPkt(request, "command=" + std::string(command) + "\n");
  git::AppendPkt(request, "agent=cairn-mirror/1\n");
  git::AppendDelim(request);
  return request;
}

}  // namespace

Upstream::Upstream(UpstreamOptions options) : options_(std::move(options)) {
  while (!options_.url.empty() && options_.url.back() == '/') options_.url.pop_back();
}

std::vector<std::string> Upstream::AuthHeaders() const {
  return net::BearerHeader(options_.token);
}

std::string Upstream::GitUrl(const hub::RepoId& repo) const {
  return options_.url + "/" + hub::RepoPath(repo) + ".git/git-upload-pack";
}

Result<std::string> Upstream::GitCommand(const hub::RepoId& repo, const std::string& request,
                                         uint64_t max_bytes) const {
  net::HttpClient http(options_.retry);
  std::vector<std::string> headers = AuthHeaders();
  headers.emplace_back("Git-Protocol: version=2");
  headers.emplace_back("Content-Type: application/x-git-upload-pack-request");
  headers.emplace_back("Accept: application/x-git-upload-pack-result");
  // A POST through Send buffers the answer; the bound is checked on the bytes received.
  auto answer = http.Send("POST", GitUrl(repo), headers, request);
  if (!answer.ok()) return answer.error();
  if (answer->status != 200) return StatusError("git upload-pack of " + repo.str(), answer->status);
  if (answer->body.size() > max_bytes) {
    return LimitExceeded("upstream's answer for " + repo.str() + " passes " + std::to_string(max_bytes) +
                         " bytes");
  }
  return std::move(answer->body);
}

Result<hub::RepoId> Upstream::Canonical(hub::RepoType type, std::string_view name) const {
  net::HttpClient http(options_.retry);
  const std::string prefix = "/api/" + std::string(hub::Plural(type)) + "/";
  // "gpt2", or "ns/name": each segment encoded.
  std::string encoded = PercentEncode(name.substr(0, name.find('/')));
  if (const size_t slash = name.find('/'); slash != std::string_view::npos)
    encoded += "/" + PercentEncode(name.substr(slash + 1));
  auto answer = http.Send("GET", options_.url + prefix + encoded, AuthHeaders());
  if (!answer.ok()) return answer.error();
  std::string id;
  if (answer->status >= 301 && answer->status <= 308) {
    // Location: "/api/models/ns/name" (or absolute, on upstream's host), perhaps with more after.
    std::string_view where = answer->headers["location"];
    if (const size_t scheme = where.find("://"); scheme != std::string_view::npos) {
      const size_t path = where.find('/', scheme + 3);
      where = path == std::string_view::npos ? std::string_view() : where.substr(path);
    }
    if (!where.starts_with(prefix)) return Malformed("upstream moved " + std::string(name) + " elsewhere");
    where.remove_prefix(prefix.size());
    const size_t first = where.find('/');
    const size_t second = first == std::string_view::npos ? first : where.find_first_of("/?", first + 1);
    id = std::string(where.substr(0, second));
  } else if (answer->status == 200) {
    try {
      id = std::string(boost::json::parse(answer->body).at("id").as_string());
    } catch (const std::exception&) {
      return Malformed("upstream's answer for " + std::string(name) + " names no id");
    }
  } else {
    return StatusError("the repository " + std::string(name), answer->status);
  }
  const size_t slash = id.find('/');
  if (slash == std::string::npos) return NotFound(std::string(name) + " has no namespace upstream either");
  hub::RepoId out{type, id.substr(0, slash), id.substr(slash + 1)};
  if (!hub::ValidName(out.ns) || !hub::ValidName(out.name)) return Malformed("upstream names an invalid id");
  return out;
}

Result<std::vector<UpstreamRef>> Upstream::ListRefs(const hub::RepoId& repo) const {
  std::string request = GitRequest("ls-refs");
  git::AppendPkt(request, "peel\n");  // an annotated tag's commit: the Hub's tags are kept lightweight here
  git::AppendPkt(request, "ref-prefix refs/heads/\n");
  git::AppendPkt(request, "ref-prefix refs/tags/\n");
  git::AppendFlush(request);
  auto answer = GitCommand(repo, request, options_.max_refs * 512);
  if (!answer.ok()) return answer.error();
  std::vector<UpstreamRef> refs;
  git::PktReader reader(*answer);
  for (;;) {
    auto pkt = reader.Next();
    if (!pkt.ok()) return pkt.error();
    if (!*pkt || (*pkt)->kind == git::PktKind::kFlush) break;
    if ((*pkt)->kind != git::PktKind::kData) continue;
    // "<oid> <refname>[ <attribute>...]"
    const std::string_view line = git::Line((*pkt)->payload);
    if (line.size() < 42 || line[40] != ' ') return Malformed("ls-refs: a line cairn cannot read");
    auto id = hub::ObjectId::FromHex(line.substr(0, 40));
    if (!id) continue;  // "unborn HEAD" and the like
    std::string_view name = line.substr(41);
    const std::string_view attributes = name.substr(std::min(name.find(' '), name.size()));
    name = name.substr(0, name.find(' '));
    if (const size_t peeled = attributes.find(" peeled:"); peeled != std::string_view::npos) {
      if (auto target = hub::ObjectId::FromHex(attributes.substr(peeled + 8, 40))) id = target;
    }
    UpstreamRef ref;
    if (name.starts_with("refs/heads/")) {
      ref.kind = index::RefKind::kBranch;
      ref.name = name.substr(11);
    } else if (name.starts_with("refs/tags/")) {
      ref.kind = index::RefKind::kTag;
      ref.name = name.substr(10);
    } else {
      continue;
    }
    if (!hub::ValidBranchOrTagName(ref.name, ref.kind == index::RefKind::kTag)) continue;
    ref.target = *id;
    refs.push_back(std::move(ref));
    if (refs.size() > options_.max_refs) return LimitExceeded("upstream lists too many refs");
  }
  return refs;
}

Result<std::vector<uint8_t>> Upstream::FetchPack(const hub::RepoId& repo,
                                                 const std::vector<hub::ObjectId>& wants,
                                                 const std::vector<hub::ObjectId>& haves) const {
  std::string request = GitRequest("fetch");
  git::AppendPkt(request, "no-progress\n");
  git::AppendPkt(request, "ofs-delta\n");
  for (const auto& w : wants) git::AppendPkt(request, "want " + w.hex() + "\n");
  for (const auto& h : haves) git::AppendPkt(request, "have " + h.hex() + "\n");
  git::AppendPkt(request, "done\n");
  git::AppendFlush(request);
  auto answer = GitCommand(repo, request, options_.max_pack_bytes + (options_.max_pack_bytes >> 4));
  if (!answer.ok()) return answer.error();
  // Sections before "packfile" (acknowledgments, shallow-info) carry nothing a mirror needs after "done".
  git::PktReader reader(*answer);
  bool in_pack = false;
  std::vector<uint8_t> pack;
  for (;;) {
    auto pkt = reader.Next();
    if (!pkt.ok()) return pkt.error();
    if (!*pkt) break;
    if ((*pkt)->kind != git::PktKind::kData) {
      if (in_pack) break;
      continue;
    }
    const std::string_view payload = (*pkt)->payload;
    if (!in_pack) {
      if (git::Line(payload) == "packfile") in_pack = true;
      continue;
    }
    if (payload.empty()) continue;
    const auto band = static_cast<uint8_t>(payload[0]);
    if (band == 1) {
      pack.insert(pack.end(), payload.begin() + 1, payload.end());
    } else if (band == 3) {
      return Malformed("upstream's upload-pack failed: " + std::string(payload.substr(1, 200)));
    }
  }
  if (!in_pack) return Malformed("upstream's fetch answer holds no pack");
  return pack;
}

std::string Upstream::FileUrl(const hub::RepoId& repo, const hub::ObjectId& commit,
                              std::string_view path) const {
  std::string encoded;
  for (size_t start = 0; start <= path.size();) {
    const size_t slash = std::min(path.find('/', start), path.size());
    if (!encoded.empty()) encoded += '/';
    encoded += PercentEncode(path.substr(start, slash - start));
    start = slash + 1;
  }
  return options_.url + "/" + hub::RepoPath(repo) + "/resolve/" + commit.hex() + "/" + encoded;
}

namespace {

UpstreamFile Described(const net::HttpResponse& answer) {
  UpstreamFile file{.status = answer.status, .xet = std::nullopt};
  if (auto it = answer.headers.find("x-xet-hash"); it != answer.headers.end()) {
    if (auto h = xet::Hash::FromHex(it->second)) file.xet = *h;
  }
  return file;
}

}  // namespace

Result<UpstreamFile> Upstream::Head(const hub::RepoId& repo, const hub::ObjectId& commit,
                                    std::string_view path) const {
  net::HttpClient http(options_.retry);
  auto answer = http.Send("HEAD", FileUrl(repo, commit, path), AuthHeaders());
  if (!answer.ok()) return answer.error();
  if (answer->status != 200 && (answer->status < 301 || answer->status > 308)) {
    return StatusError("the file " + std::string(path), answer->status);
  }
  return Described(*answer);
}

Result<UpstreamFile> Upstream::Download(const hub::RepoId& repo, const hub::ObjectId& commit,
                                        std::string_view path, uint64_t offset,
                                        const net::HttpClient::Sink& sink) const {
  net::HttpClient http(options_.retry);
  std::vector<std::string> headers = AuthHeaders();
  if (offset > 0) headers.push_back("Range: bytes=" + std::to_string(offset) + "-");
  auto answer = http.Fetch(FileUrl(repo, commit, path), headers, sink);
  if (!answer.ok()) return answer.error();
  const long expected = offset > 0 ? 206 : 200;
  if (answer->status != expected) return StatusError("the download of " + std::string(path), answer->status);
  return Described(*answer);
}

Result<UpstreamFile> Upstream::DownloadObject(const hub::RepoId& repo, const hub::LfsPointer& pointer,
                                              uint64_t offset, const net::HttpClient::Sink& sink) const {
  net::HttpClient http(options_.retry);
  std::vector<std::string> headers = AuthHeaders();
  headers.emplace_back("Accept: application/vnd.git-lfs+json");
  headers.emplace_back("Content-Type: application/vnd.git-lfs+json");
  const boost::json::object request{
      {"operation", "download"},
      {"transfers", boost::json::array{"basic"}},
      {"objects", boost::json::array{boost::json::object{{"oid", pointer.sha256}, {"size", pointer.size}}}},
      {"hash_algo", "sha256"}};
  auto answer = http.Send("POST", options_.url + "/" + hub::RepoPath(repo) + ".git/info/lfs/objects/batch",
                          headers, boost::json::serialize(request));
  if (!answer.ok()) return answer.error();
  if (answer->status != 200) return StatusError("the LFS object " + pointer.sha256, answer->status);
  // {"objects": [{"oid", "size", "actions": {"download": {"href", "header": {...}}}} or "error"]}
  std::string href;
  std::vector<std::string> link_headers;
  try {
    const auto doc = boost::json::parse(answer->body);
    const auto& objects = doc.at("objects").as_array();
    if (objects.empty()) return Malformed("upstream's LFS batch answer names no object");
    const auto& o = objects.at(0).as_object();
    if (o.contains("error")) return NotFound("upstream has no LFS object " + pointer.sha256);
    const auto& download = o.at("actions").at("download").as_object();
    href = std::string(download.at("href").as_string());
    if (const auto* h = download.if_contains("header"); h != nullptr && h->is_object()) {
      for (const auto& [name, value] : h->as_object()) {
        if (value.is_string())
          link_headers.push_back(std::string(name) + ": " + std::string(value.as_string()));
      }
    }
  } catch (const std::exception&) {
    return Malformed("upstream's LFS batch answer is not what git-lfs expects");
  }
  if (!href.starts_with("http://") && !href.starts_with("https://")) {
    return Malformed("upstream's LFS download link is not an http(s) URL");
  }
  // The link carries its own credentials (signed, or in the headers given): the mirror's token is not sent.
  if (offset > 0) link_headers.push_back("Range: bytes=" + std::to_string(offset) + "-");
  auto got = http.Fetch(href, link_headers, sink);
  if (!got.ok()) return got.error();
  const long expected = offset > 0 ? 206 : 200;
  if (got->status != expected) return StatusError("the LFS object " + pointer.sha256, got->status);
  return Described(*got);
}

Result<Upstream::XetAccess> Upstream::XetReadToken(const hub::RepoId& repo,
                                                   const hub::ObjectId& commit) const {
  net::HttpClient http(options_.retry);
  const std::string url = options_.url + "/api/" + std::string(hub::Plural(repo.type)) + "/" + repo.str() +
                          "/xet-read-token/" + commit.hex();
  auto answer = http.Send("GET", url, AuthHeaders());
  if (!answer.ok()) return answer.error();
  if (answer->status != 200) return StatusError("the Xet read token of " + repo.str(), answer->status);
  XetAccess access;
  try {
    const auto doc = boost::json::parse(answer->body);
    access.cas_url = std::string(doc.at("casUrl").as_string());
    access.token = std::string(doc.at("accessToken").as_string());
  } catch (const std::exception&) {
    return Malformed("upstream's Xet read token answer is not what hf_xet expects");
  }
  if (!access.cas_url.starts_with("http://") && !access.cas_url.starts_with("https://"))
    return Malformed("upstream's CAS URL is not an http(s) URL");
  while (access.cas_url.back() == '/') access.cas_url.pop_back();
  return access;
}

Result<xet::ParsedReconstruction> Upstream::Reconstruction(
    const XetAccess& access, const xet::FileHash& file,
    std::optional<std::pair<uint64_t, uint64_t>> bytes) const {
  net::HttpClient http(options_.retry);
  auto headers = net::BearerHeader(access.token);
  if (bytes)
    headers.push_back("Range: bytes=" + std::to_string(bytes->first) + "-" + std::to_string(bytes->second));
  for (const bool v2 : {true, false}) {
    // A part's answer is asked while a client waits for its own: once, without back-off (the relay then
    // answers with whole ranges).
    auto answer = http.Send("GET", access.cas_url + (v2 ? "/v2" : "/v1") + "/reconstructions/" + file.hex(),
                            headers, {}, /*retries=*/!bytes);
    if (!answer.ok()) return answer.error();
    if (v2 && (answer->status == 404 || answer->status == 501)) continue;  // v2 not served
    if (answer->status != 200) return StatusError("the reconstruction of " + file.hex(), answer->status);
    return xet::ParseReconstruction(answer->body, v2);
  }
  return NotFound("upstream's CAS has no file " + file.hex());
}

Status Upstream::FetchRange(const std::string& url, uint64_t first, uint64_t last,
                            const net::HttpClient::Sink& sink) const {
  net::HttpClient http(options_.retry);
  auto got = http.Fetch(url, {"Range: bytes=" + std::to_string(first) + "-" + std::to_string(last)}, sink);
  if (!got.ok()) return got.error();
  if (got->status != 206 && got->status != 200) return StatusError("a xorb range", got->status);
  return Ok{};
}

}  // namespace cairn::mirror

#include "http/handler.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/beast/core/string.hpp>
#include <boost/json.hpp>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "common/work_queue.h"

namespace cairn::http {

Result<std::shared_ptr<const File>> File::Open(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return NotFound("no such file");
    return IoError(std::string("cannot open file: ") +
                   std::error_code(errno, std::generic_category()).message());
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return IoError("not a regular file");
  return std::shared_ptr<const File>(
      std::make_shared<File>(std::move(fd), static_cast<uint64_t>(st.st_size)));
}

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsTchar);
}

bool ValidHeaderValue(std::string_view v) {
  for (const char c : v) {
    const auto b = static_cast<unsigned char>(c);
    if ((b < 0x20 && b != '\t') || b == 0x7f) return false;
  }
  return true;
}

HeaderList SendableHeaders(HeaderList headers, std::vector<std::string>& refused) {
  HeaderList out;
  out.reserve(headers.size());
  for (auto& header : headers) {
    if (!IsToken(header.first) || !ValidHeaderValue(header.second)) {
      refused.push_back(std::move(header.first));
      continue;
    }
    auto same = std::find_if(out.begin(), out.end(), [&header](const auto& h) {
      return boost::beast::iequals(h.first, header.first);
    });
    // Set-Cookie is the one header sent once per value (RFC 9110 §5.3): each cookie its own.
    if (same != out.end() && !boost::beast::iequals(header.first, "Set-Cookie")) {
      same->second = std::move(header.second);
    } else {
      out.push_back(std::move(header));
    }
  }
  return out;
}

Response& Response::Header(std::string name, std::string value) {
  if (!IsToken(name) || !ValidHeaderValue(value)) {
    refused_headers.push_back(std::move(name));
    return *this;
  }
  auto same = [&name](const auto& h) { return boost::beast::iequals(h.first, name); };
  auto it = std::find_if(headers.begin(), headers.end(), same);
  if (it == headers.end()) {
    headers.emplace_back(std::move(name), std::move(value));
    return *this;
  }
  it->second = std::move(value);
  // Duplicates pushed onto the list by hand go too: one name, one value.
  headers.erase(std::remove_if(std::next(it), headers.end(), same), headers.end());
  return *this;
}

Response& Response::AddHeader(std::string name, std::string value) {
  if (!IsToken(name) || !ValidHeaderValue(value)) {
    refused_headers.push_back(std::move(name));
    return *this;
  }
  headers.emplace_back(std::move(name), std::move(value));
  return *this;
}

uint64_t Response::ContentLength() const {
  uint64_t n = 0;
  for (const auto& part : body) {
    if (const auto* s = std::get_if<std::string>(&part)) {
      n += s->size();
    } else if (const auto* f = std::get_if<FileSegment>(&part)) {
      n += f->length;
    } else {
      n += std::get<SourceSegment>(part).length;
    }
  }
  return n;
}

Response Response::Json(unsigned status, std::string json) {
  std::vector<std::string> parts;
  parts.push_back(std::move(json));
  return Json(status, std::move(parts));
}

Response Response::Json(unsigned status, std::vector<std::string> parts) {
  Response r;
  r.status = status;
  r.Header("Content-Type", "application/json");
  r.body.reserve(parts.size());
  for (auto& p : parts) r.body.emplace_back(std::move(p));
  return r;
}

Response Response::Text(unsigned status, std::string text, std::string content_type) {
  Response r;
  r.status = status;
  r.Header("Content-Type", std::move(content_type));
  r.body.emplace_back(std::move(text));
  return r;
}

Response Response::Binary(unsigned status, std::string bytes, std::string content_type) {
  return Text(status, std::move(bytes), std::move(content_type));
}

Response Response::ErrorJson(unsigned status, std::string_view message) {
  boost::json::object o;
  o["error"] = message;
  Response r = Json(status, boost::json::serialize(o));
  r.error = message;
  // A 503 is a moment of overload or an index or store out of reach: the stock clients retry (hf_xet with
  // its own back-off, others after Retry-After).
  if (status == 503) r.Header("Retry-After", "1");
  return r;
}

std::string_view Request::Header(std::string_view name) const {
  auto it = headers.find(name);
  if (it == headers.end()) return {};
  return {it->value().data(), it->value().size()};
}

const std::string& Request::Param(std::string_view name) const {
  static const std::string kEmpty;
  auto it = params.find(name);
  return it == params.end() ? kEmpty : it->second;
}

std::optional<std::string_view> Request::Query(std::string_view key) const {
  for (const auto& [k, v] : query)
    if (k == key) return std::string_view(v);
  return std::nullopt;
}

ResponseStream::~ResponseStream() {
  Finish();
}

bool ResponseStream::Write(std::string data) {
  if (finished_.load() || !conn_->open()) return false;
  if (!data.empty()) conn_->SendChunk(gen_, std::move(data));
  return true;
}

void ResponseStream::Finish() {
  if (!finished_.exchange(true)) conn_->EndChunked(gen_);
}

void ResponseStream::Abort() {
  if (!finished_.exchange(true)) conn_->AbortChunked(gen_);
}

Exchange::~Exchange() {
  if (Claim()) conn_->SendResponse(gen_, Response::ErrorJson(500, "the handler produced no response"));
}

void Exchange::Respond(Response r) {
  if (!Claim()) return;
  conn_->Answering(req_, r.status);
  conn_->SendResponse(gen_, std::move(r));
}

std::shared_ptr<ResponseStream> Exchange::StartStream(unsigned status, HeaderList headers) {
  auto stream = std::make_shared<ResponseStream>(conn_, gen_);
  if (Claim()) {
    conn_->Answering(req_, status);
    conn_->StartChunked(gen_, status, std::move(headers));
  } else {
    stream->Finish();  // already answered: a stream that accepts nothing
  }
  return stream;
}

bool Exchange::Offload(std::function<void()> work, std::function<void()> then) {
  auto conn = conn_;
  const bool queued = conn->workers().Post([conn, w = std::move(work), t = std::move(then)]() mutable {
    w();
    if (t) conn->Dispatch(std::move(t));
  });
  if (!queued) Respond(Response::ErrorJson(503, "server busy, retry later"));
  return queued;
}

}  // namespace cairn::http

#include "store/s3_objects.h"

#include <openssl/evp.h>

#include <array>

#include "common/base64.h"

namespace cairn::store {

Error S3Refused(const S3Client& client, std::string_view what, const S3Response& res) {
  std::string m =
      "S3 store " + client.Describe() + ": " + std::string(what) + ": HTTP " + std::to_string(res.status);
  if (!res.error_code.empty()) m += " " + res.error_code;
  if (!res.error_message.empty()) m += " (" + res.error_message + ")";
  return IoError(std::move(m));
}

Status S3ListKeys(S3Client& client, std::string_view prefix,
                  const std::function<void(std::string_view key, uint64_t size)>& fn) {
  std::string token;
  for (;;) {
    std::vector<std::pair<std::string, std::string>> params = {{"list-type", "2"},
                                                               {"prefix", std::string(prefix)}};
    if (!token.empty()) params.emplace_back("continuation-token", token);
    S3Request req;
    req.method = "GET";
    req.query = S3QueryString(std::move(params));
    auto res = client.Send(req);
    if (!res) return res.error();
    if (res->status != 200) return S3Refused(client, "ListObjectsV2 " + std::string(prefix), *res);
    const std::string_view doc = res->body;
    size_t at = 0;
    for (std::string_view item = S3XmlValue(doc, "Contents", &at); !item.empty();
         item = S3XmlValue(doc, "Contents", &at)) {
      const std::string_view key = S3XmlValue(item, "Key");
      const std::string_view size_text = S3XmlValue(item, "Size");
      uint64_t size = 0;
      for (const char c : size_text) {
        if (c < '0' || c > '9' || size > (UINT64_MAX - 9) / 10) {
          size = UINT64_MAX;  // not a size: whoever reads the object finds out
          break;
        }
        size = size * 10 + static_cast<uint64_t>(c - '0');
      }
      if (key.starts_with(prefix)) fn(key, size);
    }
    std::string next(S3XmlValue(doc, "NextContinuationToken"));
    if (S3XmlValue(doc, "IsTruncated") != "true" || next.empty()) return Ok{};
    if (next == token) return Ok{};  // a store that repeats itself must not loop us forever
    token = std::move(next);
  }
}

Status S3DeleteKeys(S3Client& client, std::span<const std::string> keys) {
  constexpr size_t kPerRequest = 1000;  // DeleteObjects' limit
  for (size_t at = 0; at < keys.size(); at += kPerRequest) {
    const auto batch = keys.subspan(at, std::min(kPerRequest, keys.size() - at));
    // Quiet: the answer lists only the keys that failed.
    std::string xml = "<Delete><Quiet>true</Quiet>";
    for (const std::string& key : batch) xml += "<Object><Key>" + key + "</Key></Object>";
    xml += "</Delete>";
    // S3 wants the body's MD5 on this call (Content-MD5), whatever other checksum is sent.
    std::array<uint8_t, 16> md5{};
    unsigned int len = 0;
    if (EVP_Digest(xml.data(), xml.size(), md5.data(), &len, EVP_md5(), nullptr) != 1 || len != md5.size()) {
      return IoError("DeleteObjects: cannot compute the body's MD5");
    }
    S3Request req;
    req.method = "POST";
    req.query = S3QueryString({{"delete", ""}});
    req.headers = {"Content-MD5: " + Base64Encode(md5), "Content-Type: application/xml"};
    req.body = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(xml.data()), xml.size());
    auto res = client.Send(req);
    if (!res) return res.error();
    if (res->status != 200) return S3Refused(client, "DeleteObjects", *res);
    // A 200 may still report keys it could not delete.
    if (auto code = S3XmlValue(res->body, "Code"); !code.empty()) {
      return IoError("DeleteObjects at " + client.Describe() + ": " +
                     std::string(S3XmlValue(res->body, "Key")) + ": " + std::string(code) + " " +
                     std::string(S3XmlValue(res->body, "Message")));
    }
  }
  return Ok{};
}

Result<bool> S3PutObject(S3Client& client, const std::string& key, std::span<const uint8_t> bytes,
                         bool if_absent) {
  S3Request req;
  req.method = "PUT";
  req.key = key;
  req.body = bytes;
  req.checksum = true;
  if (if_absent) req.headers.emplace_back("If-None-Match: *");
  auto res = client.Send(req);
  if (!res) return res.error();
  if (res->status == 200) return true;
  if (if_absent && res->status == 412) return false;
  return S3Refused(client, "PUT " + key, *res);
}

Result<std::optional<std::string>> S3GetObject(S3Client& client, const std::string& key, size_t max_bytes) {
  S3Request req;
  req.method = "GET";
  req.key = key;
  auto res = client.Send(req);
  if (!res) return res.error();
  if (res->status == 404) return std::optional<std::string>();
  if (res->status != 200) return S3Refused(client, "GET " + key, *res);
  if (res->body.size() > max_bytes)
    return LimitExceeded(key + " is larger than " + std::to_string(max_bytes) + " bytes");
  return std::optional<std::string>(std::move(res->body));
}

Status S3GetObjectInto(S3Client& client, const std::string& key, std::span<uint8_t> out) {
  S3Request req;
  req.method = "GET";
  req.key = key;
  req.into = out;
  auto res = client.Send(req);
  if (!res) {
    if (res.error().code == ErrorCode::kLimit)
      return Inconsistent(key + " is larger than " + std::to_string(out.size()) + " bytes");
    return res.error();
  }
  if (res->status == 404) return NotFound("no " + key);
  if (res->status != 200) return S3Refused(client, "GET " + key, *res);
  if (res->received != out.size())
    return Inconsistent(key + " holds " + std::to_string(res->received) + " bytes, not " +
                        std::to_string(out.size()));
  return Ok{};
}

}  // namespace cairn::store

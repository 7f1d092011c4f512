#include "hub/file_link.h"

#include "common/hex.h"

namespace cairn::hub {

std::vector<uint8_t> FileLink::Key(std::string_view sha256_hex) {
  std::vector<uint8_t> key(32);
  HexDecode(sha256_hex, key);
  return key;
}

std::optional<FileLink> FileLink::Parse(const index::RepoObject& object) {
  if (object.kind != kKind || object.key.size() != 32 || object.data.size() != 32) return std::nullopt;
  // A SHA-256 prints bytewise (a Xet hash's hex() does not).
  return FileLink{.sha256 = HexEncode(object.key), .file = xet::Hash::FromBytes(object.data.data())};
}

std::optional<xet::FileHash> FileLink::FileNamed(const index::RepoObject& object) {
  if (object.kind != kKind || object.data.size() != 32) return std::nullopt;
  return xet::Hash::FromBytes(object.data.data());
}

index::RepoObject FileLink::ToObject() const {
  return index::RepoObject{
      .key = Key(sha256), .kind = kKind, .data = std::vector<uint8_t>(file.bytes.begin(), file.bytes.end())};
}

}  // namespace cairn::hub

#include "lfs/lfs_service.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <unistd.h>

#include <charconv>

#include "common/hex.h"
#include "common/posix_io.h"
#include "common/unique_fd.h"

namespace cairn::lfs {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kPurpose = "cairn lfs uploads";
constexpr size_t kReadBlock = 8 << 20;

bool IsLowerHex(std::string_view s) {
  return s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

std::optional<uint64_t> ParseU64(std::string_view s) {
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

Status SyncDir(const fs::path& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid() || ::fsync(fd.get()) != 0)
    return IoError("syncing " + dir.string() + ": " + ErrnoText(errno));
  return Ok{};
}

// A part written to a temporary file of its own (a retried PUT may overlap the first), synced, then renamed
// to
// `<n>`: a part that is there is whole.
class FilePart final : public PartWriter {
 public:
  FilePart(fs::path dir, uint32_t number, uint64_t size, fs::path tmp, UniqueFd fd)
      : dir_(std::move(dir)), number_(number), size_(size), tmp_(std::move(tmp)), fd_(std::move(fd)) {}
  ~FilePart() override {
    if (fd_.valid()) {
      std::error_code ec;
      fs::remove(Tmp(), ec);
    }
  }

  Status Write(std::span<const uint8_t> data) override {
    if (data.size() > size_ - written_)
      return Malformed("part " + std::to_string(number_) + " is " + std::to_string(size_) + " bytes");
    if (WriteFull(fd_.get(), data) != 0) return IoError("writing a part: " + ErrnoText(errno));
    sha_.Update(data);
    written_ += data.size();
    return Ok{};
  }

  Result<std::string> Finish() override {
    if (written_ != size_) {
      return Malformed("part " + std::to_string(number_) + " ended after " + std::to_string(written_) +
                       " of its " + std::to_string(size_) + " bytes");
    }
    if (::fsync(fd_.get()) != 0) return IoError("syncing a part: " + ErrnoText(errno));
    fd_.reset();
    std::error_code ec;
    fs::rename(Tmp(), dir_ / std::to_string(number_), ec);
    if (ec) return IoError("placing a part: " + ec.message());
    if (auto st = SyncDir(dir_); !st) return st.error();
    return "\"" + sha_.Final().hex() + "\"";
  }

 private:
  const fs::path& Tmp() const { return tmp_; }

  fs::path dir_;
  uint32_t number_;
  uint64_t size_;
  fs::path tmp_;
  UniqueFd fd_;
  uint64_t written_ = 0;
  ingest::Sha256 sha_;
};

}  // namespace

LfsService::LfsService(cas::CasService& cas, index::CasIndex& index, LfsOptions options)
    : cas_(cas), index_(index), options_(std::move(options)) {
  options_.part_bytes = std::max<uint64_t>(options_.part_bytes, 1 << 20);
  SetUrlKeys(options_.url_keys);
}

void LfsService::SetUrlKeys(const cas::UrlKeys& keys) {
  auto next = std::make_shared<const files::LinkSigner>(keys, options_.max_link_ttl_seconds, *options_.clock,
                                                        kPurpose);
  std::lock_guard lock(mu_);
  signer_ = std::move(next);
}

std::shared_ptr<const files::LinkSigner> LfsService::Signer() const {
  std::lock_guard lock(mu_);
  return signer_;
}

Result<std::optional<xet::FileHash>> LfsService::Stored(const std::string& scope, std::string_view oid,
                                                        uint64_t size) {
  const auto sha = oid.size() == 64 && IsLowerHex(oid) ? xet::Hash::FromHex(oid) : std::nullopt;
  if (!sha) return Malformed("an object id is a SHA-256: 64 lower-case hex digits");
  auto file = index_.FileBySha256(*sha, scope);
  if (!file) return file.error();
  if (!*file) return std::optional<xet::FileHash>();
  auto entry = index_.GetFile(**file);
  if (!entry) return entry.error();
  if (!*entry || (*entry)->size != size) return std::optional<xet::FileHash>();
  return *file;
}

uint32_t LfsService::PartCount(uint64_t size) const {
  return static_cast<uint32_t>((size + options_.part_bytes - 1) / options_.part_bytes);
}

uint64_t LfsService::PartSize(const UploadGrant& grant, uint32_t number) const {
  const uint64_t start = uint64_t{number - 1} * options_.part_bytes;
  return std::min(options_.part_bytes, grant.size - start);
}

Result<UploadAction> LfsService::PlanUpload(const std::string& scope, std::string_view oid, uint64_t size,
                                            uint64_t ttl_seconds, bool multipart) {
  if (oid.size() != 64 || !IsLowerHex(oid))
    return Malformed("an object id is a SHA-256: 64 lower-case hex digits");
  if (size > options_.max_object_bytes)
    return LimitExceeded("objects are at most " + std::to_string(options_.max_object_bytes) + " bytes here");
  RemoveExpiredStaging();
  uint8_t id[12];
  if (RAND_bytes(id, sizeof(id)) != 1) return IoError("no randomness for an upload id");
  const std::string upload = HexEncode(std::span<const uint8_t>(id, sizeof(id)));
  auto link =
      Signer()->Sign(*xet::Hash::FromHex(oid), scope, ttl_seconds, std::to_string(size) + "." + upload);
  if (!link) return link.error();
  const std::string base = options_.public_url + "/v1/lfs/" + std::string(oid);
  UploadAction action{.href = base + "?" + link->query,
                      .header = {},
                      .verify_href = base + "/verify?" + link->query,
                      .expires_in = ttl_seconds};
  if (multipart && size > options_.part_bytes) {
    action.header.emplace_back("chunk_size", std::to_string(options_.part_bytes));
    const uint32_t parts = PartCount(size);
    for (uint32_t n = 1; n <= parts; ++n) {
      std::string key = std::to_string(n);  // "00001": as the Hub numbers parts
      if (key.size() < 5) key.insert(0, 5 - key.size(), '0');
      action.header.emplace_back(std::move(key), base + "/parts/" + std::to_string(n) + "?" + link->query);
    }
  }
  return action;
}

Result<UploadGrant> LfsService::Check(std::string_view oid,
                                      const std::vector<std::pair<std::string, std::string>>& query) const {
  const auto sha = oid.size() == 64 && IsLowerHex(oid) ? xet::Hash::FromHex(oid) : std::nullopt;
  if (!sha) return Malformed("an object id is a SHA-256: 64 lower-case hex digits");
  auto grant = Signer()->Verify(*sha, query);
  if (!grant) return grant.error();
  const size_t dot = grant->name.find('.');
  const auto size = ParseU64(std::string_view(grant->name).substr(0, dot));
  if (dot == std::string::npos || !size || !IsLowerHex(grant->name.substr(dot + 1)))
    return Denied("not an upload link");
  return UploadGrant{std::string(oid), *size, grant->scope, grant->name.substr(dot + 1), grant->expires};
}

Result<std::unique_ptr<FileIngest>> LfsService::BeginUpload(const UploadGrant& grant) {
  return FileIngest::Begin(cas_, grant.scope, grant.oid, grant.size);
}

fs::path LfsService::UploadDir(const UploadGrant& grant) const {
  // The expiry first: the cleanup reads it from the name.
  return options_.staging_dir / (std::to_string(grant.expires) + "-" + grant.upload);
}

Result<std::unique_ptr<PartWriter>> LfsService::BeginPart(const UploadGrant& grant, uint32_t number) {
  if (number == 0 || number > PartCount(grant.size))
    return Malformed("this upload has parts 1 to " + std::to_string(PartCount(grant.size)));
  const fs::path dir = UploadDir(grant);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return IoError("creating " + dir.string() + ": " + ec.message());
  uint8_t nonce[8];
  if (RAND_bytes(nonce, sizeof(nonce)) != 1) return IoError("no randomness for a part's name");
  fs::path tmp =
      dir / (std::to_string(number) + "." + HexEncode(std::span<const uint8_t>(nonce, 8)) + ".tmp");
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid()) return IoError("creating a part in " + dir.string() + ": " + ErrnoText(errno));
  return std::unique_ptr<PartWriter>(
      std::make_unique<FilePart>(dir, number, PartSize(grant, number), std::move(tmp), std::move(fd)));
}

Result<Ingested> LfsService::CompleteParts(const UploadGrant& grant,
                                           const std::vector<std::pair<uint32_t, std::string>>& parts) {
  const uint32_t count = PartCount(grant.size);
  if (parts.size() != count)
    return Malformed("this upload has " + std::to_string(count) + " parts; " + std::to_string(parts.size()) +
                     " were listed");
  for (uint32_t i = 0; i < count; ++i) {
    if (parts[i].first != i + 1) return Malformed("parts are listed in order, numbered from 1");
  }
  const fs::path dir = UploadDir(grant);
  auto ingest = BeginUpload(grant);
  if (!ingest) return ingest.error();
  std::vector<uint8_t> block(kReadBlock);
  for (const auto& [number, etag] : parts) {
    const fs::path path = dir / std::to_string(number);
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) return NotFound("part " + std::to_string(number) + " was not received");
    ingest::Sha256 sha;
    const uint64_t size = PartSize(grant, number);
    for (uint64_t at = 0; at < size;) {
      const auto n = static_cast<size_t>(std::min<uint64_t>(block.size(), size - at));
      const int rc = PreadFull(fd.get(), at, std::span<uint8_t>(block.data(), n));
      if (rc == kShortFile) return NotFound("part " + std::to_string(number) + " is incomplete");
      if (rc != 0) return IoError("reading part " + std::to_string(number) + ": " + ErrnoText(rc));
      const std::span<const uint8_t> data(block.data(), n);
      sha.Update(data);
      if (auto st = (*ingest)->Feed(data); !st) return st.error();
      at += n;
    }
    if ("\"" + sha.Final().hex() + "\"" != etag)
      return Malformed("part " + std::to_string(number) + "'s ETag is not the one its upload answered");
  }
  auto done = (*ingest)->Finish();
  if (!done) return done.error();
  std::error_code ec;
  fs::remove_all(dir, ec);  // a leftover is removed with the expired ones
  return done;
}

void LfsService::RemoveExpiredStaging() {
  const int64_t now = options_.clock->UnixSeconds();
  {
    std::lock_guard lock(mu_);
    if (now - last_cleanup_ < 60) return;
    last_cleanup_ = now;
  }
  std::error_code ec;
  for (auto it = fs::directory_iterator(options_.staging_dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const auto expires = ParseU64(std::string_view(name).substr(0, name.find('-')));
    if (expires && static_cast<int64_t>(*expires) + 60 < now) {
      std::error_code rm;
      fs::remove_all(it->path(), rm);
    }
  }
}

}  // namespace cairn::lfs

#include "store/s3_store.h"

#include <blake3.h>
#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <vector>

#include "store/s3_objects.h"

namespace cairn::store {
namespace {

constexpr size_t kMinPartBytes = 5ULL << 20;  // S3's smallest part but the last

std::string What(BlobKind kind, const xet::Hash& hash) {
  return std::string(BlobKindName(kind)) + " " + hash.hex();
}

std::array<uint8_t, 32> Digest(std::span<const uint8_t> bytes) {
  blake3_hasher h;
  blake3_hasher_init(&h);
  blake3_hasher_update(&h, bytes.data(), bytes.size());
  std::array<uint8_t, 32> out{};
  blake3_hasher_finalize(&h, out.data(), out.size());
  return out;
}

}  // namespace

Error S3Store::Refused(std::string_view what, const S3Response& res) const {
  return S3Refused(*client_, what, res);
}

std::string S3Store::KeyOf(BlobKind kind, const xet::Hash& hash) const {
  return options_.prefix + std::string(BlobKindFolder(kind)) + "/" + hash.hex();
}

std::string S3Store::Describe() const {
  return "s3://" + options_.s3.bucket + "/" + options_.prefix + " at " + client_->options().endpoint;
}

Result<std::unique_ptr<S3Store>> S3Store::Open(S3StoreOptions options) {
  if (!options.prefix.empty() && !options.prefix.ends_with('/')) options.prefix += '/';
  for (const char c : options.prefix) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '/'))
      return Malformed("S3 key prefix '" + options.prefix + "' may hold only A-Z a-z 0-9 - _ . /");
  }
  options.part_bytes = std::max(options.part_bytes, kMinPartBytes);
  auto client = S3Client::Create(options.s3);
  if (!client) return client.error();
  std::unique_ptr<S3Client> presigner;
  if (!options.public_endpoint.empty()) {
    S3Options pub = options.s3;
    pub.endpoint = options.public_endpoint;
    auto made = S3Client::Create(pub);  // contacts nothing: it only signs
    if (!made) return made.error();
    presigner = std::move(*made);
  }
  std::unique_ptr<S3Store> store(new S3Store(std::move(options), std::move(*client)));
  store->presigner_ = std::move(presigner);
  if (auto st = store->Ping(); !st) return st.error();
  return store;
}

std::string S3Store::PresignedUrl(BlobKind kind, const xet::Hash& hash, uint64_t now_unix,
                                  uint64_t expiry_unix, std::string_view tag) const {
  return PresignGet(presigner_ ? *presigner_ : *client_, KeyOf(kind, hash), now_unix,
                    expiry_unix > now_unix ? expiry_unix - now_unix : 1, tag);
}

Status S3Store::Ping() {
  S3Request req;
  req.method = "HEAD";
  auto res = client_->Send(req);
  if (!res) return res.error();
  if (res->status == 200) return Ok{};
  if (res->status == 404) return IoError("S3 store " + client_->Describe() + ": the bucket does not exist");
  if (res->status == 403 || res->status == 401)
    return IoError(
        "S3 store " + client_->Describe() +
        ": access denied (check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY and the bucket's policy)");
  return Refused("HEAD bucket", *res);
}

// ---------------------------------------------------------------------------------------------------------------
// Puts

class S3Store::Writer final : public BlobWriter {
 public:
  Writer(S3Store& store, BlobKind kind, const xet::Hash& hash)
      : store_(store), kind_(kind), hash_(hash), key_(store.KeyOf(kind, hash)), sha_(EVP_MD_CTX_new()) {
    blake3_hasher_init(&digest_);
    if (sha_ != nullptr) EVP_DigestInit_ex(sha_.get(), EVP_sha256(), nullptr);
  }
  ~Writer() override {
    if (!upload_id_.empty()) Abort();
  }

  Status Append(std::span<const uint8_t> data) override {
    Piece p;
    p.owned.assign(data.begin(), data.end());
    p.bytes = p.owned;  // a vector's buffer stays put when the vector is moved
    return Add(std::move(p));
  }

  Status AppendStable(std::span<const uint8_t> data) override {
    Piece p;
    p.bytes = data;
    return Add(std::move(p));
  }

  Result<PutOutcome> Commit(const PutOptions& options) override {
    auto outcome = CommitOnce(options);
    if (outcome) store_.RememberSize(kind_, hash_, appended_);  // what is stored now has this size
    return outcome;
  }

  uint64_t bytes_appended() const override { return appended_; }

 private:
  // Bytes appended and not sent yet: the caller's (AppendStable) or a copy (Append).
  struct Piece {
    std::vector<uint8_t> owned;
    std::span<const uint8_t> bytes;
  };

  Status Add(Piece p) {
    if (failed_) return IoError("S3 put of " + What(kind_, hash_) + " failed before");
    if (done_) return IoError("append after commit");
    blake3_hasher_update(&digest_, p.bytes.data(), p.bytes.size());
    // The SHA-256 a single PUT signs, hashed here as the bytes arrive rather than at Commit, when the whole
    // body waits for it (~25 ms for 35 MB).
    if (sha_ != nullptr && upload_id_.empty()) EVP_DigestUpdate(sha_.get(), p.bytes.data(), p.bytes.size());
    appended_ += p.bytes.size();
    pending_bytes_ += p.bytes.size();
    if (!p.bytes.empty()) pending_.push_back(std::move(p));
    // Past one part, the blob goes up as a multipart upload, a part at a time as the bytes arrive (a blob of
    // at most one part waits for Commit: one PUT).
    const size_t part = store_.options_.part_bytes;
    while (pending_bytes_ > part) {
      if (auto st = SendPart(part); !st) {
        failed_ = true;
        return st.error();
      }
    }
    return Ok{};
  }

  // The first `n` pending bytes, as spans.
  std::vector<std::span<const uint8_t>> Front(size_t n) const {
    std::vector<std::span<const uint8_t>> out;
    for (const auto& p : pending_) {
      if (n == 0) break;
      const size_t take = std::min(n, p.bytes.size());
      out.push_back(p.bytes.first(take));
      n -= take;
    }
    return out;
  }

  void Consume(size_t n) {
    pending_bytes_ -= n;
    while (n > 0) {
      Piece& p = pending_.front();
      if (p.bytes.size() > n) {
        p.bytes = p.bytes.subspan(n);
        return;
      }
      n -= p.bytes.size();
      pending_.pop_front();
    }
  }

  Result<PutOutcome> CommitOnce(const PutOptions& options) {
    if (failed_) return IoError("S3 put of " + What(kind_, hash_) + " failed before");
    if (done_) return IoError("commit called twice");
    done_ = true;
    std::array<uint8_t, 32> digest{};
    blake3_hasher_finalize(&digest_, digest.data(), digest.size());
    const auto intact = [&](std::span<const uint8_t> existing) {
      if (existing.size() != appended_) return false;
      if (options.verify_existing) return options.verify_existing(existing);
      return Digest(existing) == digest;
    };

    if (upload_id_.empty()) {
      // One PUT, if nothing is stored under the name yet.
      auto put = PutWhole(/*conditional=*/true);
      if (!put) return put.error();
      if (*put) return PutOutcome{};
      auto judged = JudgeExisting(intact);
      if (!judged) return judged.error();
      if (*judged) return PutOutcome{.already_present = true, .replaced_corrupt = false};
      auto again = PutWhole(/*conditional=*/false);
      if (!again) return again.error();
      return PutOutcome{.already_present = false, .replaced_corrupt = true};
    }

    if (pending_bytes_ > 0) {
      if (auto st = SendPart(pending_bytes_); !st) return st.error();
    }
    auto done = Complete(/*conditional=*/true);
    if (!done) return done.error();
    if (*done) return PutOutcome{};
    auto judged = JudgeExisting(intact);
    if (!judged) return judged.error();
    if (*judged) {
      Abort();
      return PutOutcome{.already_present = true, .replaced_corrupt = false};
    }
    auto again = Complete(/*conditional=*/false);
    if (!again) return again.error();
    return PutOutcome{.already_present = false, .replaced_corrupt = true};
  }

  // True: stored. False: the condition failed (an object is there). The pending bytes stay pending.
  Result<bool> PutWhole(bool conditional) {
    S3Request req;
    req.method = "PUT";
    req.key = key_;
    req.body_pieces = Front(pending_bytes_);
    if (req.body_pieces.empty()) req.body = {};  // an empty blob
    req.checksum = true;
    if (sha_ != nullptr && upload_id_.empty()) {
      std::unique_ptr<EVP_MD_CTX, ShaFree> done(EVP_MD_CTX_new());
      std::array<uint8_t, 32> sha{};
      unsigned int len = sha.size();
      if (done != nullptr && EVP_MD_CTX_copy_ex(done.get(), sha_.get()) == 1 &&
          EVP_DigestFinal_ex(done.get(), sha.data(), &len) == 1)
        req.sha256 = sha;  // a copy: a second PUT (replacing a corrupt blob) signs the same hash
    }
    if (conditional) req.headers.emplace_back("If-None-Match: *");
    auto res = store_.client_->Send(req);
    if (!res) return res.error();
    if (res->status == 200) return true;
    if (res->status == 412) return false;
    return store_.Refused("PUT " + key_, *res);
  }

  // Sends the next `n` pending bytes as the next part (starting the multipart upload first if needed).
  Status SendPart(size_t n) {
    if (upload_id_.empty()) {
      S3Request req;
      req.method = "POST";
      req.key = key_;
      req.query = S3QueryString({{"uploads", ""}});
      auto res = store_.client_->Send(req);
      if (!res) return res.error();
      if (res->status != 200) return store_.Refused("CreateMultipartUpload " + key_, *res);
      upload_id_ = std::string(S3XmlValue(res->body, "UploadId"));
      if (upload_id_.empty()) return store_.Refused("CreateMultipartUpload " + key_ + " (no UploadId)", *res);
    }
    S3Request req;
    req.method = "PUT";
    req.key = key_;
    const int number = static_cast<int>(etags_.size()) + 1;
    req.query = S3QueryString({{"partNumber", std::to_string(number)}, {"uploadId", upload_id_}});
    req.body_pieces = Front(n);
    req.checksum = true;
    auto res = store_.client_->Send(req);
    if (!res) return res.error();
    if (res->status != 200 || res->etag.empty()) return store_.Refused("UploadPart " + key_, *res);
    etags_.push_back(res->etag);
    Consume(n);
    return Ok{};
  }

  Result<bool> Complete(bool conditional) {
    std::string xml = "<CompleteMultipartUpload>";
    for (size_t i = 0; i < etags_.size(); ++i) {
      xml +=
          "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" + etags_[i] + "</ETag></Part>";
    }
    xml += "</CompleteMultipartUpload>";
    S3Request req;
    req.method = "POST";
    req.key = key_;
    req.query = S3QueryString({{"uploadId", upload_id_}});
    req.body = {reinterpret_cast<const uint8_t*>(xml.data()), xml.size()};
    req.headers.emplace_back("Content-Type: application/xml");
    if (conditional) req.headers.emplace_back("If-None-Match: *");
    auto res = store_.client_->Send(req);
    if (!res) return res.error();
    // CompleteMultipartUpload can answer 200 with an error document in the body.
    if (res->status == 200 && res->body.find("<Error>") == std::string::npos) {
      upload_id_.clear();
      return true;
    }
    if (res->status == 412 || res->error_code == "PreconditionFailed") return false;
    return store_.Refused("CompleteMultipartUpload " + key_, *res);
  }

  void Abort() {
    S3Request req;
    req.method = "DELETE";
    req.key = key_;
    req.query = S3QueryString({{"uploadId", upload_id_}});
    (void)store_.client_->Send(req);  // best effort: a bucket lifecycle rule removes what is left
    upload_id_.clear();
  }

  // Reads the object already under the name and judges it.
  Result<bool> JudgeExisting(const std::function<bool(std::span<const uint8_t>)>& intact) {
    auto stat = store_.Stat(kind_, hash_);
    if (!stat) return stat.error();
    if (!stat->exists) return false;  // gone again (deleted): replace it
    if (stat->size != appended_) return false;
    std::vector<uint8_t> existing(stat->size);
    auto read = store_.ReadRange(kind_, hash_, 0, existing);
    if (!read) {
      if (read.error().code == ErrorCode::kNotFound || read.error().code == ErrorCode::kInconsistent)
        return false;
      return read.error();
    }
    return intact(existing);
  }

  S3Store& store_;
  const BlobKind kind_;
  const xet::Hash hash_;
  const std::string key_;
  std::deque<Piece> pending_;
  size_t pending_bytes_ = 0;
  uint64_t appended_ = 0;
  blake3_hasher digest_;  // of every byte appended: compares with an existing blob when there is no verifier
  struct ShaFree {
    void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
  };
  std::unique_ptr<EVP_MD_CTX, ShaFree>
      sha_;  // SHA-256 of every byte appended, until a multipart upload starts
  std::string upload_id_;
  std::vector<std::string> etags_;
  bool done_ = false;
  bool failed_ = false;
};

Result<std::unique_ptr<BlobWriter>> S3Store::BeginPut(BlobKind kind, const xet::Hash& hash) {
  return std::unique_ptr<BlobWriter>(std::make_unique<Writer>(*this, kind, hash));
}

// ---------------------------------------------------------------------------------------------------------------
// Reads

Result<BlobStat> S3Store::Stat(BlobKind kind, const xet::Hash& hash) {
  S3Request req;
  req.method = "HEAD";
  req.key = KeyOf(kind, hash);
  auto res = client_->Send(req);
  if (!res) return res.error();
  if (res->status == 200) return BlobStat{.exists = true, .size = res->content_length};
  if (res->status == 404) return BlobStat{};
  return Refused("HEAD " + req.key, *res);
}

namespace {
std::string SizeKey(BlobKind kind, const xet::Hash& hash) {
  std::string key(1 + hash.bytes.size(), static_cast<char>(kind));
  std::memcpy(key.data() + 1, hash.bytes.data(), hash.bytes.size());
  return key;
}
}  // namespace

void S3Store::RememberSize(BlobKind kind, const xet::Hash& hash, uint64_t size) {
  std::lock_guard lock(sizes_mu_);
  if (sizes_.size() >= kMaxSizes) sizes_.clear();
  sizes_[SizeKey(kind, hash)] = size;
}

void S3Store::ForgetSize(BlobKind kind, const xet::Hash& hash) {
  std::lock_guard lock(sizes_mu_);
  sizes_.erase(SizeKey(kind, hash));
}

Result<OpenBlob> S3Store::OpenForRead(BlobKind kind, const xet::Hash& hash) {
  {
    std::lock_guard lock(sizes_mu_);
    if (auto it = sizes_.find(SizeKey(kind, hash)); it != sizes_.end())
      return OpenBlob{.fd = UniqueFd(), .size = it->second};
  }
  auto st = Stat(kind, hash);
  if (!st) return st.error();
  if (!st->exists) return NotFound("no " + What(kind, hash));
  RememberSize(kind, hash, st->size);
  return OpenBlob{.fd = UniqueFd(), .size = st->size};
}

Status S3Store::ReadRange(BlobKind kind, const xet::Hash& hash, uint64_t offset, std::span<uint8_t> out) {
  const auto outside = [&](uint64_t size) {
    return Inconsistent("range [" + std::to_string(offset) + ", +" + std::to_string(out.size()) +
                        ") is outside " + What(kind, hash) +
                        (size == UINT64_MAX ? std::string() : " of " + std::to_string(size) + " bytes"));
  };
  if (out.empty()) {
    auto st = Stat(kind, hash);
    if (!st) return st.error();
    if (!st->exists) return NotFound("no " + What(kind, hash));
    if (offset > st->size) return outside(st->size);
    return Ok{};
  }
  if (offset > UINT64_MAX - out.size()) return outside(UINT64_MAX);
  S3Request req;
  req.method = "GET";
  req.key = KeyOf(kind, hash);
  req.headers.push_back("Range: bytes=" + std::to_string(offset) + "-" +
                        std::to_string(offset + out.size() - 1));
  req.into = out;
  auto res = client_->Send(req);
  if (!res) {
    // More bytes than asked for: the store ignored the range (answered the whole object).
    if (res.error().code == ErrorCode::kLimit && offset == 0) return outside(UINT64_MAX);
    return res.error();
  }
  if (res->status == 404 || res->status == 416 ||
      ((res->status == 200 || res->status == 206) && res->received != out.size()))
    ForgetSize(kind, hash);  // whatever this process remembered of the blob was wrong
  if (res->status == 404) return NotFound("no " + What(kind, hash));
  if (res->status == 416) return outside(UINT64_MAX);
  if (res->status != 206 && res->status != 200) return Refused("GET " + req.key, *res);
  if (res->received != out.size()) return outside(UINT64_MAX);  // the range ran past the end
  return Ok{};
}

// A ranged GET read as it goes; a miss or a range outside the blob makes this process forget the size it
// remembered (another process deleted or replaced the blob), as ReadRange does.
class S3Store::Reader final : public BlobReader {
 public:
  Reader(S3Store& store, BlobKind kind, const xet::Hash& hash, uint64_t offset, uint64_t length)
      : store_(store),
        kind_(kind),
        hash_(hash),
        reader_(store.client_->OpenRange(store.KeyOf(kind, hash), offset, length)) {}
  Status Read(std::span<uint8_t> out) override {
    auto st = reader_->Read(out);
    if (!st.ok() &&
        (st.error().code == ErrorCode::kNotFound || st.error().code == ErrorCode::kInconsistent)) {
      store_.ForgetSize(kind_, hash_);
      if (st.error().code == ErrorCode::kNotFound) return NotFound("no " + What(kind_, hash_));
    }
    return st;
  }

 private:
  S3Store& store_;
  const BlobKind kind_;
  const xet::Hash hash_;
  std::unique_ptr<S3RangeReader> reader_;
};

std::unique_ptr<BlobReader> S3Store::OpenRange(BlobKind kind, const xet::Hash& hash, uint64_t offset,
                                               uint64_t length) {
  return std::make_unique<Reader>(*this, kind, hash, offset, length);
}

Status S3Store::List(BlobKind kind, const std::function<void(const xet::Hash&)>& fn) {
  const std::string prefix = options_.prefix + std::string(BlobKindFolder(kind)) + "/";
  return S3ListKeys(*client_, prefix, [&](std::string_view key, uint64_t) {
    if (auto h = xet::Hash::FromHex(key.substr(prefix.size()))) fn(*h);
  });
}

Result<bool> S3Store::Delete(BlobKind kind, const xet::Hash& hash) {
  auto st = Stat(kind, hash);
  if (!st) return st.error();
  if (!st->exists) return false;
  ForgetSize(kind, hash);
  S3Request req;
  req.method = "DELETE";
  req.key = KeyOf(kind, hash);
  auto res = client_->Send(req);
  if (!res) return res.error();
  if (res->status != 204 && res->status != 200 && res->status != 404)
    return Refused("DELETE " + req.key, *res);
  return true;
}

Status S3Store::DeleteMany(BlobKind kind, std::span<const xet::Hash> hashes) {
  std::vector<std::string> keys;
  keys.reserve(hashes.size());
  for (const xet::Hash& h : hashes) {
    ForgetSize(kind, h);
    keys.push_back(KeyOf(kind, h));
  }
  return S3DeleteKeys(*client_, keys);
}

}  // namespace cairn::store

#include "git/pack.h"

#include <openssl/evp.h>

namespace cairn::git {

namespace {

uint8_t PackType(ObjectKind kind) {
  switch (kind) {
    case ObjectKind::kCommit:
      return 1;
    case ObjectKind::kTree:
      return 2;
    case ObjectKind::kBlob:
      return 3;
  }
  return 3;
}

}  // namespace

struct PackWriter::Sha1 {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  bool ok = ctx != nullptr && EVP_DigestInit_ex(ctx, EVP_sha1(), nullptr) == 1;
  ~Sha1() { EVP_MD_CTX_free(ctx); }
  void Update(std::string_view bytes) { ok = ok && EVP_DigestUpdate(ctx, bytes.data(), bytes.size()) == 1; }
};

void AppendObjectHeader(std::string& out, ObjectKind kind, uint64_t size) {
  uint8_t byte = static_cast<uint8_t>(PackType(kind) << 4 | (size & 0x0f));
  size >>= 4;
  while (size != 0) {
    out.push_back(static_cast<char>(byte | 0x80));
    byte = static_cast<uint8_t>(size & 0x7f);
    size >>= 7;
  }
  out.push_back(static_cast<char>(byte));
}

PackWriter::PackWriter(uint32_t objects, std::function<bool(std::string&&)> sink, size_t piece_bytes,
                       int level)
    : objects_(objects),
      sink_(std::move(sink)),
      piece_bytes_(piece_bytes),
      deflater_(level),
      sha1_(std::make_unique<Sha1>()) {
  pending_.append("PACK");
  for (const uint32_t word : {2U, objects}) {
    for (int shift = 24; shift >= 0; shift -= 8) pending_.push_back(static_cast<char>(word >> shift & 0xff));
  }
}

PackWriter::~PackWriter() = default;

Status PackWriter::Add(ObjectKind kind, std::span<const uint8_t> body) {
  if (added_ == objects_) return Inconsistent("pack: more objects than announced");
  ++added_;
  AppendObjectHeader(pending_, kind, body.size());
  if (auto st = deflater_.Deflate(body, pending_); !st) return st;
  return pending_.size() >= piece_bytes_ ? Emit(false) : Status(Ok{});
}

Status PackWriter::Finish() {
  if (added_ != objects_) return Inconsistent("pack: fewer objects than announced");
  return Emit(true);
}

Status PackWriter::Emit(bool last) {
  sha1_->Update(pending_);
  if (last) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    if (!sha1_->ok || EVP_DigestFinal_ex(sha1_->ctx, digest, &len) != 1 || len != 20) {
      return IoError("pack: SHA-1 failed");
    }
    pending_.append(reinterpret_cast<const char*>(digest), len);
  }
  std::string piece;
  piece.swap(pending_);
  if (!sink_(std::move(piece))) return Unavailable("the client went away");
  return Ok{};
}

}  // namespace cairn::git

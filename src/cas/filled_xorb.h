// A xorb the server fills itself as its chunk region arrives (a mirror's relay receiving upstream's whole
// xorb; CasService::BeginFilledXorb): a put of the store whose file can be read back while it is filled, then
// stored as it is by CasService::PutHashedXorb — its bytes written once — or dropped (destroying it removes
// what was written). Thread-safety: one thread appends; the descriptor may be read from any thread meanwhile.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <utility>

#include "common/error.h"
#include "store/blob_store.h"

namespace cairn::cas {

class FilledXorb {
 public:
  // `put` must give a readable descriptor (store::BlobWriter::ReadableFd).
  explicit FilledXorb(std::unique_ptr<store::BlobWriter> put) : put_(std::move(put)) {}

  Status Append(std::span<const uint8_t> bytes) { return put_->Append(bytes); }
  uint64_t size() const { return put_->bytes_appended(); }
  // The put's file, owned by it (duplicate it to keep it past the put): bytes [0, size()) read back.
  int fd() const { return put_->ReadableFd(); }

 private:
  friend class CasService;
  std::unique_ptr<store::BlobWriter> put_;
};

}  // namespace cairn::cas

// A BlobStore that hands every call to another one: the base of decorators that change one thing (tests
// and benchmarks: a store that throttles reads, one that reads in blocks). The wrapped store must outlive
// it; thread-safety and failures are the wrapped store's. DeleteMany is not forwarded: it goes through Delete
// one blob at a time, so a decorator that changes Delete sees every deletion.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "store/blob_store.h"

namespace cairn::store {

class ForwardingStore : public BlobStore {
 public:
  explicit ForwardingStore(BlobStore& inner) : inner_(inner) {}

  Result<std::unique_ptr<BlobWriter>> BeginPut(BlobKind k, const xet::Hash& h) override {
    return inner_.BeginPut(k, h);
  }
  Result<BlobStat> Stat(BlobKind k, const xet::Hash& h) override { return inner_.Stat(k, h); }
  Status ReadRange(BlobKind k, const xet::Hash& h, uint64_t offset, std::span<uint8_t> out) override {
    return inner_.ReadRange(k, h, offset, out);
  }
  std::unique_ptr<BlobReader> OpenRange(BlobKind k, const xet::Hash& h, uint64_t offset,
                                        uint64_t length) override {
    return inner_.OpenRange(k, h, offset, length);
  }
  Result<OpenBlob> OpenForRead(BlobKind k, const xet::Hash& h) override { return inner_.OpenForRead(k, h); }
  bool local() const override { return inner_.local(); }
  Status List(BlobKind k, const std::function<void(const xet::Hash&)>& fn) override {
    return inner_.List(k, fn);
  }
  Result<bool> Delete(BlobKind k, const xet::Hash& h) override { return inner_.Delete(k, h); }
  std::string PresignedUrl(BlobKind k, const xet::Hash& h, uint64_t now, uint64_t expiry,
                           std::string_view tag) const override {
    return inner_.PresignedUrl(k, h, now, expiry, tag);
  }
  Status Ping() override { return inner_.Ping(); }
  std::string Describe() const override { return inner_.Describe(); }

 protected:
  BlobStore& inner_;
};

}  // namespace cairn::store

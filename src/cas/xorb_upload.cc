#include "cas/xorb_upload.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <utility>

#include "cas/service.h"

namespace cairn::cas {

XorbUpload::XorbUpload(CasService& service, const xet::XorbHash& hash,
                       std::unique_ptr<store::BlobWriter> writer, std::unique_ptr<BufferPool::Buffer> body)
    : service_(service), hash_(hash), body_(std::move(body)), writer_(std::move(writer)) {
  if (writer_ == nullptr) return;
  flusher_ = writer_->NewFlusher();
  write_thread_ = std::thread([this] { WriteLoop(); });
  if (flusher_ != nullptr) flush_thread_ = std::thread([this] { FlushLoop(); });
  hash_thread_ = std::thread([this] { HashLoop(); });
}

XorbUpload::~XorbUpload() {
  {
    std::lock_guard lock(mu_);
    cancelled_ = true;
  }
  finishing_ = true;
  cv_.notify_all();
  for (std::thread* t : {&write_thread_, &flush_thread_, &hash_thread_}) {
    if (t->joinable()) t->join();
  }
}

std::span<uint8_t> XorbUpload::Space() {
  if (writer_ == nullptr) return {};  // the bytes are not kept
  return {body_->data() + size_, xet::kMaxXorbUploadBytes - size_};
}

Status XorbUpload::Append(std::span<const uint8_t> data) {
  if (writer_ == nullptr) return Ok{};  // stored before: the bytes are not needed
  if (data.size() > xet::kMaxXorbUploadBytes - size_)
    return LimitExceeded("xorb upload larger than " + std::to_string(xet::kMaxXorbUploadBytes) + " bytes");
  if (data.data() != body_->data() + size_) std::memcpy(body_->data() + size_, data.data(), data.size());
  size_ += data.size();
  {
    std::lock_guard lock(mu_);
    if (!write_status_) return write_status_.error();
    if (!flush_status_) return flush_status_.error();
    received_ = size_;
  }
  cv_.notify_all();
  return Ok{};
}

// Writes what has arrived, as it arrives, until the end or the first failure.
void XorbUpload::WriteLoop() {
  size_t done = 0;
  Status st = Ok{};
  for (;;) {
    size_t upto = 0;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return cancelled_ || ended_ || received_ > done; });
      if (cancelled_) break;
      if (received_ == done) break;  // ended, all written
      upto = received_;
    }
    st = writer_->AppendStable({body_->data() + done, upto - done});  // body_ outlives writer_
    if (!st) break;
    done = upto;
    {
      std::lock_guard lock(mu_);
      written_ = done;
    }
    cv_.notify_all();
  }
  {
    std::lock_guard lock(mu_);
    write_status_ = std::move(st);
    write_done_ = true;
  }
  cv_.notify_all();
}

// Makes what the write thread wrote durable, kFlushStep at a time, and the rest once it is done. Flushing as
// the bytes arrive keeps the final flush short: on virtualized or write-cached disks the flush costs in
// proportion to the data it finds unflushed, however early the kernel started writing it back (35 MB: ~50 ms
// at the end, against ~5 ms when flushed every 4 MiB; BENCHMARKS.md).
void XorbUpload::FlushLoop() {
  constexpr size_t kFlushStep = 4 << 20;
  size_t flushed = 0;
  for (;;) {
    size_t upto = 0;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return cancelled_ || write_done_ || written_ - flushed >= kFlushStep; });
      if (cancelled_ || !write_status_) return;
      if (write_done_ && written_ == flushed) return;
      upto = written_;
    }
    Status st = flusher_->Flush();
    flushed = upto;
    if (!st) {
      std::lock_guard lock(mu_);
      flush_status_ = std::move(st);
      return;
    }
  }
}

// Hashes the complete chunks that have arrived, as they arrive, until Finish takes over. At a lower CPU
// priority than the receive and the write and flush threads: hashing ahead only saves Finish work, while the
// disk flush, which starts only once bytes are written, is what the upload waits for (on 2 cores, 98 against
// 107 ms per upload, 6 paired runs of api_bench; BENCHMARKS.md).
void XorbUpload::HashLoop() {
  constexpr int kHashThreadNice = 10;
  (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), kHashThreadNice);  // Linux: per thread
  size_t seen = 0;
  for (;;) {
    size_t upto = 0;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return cancelled_ || ended_ || received_ > seen; });
      if (cancelled_ || ended_) return;  // Finish hashes the rest on the pool
      upto = received_;
    }
    prehasher_.Advance({body_->data(), upto}, &finishing_);
    seen = upto;
  }
}

Result<bool> XorbUpload::Finish() {
  if (writer_ == nullptr) return false;
  return service_.FinishXorb(*this);
}

}  // namespace cairn::cas

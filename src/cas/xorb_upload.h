// A xorb upload whose body arrives in pieces (POST /v1/xorbs streams into one): the state and threads of one
// upload, apart from the service that begins and finishes it (CasService::BeginXorb, CasService::FinishXorb).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <thread>

#include "common/buffer_pool.h"
#include "common/error.h"
#include "store/blob_store.h"
#include "xet/hash.h"
#include "xet/xorb.h"

namespace cairn::cas {

class CasService;

// A xorb upload whose body arrives in pieces. Each piece is kept (validation needs the whole xorb), written
// to the store by a thread of the upload's own as soon as it arrives, made durable by a second thread
// following the first, and its complete chunks decoded and hashed by a third, so that receiving, writing,
// flushing and most of the validation overlap; Finish validates what is left (on the worker pool) while the
// last bytes are written and flushed, then commits and indexes. Destroying an unfinished upload discards
// whatever was written.
//
// Thread-safety: one caller at a time (Append in order, then Finish once).
class XorbUpload {
 public:
  ~XorbUpload();
  XorbUpload(const XorbUpload&) = delete;
  XorbUpload& operator=(const XorbUpload&) = delete;

  // Where the next bytes may be received in place (empty once kMaxXorbUploadBytes arrived): Append of a
  // prefix of it copies nothing.
  std::span<uint8_t> Space();
  // kLimit past kMaxXorbUploadBytes; kIo when the store failed.
  Status Append(std::span<const uint8_t> data);
  // Whether the xorb was new (false: it was stored before; the upload was a retry).
  Result<bool> Finish();

 private:
  friend class CasService;
  XorbUpload(CasService& service, const xet::XorbHash& hash, std::unique_ptr<store::BlobWriter> writer,
             std::unique_ptr<BufferPool::Buffer> body);
  void WriteLoop();
  void FlushLoop();
  void HashLoop();

  CasService& service_;
  xet::XorbHash hash_;
  // Declared before the writer, so that it outlives it: the writer may send from it (AppendStable).
  std::unique_ptr<BufferPool::Buffer> body_;     // kMaxXorbUploadBytes
  std::unique_ptr<store::BlobWriter> writer_;    // null when the xorb is stored already
  std::unique_ptr<store::BlobFlusher> flusher_;  // null when the store flushes at Commit only
  size_t size_ = 0;                              // bytes appended (written by the caller only)

  // Shared with the threads.
  std::mutex mu_;
  std::condition_variable cv_;
  size_t received_ = 0;      // bytes of body_ the threads may read
  bool ended_ = false;       // no more bytes: write and flush the rest; stop hashing
  size_t written_ = 0;       // bytes handed to the writer
  bool write_done_ = false;  // the write thread ended (all written, or failed)
  bool cancelled_ = false;
  std::atomic<bool> finishing_{false};  // interrupts hashing
  xet::ChunkPrehasher prehasher_;       // the hash thread's; Finish reads it once that thread is joined
  Status write_status_ = Ok{};
  Status flush_status_ = Ok{};
  std::thread write_thread_;
  std::thread flush_thread_;
  std::thread hash_thread_;
};

}  // namespace cairn::cas

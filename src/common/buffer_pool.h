// Large buffers for request bodies that are kept whole (xorb uploads, up to 64 MiB each).
//
// A fresh 64 MiB allocation is a fresh mapping: every 4 KiB page of it faults (and is zeroed by the kernel)
// when first written, which on this project's build machine cost more than receiving the bytes (~30 ms for a
// 35 MB xorb; BENCHMARKS.md). So the buffers are mapped with transparent huge pages where the kernel allows
// (a fault per 2 MiB), and up to `keep` of them are kept for the next upload with their pages in place.
// What a kept buffer holds is resident memory: at most keep × buffer_size, and only as much of each as the
// largest body it received.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

namespace cairn {

class BufferPool {
 public:
  class Buffer;

  BufferPool(size_t buffer_size, size_t keep);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A buffer of buffer_size bytes (contents unspecified), or null when the memory cannot be mapped. It
  // returns to the pool when released; the pool must outlive it.
  std::unique_ptr<Buffer> Take();

  size_t buffer_size() const { return buffer_size_; }
  size_t kept() const;

 private:
  struct Mapping;
  void Give(std::unique_ptr<Mapping> m);

  const size_t buffer_size_;
  const size_t keep_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Mapping>> free_;
};

class BufferPool::Buffer {
 public:
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  std::span<uint8_t> bytes() const { return bytes_; }
  uint8_t* data() const { return bytes_.data(); }

 private:
  friend class BufferPool;
  Buffer(BufferPool& pool, std::unique_ptr<Mapping> mapping);

  BufferPool& pool_;
  std::unique_ptr<Mapping> mapping_;
  std::span<uint8_t> bytes_;
};

}  // namespace cairn

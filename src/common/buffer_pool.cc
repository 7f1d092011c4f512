#include "common/buffer_pool.h"

#include <sys/mman.h>

#include <cstdint>
#include <utility>

#include "common/allocator.h"

namespace cairn {

// One anonymous mapping, its usable bytes aligned to a huge page.
struct BufferPool::Mapping {
  void* base = nullptr;
  size_t length = 0;
  uint8_t* aligned = nullptr;

  ~Mapping() {
    if (base != nullptr) ::munmap(base, length);
  }

  static std::unique_ptr<Mapping> Map(size_t size) {
    auto m = std::make_unique<Mapping>();
    m->length = size + kHugePageSize;  // room to align
    void* p = ::mmap(nullptr, m->length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    m->base = p;
    const uintptr_t start =
        (reinterpret_cast<uintptr_t>(p) + kHugePageSize - 1) & ~uintptr_t{kHugePageSize - 1};
    m->aligned = reinterpret_cast<uint8_t*>(start);  // NOLINT(performance-no-int-to-ptr): inside the mapping
    AdviseHugePages(m->aligned, size);
    return m;
  }
};

BufferPool::BufferPool(size_t buffer_size, size_t keep) : buffer_size_(buffer_size), keep_(keep) {}

BufferPool::~BufferPool() = default;

std::unique_ptr<BufferPool::Buffer> BufferPool::Take() {
  std::unique_ptr<Mapping> m;
  {
    std::lock_guard lock(mu_);
    if (!free_.empty()) {
      m = std::move(free_.back());
      free_.pop_back();
    }
  }
  if (m == nullptr) m = Mapping::Map(buffer_size_);
  if (m == nullptr) return nullptr;
  return std::unique_ptr<Buffer>(new Buffer(*this, std::move(m)));
}

size_t BufferPool::kept() const {
  std::lock_guard lock(mu_);
  return free_.size();
}

void BufferPool::Give(std::unique_ptr<Mapping> m) {
  std::lock_guard lock(mu_);
  if (free_.size() < keep_) free_.push_back(std::move(m));
  // else unmapped as `m` goes
}

BufferPool::Buffer::Buffer(BufferPool& pool, std::unique_ptr<Mapping> mapping)
    : pool_(pool), mapping_(std::move(mapping)), bytes_(mapping_->aligned, pool.buffer_size()) {}

BufferPool::Buffer::~Buffer() {
  pool_.Give(std::move(mapping_));
}

}  // namespace cairn

#include "common/allocator.h"

#include <malloc.h>  // glibc's mallopt; the settings below are skipped where it lacks them
#include <sys/mman.h>

#include <cstdint>

namespace cairn {

void RetainFreedMemory() {
#if defined(M_MMAP_THRESHOLD) && defined(M_TRIM_THRESHOLD)
  // Fixing the thresholds also stops glibc from adjusting them on its own. 32 MiB is the largest mmap
  // threshold glibc accepts on 64-bit hosts.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);   // NOLINT(concurrency-mt-unsafe): called at start-up, before threads
  mallopt(M_TRIM_THRESHOLD, 256 << 20);  // NOLINT(concurrency-mt-unsafe)
#endif
}

void AdviseHugePages(void* p, size_t n) {
#ifdef MADV_HUGEPAGE
  constexpr uintptr_t kMask = kHugePageSize - 1;
  const auto begin = reinterpret_cast<uintptr_t>(p);
  const uintptr_t first = (begin + kMask) & ~kMask;
  const uintptr_t last = (begin + n) & ~kMask;
  // NOLINTNEXTLINE(performance-no-int-to-ptr): an address inside the caller's block, rounded to a huge page
  if (last > first) (void)::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#else
  (void)p;
  (void)n;
#endif
}

}  // namespace cairn

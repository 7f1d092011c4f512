#include "common/allocator.h"

#include <malloc.h>  // glibc's mallopt; the settings below are skipped where it lacks them

namespace cairn {

void RetainFreedMemory() {
#if defined(M_MMAP_THRESHOLD) && defined(M_TRIM_THRESHOLD)
  // Fixing the thresholds also stops glibc from adjusting them on its own. 32 MiB is the largest mmap
  // threshold glibc accepts on 64-bit hosts.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);   // NOLINT(concurrency-mt-unsafe): called at start-up, before threads
  mallopt(M_TRIM_THRESHOLD, 256 << 20);  // NOLINT(concurrency-mt-unsafe)
#endif
}

}  // namespace cairn

// Process-wide allocator settings for serving, and advice on how large blocks should be backed.
#pragma once

#include <cstddef>

namespace cairn {

// A transparent huge page with 4 KiB base pages (x86-64, arm64).
inline constexpr size_t kHugePageSize = size_t{2} << 20;

// Asks the kernel to back the whole huge pages inside [p, p + n) with transparent huge pages, so that filling
// a large fresh block takes one fault per 2 MiB instead of one per 4 KiB (for a 35-40 MB block that costs
// more than writing it; BENCHMARKS.md). Advice only: where THP is off, or the range holds no whole huge page,
// the block keeps ordinary pages. Thread-safe.
void AdviseHugePages(void* p, size_t n);

// Keeps freed memory in the process for reuse instead of handing it back to the kernel at once. A large
// reconstruction answer (tens of MB, freed once sent) would otherwise be unmapped and then faulted back in,
// page by page, for the next answer: half the time of a 100,000-term v1 answer (cas_bench, BENCHMARKS.md).
// Blocks of 32 MiB and more (xorb bodies) are still mapped and unmapped on their own; at most 256 MiB of free
// memory is kept per arena.
// Call once at start-up, before other threads exist.
void RetainFreedMemory();

}  // namespace cairn

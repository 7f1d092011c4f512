// Process-wide allocator settings for serving.
#pragma once

namespace cairn {

// Keeps freed memory in the process for reuse instead of handing it back to the kernel at once. A large
// reconstruction answer (tens of MB, freed once sent) would otherwise be unmapped and then faulted back in,
// page by page, for the next answer: half the time of a 100,000-term v1 answer (cas_bench, BENCHMARKS.md).
// Blocks of 32 MiB and more (xorb bodies) are still mapped and unmapped on their own; at most 256 MiB of free
// memory is kept per arena.
// Call once at start-up, before other threads exist.
void RetainFreedMemory();

}  // namespace cairn

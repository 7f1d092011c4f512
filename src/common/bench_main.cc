// main() of the Google Benchmark programs: the allocator set up as `cairn serve` sets it, then the
// benchmarks.
#include <benchmark/benchmark.h>

#include "common/allocator.h"

int main(int argc, char** argv) {
  cairn::RetainFreedMemory();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

// FUZZ_CHECK(cond): an invariant a fuzz target asserts about what the code under test returned. A failure
// prints the condition and aborts, which libFuzzer reports as a crash (and saves the input) like any other;
// it is on in every build, NDEBUG or not.
#pragma once

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      (void)std::fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                                \
    }                                                                                              \
  } while (0)

#pragma once

// A violated property in a fuzz target: print what and where, then abort so that libFuzzer
// reports a crash and keeps the input.

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond, ...)                                                            \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: property violated: %s\n", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, "  " __VA_ARGS__);                                            \
      std::fprintf(stderr, "\n");                                                        \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

// tests/fuzz/fuzz_check.h — an invariant of a fuzz target: when it breaks,
// print why and abort, so libFuzzer saves the input and a corpus replay fails.
#pragma once

#include <cstdio>
#include <cstdlib>

#define IBDT_FUZZ_CHECK(condition, ...)                                \
  do {                                                                 \
    if (!(condition)) {                                                \
      std::fprintf(stderr, "fuzz invariant broken: %s: ", #condition); \
      std::fprintf(stderr, __VA_ARGS__);                               \
      std::fprintf(stderr, "\n");                                      \
      std::abort();                                                    \
    }                                                                  \
  } while (0)

// tests/support/mp_test.h — multi-process gtests.
//
// A binary built with ibdt_add_mp_gtest() runs as every rank of a job (under
// ibdt-run, mpirun, mpiexec or srun). Every rank runs the same tests in the
// same order and reaches its peers through mpStore(). After each test the
// ranks compare results; if the test failed on any rank, every rank prints
// which ranks failed and the whole job exits non-zero at once (the launcher
// then reports it), so no rank waits forever for a peer that gave up.
// Only rank 0 prints gtest's progress; other ranks print their failures.
#pragma once

#include <chrono>

#include "ibdt/store.h"

namespace ibdt::test {

// The job's Store, connected once before the first test.
bootstrap::Store& mpStore();

// A deadline for waits inside tests: long enough for 8 oversubscribed ranks
// under sanitizers, short enough that a lost peer fails the test.
inline Deadline mpDeadline() { return Deadline::after(std::chrono::seconds(60)); }

}  // namespace ibdt::test

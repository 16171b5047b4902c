// alltoallv's failures with ranks as threads: bad arguments refused at init
// (before anything is sent), pairs whose signatures differ failing on both
// ranks with the peer named, and a dead rank: every survivor gets an error
// within the deadline, none hangs.
#include <gtest/gtest.h>

namespace ibdt::collectives {
namespace {
}  // namespace
}  // namespace ibdt::collectives

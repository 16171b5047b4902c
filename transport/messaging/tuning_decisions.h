// transport/messaging/tuning_decisions.h — limits that are constants without
// a tuning file, derived from its fits when one is in force (docs/tuning.md,
// "Model decisions"). Pure functions of the file: every rank that loaded the
// same file decides the same.
#pragma once

#include <cstdint>

#include "transport/messaging/tuning.h"

namespace ibdt::messaging {

// Exchange communicators: the smallest contiguous message that goes
// single-copy (rendezvous, one write) instead of pipelined eager — the
// crossover of the fitted kContig line and the kPipelinedContig line with its
// per-byte cost doubled (in an exchange both copies of a byte take the same
// core; the file timed them overlapped on two free cores), clamped to
// [eagerLimit, the largest size measured]; 0 (never) when single-copy is not
// cheaper anywhere in that range; `fallback` when the file lacks either path.
int64_t tunedExchangeZeroCopyMin(const Tuning& tuning, int64_t eagerLimit, int64_t fallback);

// All-to-all throttle (messages in flight per rank) for blocks of `bytes`:
// enough that one message's fixed cost is covered by the byte time of the
// others in flight, 1 + ceil(perMessage / (perByte x bytes)) of the kContig
// fit (pipelined-contig below the eager limit), clamped to [2, 64];
// `fallback` when the file lacks the path.
int64_t tunedThrottle(const Tuning& tuning, int64_t bytes, int64_t eagerLimit, int64_t fallback);

}  // namespace ibdt::messaging

// datatype/segment_program.h — what a Segment holds: count x type compiled
// into one loop program (internal).
#pragma once

#include "datatype/loop_program.h"
#include "ibdt/datatype.h"

namespace ibdt::datatype {

struct Segment::Program {
  NodeRef root;
};

}  // namespace ibdt::datatype

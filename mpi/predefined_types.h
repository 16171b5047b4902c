// mpi/predefined_types.h — MPI's predefined (named) datatypes as ibdt basic
// types, matched by kind (signed, unsigned, floating, complex, ...) and by
// the size this MPI reports, so every language binding's names (C, C++,
// Fortran) map without a per-implementation table of sizes.
#pragma once

#include <mpi.h>

#include "ibdt/datatype.h"
#include "ibdt/status.h"

namespace ibdt::mpi {

// The ibdt type of a named MPI datatype (MPI_COMBINER_NAMED), including the
// pair types of MPI_MINLOC/MAXLOC (MPI_DOUBLE_INT, ...). kUnsupported for a
// named type ibdt has no basic kind of that size for (MPI_REAL2, ...).
Result<datatype::Datatype> predefinedType(MPI_Datatype type);

// The F90 combiners (MPI_Type_create_f90_real/complex/integer): a
// predefined-like type whose kind the combiner names and whose size MPI
// reports.
Result<datatype::Datatype> f90Type(MPI_Datatype type, int combiner);

}  // namespace ibdt::mpi

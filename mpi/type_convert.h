// mpi/type_convert.h — MPI datatypes as ibdt datatypes.
//
// convertType() walks a committed MPI_Datatype through
// MPI_Type_get_envelope / MPI_Type_get_contents and rebuilds it with the
// matching ibdt constructor, inner types first. Every level is checked
// against what MPI reports (size, lb, extent): where ibdt's bounds rule
// differs (struct alignment padding differs between MPI libraries), the
// level is resized to MPI's bounds, so packing gives MPI_Pack's bytes.
//
// Conversions are cached per MPI datatype: derived types carry the result
// in a type attribute whose delete callback drops it when the type is freed
// (so a new type that reuses the handle is converted afresh); predefined
// types, which are never freed, in a table. Thread-safe.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>

#include "ibdt/datatype.h"
#include "ibdt/status.h"

namespace ibdt::mpi {

// The ibdt type of `type`, cached (see above), committed. kUnsupported for
// a combiner or predefined type ibdt cannot express, kInvalidArgument for
// MPI_DATATYPE_NULL or a handle MPI rejects.
Result<datatype::Datatype> convertType(MPI_Datatype type);

// How many converted derived types have been freed so far: while it stays
// the same, an MPI_Datatype handle converted earlier still names the same
// type (predefined types are never freed), so a caller may skip convertType.
uint64_t convertedTypesFreed();

// A type with the signature (basic-type sequence) of `type` — its
// conversion, or for a type whose layout ibdt cannot express (a negative
// extent) one built with resized levels left out — to describe `type`'s
// data packed by MPI_Pack. Uncached beyond convertType's own cache.
Result<datatype::Datatype> signatureType(MPI_Datatype type);

// A segment of `count` elements of `type`, ready to pack. The conversion
// keeps the last segment it made, so repeated packs with one count do not
// compile the loop program again. Each thread also keeps the segment of its
// previous call: a call that repeats its type handle and count while no
// converted type was freed (convertedTypesFreed) takes it without a lock or
// a lookup (a pack loop's per-call cost). The pointer is valid until the
// thread's next call.
Result<const datatype::Segment*> segmentOf(MPI_Datatype type, int64_t count);

// Uncached conversion of one level; `inner` converts the types it is made of.
using InnerConverter = std::function<Result<datatype::Datatype>(MPI_Datatype)>;
Result<datatype::Datatype> convertLevel(MPI_Datatype type, const InnerConverter& inner);

}  // namespace ibdt::mpi

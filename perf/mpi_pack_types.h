// perf/mpi_pack_types.h — the `ibdt-bench pack` cases (perf/pack_cases.h)
// as committed MPI datatypes, for the MPI programs that pack them
// (perf/mpi_pack_baseline.cc, perf/mpi_bridge_program.cc).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "perf/pack_cases.h"

namespace ibdt::perf {

struct MpiCase {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  int count = 1;
  int64_t typedBytes = 0;
};

inline MPI_Datatype blockListType(const ibdt::perf::BlockList& b, MPI_Datatype elem, int elemBytes, bool asStruct) {
  const int n = static_cast<int>(b.blens.size());
  std::vector<int> blens(b.blens.begin(), b.blens.end());
  MPI_Datatype t, resized;
  if (asStruct) {
    std::vector<MPI_Aint> displs;
    for (int64_t d : b.displs) displs.push_back(static_cast<MPI_Aint>(d * elemBytes));
    std::vector<MPI_Datatype> types(static_cast<size_t>(n), elem);
    MPI_Type_create_struct(n, blens.data(), displs.data(), types.data(), &t);
  } else {
    std::vector<int> displs(b.displs.begin(), b.displs.end());
    MPI_Type_indexed(n, blens.data(), displs.data(), elem, &t);
  }
  MPI_Type_create_resized(t, 0, static_cast<MPI_Aint>(b.extentElems * elemBytes), &resized);
  MPI_Type_free(&t);
  return resized;
}

inline MpiCase buildMpiCase(const PackCase& pc) {
  using K = PackCase::Kind;
  MpiCase c;
  switch (pc.kind) {
    case K::kVector: {
      const auto [n, elems] = vectorGeometry(pc.param, pc.payload);
      MPI_Type_vector(static_cast<int>(n), static_cast<int>(elems), static_cast<int>(2 * elems), MPI_DOUBLE, &c.type);
      c.typedBytes = 2 * n * elems * 8;
      break;
    }
    case K::kColumn:
      MPI_Type_vector(kColumnRows, static_cast<int>(pc.param), kColumnLd, MPI_INT, &c.type);
      c.typedBytes = kColumnRows * kColumnLd * 4;
      break;
    case K::kFace: {
      MPI_Datatype column;
      MPI_Type_vector(kCubeFace, 1, kCubeN, MPI_DOUBLE, &column);
      MPI_Type_create_hvector(kCubeFace, 1, kCubeN * kCubeN * 8, column, &c.type);
      MPI_Type_free(&column);
      c.typedBytes = kCubeN * kCubeN * kCubeN * 8;
      break;
    }
    case K::kStruct:
    case K::kIndexed: {
      const bool isStruct = pc.kind == K::kStruct;
      const BlockList b = isStruct ? wuStructBlocks(pc.param, pc.payload) : randomIndexedBlocks(pc.payload);
      c.type = blockListType(b, isStruct ? MPI_INT : MPI_DOUBLE, isStruct ? 4 : 8, isStruct);
      c.count = static_cast<int>(b.count);
      c.typedBytes = b.extentElems * (isStruct ? 4 : 8) * b.count;
      break;
    }
  }
  MPI_Type_commit(&c.type);
  return c;
}

}  // namespace ibdt::perf

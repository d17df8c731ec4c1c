//===- Reductions.h - Element types and reduction operators -----*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Maps the ABI's (dtype, reduction) pairs to MPI datatypes and operators.
// MPI has no 16-bit floats, so f16 and bf16 travel as MPI_UINT16_T and are
// reduced by user-defined operators that compute in float.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_RUNTIME_REDUCTIONS_H
#define BRAID_RUNTIME_REDUCTIONS_H

#include <mpi.h>

#include <cstdint>
#include <string>

namespace braid::rt {

struct ReductionType {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Op op = MPI_OP_NULL;
  int64_t elementSize = 0;
  const char *dtypeName = "";
  const char *reductionName = "";
};

/// Creates the f16/bf16 operators; called once after MPI_Init.
void createReductionOps();
/// Frees them; called once before MPI_Finalize.
void freeReductionOps();

/// The datatype and operator of a reduction; aborts with a message naming
/// the call and step for unknown codes and for bitwise reductions of floats.
ReductionType resolveReduction(int64_t dtype, int64_t reduction,
                               const char *call, int64_t step);

} // namespace braid::rt

#endif // BRAID_RUNTIME_REDUCTIONS_H

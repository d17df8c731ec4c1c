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
};

/// Creates the f16/bf16 operators; called once after MPI_Init.
void createReductionOps();
/// Frees them; called once before MPI_Finalize.
void freeReductionOps();

/// The datatype and operator of a reduction the front checked (Front.cpp:
/// known codes, bitwise reductions only of integers).
ReductionType resolveReduction(int64_t dtype, int64_t reduction);

} // namespace braid::rt

#endif // BRAID_RUNTIME_REDUCTIONS_H

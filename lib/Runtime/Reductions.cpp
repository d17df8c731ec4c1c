//===- Reductions.cpp - Element types and reduction operators -------------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "Reductions.h"

#include "Diagnostics.h"
#include "HalfFloat.h"
#include "braid/Runtime/braid_rt.h"

#include <cmath>

namespace braid::rt {

namespace {

// Each step converts both operands to float, combines them there and rounds
// once back to 16 bits, so a sum over n ranks sees n-1 roundings of a
// float-accurate partial result rather than 16-bit arithmetic throughout.
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float),
          typename Combine>
void reduce16(const void *in, void *inout, int length, Combine combine) {
  const uint16_t *a = static_cast<const uint16_t *>(in);
  uint16_t *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < length; ++i)
    b[i] = FromFloat(combine(ToFloat(a[i]), ToFloat(b[i])));
}

// Max and min propagate NaN (like arith.maximumf), which also makes the
// result independent of the order MPI combines the ranks in.
inline float maxPropagatingNaN(float a, float b) {
  if (std::isnan(a) || std::isnan(b))
    return a + b;
  return a > b ? a : b;
}
inline float minPropagatingNaN(float a, float b) {
  if (std::isnan(a) || std::isnan(b))
    return a + b;
  return a < b ? a : b;
}

struct Sum {
  float operator()(float a, float b) const { return a + b; }
};
struct Product {
  float operator()(float a, float b) const { return a * b; }
};
struct Max {
  float operator()(float a, float b) const { return maxPropagatingNaN(a, b); }
};
struct Min {
  float operator()(float a, float b) const { return minPropagatingNaN(a, b); }
};

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float),
          typename Combine>
void userFunction(void *in, void *inout, int *length, MPI_Datatype *) {
  reduce16<ToFloat, FromFloat>(in, inout, *length, Combine());
}

enum HalfKind { F16 = 0, BF16 = 1 };
// The operators are indexed by the ABI's reduction codes.
static_assert(BRAID_RT_SUM == 0 && BRAID_RT_MAX == 1 && BRAID_RT_MIN == 2 &&
                  BRAID_RT_PRODUCT == 3,
              "halfOps is indexed by the reduction code");
constexpr int numHalfReductions = 4;

MPI_Op halfOps[2][numHalfReductions] = {
    {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL},
    {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL}};

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void createOpsFor(MPI_Op (&ops)[numHalfReductions], const char *typeName) {
  MPI_User_function *functions[numHalfReductions] = {
      userFunction<ToFloat, FromFloat, Sum>,
      userFunction<ToFloat, FromFloat, Max>,
      userFunction<ToFloat, FromFloat, Min>,
      userFunction<ToFloat, FromFloat, Product>};
  for (int i = 0; i < numHalfReductions; ++i)
    checkMPI(MPI_Op_create(functions[i], /*commute=*/1, &ops[i]),
             "MPI_Op_create",
             formatString("braid_rt_init (%s reductions)", typeName));
}

MPI_Op builtinOp(int64_t reduction) {
  switch (reduction) {
  case BRAID_RT_SUM:
    return MPI_SUM;
  case BRAID_RT_MAX:
    return MPI_MAX;
  case BRAID_RT_MIN:
    return MPI_MIN;
  case BRAID_RT_PRODUCT:
    return MPI_PROD;
  case BRAID_RT_BITAND:
    return MPI_BAND;
  case BRAID_RT_BITOR:
    return MPI_BOR;
  default:
    return MPI_BXOR;
  }
}

} // namespace

void createReductionOps() {
  createOpsFor<halfToFloat, floatToHalf>(halfOps[F16], "f16");
  createOpsFor<bf16ToFloat, floatToBf16>(halfOps[BF16], "bf16");
}

void freeReductionOps() {
  for (auto &ops : halfOps)
    for (MPI_Op &op : ops)
      if (op != MPI_OP_NULL)
        checkMPI(MPI_Op_free(&op), "MPI_Op_free", "braid_rt_finalize");
}

ReductionType resolveReduction(int64_t dtype, int64_t reduction) {
  ReductionType result;
  switch (dtype) {
  case BRAID_RT_F32:
    result.type = MPI_FLOAT;
    break;
  case BRAID_RT_F64:
    result.type = MPI_DOUBLE;
    break;
  case BRAID_RT_F16:
  case BRAID_RT_BF16:
    result.type = MPI_UINT16_T;
    result.op = halfOps[dtype == BRAID_RT_F16 ? F16 : BF16][reduction];
    return result;
  case BRAID_RT_I8:
    result.type = MPI_INT8_T;
    break;
  case BRAID_RT_I16:
    result.type = MPI_INT16_T;
    break;
  case BRAID_RT_I32:
    result.type = MPI_INT32_T;
    break;
  default:
    result.type = MPI_INT64_T;
    break;
  }
  result.op = builtinOp(reduction);
  return result;
}

} // namespace braid::rt

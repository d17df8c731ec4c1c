//===- DistDialect.h - Dist dialect -----------------------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_DIALECT_DIST_IR_DISTDIALECT_H
#define BRAID_DIALECT_DIST_IR_DISTDIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dialect.h"

#include "braid/Dialect/Dist/IR/DistOpsDialect.h.inc"

#endif // BRAID_DIALECT_DIST_IR_DISTDIALECT_H

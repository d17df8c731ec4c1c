//===- MemRefAt.cpp - A memref over an address the runtime gave -*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/Conversion/XferToRuntime/MemRefAt.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

Value braid::memrefAt(OpBuilder &b, Location loc, Value address,
                      MemRefType type) {
  MLIRContext *context = b.getContext();
  auto i64 = IntegerType::get(context, 64);
  auto ptr = LLVM::LLVMPointerType::get(context);
  int64_t rank = type.getRank();
  SmallVector<Type> fields{ptr, ptr, i64};
  if (rank > 0) {
    fields.push_back(LLVM::LLVMArrayType::get(i64, rank));
    fields.push_back(LLVM::LLVMArrayType::get(i64, rank));
  }
  auto descriptorType = LLVM::LLVMStructType::getLiteral(context, fields);
  Value pointer = LLVM::IntToPtrOp::create(b, loc, ptr, address);
  Value descriptor = LLVM::PoisonOp::create(b, loc, descriptorType);
  auto insert = [&](Value field, ArrayRef<int64_t> position) {
    descriptor =
        LLVM::InsertValueOp::create(b, loc, descriptor, field, position);
  };
  auto constant = [&](int64_t value) -> Value {
    return arith::ConstantIntOp::create(b, loc, i64, value);
  };
  insert(pointer, {0});
  insert(pointer, {1});
  insert(constant(0), {2});
  int64_t stride = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    insert(constant(type.getDimSize(d)), {3, d});
    insert(constant(stride), {4, d});
    stride *= type.getDimSize(d);
  }
  return UnrealizedConversionCastOp::create(b, loc, TypeRange{type}, descriptor)
      .getResult(0);
}

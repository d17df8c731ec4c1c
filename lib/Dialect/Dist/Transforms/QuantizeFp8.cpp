//===- QuantizeFp8.cpp - All-gathers sent as fp8 with per-chunk scales ----===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// quantize-all-gather=fp8: each rank scales its chunk so that its largest
// magnitude becomes 448 (e4m3's largest finite value), rounds it to fp8
// e4m3fn (nearest even, saturating), sends the bytes and its scale, and every
// rank decodes each chunk with the scale that came with it. The codec is
// integer and f32 arithmetic in linalg payloads: neither the CPU lowering nor
// LLVM IR has an fp8 type, and on the GPU the same code runs in registers.
//
//===----------------------------------------------------------------------===//

#include "Overlap/Decompositions.h"

#include "braid/Dialect/Dist/IR/DistOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;

namespace braid::dist::overlap {

namespace {

/// e4m3fn's largest finite magnitude.
constexpr double kFp8Max = 448.0;

Value f32Constant(OpBuilder &b, Location loc, double value) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
}

Value i32Constant(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIntOp::create(b, loc, b.getI32Type(), value);
}

Value toF32(OpBuilder &b, Location loc, Value value) {
  return value.getType().isF32()
             ? value
             : arith::ExtFOp::create(b, loc, b.getF32Type(), value).getResult();
}

/// The e4m3fn code (in the low byte of an i32) of f32 `value`, which the
/// caller scaled into [-448, 448]: round to nearest even, saturating at 448.
Value encodeE4M3(OpBuilder &b, Location loc, Value value) {
  Type i32 = b.getI32Type();
  auto c = [&](int64_t v) { return i32Constant(b, loc, v); };
  Value clamped = arith::MinimumFOp::create(
      b, loc,
      arith::MaximumFOp::create(b, loc, value, f32Constant(b, loc, -kFp8Max)),
      f32Constant(b, loc, kFp8Max));
  Value bits = arith::BitcastOp::create(b, loc, i32, clamped);
  Value sign = arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, bits, c(24)), c(0x80));
  Value magnitudeBits = arith::AndIOp::create(b, loc, bits, c(0x7FFFFFFF));
  // Normal: keep f32's exponent and the top 3 mantissa bits, rounding the
  // 20 bits below to nearest even (a carry moves into the exponent), then
  // rebias the exponent from 127 to 7.
  Value lsb = arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, magnitudeBits, c(20)), c(1));
  Value rounded = arith::AddIOp::create(
      b, loc, magnitudeBits, arith::AddIOp::create(b, loc, lsb, c(0x7FFFF)));
  Value normal = arith::SubIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, rounded, c(20)), c(120 << 3));
  normal = arith::MinSIOp::create(b, loc, normal, c(0x7E));
  // Subnormal (below 2^-6): multiples of 2^-9, rounded to nearest even by
  // adding and removing 1.5 * 2^23 in f32; 8 * 2^-9 is the smallest normal,
  // whose code is 8, so the two cases meet without a seam.
  Value magnitude = math::AbsFOp::create(b, loc, clamped);
  Value ulps =
      arith::MulFOp::create(b, loc, magnitude, f32Constant(b, loc, 512.0));
  Value magic = f32Constant(b, loc, 12582912.0);
  Value integral = arith::SubFOp::create(
      b, loc, arith::AddFOp::create(b, loc, ulps, magic), magic);
  Value subnormal = arith::FPToSIOp::create(b, loc, i32, integral);
  Value tiny =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, magnitude,
                            f32Constant(b, loc, std::ldexp(1.0, -6)));
  Value code = arith::SelectOp::create(b, loc, tiny, subnormal, normal);
  return arith::OrIOp::create(b, loc, code, sign);
}

/// The f32 value of e4m3fn code `code` (an i8).
Value decodeE4M3(OpBuilder &b, Location loc, Value code) {
  Type i32 = b.getI32Type();
  Type f32 = b.getF32Type();
  auto c = [&](int64_t v) { return i32Constant(b, loc, v); };
  Value bits = arith::ExtUIOp::create(b, loc, i32, code);
  Value negative =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                            arith::AndIOp::create(b, loc, bits, c(0x80)), c(0));
  Value exponent = arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, bits, c(3)), c(0xF));
  Value mantissa = arith::AndIOp::create(b, loc, bits, c(7));
  Value normalBits = arith::OrIOp::create(
      b, loc,
      arith::ShLIOp::create(
          b, loc, arith::AddIOp::create(b, loc, exponent, c(120)), c(23)),
      arith::ShLIOp::create(b, loc, mantissa, c(20)));
  Value normal = arith::BitcastOp::create(b, loc, f32, normalBits);
  Value subnormal = arith::MulFOp::create(
      b, loc, arith::SIToFPOp::create(b, loc, f32, mantissa),
      f32Constant(b, loc, std::ldexp(1.0, -9)));
  Value isSubnormal =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, exponent, c(0));
  Value magnitude =
      arith::SelectOp::create(b, loc, isSubnormal, subnormal, normal);
  return arith::SelectOp::create(
      b, loc, negative, arith::NegFOp::create(b, loc, magnitude), magnitude);
}

} // namespace

FailureOr<AllGatherOp> quantizeAllGatherFp8(AllGatherOp gather) {
  auto type = cast<RankedTensorType>(gather.getInput().getType());
  auto resultType = cast<RankedTensorType>(gather.getResult().getType());
  Type element = type.getElementType();
  int64_t dim = static_cast<int64_t>(gather.getDim());
  if (!isa<FloatType>(element) || element.getIntOrFloatBitWidth() < 16 ||
      element.getIntOrFloatBitWidth() > 32 || !type.hasStaticShape() ||
      !resultType.hasStaticShape())
    return failure();
  int64_t rank = type.getRank();
  int64_t local = type.getDimSize(dim);
  int64_t ranks = local ? resultType.getDimSize(dim) / local : 0;
  if (ranks <= 0)
    return failure();

  OpBuilder b(gather);
  Location loc = gather.getLoc();
  MLIRContext *context = b.getContext();
  Type f32 = b.getF32Type();
  Type i8 = b.getI8Type();
  SmallVector<utils::IteratorType> parallel(rank,
                                            utils::IteratorType::parallel);
  AffineMap identity = b.getMultiDimIdentityMap(rank);
  AffineMap toScalar = AffineMap::get(rank, 0, {}, context);

  // The chunk's largest magnitude.
  auto scalarType = RankedTensorType::get({}, f32);
  Value zero = f32Constant(b, loc, 0.0);
  Value amaxInit =
      linalg::FillOp::create(
          b, loc, zero,
          tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{}, f32).getResult())
          .getResult(0);
  SmallVector<utils::IteratorType> reduction(rank,
                                             utils::IteratorType::reduction);
  Value amax =
      linalg::GenericOp::create(
          b, loc, scalarType, gather.getInput(), amaxInit,
          ArrayRef<AffineMap>{identity, toScalar}, reduction,
          [&](OpBuilder &nb, Location nl, ValueRange args) {
            Value magnitude =
                math::AbsFOp::create(nb, nl, toF32(nb, nl, args[0]));
            linalg::YieldOp::create(nb, nl,
                                    ValueRange{arith::MaximumFOp::create(
                                        nb, nl, args[1], magnitude)});
          })
          .getResult(0);

  // The codes: x * 448 / amax (an all-zero chunk stays zero).
  auto codesType = type.clone(i8);
  Value codes =
      linalg::GenericOp::create(
          b, loc, codesType, ValueRange{gather.getInput(), amax},
          tensor::EmptyOp::create(b, loc, type.getShape(), i8).getResult(),
          ArrayRef<AffineMap>{identity, toScalar, identity}, parallel,
          [&](OpBuilder &nb, Location nl, ValueRange args) {
            Value safe = arith::MaximumFOp::create(
                nb, nl, args[1], f32Constant(nb, nl, std::ldexp(1.0, -100)));
            Value scale = arith::DivFOp::create(
                nb, nl, f32Constant(nb, nl, kFp8Max), safe);
            Value scaled =
                arith::MulFOp::create(nb, nl, toF32(nb, nl, args[0]), scale);
            Value code = encodeE4M3(nb, nl, scaled);
            linalg::YieldOp::create(
                nb, nl, ValueRange{arith::TruncIOp::create(nb, nl, i8, code)});
          })
          .getResult(0);

  // Both travel: the codes along the gathered dimension, the scales as one
  // element per rank.
  auto sent =
      AllGatherOp::create(b, loc, resultType.clone(i8), gather.getGridAttr(),
                          gather.getAxesAttr(), codes, gather.getDimAttr());
  Value amaxVector =
      tensor::ExpandShapeOp::create(b, loc, RankedTensorType::get({1}, f32),
                                    amax, ArrayRef<ReassociationIndices>{});
  auto scales = AllGatherOp::create(
      b, loc, RankedTensorType::get({ranks}, f32), gather.getGridAttr(),
      gather.getAxesAttr(), amaxVector,
      IntegerAttr::get(gather.getDimAttr().getType(), 0));

  // Decoded with the scale of the chunk each element came in.
  AffineMap chunkOf = AffineMap::get(
      rank, 0, {getAffineDimExpr(dim, context).floorDiv(local)}, context);
  Value decoded =
      linalg::GenericOp::create(
          b, loc, resultType, ValueRange{sent.getResult(), scales.getResult()},
          tensor::EmptyOp::create(b, loc, resultType.getShape(), element)
              .getResult(),
          ArrayRef<AffineMap>{b.getMultiDimIdentityMap(rank), chunkOf,
                              b.getMultiDimIdentityMap(rank)},
          parallel,
          [&](OpBuilder &nb, Location nl, ValueRange args) {
            Value value = arith::MulFOp::create(
                nb, nl, decodeE4M3(nb, nl, args[0]),
                arith::DivFOp::create(nb, nl, args[1],
                                      f32Constant(nb, nl, kFp8Max)));
            if (!element.isF32())
              value = arith::TruncFOp::create(nb, nl, element, value);
            linalg::YieldOp::create(nb, nl, ValueRange{value});
          })
          .getResult(0);
  gather.getResult().replaceAllUsesWith(decoded);
  gather->erase();
  return sent;
}

} // namespace braid::dist::overlap

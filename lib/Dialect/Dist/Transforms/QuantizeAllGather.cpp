//===- QuantizeAllGather.cpp - All-gathers sent in fewer bits ---*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// braid-quantize-all-gather, opt-in:
//
// - bf16: an f32 all-gather sends its values rounded to bf16 (nearest even);
//   named matmuls take the bf16 values as they are (their bodies extend
//   each element, accumulating in f32), anything else reads them extended
//   back to f32.
// - fp8: each rank scales its chunk so that its largest magnitude becomes
//   448 (e4m3's largest finite value), rounds it to fp8 e4m3fn (nearest
//   even, saturating), sends the bytes and its scale, and every rank
//   decodes each chunk with the scale that came with it. The codec is
//   integer and f32 arithmetic in linalg payloads: neither the CPU lowering
//   nor LLVM IR has an fp8 type, and on the GPU the same code runs in
//   registers.
//
// Each gather sent narrow carries `dist.quantized`, which braid-overlap's
// report turns into its error bound (quantizationBounds).
//
//===----------------------------------------------------------------------===//

#include "Overlap/Decompositions.h"

#include "braid/Dialect/Dist/IR/DistOps.h"
#include "braid/Dialect/Dist/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Utils/Utils.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <algorithm>
#include <cmath>

namespace braid::dist {
#define GEN_PASS_DEF_QUANTIZEALLGATHER
#include "braid/Dialect/Dist/Transforms/Passes.h.inc"
} // namespace braid::dist

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

void quantizationBounds(llvm::StringRef format, double &relative,
                        double &absolute) {
  relative = absolute = 0;
  if (format == "bf16") {
    // Round to nearest: half a unit in the last of bf16's 8 bits.
    relative = std::ldexp(1.0, -8);
  } else if (format == "fp8-e4m3") {
    // Nearest of e4m3's 3 mantissa bits: half a unit, 2^-4 relative; below
    // its smallest normal (2^-6 of 448 after scaling) the spacing is 2^-9,
    // so at most 2^-10 / 448 of the chunk's largest magnitude absolute.
    relative = std::ldexp(1.0, -4);
    absolute = std::ldexp(1.0, -10) / 448.0;
  }
}

} // namespace braid::dist::overlap

//===----------------------------------------------------------------------===//
// bf16, and the pass
//===----------------------------------------------------------------------===//

namespace {

using namespace braid::dist;

/// An elementwise linalg.generic converting `input` to `elementType`.
Value convertElements(OpBuilder &b, Location loc, Value input,
                      Type elementType) {
  auto type = cast<RankedTensorType>(input.getType());
  auto resultType = type.clone(elementType);
  Value init =
      tensor::EmptyOp::create(b, loc, resultType.getShape(), elementType);
  SmallVector<AffineMap> maps(2, b.getMultiDimIdentityMap(type.getRank()));
  SmallVector<utils::IteratorType> iterators(type.getRank(),
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, resultType, input, init, maps, iterators,
      [&](OpBuilder &nested, Location nestedLoc, ValueRange args) {
        Value converted =
            elementType.getIntOrFloatBitWidth() <
                    type.getElementType().getIntOrFloatBitWidth()
                ? arith::TruncFOp::create(nested, nestedLoc, elementType,
                                          args[0])
                      .getResult()
                : arith::ExtFOp::create(nested, nestedLoc, elementType, args[0])
                      .getResult();
        linalg::YieldOp::create(nested, nestedLoc, converted);
      });
  return generic.getResult(0);
}

/// An f32 all-gather sent as bf16.
AllGatherOp quantizeBf16(AllGatherOp gather) {
  auto type = cast<RankedTensorType>(gather.getInput().getType());
  OpBuilder b(gather);
  Location loc = gather.getLoc();
  Type bf16 = b.getBF16Type();
  Value narrow = convertElements(b, loc, gather.getInput(), bf16);
  auto resultType = cast<RankedTensorType>(gather.getResult().getType());
  auto sent =
      AllGatherOp::create(b, loc, resultType.clone(bf16), gather.getGridAttr(),
                          gather.getAxesAttr(), narrow, gather.getDimAttr());
  // Named matmuls take the bf16 value as it is (they extend each element
  // as they multiply, accumulating in f32), so the fused schedules still
  // see an all-gather feeding a contraction; anything else reads it
  // extended back to f32.
  Value widened;
  for (OpOperand &use : llvm::make_early_inc_range(gather->getUses())) {
    Operation *user = use.getOwner();
    auto linalgOp = dyn_cast<linalg::LinalgOp>(user);
    if (isa<linalg::MatmulOp, linalg::BatchMatmulOp>(user) &&
        linalgOp.isDpsInput(&use)) {
      // A named op's body is typed by its operands: build it anew.
      SmallVector<Value> inputs(linalgOp.getDpsInputs());
      inputs[use.getOperandNumber()] = sent.getResult();
      OpBuilder at(user);
      Operation *rebuilt;
      if (auto matmul = dyn_cast<linalg::MatmulOp>(user))
        rebuilt = linalg::MatmulOp::create(
            at, matmul.getLoc(), matmul->getResultTypes(), inputs,
            matmul.getDpsInits(), linalg::getPrunedAttributeList(matmul));
      else
        rebuilt = linalg::BatchMatmulOp::create(
            at, user->getLoc(), user->getResultTypes(), inputs,
            linalgOp.getDpsInits(),
            linalg::getPrunedAttributeList(cast<linalg::BatchMatmulOp>(user)));
      // Its indexing maps (a transposed operand) are an attribute the
      // builder sets to the default: they come along.
      rebuilt->setAttr("indexing_maps", user->getAttr("indexing_maps"));
      user->replaceAllUsesWith(rebuilt->getResults());
      user->erase();
      continue;
    }
    if (!widened) {
      b.setInsertionPointAfter(sent);
      widened =
          convertElements(b, loc, sent.getResult(), type.getElementType());
    }
    use.set(widened);
  }
  gather->erase();
  return sent;
}

/// The relative error bound of `format` (quantizationBounds).
double relativeBound(StringRef format) {
  double relative, absolute;
  overlap::quantizationBounds(format, relative, absolute);
  return relative;
}

struct QuantizeAllGatherPass
    : public braid::dist::impl::QuantizeAllGatherBase<QuantizeAllGatherPass> {
  using Base::Base;

  void runOnOperation() override {
    if (format == braid::QuantizeMode::Off)
      return;
    SmallVector<AllGatherOp> gathers;
    getOperation().walk([&](AllGatherOp gather) { gathers.push_back(gather); });
    double bound = 0;
    for (AllGatherOp gather : gathers)
      bound = std::max(bound, quantize(gather));
    if (bound == 0)
      return;
    // The runners read the bound from the manifest (a --check widens its
    // tolerance by it): the module carries it there.
    ModuleOp module = getOperation();
    StringRef name = DistDialect::getQuantizationBoundAttrName();
    if (auto earlier = module->getAttrOfType<FloatAttr>(name))
      bound = std::max(bound, earlier.getValueAsDouble());
    module->setAttr(name,
                    FloatAttr::get(Float64Type::get(&getContext()), bound));
  }

private:
  /// Quantizes `gather` if its format applies; returns the relative error
  /// bound it adds to an element (0: left as it was).
  double quantize(AllGatherOp gather);
};

double QuantizeAllGatherPass::quantize(AllGatherOp gather) {
  Type element =
      cast<RankedTensorType>(gather.getInput().getType()).getElementType();
  StringAttr name =
      StringAttr::get(&getContext(), DistDialect::getQuantizedAttrName());
  if (format == braid::QuantizeMode::Bf16) {
    if (!element.isF32())
      return 0;
    AllGatherOp sent = quantizeBf16(gather);
    sent->setAttr(name, StringAttr::get(&getContext(), "bf16"));
    sent->emitRemark() << "all_gather sends bf16 instead of f32 "
                          "(quantize-all-gather=bf16): relative error of "
                          "each element at most 2^-8";
    return relativeBound("bf16");
  }
  FailureOr<AllGatherOp> sent = overlap::quantizeAllGatherFp8(gather);
  if (failed(sent)) {
    gather->emitRemark() << "all_gather not quantized: fp8 needs a "
                            "statically shaped f32, bf16 or f16 tensor";
    return 0;
  }
  (*sent)->setAttr(name, StringAttr::get(&getContext(), "fp8-e4m3"));
  (*sent)->emitRemark()
      << "all_gather sends fp8 (e4m3) with one scale per rank's chunk "
         "instead of "
      << element
      << " (quantize-all-gather=fp8): each element within 2^-4 "
         "relative, or 2^-10/448 of its chunk's largest magnitude";
  return relativeBound("fp8-e4m3");
}

} // namespace

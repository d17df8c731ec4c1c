//===- CostModel.cpp - Predicting communication and computation -*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Dist/Transforms/CostModel.h"
#include "braid/Dialect/Dist/IR/DistOps.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <cmath>

using namespace mlir;
using namespace braid::dist;

std::optional<TargetDescription>
TargetDescription::preset(llvm::StringRef name) {
  TargetDescription t;
  t.name = name.str();
  if (name == "h100" || name == "h200") {
    // H100/H200 SXM: dense tensor-core throughput (bf16/fp16 989 TFLOP/s;
    // f32 without tensor cores 67 TFLOP/s), HBM3 3.35 TB/s (H100) or HBM3e
    // 4.8 TB/s (H200), NVLink 4 at 450 GB/s per direction. A GEMM fills
    // the 132 SMs with one 64x128 tile each; cuBLAS picks smaller tiles for
    // smaller problems, which computeTime models with a square root.
    t.peakFlops16 = 989e12;
    t.peakFlops32 = 67e12;
    t.gemmEfficiency = 0.75;
    t.gemmSaturationOutputs = 132.0 * 64 * 128;
    t.memoryBandwidth = name == "h100" ? 3.35e12 : 4.8e12;
    t.memoryEfficiency = 0.85;
    t.launchOverhead = 4e-6;
    t.overlapInterference = 0.08;
    t.linkEfficiency = 0.8;
    t.defaultLink = {450e9, 3e-6};
    return t;
  }
  if (name == "cpu") {
    // What one of 4 ranks sharing a 2-core x86-64 gets, measured by
    // bench/cpu/calibrate.py: contractions on oneDNN (bf16 on AMX), the
    // generated elementwise kernels, MPI over shared memory (per ring
    // step). Per rank, since every rank runs the same schedule.
    t.peakFlops16 = 95e9;
    t.peakFlops32 = 44e9;
    t.gemmEfficiency = 1.0;
    t.gemmSaturationOutputs = 1;
    t.memoryBandwidth = 2.3e9;
    t.memoryEfficiency = 1.0;
    t.launchOverhead = 1e-6;
    t.overlapInterference = 0.1;
    t.linkEfficiency = 1.0;
    t.defaultLink = {0.6e9, 16e-6};
    // The same ranks through an MPI shared window (one node): a put and a
    // flag instead of a matched message, so less fixed cost, but the
    // receiver copies each piece out of its slot, so a little less
    // bandwidth (fitted to bench/cpu/symmetric.py: symmetric gains 1.1-1.7x
    // up to ~256 KiB per ring step, loses up to 0.76x at 1 MiB).
    t.oneSidedLink = LinkFigures{0.58e9, 4e-6};
    return t;
  }
  return std::nullopt;
}

double braid::dist::tensorBytes(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.hasStaticShape())
    return 0;
  return type.getNumElements() * ((type.getElementTypeBitWidth() + 7) / 8);
}

LinkFigures CostModel::link(Operation *collective, FlatSymbolRefAttr gridAttr,
                            ArrayRef<int16_t> axes) const {
  LinkFigures result{0, 0};
  shard::GridOp grid = lookupGrid(collective, gridAttr);
  auto topology =
      grid ? grid->getAttrOfType<ArrayAttr>(DistDialect::getTopologyAttrName())
           : ArrayAttr();
  bool first = true;
  for (int16_t axis : axes) {
    LinkFigures figures = target.defaultLink;
    if (topology && axis < static_cast<int64_t>(topology.size()))
      if (auto linkAttr = dyn_cast<LinkAttr>(topology[axis]))
        figures = {linkAttr.getBandwidthGBps() * 1e9,
                   linkAttr.getLatencyUs() * 1e-6};
    if (first || figures.bandwidth < result.bandwidth)
      result.bandwidth = figures.bandwidth;
    result.latency = std::max(result.latency, figures.latency);
    first = false;
  }
  if (first)
    result = target.defaultLink;
  return result;
}

/// FLOPs of a contraction: 2 per point of the iteration space.
static double contractionFlops(linalg::LinalgOp op) {
  double points = 1;
  for (int64_t range : op.getStaticLoopRanges()) {
    if (ShapedType::isDynamic(range))
      return 0;
    points *= range;
  }
  return 2 * points;
}

double CostModel::computeTime(Operation *op, double fraction,
                              std::optional<unsigned> loop) const {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  // The bytes a chunk moves: all of an operand the chunked loop does not
  // index, its share of the others.
  auto share = [&](OpOperand &operand) {
    if (!loop || !linalgOp)
      return fraction;
    AffineMap map = linalgOp.getMatchingIndexingMap(&operand);
    return map.isFunctionOfDim(*loop) ? fraction : 1.0;
  };
  double bytes = 0;
  for (OpOperand &operand : op->getOpOperands())
    bytes += tensorBytes(operand.get()) * share(operand);
  for (OpResult result : op->getResults())
    bytes += tensorBytes(result) *
             (linalgOp && loop
                  ? share(*linalgOp.getDpsInitOperand(result.getResultNumber()))
                  : fraction);
  double memory = streamTime(bytes);
  if (!linalgOp || linalgOp.getNumReductionLoops() == 0)
    return memory + target.launchOverhead;
  // Matmul-like: FLOPs at the operands' width, derated for GEMMs too small
  // to fill the machine.
  double flops = contractionFlops(linalgOp) * fraction;
  unsigned width = 32;
  for (OpOperand *input : linalgOp.getDpsInputOperands())
    if (auto type = dyn_cast<ShapedType>(input->get().getType()))
      width = std::min<unsigned>(width, type.getElementTypeBitWidth());
  double peak = width <= 16 ? target.peakFlops16 : target.peakFlops32;
  double outputs = 1;
  for (Value result : op->getResults())
    if (auto type = dyn_cast<ShapedType>(result.getType());
        type && type.hasStaticShape())
      outputs = type.getNumElements();
  double fill = std::sqrt(std::min(
      1.0, outputs * fraction / std::max(1.0, target.gemmSaturationOutputs)));
  double rate = peak * target.gemmEfficiency * std::max(fill, 1e-3);
  return std::max(flops / rate, memory) + target.launchOverhead;
}

double CostModel::messageTime(double bytes, LinkFigures link) const {
  return link.latency + bytes / (link.bandwidth * target.linkEfficiency);
}

double CostModel::streamTime(double bytes) const {
  return bytes / (target.memoryBandwidth * target.memoryEfficiency);
}

double CostModel::collectiveTime(llvm::StringRef kind, double bytes, int64_t n,
                                 LinkFigures link) const {
  if (n <= 1)
    return 0;
  double block = bytes / n;
  double ring = (n - 1) * messageTime(block, link);
  // Reductions run on each block as it arrives, pipelined with the
  // transfers of the next (as NCCL does): the slower of the two bounds it.
  double reduce = (n - 1) * streamTime(3 * block);
  if (kind == "all_gather" || kind == "all_to_all")
    return ring;
  if (kind == "reduce_scatter")
    return std::max(ring, reduce);
  if (kind == "all_reduce")
    return std::max(ring, reduce) + ring;
  if (kind == "shift")
    return messageTime(bytes, link);
  // broadcast: pipelined ring.
  return (n - 1) * link.latency +
         bytes / (link.bandwidth * target.linkEfficiency);
}

//===- CostModel.h - Predicting communication and computation ---*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// An alpha-beta model of links (per grid axis, from `dist.topology` or the
// target preset) and a roofline model of compute (peak FLOP/s per element
// type, memory bandwidth, launch overhead, and the size below which a GEMM
// cannot fill the machine). The overlap pass asks it for the serial and the
// overlapped time of each candidate schedule and never picks one predicted
// slower than the collective left whole.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_DIALECT_DIST_TRANSFORMS_COSTMODEL_H
#define BRAID_DIALECT_DIST_TRANSFORMS_COSTMODEL_H

#include "mlir/IR/Operation.h"
#include "mlir/Support/LLVM.h"

#include <optional>
#include <string>

namespace braid::dist {

class CollectiveOpInterface;

/// Figures of one link: bytes per second per direction, seconds of latency.
struct LinkFigures {
  double bandwidth = 0;
  double latency = 0;
};

/// What the cost model knows about a target. All times in seconds.
struct TargetDescription {
  std::string name;
  /// Peak dense matmul throughput, FLOP/s, by operand element width.
  double peakFlops32 = 0;
  double peakFlops16 = 0;
  /// Fraction of peak a large GEMM reaches.
  double gemmEfficiency = 0.7;
  /// Output elements (M*N) a GEMM needs to fill the machine; smaller GEMMs
  /// (and chunks) run proportionally less efficiently.
  double gemmSaturationOutputs = 1;
  /// Memory bandwidth, bytes/s, and the fraction of it streaming kernels
  /// reach.
  double memoryBandwidth = 0;
  double memoryEfficiency = 0.8;
  /// Fixed cost of each kernel (GPU launch) or loop nest.
  double launchOverhead = 0;
  /// How much compute slows down while transfers share its memory system.
  double overlapInterference = 0.05;
  /// Fraction of link bandwidth collectives reach.
  double linkEfficiency = 0.8;
  /// Link used for grid axes without `dist.topology`.
  LinkFigures defaultLink;
  /// One-sided transfers through symmetric memory within the preset's
  /// shared-memory domain (per ring step), when it has one.
  std::optional<LinkFigures> oneSidedLink;

  /// The presets `cpu`, `h100` and `h200`, or nothing.
  static std::optional<TargetDescription> preset(llvm::StringRef name);
};

/// Predictions for one compute op or collective.
class CostModel {
public:
  explicit CostModel(TargetDescription target) : target(std::move(target)) {}

  const TargetDescription &getTarget() const { return target; }

  /// Link figures of the group over `axes` of the collective's grid: the
  /// slowest axis bounds a multi-axis group.
  LinkFigures link(mlir::Operation *collective, mlir::FlatSymbolRefAttr grid,
                   llvm::ArrayRef<int16_t> axes) const;

  /// Time of `op` on the whole of its operands: matmul-like linalg ops by
  /// FLOPs, everything else by bytes moved. `fraction` scales the work (a
  /// chunk of 1/n of it). With `loop`, the chunk is that fraction of the
  /// loop's iterations: an operand the loop does not index is read whole
  /// by every chunk (a GEMM's weight, when its rows are chunked).
  double computeTime(mlir::Operation *op, double fraction = 1.0,
                     std::optional<unsigned> loop = std::nullopt) const;

  /// Time of a ring collective of `kind` moving `bytes` (the input of a
  /// reduction, the result of a gather) over `groupSize` ranks on `link`.
  double collectiveTime(llvm::StringRef kind, double bytes, int64_t groupSize,
                        LinkFigures link) const;

  /// Time of one point-to-point message of `bytes`.
  double messageTime(double bytes, LinkFigures link) const;

  /// Time to stream `bytes` through memory (an elementwise pass).
  double streamTime(double bytes) const;

private:
  TargetDescription target;
};

/// Bytes of a statically shaped tensor value, or 0.
double tensorBytes(mlir::Value value);

} // namespace braid::dist

#endif // BRAID_DIALECT_DIST_TRANSFORMS_COSTMODEL_H

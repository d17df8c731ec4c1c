//===- Report.h - braid-overlap's decisions, as records ---------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Internal to braid-overlap. One record per collective of the input: what
// became of it and why. `report=FILE` writes them as JSON; the common
// fields are those of Record, in that order, and a pattern adds its own
// object (ring attention's "scores"). docs/report.schema.json is the
// schema, which the tests check every report they write against.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_LIB_DIALECT_DIST_TRANSFORMS_OVERLAP_REPORT_H
#define BRAID_LIB_DIALECT_DIST_TRANSFORMS_OVERLAP_REPORT_H

#include "mlir/Support/LLVM.h"

#include <functional>
#include <string>
#include <vector>

namespace llvm::json {
class OStream;
} // namespace llvm::json

namespace braid::dist::overlap {

/// One collective of the input and what became of it.
struct Record {
  std::string function, kind, loc;
  /// How often the function runs per run of the program: a layer function
  /// (braid-outline-layers) once per call.
  int64_t calls = 1;
  /// "fused", "async" or "kept"; the strategy and the op it overlaps.
  std::string decision, with, strategy;
  int64_t chunks = 0;
  /// "symmetric" or "two-sided".
  std::string transport = "two-sided";
  /// fuse-collectives: computed inside the kernel `kernel` names.
  bool inKernel = false;
  std::string kernel;
  std::string reason;
  double compute = 0, comm = 0, serial = 0, overlapped = 0;
  /// The format the collective sends in, when quantized; its bound on the
  /// relative error of each element, and (fp8) the absolute bound, as a
  /// fraction of the chunk's largest magnitude, below the smallest normal.
  std::string quantized;
  double quantizationError = 0, quantizationAbsolute = 0;
  /// The pattern's own fields, written after "chunks".
  std::function<void(llvm::json::OStream &)> details;
};

/// What the report says besides the records.
struct ReportHeader {
  std::string preset, mode;
  /// The pipeline's options (a JSON object), or empty.
  std::string options;
};

/// Writes the report to `path`; an error message or an empty string.
std::string writeReport(llvm::StringRef path, const ReportHeader &header,
                        llvm::ArrayRef<Record> records);

} // namespace braid::dist::overlap

#endif // BRAID_LIB_DIALECT_DIST_TRANSFORMS_OVERLAP_REPORT_H

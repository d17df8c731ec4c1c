//===- Report.cpp - braid-overlap's decisions as JSON -----------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "Report.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
using namespace braid::dist;
using namespace braid::dist::overlap;

namespace {

/// Writes one record, its keys in a fixed order, times in microseconds
/// with one decimal.
void writeRecord(llvm::json::OStream &json, const Record &r) {
  auto time = [&](StringRef key, double seconds) {
    json.attributeBegin(key);
    json.rawValue(llvm::formatv("{0:f1}", seconds * 1e6).str());
    json.attributeEnd();
  };
  auto optional = [&](StringRef key, const std::string &value) {
    if (value.empty())
      json.attribute(key, nullptr);
    else
      json.attribute(key, value);
  };
  json.attribute("kind", r.kind);
  json.attribute("loc", r.loc);
  json.attribute("function", r.function);
  json.attribute("calls", r.calls);
  json.attribute("decision", r.decision);
  optional("with", r.with);
  optional("strategy", r.strategy);
  json.attribute("chunks", r.chunks);
  if (r.details)
    r.details(json);
  json.attribute("transport", r.transport);
  if (r.inKernel) {
    json.attribute("in_kernel", true);
    json.attribute("kernel", r.kernel);
  }
  json.attribute("reason", r.reason);
  json.attributeObject("predicted", [&] {
    time("compute_us", r.compute);
    time("comm_us", r.comm);
    time("serial_us", r.serial);
    time("overlapped_us", r.overlapped);
  });
  if (!r.quantized.empty())
    json.attributeObject("quantized", [&] {
      json.attribute("format", r.quantized);
      json.attribute("max_relative_error", r.quantizationError);
      if (r.quantizationAbsolute > 0)
        json.attribute("max_absolute_error_over_chunk_amax",
                       r.quantizationAbsolute);
    });
}

} // namespace

std::string overlap::writeReport(StringRef path, const ReportHeader &header,
                                 ArrayRef<Record> records) {
  std::string message;
  std::unique_ptr<llvm::ToolOutputFile> file = openOutputFile(path, &message);
  if (!file)
    return message.empty() ? "cannot open it" : message;
  llvm::json::OStream json(file->os(), /*IndentSize=*/2);
  json.object([&] {
    json.attribute("target_preset", header.preset);
    json.attribute("mode", header.mode);
    if (!header.options.empty()) {
      json.attributeBegin("options");
      json.rawValue(header.options);
      json.attributeEnd();
    }
    json.attributeArray("collectives", [&] {
      for (const Record &r : records)
        json.object([&] { writeRecord(json, r); });
    });
  });
  file->os() << "\n";
  file->keep();
  return "";
}

//===- DistAttrs.cpp - Dist attributes and types ----------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Dist/IR/DistOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace braid::dist;

#include "braid/Dialect/Dist/IR/DistOpsEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "braid/Dialect/Dist/IR/DistOpsAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "braid/Dialect/Dist/IR/DistOpsTypes.cpp.inc"

void DistDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "braid/Dialect/Dist/IR/DistOpsAttrs.cpp.inc"
      >();
}

void DistDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "braid/Dialect/Dist/IR/DistOpsTypes.cpp.inc"
      >();
}

llvm::hash_code braid::dist::hash_value(const AxisPlacement &placement) {
  switch (placement.kind) {
  case PlacementKind::Shard:
    return llvm::hash_combine(placement.kind, placement.dim);
  case PlacementKind::Partial:
    return llvm::hash_combine(placement.kind, placement.reduction);
  case PlacementKind::Replicate:
    break;
  }
  return llvm::hash_value(static_cast<int>(placement.kind));
}

bool braid::dist::isReductionLegalFor(ReductionKind kind, Type elementType) {
  switch (kind) {
  case ReductionKind::Sum:
  case ReductionKind::Product:
  case ReductionKind::Max:
  case ReductionKind::Min:
    return elementType.isIntOrFloat();
  case ReductionKind::BitAnd:
  case ReductionKind::BitOr:
  case ReductionKind::BitXor:
    return elementType.isInteger();
  }
  return false;
}

int64_t braid::dist::getGroupSize(shard::GridOp grid, ArrayRef<int16_t> axes) {
  ArrayRef<int64_t> shape = grid.getShape();
  int64_t size = 1;
  for (int16_t axis : axes) {
    if (axis < 0 || axis >= static_cast<int64_t>(shape.size()) ||
        ShapedType::isDynamic(shape[axis]))
      return ShapedType::kDynamic;
    size *= shape[axis];
  }
  return size;
}

shard::GridOp braid::dist::lookupGrid(Operation *from,
                                      FlatSymbolRefAttr symbol) {
  if (!symbol)
    return {};
  return dyn_cast_or_null<shard::GridOp>(
      SymbolTable::lookupNearestSymbolFrom(from, symbol));
}

//===----------------------------------------------------------------------===//
// LinkAttr
//===----------------------------------------------------------------------===//

/// Prints `value` with the fewest digits that read back to the same double,
/// always with a decimal point so that it reads as a float.
static void printShortestDouble(AsmPrinter &printer, double value) {
  SmallString<32> text;
  llvm::APFloat(value).toString(text, /*FormatPrecision=*/0,
                                /*FormatMaxPadding=*/6);
  if (StringRef(text).find_first_of(".eEnNiI") == StringRef::npos)
    text.append(".0");
  printer << text;
}

Attribute LinkAttr::parse(AsmParser &parser, Type) {
  StringRef className;
  double bandwidth = 0, latency = 0;
  SMLoc classLoc;
  if (parser.parseLess())
    return {};
  classLoc = parser.getCurrentLocation();
  if (parser.parseKeyword(&className))
    return {};
  std::optional<LinkClass> linkClass = symbolizeLinkClass(className);
  if (!linkClass) {
    parser.emitError(classLoc)
        << "unknown link class '" << className
        << "', expected one of nvlink, pcie, network, shm";
    return {};
  }
  if (parser.parseComma() || parser.parseKeyword("bandwidth") ||
      parser.parseEqual() || parser.parseFloat(bandwidth) ||
      parser.parseComma() || parser.parseKeyword("latency") ||
      parser.parseEqual() || parser.parseFloat(latency) ||
      parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(classLoc); },
                    parser.getContext(), *linkClass, llvm::APFloat(bandwidth),
                    llvm::APFloat(latency));
}

void LinkAttr::print(AsmPrinter &printer) const {
  printer << "<" << stringifyLinkClass(getLinkClass()) << ", bandwidth = ";
  printShortestDouble(printer, getBandwidthGBps());
  printer << ", latency = ";
  printShortestDouble(printer, getLatencyUs());
  printer << ">";
}

LogicalResult LinkAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               LinkClass, llvm::APFloat bandwidthValue,
                               llvm::APFloat latencyValue) {
  double bandwidth = bandwidthValue.convertToDouble();
  double latency = latencyValue.convertToDouble();
  if (!(bandwidth > 0))
    return emitError() << "link bandwidth must be positive (GB/s), got "
                       << bandwidth;
  if (!(latency >= 0))
    return emitError() << "link latency must be non-negative (us), got "
                       << latency;
  return success();
}

//===----------------------------------------------------------------------===//
// PlacementAttr
//===----------------------------------------------------------------------===//

static ParseResult parseAxisPlacement(AsmParser &parser,
                                      AxisPlacement &placement) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return failure();
  if (keyword == "replicate") {
    placement = AxisPlacement::replicate();
    return success();
  }
  if (keyword == "shard") {
    int64_t dim = 0;
    if (parser.parseLess() || parser.parseInteger(dim) || parser.parseGreater())
      return failure();
    placement = AxisPlacement::shard(dim);
    return success();
  }
  if (keyword == "partial") {
    StringRef kindName;
    SMLoc kindLoc;
    if (parser.parseLess())
      return failure();
    kindLoc = parser.getCurrentLocation();
    if (parser.parseKeyword(&kindName) || parser.parseGreater())
      return failure();
    std::optional<ReductionKind> kind = symbolizeReductionKind(kindName);
    if (!kind)
      return parser.emitError(kindLoc)
             << "unknown reduction '" << kindName << "'";
    placement = AxisPlacement::partial(*kind);
    return success();
  }
  return parser.emitError(loc) << "expected 'replicate', 'shard<dim>' or "
                                  "'partial<kind>', got '"
                               << keyword << "'";
}

Attribute PlacementAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  FlatSymbolRefAttr grid;
  SmallVector<AxisPlacement> axes;
  if (parser.parseLess() || parser.parseAttribute(grid) ||
      parser.parseComma() ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square,
                                     [&] {
                                       AxisPlacement placement;
                                       if (parseAxisPlacement(parser,
                                                              placement))
                                         return failure();
                                       axes.push_back(placement);
                                       return success();
                                     }) ||
      parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(loc); }, parser.getContext(),
                    grid, axes);
}

void PlacementAttr::print(AsmPrinter &printer) const {
  printer << "<" << getGrid() << ", [";
  llvm::interleaveComma(getAxes(), printer, [&](const AxisPlacement &axis) {
    switch (axis.kind) {
    case PlacementKind::Replicate:
      printer << "replicate";
      break;
    case PlacementKind::Shard:
      printer << "shard<" << axis.dim << ">";
      break;
    case PlacementKind::Partial:
      printer << "partial<" << stringifyReductionKind(axis.reduction) << ">";
      break;
    }
  });
  printer << "]>";
}

LogicalResult
PlacementAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      FlatSymbolRefAttr grid, ArrayRef<AxisPlacement> axes) {
  if (!grid)
    return emitError() << "placement needs a grid symbol";
  for (auto [index, axis] : llvm::enumerate(axes))
    if (axis.kind == PlacementKind::Shard && axis.dim < 0)
      return emitError() << "placement of grid axis " << index
                         << " shards negative dimension " << axis.dim;
  return success();
}

bool PlacementAttr::isReplicatedAlong(int64_t axis) const {
  ArrayRef<AxisPlacement> axes = getAxes();
  return axis >= 0 && axis < static_cast<int64_t>(axes.size()) &&
         axes[axis].kind == PlacementKind::Replicate;
}

LogicalResult
braid::dist::verifyPlacement(PlacementAttr placement, Type type,
                             shard::GridOp grid,
                             function_ref<InFlightDiagnostic()> emitError) {
  // Bufferized functions keep their placements on memref arguments.
  auto tensorType = dyn_cast<ShapedType>(type);
  if (!tensorType || !tensorType.hasRank() ||
      !isa<RankedTensorType, MemRefType>(type))
    return emitError() << "a placement needs a ranked tensor or memref, got "
                       << type;
  if (!grid)
    return emitError() << "unknown grid " << placement.getGrid();
  if (static_cast<int64_t>(placement.getAxes().size()) != grid.getRank())
    return emitError() << "placement has " << placement.getAxes().size()
                       << " entries but grid " << placement.getGrid() << " has "
                       << grid.getRank() << " axes";
  for (auto [index, axis] : llvm::enumerate(placement.getAxes())) {
    if (axis.kind == PlacementKind::Shard && axis.dim >= tensorType.getRank())
      return emitError() << "grid axis " << index << " shards dimension "
                         << axis.dim << " of a rank-" << tensorType.getRank()
                         << " tensor";
    if (axis.kind == PlacementKind::Partial &&
        !isReductionLegalFor(axis.reduction, tensorType.getElementType()))
      return emitError() << "partial<" << stringifyReductionKind(axis.reduction)
                         << "> along grid axis " << index
                         << " is not defined for "
                         << tensorType.getElementType();
  }
  return success();
}

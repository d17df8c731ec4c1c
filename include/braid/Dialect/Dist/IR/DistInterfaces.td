//===- DistInterfaces.td - Dist op interfaces --------------*- tablegen -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_DIALECT_DIST_IR_DISTINTERFACES_TD
#define BRAID_DIALECT_DIST_IR_DISTINTERFACES_TD

include "mlir/IR/OpBase.td"

def Dist_CollectiveOpInterface : OpInterface<"CollectiveOpInterface"> {
  let cppNamespace = "::braid::dist";
  let description = [{
    Common view of every `dist` collective, synchronous or asynchronous:
    the grid it runs on, the grid axes that form its groups, the tensor it
    reads and the tensor it produces (the future, for a start op).
  }];
  let methods = [
    InterfaceMethod<"The grid symbol.", "::mlir::FlatSymbolRefAttr",
      "getGridAttr">,
    InterfaceMethod<"The grid axes forming each group.",
      "::llvm::ArrayRef<int16_t>", "getAxes">,
    InterfaceMethod<"The tensor sent by this rank.",
      "::mlir::TypedValue<::mlir::RankedTensorType>", "getInput">,
    InterfaceMethod<"The tensor this rank receives (the future of a start op).",
      "::mlir::TypedValue<::mlir::RankedTensorType>", "getCollectiveResult">,
    InterfaceMethod<"The completion token, or null for a synchronous op.",
      "::mlir::Value", "getAsyncToken", (ins), [{}], [{ return {}; }]>,
    InterfaceMethod<"The collective's kind as the report names it.",
      "::llvm::StringRef", "getCollectiveKind">
  ];
  let extraSharedClassDeclaration = [{
    bool isAsync() { return static_cast<bool>($_op.getAsyncToken()); }
  }];
}

#endif // BRAID_DIALECT_DIST_IR_DISTINTERFACES_TD

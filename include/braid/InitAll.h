//===- InitAll.h - Register Braid's dialects and passes ---------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_INITALL_H
#define BRAID_INITALL_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace braid {

/// Adds Braid's dialects and the interface models they rely on.
void registerAllDialects(mlir::DialectRegistry &registry);

/// Registers Braid's passes and pipelines with the global pass registry
/// (library BraidPassRegistration; the dialects alone need only
/// BraidRegistration).
void registerAllPasses();

/// Braid's version and the LLVM it was built against, for `--version`.
const char *getVersionString();

} // namespace braid

#endif // BRAID_INITALL_H

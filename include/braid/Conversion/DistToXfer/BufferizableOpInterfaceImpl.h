//===- BufferizableOpInterfaceImpl.h - dist ops bufferize to xfer -*- C++
//-*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// `dist` collectives bufferize to `xfer` transfers: One-Shot Bufferize is the
// dist-to-xfer conversion. A synchronous collective becomes a transfer into a
// fresh buffer plus its wait; a start op becomes the transfer, and its
// `dist.wait` becomes the `xfer.wait`.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_CONVERSION_DISTTOXFER_BUFFERIZABLEOPINTERFACEIMPL_H
#define BRAID_CONVERSION_DISTTOXFER_BUFFERIZABLEOPINTERFACEIMPL_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace braid::dist {
void registerBufferizableOpInterfaceExternalModels(
    mlir::DialectRegistry &registry);
} // namespace braid::dist

#endif // BRAID_CONVERSION_DISTTOXFER_BUFFERIZABLEOPINTERFACEIMPL_H

/*===- memref2.h - The descriptor of a rank-2 memref, for the stand-ins ---===*
 *
 * Part of Braid.
 *
 *===----------------------------------------------------------------------===*
 *
 * What braid_entry's argv points to for a rank-2 argument or result: MLIR's
 * memref descriptor as the LLVM lowering lays it out.
 *
 *===----------------------------------------------------------------------===*/

#ifndef BRAID_TEST_MEMREF2_H
#define BRAID_TEST_MEMREF2_H

#include <stdint.h>

typedef struct {
  void *allocated;
  void *aligned;
  int64_t offset;
  int64_t sizes[2];
  int64_t strides[2];
} MemRef2;

#endif

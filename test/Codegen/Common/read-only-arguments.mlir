// braid-read-only-arguments marks the tensor arguments of public functions
// read-only for One-Shot Bufferize, so that a compiled program never writes
// its caller's buffers (braid_program.h runs a program many times on the
// same weights).

// RUN: braid-opt %s --pass-pipeline='builtin.module(func.func(braid-read-only-arguments))' | FileCheck %s
// RUN: braid-opt %s --pass-pipeline='builtin.module(func.func(braid-read-only-arguments),one-shot-bufferize{bufferize-function-boundaries})' | FileCheck %s --check-prefix=BUFFERS

// A public function's tensor arguments are read-only: the insert into %x
// goes into a copy, and the caller's buffer is never written.
// CHECK-LABEL: func.func @entry(
// CHECK-SAME: %{{.*}}: tensor<4xf32> {bufferization.writable = false}, %{{.*}}: tensor<2xf32> {bufferization.writable = false}, %{{.*}}: index)
// BUFFERS-LABEL: func.func @entry(
// BUFFERS-SAME: %[[X:[a-z0-9]+]]: memref<4xf32{{.*}}>, %[[Y:[a-z0-9]+]]: memref<2xf32{{.*}}>
// BUFFERS: %[[COPY:.*]] = memref.alloc() {{.*}}: memref<4xf32>
// BUFFERS: memref.copy %[[X]], %[[COPY]]
// BUFFERS: memref.subview %[[COPY]]
// BUFFERS-NOT: memref.subview %[[X]]
func.func @entry(%x: tensor<4xf32>, %y: tensor<2xf32>, %n: index) -> tensor<4xf32> {
  %r = tensor.insert_slice %y into %x[0] [2] [1] : tensor<2xf32> into tensor<4xf32>
  return %r : tensor<4xf32>
}

// A private function (an outlined layer) is the program's own: its
// arguments stay writable, and the insert goes into %x in place.
// CHECK-LABEL: func.func private @layer(
// CHECK-SAME: %{{.*}}: tensor<4xf32>, %{{.*}}: tensor<2xf32>)
// CHECK-NOT: writable
// BUFFERS-LABEL: func.func private @layer(
// BUFFERS-SAME: %[[LX:[a-z0-9]+]]: memref<4xf32{{.*}}>,
// BUFFERS-NOT: memref.alloc
// BUFFERS: memref.subview %[[LX]]
func.func private @layer(%x: tensor<4xf32>, %y: tensor<2xf32>) -> tensor<4xf32> {
  %r = tensor.insert_slice %y into %x[0] [2] [1] : tensor<2xf32> into tensor<4xf32>
  return %r : tensor<4xf32>
}

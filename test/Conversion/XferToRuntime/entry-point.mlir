// The uniform entry point runners call.
// RUN: braid-opt %s -split-input-file --convert-func-to-llvm --braid-emit-entry-point=entry=main -verify-diagnostics | FileCheck %s

// CHECK-LABEL: llvm.func @braid_entry(
// CHECK-SAME: %[[ARGV:.*]]: !llvm.ptr)
// Results first (argv[0]), then the two arguments.
// CHECK: %[[P0:.*]] = llvm.getelementptr %[[ARGV]][0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK: %[[R:.*]] = llvm.load %[[P0]] : !llvm.ptr -> !llvm.ptr
// CHECK: llvm.getelementptr %[[ARGV]][1]
// CHECK: llvm.getelementptr %[[ARGV]][2]
// CHECK: llvm.call @_mlir_ciface_main(%[[R]], %{{.*}}, %{{.*}})
func.func @main(%a: memref<4xf32>, %b: memref<4xf32>) -> memref<4xf32> attributes {llvm.emit_c_interface} {
  return %a : memref<4xf32>
}

// -----

// Without results, argv[0] is skipped.
// CHECK-LABEL: llvm.func @braid_entry(
// CHECK: llvm.getelementptr %{{.*}}[1]
// CHECK: llvm.call @_mlir_ciface_main(%{{.*}}) : (!llvm.ptr) -> ()
func.func @main(%a: memref<4xf32>) attributes {llvm.emit_c_interface} {
  return
}

// -----

// expected-error @+1 {{braid-emit-entry-point: no '_mlir_ciface_main' in the module; is 'main' a function with llvm.emit_c_interface?}}
module {
  func.func @main(%a: memref<4xf32>) {
    return
  }
}

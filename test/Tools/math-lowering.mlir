// math ops the C library lacks are expanded before the rest become LLVM
// intrinsics or libm calls: glibc has no rsqrtf, and an artifact calling it
// would not load. sqrt is LLVM's own (one instruction).
// RUN: braid-compile %s --emit=llvm-ir 2>/dev/null | FileCheck %s
// CHECK-NOT: rsqrtf
// CHECK: call float @llvm.sqrt.f32
// CHECK-NOT: rsqrtf
shard.grid @g(shape = 2)
func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.rsqrt %a : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  return %y : tensor<8xf32>
}

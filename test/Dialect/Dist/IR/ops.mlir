// Round trip of every dist op, attribute and type in custom form, generic
// form and bytecode.
// RUN: braid-opt %s | braid-opt | FileCheck %s
// RUN: braid-opt %s --mlir-print-op-generic | braid-opt | FileCheck %s
// RUN: braid-opt %s --emit-bytecode | braid-opt | FileCheck %s

// CHECK: shard.grid @tp(shape = 2x4) {dist.topology = [#dist.link<network, bandwidth = 50.0, latency = 5.0>, #dist.link<nvlink, bandwidth = 450.0, latency = 1.5>]}
shard.grid @tp(shape = 2x4) {dist.topology = [
    #dist.link<network, bandwidth = 50.0, latency = 5.0>,
    #dist.link<nvlink, bandwidth = 450.0, latency = 1.5>]}
// CHECK: shard.grid @pcie(shape = 8) {dist.topology = [#dist.link<pcie, bandwidth = 25.0, latency = 2.25>]}
shard.grid @pcie(shape = 8) {dist.topology = [#dist.link<pcie, bandwidth = 25.0, latency = 2.25>]}
shard.grid @cpu(shape = 4) {dist.topology = [#dist.link<shm, bandwidth = 10.0, latency = 0.5>]}

// CHECK-LABEL: func.func @sync
// CHECK-SAME: %[[X:[^:]*]]: tensor<128x64xf32> {dist.placement = #dist.placement<@tp, [replicate, shard<0>]>}
// CHECK-SAME: -> (tensor<512x64xf32> {dist.placement = #dist.placement<@tp, [partial<sum>, replicate]>})
func.func @sync(%x: tensor<128x64xf32> {dist.placement = #dist.placement<@tp, [replicate, shard<0>]>})
    -> (tensor<512x64xf32> {dist.placement = #dist.placement<@tp, [partial<sum>, replicate]>}) {
  // CHECK: %[[G:.*]] = dist.all_gather %[[X]] on @tp axes = [1] dim = 0 : tensor<128x64xf32> -> tensor<512x64xf32>
  %g = dist.all_gather %x on @tp axes = [1] dim = 0 : tensor<128x64xf32> -> tensor<512x64xf32>
  // CHECK: %[[R:.*]] = dist.all_reduce %[[G]] on @tp axes = [0] reduce = sum : tensor<512x64xf32> -> tensor<512x64xf32>
  %r = dist.all_reduce %g on @tp axes = [0] reduce = sum : tensor<512x64xf32> -> tensor<512x64xf32>
  // CHECK: %[[S:.*]] = dist.reduce_scatter %[[R]] on @tp axes = [1] dim = 1 reduce = max : tensor<512x64xf32> -> tensor<512x16xf32>
  %s = dist.reduce_scatter %r on @tp axes = [1] dim = 1 reduce = max : tensor<512x64xf32> -> tensor<512x16xf32>
  // CHECK: %[[A:.*]] = dist.all_to_all %[[S]] on @tp axes = [1] split_dim = 0 concat_dim = 1 : tensor<512x16xf32> -> tensor<128x64xf32>
  %a = dist.all_to_all %s on @tp axes = [1] split_dim = 0 concat_dim = 1 : tensor<512x16xf32> -> tensor<128x64xf32>
  // CHECK: %[[SH:.*]] = dist.shift %[[A]] on @tp axes = [1] offset = -1 : tensor<128x64xf32> -> tensor<128x64xf32>
  %sh = dist.shift %a on @tp axes = [1] offset = -1 : tensor<128x64xf32> -> tensor<128x64xf32>
  // CHECK: %[[B:.*]] = dist.broadcast %[[SH]] on @tp axes = [0, 1] root = [1, 3] : tensor<128x64xf32> -> tensor<128x64xf32>
  %b = dist.broadcast %sh on @tp axes = [0, 1] root = [1, 3] : tensor<128x64xf32> -> tensor<128x64xf32>
  // CHECK: dist.annotate %[[B]] as <@tp, [partial<min>, shard<1>]> : tensor<128x64xf32>
  %an = dist.annotate %b as <@tp, [partial<min>, shard<1>]> : tensor<128x64xf32>
  return %r : tensor<512x64xf32>
}

// CHECK-LABEL: func.func @async
func.func @async(%x: tensor<128x64xbf16>, %i: tensor<16xi32>, %h: tensor<8x64xf16>) -> tensor<512x64xbf16> {
  // CHECK: %[[T0:.*]], %[[F0:.*]] = dist.all_gather_start %{{.*}} on @tp axes = [1] dim = 0 : tensor<128x64xbf16> -> tensor<512x64xbf16>
  // CHECK: %[[W0:.*]] = dist.wait %[[T0]], %[[F0]] : tensor<512x64xbf16>
  %t0, %f0 = dist.all_gather_start %x on @tp axes = [1] dim = 0 : tensor<128x64xbf16> -> tensor<512x64xbf16>
  %w0 = dist.wait %t0, %f0 : tensor<512x64xbf16>
  // CHECK: dist.reduce_scatter_start %{{.*}} on @tp axes = [0, 1] dim = 0 reduce = sum : tensor<512x64xbf16> -> tensor<64x64xbf16>
  %t1, %f1 = dist.reduce_scatter_start %w0 on @tp axes = [0, 1] dim = 0 reduce = sum : tensor<512x64xbf16> -> tensor<64x64xbf16>
  // CHECK: dist.all_reduce_start %{{.*}} on @tp axes = [0] reduce = bitxor : tensor<16xi32> -> tensor<16xi32>
  %t2, %f2 = dist.all_reduce_start %i on @tp axes = [0] reduce = bitxor : tensor<16xi32> -> tensor<16xi32>
  // CHECK: dist.all_to_all_start %{{.*}} on @pcie axes = [0] split_dim = 0 concat_dim = 0 : tensor<8x64xf16> -> tensor<8x64xf16>
  %t3, %f3 = dist.all_to_all_start %h on @pcie axes = [0] split_dim = 0 concat_dim = 0 : tensor<8x64xf16> -> tensor<8x64xf16>
  // CHECK: dist.shift_start %{{.*}} on @cpu axes = [0] offset = 1 : tensor<8x64xf16> -> tensor<8x64xf16>
  %t4, %f4 = dist.shift_start %h on @cpu axes = [0] offset = 1 : tensor<8x64xf16> -> tensor<8x64xf16>
  // CHECK: dist.broadcast_start %{{.*}} on @cpu axes = [0] root = [2] : tensor<8x64xf16> -> tensor<8x64xf16>
  %t5, %f5 = dist.broadcast_start %h on @cpu axes = [0] root = [2] : tensor<8x64xf16> -> tensor<8x64xf16>
  %w5 = dist.wait %t5, %f5 : tensor<8x64xf16>
  %w4 = dist.wait %t4, %f4 : tensor<8x64xf16>
  %w3 = dist.wait %t3, %f3 : tensor<8x64xf16>
  %w2 = dist.wait %t2, %f2 : tensor<16xi32>
  %w1 = dist.wait %t1, %f1 : tensor<64x64xbf16>
  return %w0 : tensor<512x64xbf16>
}

// Dynamic tensor dimensions are allowed; their sizes are not checked.
// CHECK-LABEL: func.func @dynamic
func.func @dynamic(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  // CHECK: dist.all_gather %{{.*}} on @tp axes = [1] dim = 0 : tensor<?x64xf32> -> tensor<?x64xf32>
  %g = dist.all_gather %x on @tp axes = [1] dim = 0 : tensor<?x64xf32> -> tensor<?x64xf32>
  return %g : tensor<?x64xf32>
}

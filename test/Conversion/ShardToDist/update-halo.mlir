// shard.update_halo as ring shifts: per split dimension, last to first, the
// first interior rows to the lower neighbour's upper halo and the last to
// the upper neighbour's lower halo; ranks at a group's end keep the halo
// their destination had. Unconvertible forms are located errors.
// RUN: braid-opt %s -split-input-file --braid-import-shard -verify-diagnostics | FileCheck %s

shard.grid @g(shape = 4)

// CHECK-LABEL: func.func @rows
// Upper halo (row 9) from the next rank's first interior row (row 1).
// CHECK: %[[P:.*]] = shard.process_multi_index on @g axes = [0] : index
// CHECK: %[[UP:.*]] = tensor.extract_slice %arg0[1, 0] [1, 6] [1, 1] : tensor<10x6xf32> to tensor<1x6xf32>
// CHECK: %[[GOT:.*]] = dist.shift %[[UP]] on @g axes = [0] offset = -1 : tensor<1x6xf32> -> tensor<1x6xf32>
// CHECK: %[[OLD:.*]] = tensor.extract_slice %arg0[9, 0] [1, 6] [1, 1]
// CHECK: %[[LAST:.*]] = arith.cmpi eq, %[[P]], %c3
// CHECK: %[[K:.*]] = arith.select %[[LAST]], %[[OLD]], %[[GOT]] : tensor<1x6xf32>
// CHECK: %[[R1:.*]] = tensor.insert_slice %[[K]] into %arg0[9, 0] [1, 6] [1, 1]
// The lower halo (row 0) from the previous rank's last interior row (row 8).
// CHECK: %[[DOWN:.*]] = tensor.extract_slice %[[R1]][8, 0] [1, 6] [1, 1]
// CHECK: dist.shift %[[DOWN]] on @g axes = [0] offset = 1
// CHECK: arith.cmpi eq, %[[P]], %c0
// CHECK: tensor.insert_slice %{{.*}} into %[[R1]][0, 0] [1, 6] [1, 1]
// CHECK-NOT: shard.update_halo
func.func @rows(%d: tensor<10x6xf32>) -> tensor<10x6xf32> {
  %h = shard.update_halo %d on @g split_axes = [[0]] halo_sizes = [1, 1] : tensor<10x6xf32>
  return %h : tensor<10x6xf32>
}

// -----

shard.grid @g(shape = 2x2)

// Both dimensions: the columns (the last split dimension) first over
// interior rows only, then the rows over whole columns, halos included, so
// that the corners arrive. The rows go in two messages: their interior
// columns straight from the tile before any exchange (which then waits
// for nothing), and both corners, packed side by side, from the tile the
// column exchange filled. Uneven halos: 2 below and none above in rows.
// CHECK-LABEL: func.func @tile
// CHECK: tensor.extract_slice %arg0[2, 1] [4, 1] [1, 1] : tensor<6x6xbf16> to tensor<4x1xbf16>
// CHECK: dist.shift %{{.*}} on @g axes = [1] offset = -1
// CHECK: tensor.extract_slice %{{.*}}[2, 4] [4, 1] [1, 1]
// CHECK: %[[COLS:.*]] = tensor.insert_slice %{{.*}}[2, 0] [4, 1] [1, 1]
// CHECK: %[[CORE:.*]] = tensor.extract_slice %arg0[4, 1] [2, 4] [1, 1] : tensor<6x6xbf16> to tensor<2x4xbf16>
// CHECK: dist.shift %[[CORE]] on @g axes = [0] offset = 1
// CHECK: %[[R1:.*]] = tensor.insert_slice %{{.*}} into %[[COLS]][0, 1] [2, 4] [1, 1]
// CHECK: %[[LEFT:.*]] = tensor.extract_slice %[[R1]][4, 0] [2, 1] [1, 1]
// CHECK: %[[P1:.*]] = tensor.insert_slice %[[LEFT]] into %{{.*}}[0, 0] [2, 1] [1, 1] : tensor<2x1xbf16> into tensor<2x2xbf16>
// CHECK: %[[RIGHT:.*]] = tensor.extract_slice %[[R1]][4, 5] [2, 1] [1, 1]
// CHECK: %[[P2:.*]] = tensor.insert_slice %[[RIGHT]] into %[[P1]][0, 1] [2, 1] [1, 1]
// CHECK: dist.shift %[[P2]] on @g axes = [0] offset = 1 : tensor<2x2xbf16>
// CHECK: %[[R2:.*]] = tensor.insert_slice %{{.*}} into %[[R1]][0, 0] [2, 1] [1, 1]
// CHECK: tensor.insert_slice %{{.*}} into %[[R2]][0, 5] [2, 1] [1, 1]
// CHECK-NOT: dist.shift
func.func @tile(%d: tensor<6x6xbf16>) -> tensor<6x6xbf16> {
  %h = shard.update_halo %d on @g split_axes = [[0], [1]] halo_sizes = [2, 0, 1, 1] : tensor<6x6xbf16>
  return %h : tensor<6x6xbf16>
}

// -----

shard.grid @g(shape = 2x2)
func.func @two_axes(%d: tensor<10xf32>) -> tensor<10xf32> {
  // expected-error @+1 {{cannot convert 'shard.update_halo': tensor dimension 0 is split over several grid axes}}
  %h = shard.update_halo %d on @g split_axes = [[0, 1]] halo_sizes = [1, 1] : tensor<10xf32>
  return %h : tensor<10xf32>
}

// -----

shard.grid @g(shape = 4)
func.func @dynamic_halo(%d: tensor<10xf32>, %s: i64) -> tensor<10xf32> {
  // expected-error @+1 {{cannot convert 'shard.update_halo' with dynamic halo sizes}}
  %h = shard.update_halo %d on @g split_axes = [[0]] halo_sizes = [%s, 1] : tensor<10xf32>
  return %h : tensor<10xf32>
}

// -----

shard.grid @g(shape = 4)
func.func @too_wide(%d: tensor<5xf32>) -> tensor<5xf32> {
  // expected-error @+1 {{cannot convert 'shard.update_halo': halos 2 and 2 of dimension 0 do not fit its 5 elements with an interior at least as large}}
  %h = shard.update_halo %d on @g split_axes = [[0]] halo_sizes = [2, 2] : tensor<5xf32>
  return %h : tensor<5xf32>
}

// -----

shard.grid @g(shape = 4)
func.func @count(%d: tensor<10x4xf32>) -> tensor<10x4xf32> {
  // expected-error @+1 {{has 4 halo sizes for 1 split dimensions (expected two each)}}
  %h = shard.update_halo %d on @g split_axes = [[0]] halo_sizes = [1, 1, 1, 1] : tensor<10x4xf32>
  return %h : tensor<10x4xf32>
}

// -----

shard.grid @g(shape = 4)
func.func @on_memref(%d: memref<10xf32>) -> memref<10xf32> {
  // expected-error @+1 {{cannot convert 'shard.update_halo' on 'memref<10xf32>': it needs a statically shaped tensor}}
  %h = shard.update_halo %d on @g split_axes = [[0]] halo_sizes = [1, 1] : memref<10xf32>
  return %h : memref<10xf32>
}

// -----

shard.grid @g(shape = 4)
func.func @past_rank(%d: tensor<10xf32>) -> tensor<10xf32> {
  // expected-error @+1 {{splits tensor dimension 1 of a rank-1 tensor}}
  %h = shard.update_halo %d on @g split_axes = [[], [0]] halo_sizes = [1, 1] : tensor<10xf32>
  return %h : tensor<10xf32>
}

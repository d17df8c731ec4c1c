// A halo exchange (update_halo as the import writes it: ring shifts whose
// rows are inserted into the tile's halos) feeding a stencil: the
// iterations that read no halo row run from the tile as it was before the
// exchange, between the shifts' starts and waits; the frame next to the
// halos runs after. Every shift reads the pre-exchange tile, so all start
// first.
// RUN: braid-opt %s -split-input-file --braid-overlap="mode=force" 2>/dev/null | FileCheck %s
// RUN: braid-opt %s -split-input-file --braid-overlap="mode=force" -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// RUN: braid-opt %s -split-input-file --braid-overlap="mode=off" -o /dev/null 2>&1 | FileCheck %s --check-prefix=OFF
// The schedule checker accepts the result.
// RUN: braid-opt %s -split-input-file --braid-pipeline="skip-import=1 stop-after=xfer check-schedule=1" -o /dev/null

shard.grid @g(shape = 4)

#id = affine_map<(d0) -> (d0)>

// CHECK-LABEL: func.func @stencil
// CHECK-SAME: %[[X:[^:]*]]: tensor<4xf32>
// CHECK: %[[D:.*]] = tensor.insert_slice %[[X]] into
// CHECK: %[[UP:.*]] = tensor.extract_slice %[[D]][1] [1] [1]
// CHECK: dist.shift_start %[[UP]] on @g axes = [0] offset = -1
// CHECK: %[[DOWN:.*]] = tensor.extract_slice %[[D]][4] [1] [1]
// CHECK: dist.shift_start %[[DOWN]] on @g axes = [0] offset = 1
// The interior: output rows 1..3 from the tile before the exchange.
// CHECK: %[[IN:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>)
// CHECK: dist.wait
// CHECK: dist.wait
// The frame: rows 0 and 3, from the haloed tile.
// CHECK: linalg.generic {{.*}} : tensor<1xf32>, tensor<1xf32>, tensor<1xf32>)
// CHECK: linalg.generic {{.*}} : tensor<1xf32>, tensor<1xf32>, tensor<1xf32>)
// CHECK: tensor.insert_slice %[[IN]] into %{{.*}}[1] [2] [1]
// CHECK: return
// REMARK: remark: 'linalg.generic' computes iterations 1..3 of 4 along loop 0 (which read no halo row) before the halo exchange completes, the other 2 after it
// REMARK: remark: shift made asynchronous
// REMARK: remark: shift made asynchronous
// OFF-NOT: computes iterations
func.func @stencil(%x: tensor<4xf32>) -> tensor<4xf32> {
  %two = arith.constant 2.0 : f32
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<6xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<6xf32>) -> tensor<6xf32>
  %d = tensor.insert_slice %x into %f[1] [4] [1] : tensor<4xf32> into tensor<6xf32>
  %pos = shard.process_multi_index on @g axes = [0] : index
  %up = tensor.extract_slice %d[1] [1] [1] : tensor<6xf32> to tensor<1xf32>
  %r1 = dist.shift %up on @g axes = [0] offset = -1 : tensor<1xf32> -> tensor<1xf32>
  %old1 = tensor.extract_slice %d[5] [1] [1] : tensor<6xf32> to tensor<1xf32>
  %c3 = arith.constant 3 : index
  %end1 = arith.cmpi eq, %pos, %c3 : index
  %k1 = arith.select %end1, %old1, %r1 : tensor<1xf32>
  %h1 = tensor.insert_slice %k1 into %d[5] [1] [1] : tensor<1xf32> into tensor<6xf32>
  %down = tensor.extract_slice %h1[4] [1] [1] : tensor<6xf32> to tensor<1xf32>
  %r2 = dist.shift %down on @g axes = [0] offset = 1 : tensor<1xf32> -> tensor<1xf32>
  %old2 = tensor.extract_slice %h1[0] [1] [1] : tensor<6xf32> to tensor<1xf32>
  %c0 = arith.constant 0 : index
  %end2 = arith.cmpi eq, %pos, %c0 : index
  %k2 = arith.select %end2, %old2, %r2 : tensor<1xf32>
  %h = tensor.insert_slice %k2 into %h1[0] [1] [1] : tensor<1xf32> into tensor<6xf32>
  %s0 = tensor.extract_slice %h[0] [4] [1] : tensor<6xf32> to tensor<4xf32>
  %s1 = tensor.extract_slice %h[1] [4] [1] : tensor<6xf32> to tensor<4xf32>
  %s2 = tensor.extract_slice %h[2] [4] [1] : tensor<6xf32> to tensor<4xf32>
  %o = tensor.empty() : tensor<4xf32>
  %y = linalg.generic {indexing_maps = [#id, #id, #id, #id], iterator_types = ["parallel"]} ins(%s0, %s1, %s2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) outs(%o : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %out: f32):
    %m = arith.mulf %b, %two : f32
    %s = arith.addf %a, %m : f32
    %t = arith.addf %s, %c : f32
    linalg.yield %t : f32
  } -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

shard.grid @g(shape = 4)

// A convolution reading the haloed tile whole (its input index ow + kw):
// outputs 1..5 of 6 read no halo row.
// CHECK-LABEL: func.func @conv
// CHECK: dist.shift_start
// CHECK: dist.shift_start
// CHECK: linalg.conv_1d ins(%{{.*}}, %{{.*}} : tensor<6xf32>, tensor<3xf32>) outs(%{{.*}} : tensor<4xf32>)
// CHECK: dist.wait
// CHECK: dist.wait
// CHECK: linalg.conv_1d ins(%{{.*}}, %{{.*}} : tensor<3xf32>, tensor<3xf32>) outs(%{{.*}} : tensor<1xf32>)
// CHECK: linalg.conv_1d ins(%{{.*}}, %{{.*}} : tensor<3xf32>, tensor<3xf32>) outs(%{{.*}} : tensor<1xf32>)
// REMARK: remark: 'linalg.conv_1d' computes iterations 1..5 of 6 along loop 0
func.func @conv(%x: tensor<6xf32>, %w: tensor<3xf32>) -> tensor<6xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %d = tensor.insert_slice %x into %f[1] [6] [1] : tensor<6xf32> into tensor<8xf32>
  %up = tensor.extract_slice %d[1] [1] [1] : tensor<8xf32> to tensor<1xf32>
  %r1 = dist.shift %up on @g axes = [0] offset = -1 : tensor<1xf32> -> tensor<1xf32>
  %h1 = tensor.insert_slice %r1 into %d[7] [1] [1] : tensor<1xf32> into tensor<8xf32>
  %down = tensor.extract_slice %h1[6] [1] [1] : tensor<8xf32> to tensor<1xf32>
  %r2 = dist.shift %down on @g axes = [0] offset = 1 : tensor<1xf32> -> tensor<1xf32>
  %h = tensor.insert_slice %r2 into %h1[0] [1] [1] : tensor<1xf32> into tensor<8xf32>
  %o = tensor.empty() : tensor<6xf32>
  %z = linalg.fill ins(%zero : f32) outs(%o : tensor<6xf32>) -> tensor<6xf32>
  %y = linalg.conv_1d ins(%h, %w : tensor<8xf32>, tensor<3xf32>) outs(%z : tensor<6xf32>) -> tensor<6xf32>
  return %y : tensor<6xf32>
}

// -----

shard.grid @g(shape = 4)

// A sum over the whole haloed tile reads a halo at every iteration.
// REMARK: remark: halo exchange not overlapped: every iteration of 'linalg.generic' reads a halo along the loops it could be split on
func.func @whole(%x: tensor<4xf32>) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<6xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<6xf32>) -> tensor<6xf32>
  %d = tensor.insert_slice %x into %f[1] [4] [1] : tensor<4xf32> into tensor<6xf32>
  %up = tensor.extract_slice %d[1] [1] [1] : tensor<6xf32> to tensor<1xf32>
  %r1 = dist.shift %up on @g axes = [0] offset = -1 : tensor<1xf32> -> tensor<1xf32>
  %h = tensor.insert_slice %r1 into %d[5] [1] [1] : tensor<1xf32> into tensor<6xf32>
  %se = tensor.empty() : tensor<f32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<f32>) -> tensor<f32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]} ins(%h : tensor<6xf32>) outs(%sz : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %t = arith.addf %a, %acc : f32
    linalg.yield %t : f32
  } -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Haloed along both dimensions: a 2-D convolution computes the box of
// outputs that reads no halo (rows 1..3, columns 1..2) while the first
// exchange travels; the frame (10 outputs) after. The second exchange
// sends rows that include the first one's halos, so it waits for it.
// REMARK: remark: 'linalg.conv_2d' computes iterations 1..3 of 4 x 1..2 of 3 along loops 0, 1 (which read no halo row) before the halo exchange completes, the other 10 after it
shard.grid @g(shape = 2x2)
func.func @conv2d(%arg0: tensor<4x3xf32>, %arg1: tensor<3x3xf32>) -> tensor<4x3xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %0 = tensor.empty() : tensor<6x5xf32>
  %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<6x5xf32>) -> tensor<6x5xf32>
  %inserted_slice = tensor.insert_slice %arg0 into %1[1, 1] [4, 3] [1, 1] : tensor<4x3xf32> into tensor<6x5xf32>
  %proc_linear_idx = shard.process_multi_index on @g axes = [1] : index
  %extracted_slice = tensor.extract_slice %inserted_slice[1, 1] [4, 1] [1, 1] : tensor<6x5xf32> to tensor<4x1xf32>
  %2 = dist.shift %extracted_slice on @g axes = [1] offset = -1 : tensor<4x1xf32> -> tensor<4x1xf32>
  %extracted_slice_0 = tensor.extract_slice %inserted_slice[1, 4] [4, 1] [1, 1] : tensor<6x5xf32> to tensor<4x1xf32>
  %c1 = arith.constant 1 : index
  %3 = arith.cmpi eq, %proc_linear_idx, %c1 : index
  %4 = arith.select %3, %extracted_slice_0, %2 : tensor<4x1xf32>
  %inserted_slice_1 = tensor.insert_slice %4 into %inserted_slice[1, 4] [4, 1] [1, 1] : tensor<4x1xf32> into tensor<6x5xf32>
  %extracted_slice_2 = tensor.extract_slice %inserted_slice_1[1, 3] [4, 1] [1, 1] : tensor<6x5xf32> to tensor<4x1xf32>
  %5 = dist.shift %extracted_slice_2 on @g axes = [1] offset = 1 : tensor<4x1xf32> -> tensor<4x1xf32>
  %extracted_slice_3 = tensor.extract_slice %inserted_slice_1[1, 0] [4, 1] [1, 1] : tensor<6x5xf32> to tensor<4x1xf32>
  %c0 = arith.constant 0 : index
  %6 = arith.cmpi eq, %proc_linear_idx, %c0 : index
  %7 = arith.select %6, %extracted_slice_3, %5 : tensor<4x1xf32>
  %inserted_slice_4 = tensor.insert_slice %7 into %inserted_slice_1[1, 0] [4, 1] [1, 1] : tensor<4x1xf32> into tensor<6x5xf32>
  %proc_linear_idx_5 = shard.process_multi_index on @g axes = [0] : index
  %extracted_slice_6 = tensor.extract_slice %inserted_slice_4[1, 0] [1, 5] [1, 1] : tensor<6x5xf32> to tensor<1x5xf32>
  %8 = dist.shift %extracted_slice_6 on @g axes = [0] offset = -1 : tensor<1x5xf32> -> tensor<1x5xf32>
  %extracted_slice_7 = tensor.extract_slice %inserted_slice_4[5, 0] [1, 5] [1, 1] : tensor<6x5xf32> to tensor<1x5xf32>
  %c1_8 = arith.constant 1 : index
  %9 = arith.cmpi eq, %proc_linear_idx_5, %c1_8 : index
  %10 = arith.select %9, %extracted_slice_7, %8 : tensor<1x5xf32>
  %inserted_slice_9 = tensor.insert_slice %10 into %inserted_slice_4[5, 0] [1, 5] [1, 1] : tensor<1x5xf32> into tensor<6x5xf32>
  %extracted_slice_10 = tensor.extract_slice %inserted_slice_9[4, 0] [1, 5] [1, 1] : tensor<6x5xf32> to tensor<1x5xf32>
  %11 = dist.shift %extracted_slice_10 on @g axes = [0] offset = 1 : tensor<1x5xf32> -> tensor<1x5xf32>
  %extracted_slice_11 = tensor.extract_slice %inserted_slice_9[0, 0] [1, 5] [1, 1] : tensor<6x5xf32> to tensor<1x5xf32>
  %c0_12 = arith.constant 0 : index
  %12 = arith.cmpi eq, %proc_linear_idx_5, %c0_12 : index
  %13 = arith.select %12, %extracted_slice_11, %11 : tensor<1x5xf32>
  %inserted_slice_13 = tensor.insert_slice %13 into %inserted_slice_9[0, 0] [1, 5] [1, 1] : tensor<1x5xf32> into tensor<6x5xf32>
  %14 = tensor.empty() : tensor<4x3xf32>
  %15 = linalg.fill ins(%cst : f32) outs(%14 : tensor<4x3xf32>) -> tensor<4x3xf32>
  %16 = linalg.conv_2d ins(%inserted_slice_13, %arg1 : tensor<6x5xf32>, tensor<3x3xf32>) outs(%15 : tensor<4x3xf32>) -> tensor<4x3xf32>
  return %16 : tensor<4x3xf32>
}

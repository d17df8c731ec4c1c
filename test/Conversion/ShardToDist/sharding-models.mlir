// Braid's sharding models for the tensor ops frontends emit around
// contractions and attention: splits pass through reshapes, slices, concats
// and pads that keep them block splits (no collective), and a split the op
// cannot keep is gathered before it.
// RUN: braid-opt %s -split-input-file --braid-import-shard | FileCheck %s

shard.grid @g(shape = 2)
// hidden -> [heads, head_dim] with hidden split: heads are split.
// CHECK-LABEL: func.func @heads
// CHECK-SAME: %[[X:.*]]: tensor<8x32xf32>
// CHECK-NOT: = dist.
// CHECK: tensor.expand_shape %[[X]] {{\[}}[0], [1, 2]] output_shape [8, 2, 16] : tensor<8x32xf32> into tensor<8x2x16xf32>
func.func @heads(%x: tensor<8x64xf32>) -> tensor<8x4x16xf32> {
  %s = shard.sharding @g split_axes = [[], [0]] : !shard.sharding
  %a = shard.shard %x to %s annotate_for_users : tensor<8x64xf32>
  %e = tensor.expand_shape %a [[0], [1, 2]] output_shape [8, 4, 16] : tensor<8x64xf32> into tensor<8x4x16xf32>
  %r = shard.sharding @g split_axes = [[], [0]] : !shard.sharding
  %b = shard.shard %e to %r : tensor<8x4x16xf32>
  return %b : tensor<8x4x16xf32>
}

// -----

shard.grid @g(shape = 2)
// [1, seq, hidden] -> [seq, hidden] with seq split: the leading unit
// dimension lets the split through.
// CHECK-LABEL: func.func @one_sequence
// CHECK-NOT: = dist.
// CHECK: tensor.collapse_shape %{{.*}} {{\[}}[0, 1], [2]] : tensor<1x4x64xf32> into tensor<4x64xf32>
// CHECK-NOT: = dist.
// CHECK: return
func.func @one_sequence(%x: tensor<1x8x64xf32>) -> tensor<8x64xf32> {
  %s = shard.sharding @g split_axes = [[], [0]] : !shard.sharding
  %a = shard.shard %x to %s annotate_for_users : tensor<1x8x64xf32>
  %c = tensor.collapse_shape %a [[0, 1], [2]] : tensor<1x8x64xf32> into tensor<8x64xf32>
  %r = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %b = shard.shard %c to %r : tensor<8x64xf32>
  return %b : tensor<8x64xf32>
}

// -----

shard.grid @g(shape = 2)
// [batch = 2, seq, hidden] -> [tokens, hidden] with seq split: the tokens
// of one rank are no block of the collapsed dimension, so the sequence is
// gathered first.
// CHECK-LABEL: func.func @two_sequences
// CHECK: %[[G:.*]] = dist.all_gather %{{.*}} dim = 1 : tensor<2x4x64xf32> -> tensor<2x8x64xf32>
// CHECK: tensor.collapse_shape %[[G]] {{\[}}[0, 1], [2]] : tensor<2x8x64xf32> into tensor<16x64xf32>
func.func @two_sequences(%x: tensor<2x8x64xf32>) -> tensor<16x64xf32> {
  %s = shard.sharding @g split_axes = [[], [0]] : !shard.sharding
  %a = shard.shard %x to %s annotate_for_users : tensor<2x8x64xf32>
  %c = tensor.collapse_shape %a [[0, 1], [2]] : tensor<2x8x64xf32> into tensor<16x64xf32>
  %r = shard.sharding @g split_axes = [[]] : !shard.sharding
  %b = shard.shard %c to %r : tensor<16x64xf32>
  return %b : tensor<16x64xf32>
}

// -----

shard.grid @g(shape = 2)
// RoPE's halves of head_dim, heads split: local slices, same offsets, and
// the concat of the halves stays local too.
// CHECK-LABEL: func.func @rotate_half
// CHECK-NOT: = dist.
// CHECK: tensor.extract_slice %{{.*}}[0, 0, 0] [8, 2, 8] [1, 1, 1] : tensor<8x2x16xf32> to tensor<8x2x8xf32>
// CHECK: tensor.extract_slice %{{.*}}[0, 0, 8] [8, 2, 8] [1, 1, 1] : tensor<8x2x16xf32> to tensor<8x2x8xf32>
// CHECK: tensor.concat dim(2) %{{.*}}, %{{.*}} : (tensor<8x2x8xf32>, tensor<8x2x8xf32>) -> tensor<8x2x16xf32>
// CHECK-NOT: = dist.
// CHECK: return
func.func @rotate_half(%x: tensor<8x4x16xf32>) -> tensor<8x4x16xf32> {
  %s = shard.sharding @g split_axes = [[], [0]] : !shard.sharding
  %a = shard.shard %x to %s annotate_for_users : tensor<8x4x16xf32>
  %lo = tensor.extract_slice %a[0, 0, 0] [8, 4, 8] [1, 1, 1] : tensor<8x4x16xf32> to tensor<8x4x8xf32>
  %hi = tensor.extract_slice %a[0, 0, 8] [8, 4, 8] [1, 1, 1] : tensor<8x4x16xf32> to tensor<8x4x8xf32>
  %c = tensor.concat dim(2) %hi, %lo : (tensor<8x4x8xf32>, tensor<8x4x8xf32>) -> tensor<8x4x16xf32>
  %r = shard.sharding @g split_axes = [[], [0]] : !shard.sharding
  %b = shard.shard %c to %r : tensor<8x4x16xf32>
  return %b : tensor<8x4x16xf32>
}

// -----

shard.grid @g(shape = 2)
// A slice that cuts the split dimension (a packed projection's parts, here
// 48 + 16 of 64 columns) needs it whole: gathered before the slice.
// CHECK-LABEL: func.func @uneven_parts
// CHECK: %[[G:.*]] = dist.all_gather %{{.*}} dim = 1 : tensor<8x32xf32> -> tensor<8x64xf32>
// CHECK: tensor.extract_slice %[[G]][0, 0] [8, 48] [1, 1] : tensor<8x64xf32> to tensor<8x48xf32>
func.func @uneven_parts(%x: tensor<8x64xf32>) -> tensor<8x48xf32> {
  %s = shard.sharding @g split_axes = [[], [0]] : !shard.sharding
  %a = shard.shard %x to %s annotate_for_users : tensor<8x64xf32>
  %p = tensor.extract_slice %a[0, 0] [8, 48] [1, 1] : tensor<8x64xf32> to tensor<8x48xf32>
  %r = shard.sharding @g split_axes = [[]] : !shard.sharding
  %b = shard.shard %p to %r : tensor<8x48xf32>
  return %b : tensor<8x48xf32>
}

// -----

shard.grid @g(shape = 2)
// Rank-reducing slice of a unit dimension, rows split: local.
// CHECK-LABEL: func.func @drop_unit
// CHECK-NOT: = dist.
// CHECK: tensor.extract_slice %{{.*}}[0, 0, 0] [4, 1, 64] [1, 1, 1] : tensor<4x2x64xf32> to tensor<4x64xf32>
func.func @drop_unit(%x: tensor<8x2x64xf32>) -> tensor<8x64xf32> {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s annotate_for_users : tensor<8x2x64xf32>
  %p = tensor.extract_slice %a[0, 0, 0] [8, 1, 64] [1, 1, 1] : tensor<8x2x64xf32> to tensor<8x64xf32>
  %r = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %b = shard.shard %p to %r : tensor<8x64xf32>
  return %b : tensor<8x64xf32>
}

// -----

shard.grid @g(shape = 2)
// Writing a slice of unsplit columns into rows-split tensors: local.
// CHECK-LABEL: func.func @insert_columns
// CHECK-NOT: = dist.
// CHECK: tensor.insert_slice %{{.*}} into %{{.*}}[0, 16] [4, 16] [1, 1] : tensor<4x16xf32> into tensor<4x64xf32>
func.func @insert_columns(%x: tensor<8x16xf32>, %d: tensor<8x64xf32>) -> tensor<8x64xf32> {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s annotate_for_users : tensor<8x16xf32>
  %b = shard.shard %d to %s annotate_for_users : tensor<8x64xf32>
  %i = tensor.insert_slice %a into %b[0, 16] [8, 16] [1, 1] : tensor<8x16xf32> into tensor<8x64xf32>
  %r = shard.shard %i to %s : tensor<8x64xf32>
  return %r : tensor<8x64xf32>
}

// -----

shard.grid @g(shape = 2)
// Padding columns of rows-split tensors: local.
// CHECK-LABEL: func.func @pad_columns
// CHECK-NOT: = dist.
// CHECK: tensor.pad %{{.*}} low[0, 1] high[0, 3]
// CHECK: tensor<4x16xf32> to tensor<4x20xf32>
func.func @pad_columns(%x: tensor<8x16xf32>) -> tensor<8x20xf32> {
  %zero = arith.constant 0.0 : f32
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s annotate_for_users : tensor<8x16xf32>
  %p = tensor.pad %a low[0, 1] high[0, 3] {
  ^bb0(%i: index, %j: index):
    tensor.yield %zero : f32
  } : tensor<8x16xf32> to tensor<8x20xf32>
  %r = shard.shard %p to %s : tensor<8x20xf32>
  return %r : tensor<8x20xf32>
}

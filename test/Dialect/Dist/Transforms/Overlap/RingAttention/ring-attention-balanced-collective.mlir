// The balanced ring's helper computes again, for the rank whose rows it
// scores, every value the chain reads that depends on the rank's position.
// Collectives are pure ops to MLIR, so a region op holding one (an scf.if
// on the position whose branch gathers) looked like a function of the
// position: the helper would have run it alone. It is refused with the
// reason, and the ring is not balanced.
// RUN: braid-opt %s --braid-overlap="balance-attention=on" -o /dev/null 2>&1 | FileCheck %s
// RUN: braid-opt %s --braid-pipeline="stop-after=xfer check-schedule=1 balance-attention=on" -o /dev/null
// CHECK: as ring_attention (4 chunks){{.*}}; not balanced: 'linalg.generic' reads the result of 'scf.if', which may differ between ranks
shard.grid @cp(shape = 4)
func.func @main(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %low = arith.constant -3.0e+38 : f32
  %c0i = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %kg = dist.all_gather %k on @cp axes = [0] dim = 1 : tensor<2x4x8xf32> -> tensor<2x16x8xf32>
  %vg = dist.all_gather %v on @cp axes = [0] dim = 1 : tensor<2x4x8xf32> -> tensor<2x16x8xf32>
  %se = tensor.empty() : tensor<2x4x16xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(h, i, j, c) -> (h, i, c)>, affine_map<(h, i, j, c) -> (h, j, c)>, affine_map<(h, i, j, c) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kg : tensor<2x4x8xf32>, tensor<2x16x8xf32>) outs(%sz : tensor<2x4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %mul = arith.mulf %a, %b : f32
    %add = arith.addf %acc, %mul : f32
    linalg.yield %add : f32
  } -> tensor<2x4x16xf32>
  // Rank 0 adds a mask gathered from every rank's part, the others none:
  // the branch computes a collective, which a helper must not run again
  // for its owner (only the helpers would enter it: a deadlock).
  %rank = shard.process_multi_index on @cp axes = [0] : index
  %first = arith.cmpi eq, %rank, %c0i : index
  %mke = tensor.empty() : tensor<4x16xf32>
  %mask = scf.if %first -> tensor<4x16xf32> {
    %pe = tensor.empty() : tensor<1x16xf32>
    %part = linalg.fill ins(%zero : f32) outs(%pe : tensor<1x16xf32>) -> tensor<1x16xf32>
    %all = dist.all_gather %part on @cp axes = [0] dim = 0 : tensor<1x16xf32> -> tensor<4x16xf32>
    scf.yield %all : tensor<4x16xf32>
  } else {
    %none = linalg.fill ins(%zero : f32) outs(%mke : tensor<4x16xf32>) -> tensor<4x16xf32>
    scf.yield %none : tensor<4x16xf32>
  }
  %scale = arith.constant 0.35355339059327373 : f32
  %me = tensor.empty() : tensor<2x4x16xf32>
  %sm = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (i, j)>, affine_map<(h, i, j) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %mask : tensor<2x4x16xf32>, tensor<4x16xf32>) outs(%me : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %mk: f32, %o: f32):
    %y = arith.mulf %x, %scale : f32
    %r = arith.addf %y, %mk : f32
    linalg.yield %r : f32
  } -> tensor<2x4x16xf32>
  %mx0 = tensor.empty() : tensor<2x4xf32>
  %mx1 = linalg.fill ins(%low : f32) outs(%mx0 : tensor<2x4xf32>) -> tensor<2x4xf32>
  %mx = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%sm : tensor<2x4x16xf32>) outs(%mx1 : tensor<2x4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.maximumf %acc, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %ee = tensor.empty() : tensor<2x4x16xf32>
  %e = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i)>, affine_map<(h, i, j) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sm, %mx : tensor<2x4x16xf32>, tensor<2x4xf32>) outs(%ee : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %m: f32, %o: f32):
    %y = arith.subf %x, %m : f32
    %r = math.exp %y : f32
    linalg.yield %r : f32
  } -> tensor<2x4x16xf32>
  %sum1 = linalg.fill ins(%zero : f32) outs(%mx0 : tensor<2x4xf32>) -> tensor<2x4xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%e : tensor<2x4x16xf32>) outs(%sum1 : tensor<2x4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %x, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %pe = tensor.empty() : tensor<2x4x16xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i)>, affine_map<(h, i, j) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%e, %sum : tensor<2x4x16xf32>, tensor<2x4xf32>) outs(%pe : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %zz: f32, %o: f32):
    %r = arith.divf %x, %zz : f32
    linalg.yield %r : f32
  } -> tensor<2x4x16xf32>
  %oute = tensor.empty() : tensor<2x4x8xf32>
  %outz = linalg.fill ins(%zero : f32) outs(%oute : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %out = linalg.generic {indexing_maps = [affine_map<(h, i, c, j) -> (h, i, j)>, affine_map<(h, i, c, j) -> (h, j, c)>, affine_map<(h, i, c, j) -> (h, i, c)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%p, %vg : tensor<2x4x16xf32>, tensor<2x16x8xf32>) outs(%outz : tensor<2x4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %mul = arith.mulf %a, %b : f32
    %add = arith.addf %acc, %mul : f32
    linalg.yield %add : f32
  } -> tensor<2x4x8xf32>
  return %out : tensor<2x4x8xf32>
}

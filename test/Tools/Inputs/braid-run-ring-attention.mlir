// Causal attention over k and v gathered along the sequence on 4 ranks
// (written by test/lib/e2e.py ring_attention --variant causal --grid 4).
shard.grid @g(shape = 4)
func.func @main(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %low = arith.constant -3.0e+38 : f32
  %kg = shard.all_gather %k on @g grid_axes = [0] gather_axis = 1 : tensor<2x4x8xf32> -> tensor<2x16x8xf32>
  %vg = shard.all_gather %v on @g grid_axes = [0] gather_axis = 1 : tensor<2x4x8xf32> -> tensor<2x16x8xf32>
  %se = tensor.empty() : tensor<2x4x16xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(h, i, j, c) -> (h, i, c)>, affine_map<(h, i, j, c) -> (h, j, c)>, affine_map<(h, i, j, c) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kg : tensor<2x4x8xf32>, tensor<2x16x8xf32>) outs(%sz : tensor<2x4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %mul = arith.mulf %a, %b : f32
    %add = arith.addf %acc, %mul : f32
    linalg.yield %add : f32
  } -> tensor<2x4x16xf32>
  %scale = arith.constant 0.35355339059327373 : f32
  %me = tensor.empty() : tensor<2x4x16xf32>
  %pos = shard.process_multi_index on @g axes = [0] : index
  %tl = arith.constant 4 : index
  %base = arith.muli %pos, %tl : index
  %neg = arith.constant -1.0e+30 : f32
  %sm = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x16xf32>) outs(%me : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %gi = arith.addi %base, %i : index
    %future = arith.cmpi ugt, %j, %gi : index
    %y = arith.mulf %x, %scale : f32
    %r = arith.select %future, %neg, %y : f32
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

// A rank's contraction FLOPs as the report counts them: a matmul, one in
// a loop of 3 iterations, one in a function called in it, and one in a
// loop whose trip count is an argument (counted once, and as unbounded).

func.func private @helper(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %m = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%z : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %m : tensor<4x16xf32>
}

func.func @main(%x: tensor<32x8xf32>, %w: tensor<8x16xf32>, %n: index) -> (tensor<32x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %e = tensor.empty() : tensor<32x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<32x16xf32>) -> tensor<32x16xf32>
  %m = linalg.matmul ins(%x, %w : tensor<32x8xf32>, tensor<8x16xf32>) outs(%z : tensor<32x16xf32>) -> tensor<32x16xf32>
  %a = tensor.extract_slice %x[0, 0] [4, 8] [1, 1] : tensor<32x8xf32> to tensor<4x8xf32>
  %e4 = tensor.empty() : tensor<4x16xf32>
  %z4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<4x16xf32>) -> tensor<4x16xf32>
  %loop = scf.for %i = %c0 to %c3 step %c1 iter_args(%acc = %z4) -> tensor<4x16xf32> {
    %p = linalg.matmul ins(%a, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
    %q = func.call @helper(%a, %w) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %s = arith.addf %p, %q : tensor<4x16xf32>
    scf.yield %s : tensor<4x16xf32>
  }
  %open = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %z4) -> tensor<4x16xf32> {
    %p = linalg.matmul ins(%a, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
    scf.yield %p : tensor<4x16xf32>
  }
  return %m, %loop, %open : tensor<32x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}

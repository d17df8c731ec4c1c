// Top-k routing as torch-mlir prints it for a sort: tm_tensor is not a
// dialect Braid accepts (braid.pytorch decomposes topk before export).
func.func @route(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %i = tensor.empty() : tensor<8x4xi64>
  %0:2 = tm_tensor.sort dimension(1) outs(%x, %i : tensor<8x4xf32>, tensor<8x4xi64>) {
  ^bb0(%a: f32, %b: f32, %c: i64, %d: i64):
    %p = arith.cmpf oge, %a, %b : f32
    tm_tensor.yield %p : i1
  } -> tensor<8x4xf32>, tensor<8x4xi64>
  return %0#0 : tensor<8x4xf32>
}

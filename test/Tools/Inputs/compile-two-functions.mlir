func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}
func.func @g(%x: tensor<8xf32>) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}

// A program whose own check fails on braid-exec's random inputs (integers
// in [0, 16)): assert-failed.test.
shard.grid @g(shape = 2)
func.func @main(%ids: tensor<4xi64>) -> tensor<4xi64> {
  %c0 = arith.constant 0 : index
  %first = tensor.extract %ids[%c0] : tensor<4xi64>
  %limit = arith.constant 100 : i64
  %ok = arith.cmpi sge, %first, %limit : i64
  cf.assert %ok, "index must be at least 100"
  return %ids : tensor<4xi64>
}

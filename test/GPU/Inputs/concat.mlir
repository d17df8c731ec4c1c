// Two bf16 blocks of 4096 x 4096 concatenated: two copies, each a
// grid-stride kernel over 2 Mi 16-byte vectors.
shard.grid @g(shape = 1)
func.func @main(%x: tensor<4096x4096xbf16>, %y: tensor<4096x4096xbf16>) -> tensor<4096x8192xbf16> {
  %e = tensor.empty() : tensor<4096x8192xbf16>
  %a = tensor.insert_slice %x into %e[0, 0] [4096, 4096] [1, 1] : tensor<4096x4096xbf16> into tensor<4096x8192xbf16>
  %b = tensor.insert_slice %y into %a[0, 4096] [4096, 4096] [1, 1] : tensor<4096x4096xbf16> into tensor<4096x8192xbf16>
  return %b : tensor<4096x8192xbf16>
}

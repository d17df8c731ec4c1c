// RUN: braid-opt %s --pass-pipeline='builtin.module(func.func(braid-list-collectives))' -verify-diagnostics -o /dev/null

shard.grid @tp(shape = 2x4)

func.func @layer(%x: tensor<256x512xbf16>, %w: tensor<512x512xbf16>, %d: tensor<?x8xf32>) -> (tensor<256x512xf32>, tensor<?x8xf32>) {
  // expected-remark @+1 {{all_gather on @tp axes [1] (4 ranks): 'tensor<256x512xbf16>' -> 'tensor<1024x512xbf16>', receives 768.0 KiB per rank; input from a function argument, result used by 'linalg.matmul'}}
  %g = dist.all_gather %x on @tp axes = [1] dim = 0 : tensor<256x512xbf16> -> tensor<1024x512xbf16>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1024x512xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1024x512xf32>) -> tensor<1024x512xf32>
  %y = linalg.matmul ins(%g, %w : tensor<1024x512xbf16>, tensor<512x512xbf16>) outs(%f : tensor<1024x512xf32>) -> tensor<1024x512xf32>
  // expected-remark @+1 {{reduce_scatter (async) on @tp axes [1] (4 ranks): 'tensor<1024x512xf32>' -> 'tensor<256x512xf32>', receives 1.5 MiB per rank; input from 'linalg.matmul', result used by 'dist.all_reduce'}}
  %t, %fu = dist.reduce_scatter_start %y on @tp axes = [1] dim = 0 reduce = sum : tensor<1024x512xf32> -> tensor<256x512xf32>
  %s = dist.wait %t, %fu : tensor<256x512xf32>
  // expected-remark @+1 {{all_reduce on @tp axes [0] (2 ranks): 'tensor<256x512xf32>' -> 'tensor<256x512xf32>', receives 512.0 KiB per rank; input from 'dist.wait', result used by 'func.return'}}
  %r = dist.all_reduce %s on @tp axes = [0] reduce = sum : tensor<256x512xf32> -> tensor<256x512xf32>
  // expected-remark @+1 {{all_gather on @tp axes [1] (4 ranks): 'tensor<?x8xf32>' -> 'tensor<?x8xf32>'; input from a function argument, result unused}}
  %u = dist.all_gather %d on @tp axes = [1] dim = 0 : tensor<?x8xf32> -> tensor<?x8xf32>
  return %r, %d : tensor<256x512xf32>, tensor<?x8xf32>
}

// The cost model decides: Llama-3-70B-sized GEMMs on the h100 preset hide
// their collectives; tiny ones would only pay the chunking overhead and stay
// whole, with the reason in a remark.
// RUN: braid-opt %s --braid-overlap="target-preset=h100" -verify-diagnostics -o /dev/null
// RUN: braid-opt %s --braid-overlap="target-preset=h100 report=%t.json" -o /dev/null 2>/dev/null
// RUN: FileCheck %s --input-file=%t.json --check-prefix=JSON
// RUN: braid-opt %s --braid-overlap="mode=off report=%t.off.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=OFF
// RUN: FileCheck %s --input-file=%t.off.json --check-prefix=OFFJSON

shard.grid @tp(shape = 8) {dist.topology = [#dist.link<nvlink, bandwidth = 450.0, latency = 3.0>]}

// Sequence-parallel up projection at TP 8: 16384 tokens, hidden 8192,
// FFN 28672 / 8.
func.func @llama_up(%x: tensor<2048x8192xbf16>, %w: tensor<8192x3584xbf16>) -> tensor<16384x3584xf32> {
  // expected-remark @+1 {{all_gather fused with 'linalg.matmul' as ring_ag_matmul}}
  %g = dist.all_gather %x on @tp axes = [0] dim = 0 : tensor<2048x8192xbf16> -> tensor<16384x8192xbf16>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16384x3584xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<16384x3584xf32>) -> tensor<16384x3584xf32>
  %y = linalg.matmul ins(%g, %w : tensor<16384x8192xbf16>, tensor<8192x3584xbf16>) outs(%f : tensor<16384x3584xf32>) -> tensor<16384x3584xf32>
  return %y : tensor<16384x3584xf32>
}

func.func @tiny(%x: tensor<8x64xbf16>, %w: tensor<64x64xbf16>) -> tensor<64x64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %ex = tensor.empty() : tensor<8x64xbf16>
  %xn = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                        iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x64xbf16>) outs(%ex : tensor<8x64xbf16>) {
  ^bb0(%v: bf16, %o: bf16):
    %n = arith.negf %v : bf16
    linalg.yield %n : bf16
  } -> tensor<8x64xbf16>
  // expected-remark @+1 {{all_gather kept whole: no schedule is predicted faster: best is}}
  %g = dist.all_gather %xn on @tp axes = [0] dim = 0 : tensor<8x64xbf16> -> tensor<64x64xbf16>
  %y = linalg.matmul ins(%g, %w : tensor<64x64xbf16>, tensor<64x64xbf16>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}

// JSON: "target_preset": "h100",
// JSON: "mode": "auto",
// JSON: "kind": "all_gather",
// JSON-NEXT: "loc": "{{.*}}auto.mlir:{{[0-9]+}}:8",
// JSON-NEXT: "function": "llama_up",
// JSON-NEXT: "calls": 1,
// JSON-NEXT: "decision": "fused",
// JSON-NEXT: "with": "linalg.matmul",
// JSON-NEXT: "strategy": "ring_ag_matmul{{(_bidir)?}}",
// JSON-NEXT: "chunks": {{[0-9]+}},
// JSON-NEXT: "transport": "two-sided",
// JSON-NEXT: "reason": "predicted {{.*}} serial, {{.*}} overlapped; not in a kernel: preset 'h100' has no measured one-sided link (comm=symmetric or fuse-collectives=force use one); transport two-sided: preset 'h100' has no measured one-sided link (comm=symmetric forces them)",
// JSON-NEXT: "predicted": {
// JSON-NEXT: "compute_us": {{[0-9]+\.[0-9]}},
// JSON-NEXT: "comm_us": {{[0-9]+\.[0-9]}},
// JSON-NEXT: "serial_us": {{[0-9]+\.[0-9]}},
// JSON-NEXT: "overlapped_us": {{[0-9]+\.[0-9]}}
// JSON: "kind": "all_gather",
// JSON: "function": "tiny",
// JSON-NEXT: "calls": 1,
// JSON-NEXT: "decision": "kept",
// JSON-NEXT: "with": "linalg.matmul",
// JSON-NEXT: "strategy": null,

// OFF: remark: all_gather kept whole: overlap=off
// OFFJSON: "decision": "kept",
// OFFJSON-NEXT: "with": null,
// OFFJSON-NEXT: "strategy": null,
// OFFJSON-NEXT: "chunks": 0,
// OFFJSON-NEXT: "transport": "two-sided",
// OFFJSON-NEXT: "reason": "overlap=off",

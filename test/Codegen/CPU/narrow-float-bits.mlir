// RUN: braid-opt %s --braid-narrow-float-bits | FileCheck %s

// The end of a bf16 rounding: a select against the NaN, then a store. Both
// move i16 lanes; the load whose only use takes its bits loads them.
// CHECK-LABEL: llvm.func @round_and_store
// CHECK: %[[IN:.*]] = llvm.load %arg0 : !llvm.ptr -> vector<16xi16>
// CHECK: %[[NAN:.*]] = llvm.bitcast %{{.*}} : vector<16xbf16> to vector<16xi16>
// CHECK: %[[SEL:.*]] = llvm.select %arg2, %[[NAN]], %[[IN]] : vector<16xi1>, vector<16xi16>
// CHECK: llvm.store %[[SEL]], %arg1 : vector<16xi16>, !llvm.ptr
llvm.func @round_and_store(%src: !llvm.ptr, %dst: !llvm.ptr, %isnan: vector<16xi1>) {
  %nan = llvm.mlir.constant(dense<0x7FC0> : vector<16xbf16>) : vector<16xbf16>
  %raw = llvm.load %src : !llvm.ptr -> vector<16xbf16>
  %bits = llvm.bitcast %raw : vector<16xbf16> to vector<16xi16>
  %back = llvm.bitcast %bits : vector<16xi16> to vector<16xbf16>
  %r = llvm.select %isnan, %nan, %back : vector<16xi1>, vector<16xbf16>
  llvm.store %r, %dst : vector<16xbf16>, !llvm.ptr
  llvm.return
}

// f16 scalars too; f32 is left alone.
// CHECK-LABEL: llvm.func @scalars
// CHECK: llvm.select %arg0, %{{.*}}, %{{.*}} : i1, i16
// CHECK: llvm.select %arg0, %arg3, %arg4 : i1, f32
llvm.func @scalars(%c: i1, %a: f16, %b: f16, %x: f32, %y: f32) -> !llvm.struct<(f16, f32)> {
  %s = llvm.select %c, %a, %b : i1, f16
  %t = llvm.select %c, %x, %y : i1, f32
  %u = llvm.mlir.undef : !llvm.struct<(f16, f32)>
  %v = llvm.insertvalue %s, %u[0] : !llvm.struct<(f16, f32)>
  %w = llvm.insertvalue %t, %v[1] : !llvm.struct<(f16, f32)>
  llvm.return %w : !llvm.struct<(f16, f32)>
}

// A bf16 fill vectorized as a broadcast (insertelement, then a splat
// shuffle) and a lane taken out: all on i16 lanes, no bf16 vector left for
// the backend to widen to f32 and round back through __truncsfbf2, which
// the artifact could not resolve.
// CHECK-LABEL: llvm.func @broadcast
// CHECK: %[[INS:.*]] = llvm.insertelement %arg0, %{{.*}}[%{{.*}} : i32] : vector<32xi16>
// CHECK: %[[SPLAT:.*]] = llvm.shufflevector %[[INS]], %{{.*}} [0, 0, {{.*}}] : vector<32xi16>
// CHECK: llvm.store %[[SPLAT]], %arg1 {alignment = 2 : i64} : vector<32xi16>, !llvm.ptr
// CHECK: %[[LANE:.*]] = llvm.extractelement %[[SPLAT]][%{{.*}} : i32] : vector<32xi16>
// CHECK: llvm.store %[[LANE]], %arg2 : i16, !llvm.ptr
llvm.func @broadcast(%bits: i16, %dst: !llvm.ptr, %one: !llvm.ptr) {
  %poison = llvm.mlir.poison : vector<32xbf16>
  %zero = llvm.mlir.constant(0 : i32) : i32
  %v = llvm.bitcast %bits : i16 to bf16
  %ins = llvm.insertelement %v, %poison[%zero : i32] : vector<32xbf16>
  %splat = llvm.shufflevector %ins, %poison [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0] : vector<32xbf16>
  llvm.store %splat, %dst {alignment = 2 : i64} : vector<32xbf16>, !llvm.ptr
  %lane = llvm.extractelement %splat[%zero : i32] : vector<32xbf16>
  llvm.store %lane, %one : bf16, !llvm.ptr
  llvm.return
}

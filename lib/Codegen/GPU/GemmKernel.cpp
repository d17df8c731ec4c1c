//===- GemmKernel.cpp - Contractions as generated tensor-core kernels -----===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// The cuda target's own GEMM (gemm=generated): a contraction that
// braid_rt_gemm would take, with f16 or bf16 operands, becomes a gpu.launch
// whose warps multiply on the tensor cores with mma.sync (sm_80 and later),
// so that later steps can put communication inside its tile loop, which a
// library GEMM does not allow.
//
// The kernel, per block of 4 warps (128 threads):
//   - a 64x64 tile of C, each warp a 32x32 quarter of it: 2 x 4 mma tiles
//     of m16n8, accumulated in f32 registers (loaded from C when the
//     contraction accumulates, zero when a zero fill before it is folded);
//   - along K, 32 at a time: the block copies A's 64x32 and B's 32x64 tile
//     (in B's layout) into shared memory (rows padded by 8 elements, so
//     that ldmatrix's eight row addresses fall in different banks), zeros
//     past M, N and K, so ragged edges and any K need no other path; a
//     barrier; then for each half of the tile (k16), ldmatrix.x4 for each
//     16x16 A fragment and ldmatrix.x2 (.trans for B stored [k][n]) for
//     each 16x8 B fragment, and mma.sync m16n8k16 per pair; a barrier
//     before the next tile overwrites them. Where the layouts allow and a
//     run-time check finds the operands aligned, the copies are cp.async
//     of 16 bytes in two stages, the next tile in flight during the
//     current tile's products;
//   - the accumulators converted to C's type and stored, in bounds only.
// Operands are read through their memrefs (strided: ring chunks qualify),
// either layout of A and B (the tile copy transposes). The grid is
// (ceil(N / 64), ceil(M / 64), batch).
//
// The elementwise op right after the product, when it alone reads it (a
// bias, an activation, a residual, a cast: any payload), is applied as the
// results are stored, and C is not written.
//
// This is the generator's first form: correct on every shape and checked
// on the emulated device, never timed on a GPU; docs/rationale/gpu-codegen.md
// says what is left for speed.
//
//===----------------------------------------------------------------------===//

#include "GPU.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;

namespace braid::codegen {

namespace {

constexpr int64_t kTileM = 64, kTileN = 64, kTileK = 32;
constexpr int64_t kWarpM = 32, kWarpN = 32;
constexpr int64_t kThreads = 128;
/// Bytes of padding at the end of each shared row, and of a cp.async piece.
constexpr int64_t kPadBytes = 16;
/// m16n8 tiles per warp.
constexpr int64_t kFragsM = kWarpM / 16, kFragsN = kWarpN / 8;

/// Emits one kernel for one contraction, or for several alike (segments)
/// as one persistent grid.
struct GemmKernelBuilder {
  GemmKernelBuilder(ArrayRef<linalg::LinalgOp> segments, const GemmMatch &match,
                    bool accumulate, linalg::GenericOp epilogue,
                    Operation *before)
      : segments(segments), match(match), accumulate(accumulate),
        epilogue(epilogue), b(before), loc(segments.front()->getLoc()) {
    linalg::LinalgOp op = segments.front();
    a = op.getDpsInputOperand(0)->get();
    bm = op.getDpsInputOperand(1)->get();
    c = op.getDpsInitOperand(0)->get();
    element = cast<MemRefType>(a.getType()).getElementType();
    output = cast<MemRefType>(c.getType()).getElementType();
  }

  ArrayRef<linalg::LinalgOp> segments;
  const GemmMatch &match;
  bool accumulate;
  /// The elementwise op applied to the results as they are stored, or null.
  linalg::GenericOp epilogue;
  OpBuilder b;
  Location loc;
  /// The operands of the tile being emitted (a segment's, selected by the
  /// tile in a segmented kernel).
  Value a, bm, c;
  Type element, output;
  Value batch; // the block's batch index, or null
  // Set by build(): the shared tiles' types and bytes, the K tiles, the
  // thread's place.
  MemRefType aTileType, bTileType;
  int64_t aBytes = 0, stageBytes = 0, kTiles = 1;
  bool pipelined = false;
  Value threadId, lane, group, quad, warpRow, warpColumn, rowBase, columnBase;

  Value index(int64_t value) {
    return arith::ConstantIndexOp::create(b, loc, value);
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value mul(Value x, int64_t y) {
    return arith::MulIOp::create(b, loc, x, index(y));
  }
  Value less(Value x, int64_t bound) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, x,
                                 index(bound));
  }

  /// The indices of element (row, column) of a (batch?, rows, columns)
  /// operand, transposed when its layout is.
  SmallVector<Value> indices(Value row, Value column, bool transposed) {
    SmallVector<Value> result;
    if (batch)
      result.push_back(batch);
    result.push_back(transposed ? column : row);
    result.push_back(transposed ? row : column);
    return result;
  }

  /// operand(row, column) when `inBounds`, else `fallback`.
  Value guardedLoad(Value operand, Value row, Value column, bool transposed,
                    Value inBounds, Value fallback) {
    auto branch =
        scf::IfOp::create(b, loc, TypeRange{fallback.getType()}, inBounds,
                          /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(branch.thenBlock());
    Value value = memref::LoadOp::create(b, loc, operand,
                                         indices(row, column, transposed));
    scf::YieldOp::create(b, loc, value);
    b.setInsertionPointToStart(branch.elseBlock());
    scf::YieldOp::create(b, loc, fallback);
    return branch.getResult(0);
  }

  /// Copies the rows x columns tile of `operand` at (rowBase, columnBase)
  /// into `shared`, zeros outside (rowLimit, columnLimit); each thread
  /// takes every kThreads-th element, consecutive threads consecutive
  /// columns.
  void copyTile(Value operand, bool transposed, Value shared, int64_t rows,
                int64_t columns, Value rowBase, Value columnBase,
                int64_t rowLimit, int64_t columnLimit) {
    Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(element));
    auto loop = scf::ForOp::create(b, loc, index(0),
                                   index(rows * columns / kThreads), index(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value linear = add(mul(loop.getInductionVar(), kThreads), threadId);
    Value row = arith::DivUIOp::create(b, loc, linear, index(columns));
    Value column = arith::RemUIOp::create(b, loc, linear, index(columns));
    Value globalRow = add(rowBase, row), globalColumn = add(columnBase, column);
    Value inBounds = arith::AndIOp::create(b, loc, less(globalRow, rowLimit),
                                           less(globalColumn, columnLimit));
    Value value = guardedLoad(operand, globalRow, globalColumn, transposed,
                              inBounds, zero);
    memref::StoreOp::create(b, loc, value, shared, ValueRange{row, column});
  }

  /// The i32 register holding elements 2r and 2r + 1 of a fragment.
  Value fragmentRegister(Value fragment, int64_t r) {
    Value pair = vector::ExtractOp::create(b, loc, fragment, r);
    Value word = vector::BitCastOp::create(
        b, loc, VectorType::get({1}, b.getI32Type()), pair);
    return vector::ExtractOp::create(b, loc, word, 0);
  }

  /// d = a * b + c on the tensor cores, m16n8k16: 4 A and 2 B registers,
  /// 4 f32 accumulators.
  SmallVector<Value> mma(ArrayRef<Value> aRegs, ArrayRef<Value> bRegs,
                         ArrayRef<Value> acc) {
    Type f32 = b.getF32Type();
    auto result =
        LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
    // f32 operands go as tf32, 8 of k at a time; f16 and bf16 16.
    std::string text = std::string("mma.sync.aligned.") +
                       (element.isF32()    ? "m16n8k8.row.col.f32.tf32.tf32"
                        : element.isBF16() ? "m16n8k16.row.col.f32.bf16.bf16"
                                           : "m16n8k16.row.col.f32.f16.f16") +
                       ".f32 {$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, "
                       "{$10, $11, $12, $13};";
    SmallVector<Value> operands(aRegs);
    llvm::append_range(operands, bRegs);
    llvm::append_range(operands, acc);
    auto asmOp = LLVM::InlineAsmOp::create(
        b, loc, result, operands, text, "=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f",
        /*has_side_effects=*/true, /*is_align_stack=*/false,
        LLVM::TailCallKind::None, LLVM::AsmDialectAttr(), ArrayAttr());
    SmallVector<Value> d;
    for (int64_t i = 0; i < 4; ++i)
      d.push_back(LLVM::ExtractValueOp::create(b, loc, asmOp.getResult(0), i));
    return d;
  }

  /// Every warp's mma of each A fragment by each B fragment into `acc`.
  void multiplyFragments(ArrayRef<SmallVector<Value>> aRegs,
                         ArrayRef<SmallVector<Value>> bRegs,
                         SmallVector<Value> &acc) {
    for (int64_t mi = 0; mi < kFragsM; ++mi)
      for (int64_t ni = 0; ni < kFragsN; ++ni) {
        int64_t first = (mi * kFragsN + ni) * 4;
        SmallVector<Value> d =
            mma(aRegs[mi], bRegs[ni], ArrayRef<Value>(acc).slice(first, 4));
        std::copy(d.begin(), d.end(), acc.begin() + first);
      }
  }

  /// Where accumulator i of fragment (mi, ni) sits in C (rows g and g + 8,
  /// columns 2q and 2q + 1 of the warp's tile), and whether that is inside
  /// C.
  std::tuple<Value, Value, Value> place(int64_t mi, int64_t ni, int64_t i) {
    Value row =
        add(rowBase, add(add(warpRow, index(mi * 16 + (i / 2) * 8)), group));
    Value column = add(
        columnBase, add(add(warpColumn, index(ni * 8 + i % 2)), mul(quad, 2)));
    Value inBounds = arith::AndIOp::create(b, loc, less(row, match.m),
                                           less(column, match.n));
    return {row, column, inBounds};
  }

  /// Stores the product's element (row, column), `value` in C's type:
  /// into C, or through the epilogue's payload (its other operands read at
  /// their maps of (row, column)) into the epilogue's output.
  void store(Value value, Value row, Value column) {
    if (!epilogue) {
      memref::StoreOp::create(b, loc, value, c, indices(row, column, false));
      return;
    }
    Block &body = epilogue.getRegion().front();
    IRMapping mapping;
    for (OpOperand *input : epilogue.getDpsInputOperands()) {
      BlockArgument argument = body.getArgument(input->getOperandNumber());
      if (input->get() == c) {
        mapping.map(argument, value);
        continue;
      }
      SmallVector<Value> at;
      for (AffineExpr expr :
           epilogue.getMatchingIndexingMap(input).getResults())
        at.push_back(cast<AffineDimExpr>(expr).getPosition() == 0 ? row
                                                                  : column);
      mapping.map(argument, memref::LoadOp::create(b, loc, input->get(), at));
    }
    for (Operation &inner : body.without_terminator()) {
      if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
        mapping.map(index.getResult(), index.getDim() == 0 ? row : column);
        continue;
      }
      b.clone(inner, mapping);
    }
    Value result = mapping.lookupOrDefault(body.getTerminator()->getOperand(0));
    memref::StoreOp::create(b, loc, result, epilogue.getDpsInits()[0],
                            ValueRange{row, column});
  }

  /// Where the tiles of one pipeline stage start in dynamic shared memory.
  std::pair<Value, Value> stageViews(Value base, Value stage) {
    Value offset = arith::MulIOp::create(b, loc, stage, index(stageBytes));
    Value sharedA =
        memref::ViewOp::create(b, loc, aTileType, base, offset, ValueRange());
    Value sharedB = memref::ViewOp::create(
        b, loc, bTileType, base, add(offset, index(aBytes)), ValueRange());
    return {sharedA, sharedB};
  }

  /// Starts the copy of the rows x columns tile of `operand` (stored
  /// rows x columns, contiguous along the columns) at (rowBase, columnBase)
  /// into `shared` with cp.async, 16 bytes per copy, each thread every
  /// kThreads-th piece; a piece past (rowLimit, columnLimit) is a zero fill
  /// (columnLimit is a multiple of 8, so a piece is all in or all out).
  void copyTileAsync(Value operand, Value shared, int64_t rows, int64_t columns,
                     Value rowBase, Value columnBase, int64_t rowLimit,
                     int64_t columnLimit) {
    int64_t piece = pieceElements();
    int64_t pieces = rows * columns / piece;
    auto loop = scf::ForOp::create(b, loc, index(0), index(pieces / kThreads),
                                   index(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value linear = add(mul(loop.getInductionVar(), kThreads), threadId);
    Value row = arith::DivUIOp::create(b, loc, linear, index(columns / piece));
    Value column = mul(
        arith::RemUIOp::create(b, loc, linear, index(columns / piece)), piece);
    Value globalRow = add(rowBase, row), globalColumn = add(columnBase, column);
    Value inBounds = arith::AndIOp::create(b, loc, less(globalRow, rowLimit),
                                           less(globalColumn, columnLimit));
    // Out of bounds: no byte is read, from an address that exists.
    Value zero = index(0);
    globalRow = arith::SelectOp::create(b, loc, inBounds, globalRow, zero);
    globalColumn =
        arith::SelectOp::create(b, loc, inBounds, globalColumn, zero);
    Value elements =
        arith::SelectOp::create(b, loc, inBounds, index(piece), index(0));
    nvgpu::DeviceAsyncCopyOp::create(
        b, loc, nvgpu::DeviceAsyncTokenType::get(b.getContext()), shared,
        ValueRange{row, column}, operand,
        indices(globalRow, globalColumn, false), b.getIndexAttr(piece),
        elements, b.getUnitAttr());
  }

  /// Copies the K tile at `k0` of A and B into `sharedA` and `sharedB`:
  /// by cp.async (`async`), or an element per thread at a time (any layout,
  /// any alignment). The B tile keeps B's layout: [k][n] (fragments by
  /// ldmatrix.trans) or, for B stored [n][k], [n][k] (ldmatrix).
  void copyTiles(Value sharedA, Value sharedB, Value k0, bool async) {
    auto copy = [&](Value operand, bool transposed, Value shared, int64_t rows,
                    int64_t columns, Value rowStart, Value columnStart,
                    int64_t rowLimit, int64_t columnLimit) {
      if (async)
        copyTileAsync(operand, shared, rows, columns, rowStart, columnStart,
                      rowLimit, columnLimit);
      else
        copyTile(operand, transposed, shared, rows, columns, rowStart,
                 columnStart, rowLimit, columnLimit);
    };
    copy(a, match.transA, sharedA, kTileM, kTileK, rowBase, k0, match.m,
         match.k);
    if (match.transB)
      copy(bm, false, sharedB, kTileN, kTileK, columnBase, k0, match.n,
           match.k);
    else
      copy(bm, false, sharedB, kTileK, kTileN, k0, columnBase, match.k,
           match.n);
  }

  /// Elements of a 16-byte cp.async piece.
  int64_t pieceElements() { return kPadBytes / elementBytes(element); }

  /// f32 `value` rounded to tf32 (cvt.rna), in an i32 register.
  Value toTf32(Value value) {
    auto asmOp = LLVM::InlineAsmOp::create(
        b, loc, b.getI32Type(), ValueRange{value}, "cvt.rna.tf32.f32 $0, $1;",
        "=r,f", /*has_side_effects=*/false, /*is_align_stack=*/false,
        LLVM::TailCallKind::None, LLVM::AsmDialectAttr(), ArrayAttr());
    return asmOp.getResult(0);
  }

  /// multiplyTiles for f32 operands as tf32 (mma.sync m16n8k8): each lane
  /// loads its fragments' elements from the shared tiles (ldmatrix moves
  /// 16-bit elements): A (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4);
  /// B (t, g), (t + 4, g), rounded to tf32.
  void multiplyTilesTf32(Value sharedA, Value sharedB,
                         SmallVector<Value> &acc) {
    for (int64_t kk = 0; kk < kTileK; kk += 8) {
      SmallVector<SmallVector<Value>> aRegs, bRegs;
      for (int64_t mi = 0; mi < kFragsM; ++mi) {
        aRegs.emplace_back();
        for (int64_t r = 0; r < 4; ++r) {
          Value row = add(add(warpRow, index(mi * 16 + (r % 2) * 8)), group);
          Value column = add(index(kk + (r / 2) * 4), quad);
          aRegs.back().push_back(toTf32(memref::LoadOp::create(
              b, loc, sharedA, ValueRange{row, column})));
        }
      }
      for (int64_t ni = 0; ni < kFragsN; ++ni) {
        bRegs.emplace_back();
        for (int64_t r = 0; r < 2; ++r) {
          Value k = add(index(kk + r * 4), quad);
          Value n = add(add(warpColumn, index(ni * 8)), group);
          bRegs.back().push_back(toTf32(memref::LoadOp::create(
              b, loc, sharedB,
              match.transB ? ValueRange{n, k} : ValueRange{k, n})));
        }
      }
      multiplyFragments(aRegs, bRegs, acc);
    }
  }

  /// The warps' products of the tiles in `sharedA` and `sharedB` added to
  /// `acc`: per k16 step, ldmatrix fragments and mma.sync.
  void multiplyTiles(Value sharedA, Value sharedB, SmallVector<Value> &acc) {
    if (element.isF32()) {
      multiplyTilesTf32(sharedA, sharedB, acc);
      return;
    }
    Value laneRow = arith::RemUIOp::create(b, loc, lane, index(16));
    Value laneHalf = mul(arith::DivUIOp::create(b, loc, lane, index(16)), 8);
    // ldmatrix.x2 of B stored [n][k]: lanes 0-7 address k, 8-15 k + 8.
    Value laneEighth = arith::RemUIOp::create(b, loc, lane, index(8));
    Value laneK = mul(
        arith::RemUIOp::create(
            b, loc, arith::DivUIOp::create(b, loc, lane, index(8)), index(2)),
        8);
    auto aFragmentType = VectorType::get({4, 2}, element);
    auto bFragmentType = VectorType::get({2, 2}, element);
    for (int64_t kk = 0; kk < kTileK; kk += 16) {
      SmallVector<SmallVector<Value>> aRegs, bRegs;
      for (int64_t mi = 0; mi < kFragsM; ++mi) {
        Value fragment = nvgpu::LdMatrixOp::create(
            b, loc, aFragmentType, sharedA,
            ValueRange{add(add(warpRow, index(mi * 16)), laneRow),
                       add(index(kk), laneHalf)},
            b.getBoolAttr(false), b.getI32IntegerAttr(4));
        aRegs.emplace_back();
        for (int64_t r = 0; r < 4; ++r)
          aRegs.back().push_back(fragmentRegister(fragment, r));
      }
      for (int64_t ni = 0; ni < kFragsN; ++ni) {
        Value fragment =
            match.transB ? nvgpu::LdMatrixOp::create(
                               b, loc, bFragmentType, sharedB,
                               ValueRange{add(add(warpColumn, index(ni * 8)),
                                              laneEighth),
                                          add(index(kk), laneK)},
                               b.getBoolAttr(false), b.getI32IntegerAttr(2))
                         : nvgpu::LdMatrixOp::create(
                               b, loc, bFragmentType, sharedB,
                               ValueRange{add(index(kk), laneRow),
                                          add(warpColumn, index(ni * 8))},
                               b.getBoolAttr(true), b.getI32IntegerAttr(2));
        bRegs.emplace_back();
        for (int64_t r = 0; r < 2; ++r)
          bRegs.back().push_back(fragmentRegister(fragment, r));
      }
      multiplyFragments(aRegs, bRegs, acc);
    }
  }

  /// K tiles one after another in one stage: copy, barrier, multiply,
  /// barrier (before the next copy overwrites what a warp may still read).
  SmallVector<Value> simpleLoop(Value base, ValueRange initial) {
    auto kLoop = scf::ForOp::create(b, loc, index(0), index(kTiles * kTileK),
                                    index(kTileK), initial);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(kLoop.getBody());
    auto [sharedA, sharedB] = stageViews(base, index(0));
    copyTiles(sharedA, sharedB, kLoop.getInductionVar(), /*async=*/false);
    gpu::BarrierOp::create(b, loc);
    SmallVector<Value> acc(kLoop.getRegionIterArgs());
    multiplyTiles(sharedA, sharedB, acc);
    gpu::BarrierOp::create(b, loc);
    scf::YieldOp::create(b, loc, acc);
    return kLoop.getResults();
  }

  /// Two stages: the next K tile's cp.async copies are in flight while the
  /// warps multiply the current one. Every iteration commits a group
  /// (empty on the last), so waiting for all but the latest group waits
  /// for exactly the current tile.
  SmallVector<Value> pipelinedLoop(Value base, ValueRange initial) {
    {
      auto [sharedA, sharedB] = stageViews(base, index(0));
      copyTiles(sharedA, sharedB, index(0), /*async=*/true);
      emitPtx(b, loc, Type(), "cp.async.commit_group;", "", {});
    }
    auto kLoop =
        scf::ForOp::create(b, loc, index(0), index(kTiles), index(1), initial);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(kLoop.getBody());
    Value tile = kLoop.getInductionVar();
    Value next = add(tile, index(1));
    auto prefetch = scf::IfOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, next,
                              index(kTiles)),
        /*withElseRegion=*/false);
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(prefetch.thenBlock());
      auto [sharedA, sharedB] =
          stageViews(base, arith::RemUIOp::create(b, loc, next, index(2)));
      copyTiles(sharedA, sharedB, mul(next, kTileK), /*async=*/true);
    }
    emitPtx(b, loc, Type(), "cp.async.commit_group;", "", {});
    emitPtx(b, loc, Type(), "cp.async.wait_group 1;", "", {});
    gpu::BarrierOp::create(b, loc);
    auto [sharedA, sharedB] =
        stageViews(base, arith::RemUIOp::create(b, loc, tile, index(2)));
    SmallVector<Value> acc(kLoop.getRegionIterArgs());
    multiplyTiles(sharedA, sharedB, acc);
    // The next iteration's copies go to the stage just read.
    gpu::BarrierOp::create(b, loc);
    scf::YieldOp::create(b, loc, acc);
    return kLoop.getResults();
  }

  /// Whether cp.async can copy `operand`'s tiles 16 bytes at a time, at
  /// run time: its start is 16-byte aligned and its row (and batch)
  /// strides are multiples of 8 elements. Subviews (ring chunks) have
  /// dynamic offsets, so this cannot be known when compiling.
  Value alignedForCopies(Value operand) {
    auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, operand);
    Value pointer = memref::ExtractAlignedPointerAsIndexOp::create(
        b, loc, metadata.getBaseBuffer());
    Value start =
        add(pointer, mul(metadata.getOffset(), elementBytes(element)));
    auto isZero = [&](Value value) {
      return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, value,
                                   index(0));
    };
    Value aligned = isZero(arith::RemUIOp::create(b, loc, start, index(16)));
    auto strides = metadata.getStrides();
    for (size_t i = 0; i + 1 < strides.size(); ++i)
      aligned = arith::AndIOp::create(
          b, loc, aligned,
          isZero(arith::RemUIOp::create(b, loc, strides[i],
                                        index(pieceElements()))));
    return aligned;
  }

  /// The poll of each segment's flags, emitted at the start of each of
  /// its tiles (null when the kernel waits for nothing).
  GemmPoll poll;
  /// What each segment's tiles do once stored (null when nothing).
  GemmArrive arrive;
  /// A persistent grid of at most maxBlocks blocks, whatever the rest.
  bool persistent = false;
  /// The most blocks of a segmented kernel's grid.
  int64_t maxBlocks = 0;

  bool segmented() const {
    return persistent || segments.size() > 1 || poll || arrive;
  }

  gpu::LaunchOp build() {
    MLIRContext *context = b.getContext();
    auto workgroup = gpu::AddressSpaceAttr::get(
        context, gpu::GPUDialect::getWorkgroupAddressSpace());
    int64_t kPad = kPadBytes / elementBytes(element);
    aTileType = MemRefType::get({kTileM, kTileK + kPad}, element,
                                MemRefLayoutAttrInterface(), workgroup);
    bTileType = match.transB
                    ? MemRefType::get({kTileN, kTileK + kPad}, element,
                                      MemRefLayoutAttrInterface(), workgroup)
                    : MemRefType::get({kTileK, kTileN + kPad}, element,
                                      MemRefLayoutAttrInterface(), workgroup);
    kTiles = std::max<int64_t>(1, (match.k + kTileK - 1) / kTileK);
    // cp.async moves whole 16-byte pieces along the contiguous dimension:
    // A stored [m][k] (a transposed A is copied an element at a time), and
    // the contiguous extent of each operand a multiple of 8 elements, so
    // that a piece is all inside the operand or all outside.
    pipelined = !match.transA && match.k % pieceElements() == 0 &&
                (match.transB || match.n % pieceElements() == 0);
    // The tiles in dynamic shared memory, which is 16-byte aligned
    // (ldmatrix's row addresses must be; workgroup attributions would be
    // aligned to their element only); two stages when pipelined.
    aBytes = aTileType.getNumElements() * elementBytes(element);
    stageBytes = aBytes + bTileType.getNumElements() * elementBytes(element);
    int64_t sharedBytes = stageBytes * (pipelined ? 2 : 1);
    int64_t tilesN = (match.n + kTileN - 1) / kTileN;
    int64_t tilesM = (match.m + kTileM - 1) / kTileM;
    int64_t perSegment = tilesN * tilesM * match.batch;
    int64_t total = perSegment * static_cast<int64_t>(segments.size());
    int64_t blocks = std::min(total, maxBlocks);
    // A segmented kernel picks each tile's operands from its segment's:
    // one type for each operand, what the segments' layouts share.
    SmallVector<SmallVector<Value>> operands(3);
    if (segmented())
      for (linalg::LinalgOp op : segments) {
        operands[0].push_back(op.getDpsInputOperand(0)->get());
        operands[1].push_back(op.getDpsInputOperand(1)->get());
        operands[2].push_back(op.getDpsInitOperand(0)->get());
      }
    for (SmallVector<Value> &values : operands)
      castToCommonLayout(values);
    Value one = index(1);
    auto launch =
        segmented()
            ? gpu::LaunchOp::create(b, loc, index(blocks), one, one,
                                    index(kThreads), one, one,
                                    arith::ConstantIntOp::create(
                                        b, loc, b.getI32Type(), sharedBytes))
            : gpu::LaunchOp::create(b, loc, index(tilesN), index(tilesM),
                                    index(match.batch), index(kThreads), one,
                                    one,
                                    arith::ConstantIntOp::create(
                                        b, loc, b.getI32Type(), sharedBytes));
    b.setInsertionPointToStart(&launch.getBody().front());
    gpu::TerminatorOp terminator = gpu::TerminatorOp::create(b, loc);
    b.setInsertionPoint(terminator);
    auto bytesType = MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                                     MemRefLayoutAttrInterface(), workgroup);
    Value base = gpu::DynamicSharedMemoryOp::create(b, loc, bytesType);

    threadId = launch.getThreadIds().x;
    Value warp = arith::DivUIOp::create(b, loc, threadId, index(32));
    lane = arith::RemUIOp::create(b, loc, threadId, index(32));
    group = arith::DivUIOp::create(b, loc, lane, index(4));
    quad = arith::RemUIOp::create(b, loc, lane, index(4));
    // Warps 2 x 2 over the block's tile.
    warpRow = mul(arith::DivUIOp::create(b, loc, warp, index(2)), kWarpM);
    warpColumn = mul(arith::RemUIOp::create(b, loc, warp, index(2)), kWarpN);

    if (!segmented()) {
      if (match.batchDim != ~0u)
        batch = launch.getBlockIds().z;
      rowBase = mul(launch.getBlockIds().y, kTileM);
      columnBase = mul(launch.getBlockIds().x, kTileN);
      emitTile(base);
      return launch;
    }

    // Persistent: block i takes tiles i, i + blocks, ..., segment after
    // segment in the order given (the caller's: the chunk that is here
    // first), each segment's tiles batch-major, then by rows.
    auto tiles = scf::ForOp::create(b, loc, launch.getBlockIds().x,
                                    index(total), index(blocks));
    b.setInsertionPointToStart(tiles.getBody());
    Value tile = tiles.getInductionVar();
    Value segment = arith::DivUIOp::create(b, loc, tile, index(perSegment));
    Value local = arith::RemUIOp::create(b, loc, tile, index(perSegment));
    if (match.batchDim != ~0u) {
      batch = arith::DivUIOp::create(b, loc, local, index(tilesM * tilesN));
      local = arith::RemUIOp::create(b, loc, local, index(tilesM * tilesN));
    }
    rowBase = mul(arith::DivUIOp::create(b, loc, local, index(tilesN)), kTileM);
    columnBase =
        mul(arith::RemUIOp::create(b, loc, local, index(tilesN)), kTileN);
    a = selectBySegment(segment, operands[0]);
    bm = selectBySegment(segment, operands[1]);
    c = selectBySegment(segment, operands[2]);
    // The previous tile's warps may still read the shared tiles this one's
    // copies overwrite.
    gpu::BarrierOp::create(b, loc);
    // Each segment's polls, then its tile, then its arrivals once every
    // thread's stores of the tile are done.
    if (poll)
      forEachSegment(segment, [&](unsigned i) { poll(b, loc, i, threadId); });
    emitTile(base);
    if (arrive)
      forEachSegment(segment, [&](unsigned i) {
        arrive(b, loc, i, threadId, perSegment);
      });
    return launch;
  }

  /// `body(i)` for each segment i under a test of `segment` against it (a
  /// switch would be a jump table, brx.idx).
  void forEachSegment(Value segment, llvm::function_ref<void(unsigned)> body) {
    for (size_t i = 0; i < segments.size(); ++i) {
      Value is = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                       segment, index(i));
      auto branch = scf::IfOp::create(b, loc, is, /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(branch.thenBlock());
      body(static_cast<unsigned>(i));
    }
  }

  /// `values` (one operand of each segment) cast to the layout they share:
  /// their strides where equal, dynamic elsewhere, a dynamic offset.
  void castToCommonLayout(SmallVector<Value> &values) {
    if (values.empty() || llvm::all_equal(llvm::map_range(
                              values, [](Value v) { return v.getType(); })))
      return;
    auto first = cast<MemRefType>(values.front().getType());
    SmallVector<int64_t> strides = first.getStridesAndOffset().first;
    for (Value value : values) {
      auto [own, offset] =
          cast<MemRefType>(value.getType()).getStridesAndOffset();
      for (auto [common, stride] : llvm::zip(strides, own))
        if (common != stride)
          common = ShapedType::kDynamic;
    }
    auto type = MemRefType::get(
        first.getShape(), first.getElementType(),
        StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic, strides),
        first.getMemorySpace());
    for (Value &value : values)
      if (value.getType() != type)
        value = memref::CastOp::create(b, loc, type, value);
  }

  /// The value of `values` that `segment` picks.
  Value selectBySegment(Value segment, ArrayRef<Value> values) {
    Value picked = values.back();
    for (size_t i = values.size() - 1; i-- > 0;) {
      Value is = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                       segment, index(i));
      picked = arith::SelectOp::create(b, loc, is, values[i], picked);
    }
    return picked;
  }

  /// One 64x64 tile of C at (rowBase, columnBase) of `batch`, from the
  /// operands a, bm and c.
  void emitTile(Value base) {
    // The accumulators: C's values (in f32) or zeros.
    Type f32 = b.getF32Type();
    Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(f32));
    SmallVector<Value> initial;
    for (int64_t mi = 0; mi < kFragsM; ++mi)
      for (int64_t ni = 0; ni < kFragsN; ++ni)
        for (int64_t i = 0; i < 4; ++i) {
          if (!accumulate) {
            initial.push_back(zero);
            continue;
          }
          auto [row, column, inBounds] = place(mi, ni, i);
          Value outputZero =
              arith::ConstantOp::create(b, loc, b.getZeroAttr(output));
          Value value =
              guardedLoad(c, row, column, false, inBounds, outputZero);
          if (output != f32)
            value = arith::ExtFOp::create(b, loc, f32, value);
          initial.push_back(value);
        }

    // Along K: pipelined when the operands' layout allows and a run-time
    // check finds them aligned, one stage at a time otherwise.
    SmallVector<Value> results;
    if (pipelined) {
      Value aligned = arith::AndIOp::create(b, loc, alignedForCopies(a),
                                            alignedForCopies(bm));
      SmallVector<Type> types(initial.size(), f32);
      auto branch = scf::IfOp::create(b, loc, types, aligned,
                                      /*withElseRegion=*/true);
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(branch.thenBlock());
        scf::YieldOp::create(b, loc, pipelinedLoop(base, initial));
        b.setInsertionPointToStart(branch.elseBlock());
        scf::YieldOp::create(b, loc, simpleLoop(base, initial));
      }
      results = branch.getResults();
    } else {
      results = simpleLoop(base, initial);
    }

    // C, in bounds.
    for (int64_t mi = 0; mi < kFragsM; ++mi)
      for (int64_t ni = 0; ni < kFragsN; ++ni)
        for (int64_t i = 0; i < 4; ++i) {
          auto [row, column, inBounds] = place(mi, ni, i);
          auto branch = scf::IfOp::create(b, loc, inBounds, false);
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(branch.thenBlock());
          Value value = results[(mi * kFragsN + ni) * 4 + i];
          if (output != f32)
            value = arith::TruncFOp::create(b, loc, output, value);
          store(value, row, column);
        }
  }
};

/// The elementwise op right after the product that alone reads it, when
/// the kernel can apply it to its results as it stores them (C then is
/// never written): two parallel loops over the product's M x N, the
/// product read once through the identity, its other operands buffers read
/// through projections of (row, column), its output written through the
/// identity and not read, a payload without memory effects or regions; and
/// nothing it writes is what the kernel still reads elsewhere (the memory
/// plan may give the output bytes of an operand).
linalg::GenericOp fusibleEpilogue(linalg::LinalgOp op, const GemmMatch &match,
                                  bool accumulate) {
  if (match.batchDim != ~0u)
    return {};
  linalg::GenericOp reader = readerAfter(op);
  if (!reader || reader.getNumLoops() != 2 ||
      reader.getNumParallelLoops() != 2 || reader.getNumDpsInits() != 1 ||
      reader.getStaticLoopRanges() != ArrayRef<int64_t>{match.m, match.n})
    return {};
  AffineMap identity =
      AffineMap::getMultiDimIdentityMap(2, reader.getContext());
  OpOperand &init = reader.getDpsInitsMutable()[0];
  Value written = init.get();
  Value c = op.getDpsInitOperand(0)->get();
  if (!isa<MemRefType>(written.getType()) ||
      reader.getMatchingIndexingMap(&init) != identity ||
      reader.payloadUsesValueFromOperand(&init))
    return {};
  auto overlaps = [&](Value value) {
    return value == written || mayShareBytes(value, written);
  };
  if (overlaps(op.getDpsInputOperand(0)->get()) ||
      overlaps(op.getDpsInputOperand(1)->get()) ||
      (accumulate && written != c && overlaps(c)))
    return {};
  int productReads = 0;
  for (OpOperand *input : reader.getDpsInputOperands()) {
    AffineMap map = reader.getMatchingIndexingMap(input);
    if (input->get() == c) {
      if (map != identity)
        return {};
      ++productReads;
      continue;
    }
    if (!isa<MemRefType>(input->get().getType()) ||
        !map.isProjectedPermutation() ||
        (overlaps(input->get()) &&
         !(input->get() == written && map == identity)))
      return {};
  }
  if (productReads != 1)
    return {};
  for (Operation &inner : reader.getRegion().front().without_terminator())
    if (inner.getNumRegions() != 0 || !isMemoryEffectFree(&inner))
      return {};
  return reader;
}

/// `type` as the IR prints it, unquoted.
std::string typeName(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  type.print(os);
  return text;
}

} // namespace

/// The contraction's match when the generated kernel takes it, else the
/// reason in `why`.
static FailureOr<GemmMatch> matchKernelGemm(linalg::LinalgOp op, bool allowTf32,
                                            std::string &why) {
  FailureOr<GemmMatch> match = matchGemm(op, why);
  if (failed(match))
    return failure();
  if (match->m == 0 || match->n == 0 || match->batch == 0) {
    why = "its result is empty";
    return failure();
  }
  // A grid's y and z have at most 65535 blocks.
  if ((match->m + kTileM - 1) / kTileM > 65535 || match->batch > 65535) {
    why = "its " + std::string(match->batch > 65535 ? "batches" : "row tiles") +
          " exceed the 65535 blocks of a grid dimension";
    return failure();
  }
  Type element = getElementTypeOrSelf(op.getDpsInputOperand(0)->get());
  if (!element.isF16() && !element.isBF16() &&
      !(element.isF32() && allowTf32)) {
    why = element.isF32()
              ? "its operands are f32, which the tensor cores multiply as "
                "tf32 only (10 bits of mantissa): allow-tf32 allows it"
              : "its operands are not f16, bf16 or f32";
    return failure();
  }
  return match;
}

/// What the remark of a generated kernel says first: the instruction and
/// tiles.
static std::string describeKernel(linalg::LinalgOp op) {
  Type element = getElementTypeOrSelf(op.getDpsInputOperand(0)->get());
  return std::string("mma.sync ") +
         (element.isF32() ? "m16n8k8 on tf32" : "m16n8k16") + ", " +
         std::to_string(kTileM) + "x" + std::to_string(kTileN) + "x" +
         std::to_string(kTileK) + " tiles";
}

Operation *emitGemmKernel(linalg::LinalgOp op, bool allowTf32, std::string &why,
                          bool &zeroFillFolded, linalg::GenericOp &epilogue) {
  FailureOr<GemmMatch> match = matchKernelGemm(op, allowTf32, why);
  if (failed(match))
    return nullptr;
  // A zero fill right before only makes the product start from zero.
  Operation *zeros = match->k > 0 ? zeroFillBefore(op) : nullptr;
  zeroFillFolded = zeros;
  if (zeros)
    zeros->erase();
  epilogue = fusibleEpilogue(op, *match, /*accumulate=*/!zeroFillFolded);
  GemmKernelBuilder builder(
      op, *match, /*accumulate=*/!zeroFillFolded, epilogue,
      epilogue ? epilogue.getOperation() : op.getOperation());
  gpu::LaunchOp launch = builder.build();
  auto remark = op->emitRemark();
  remark << "runs as a generated tensor-core kernel (" << describeKernel(op)
         << "): " << describeGemm(*match);
  remark << (zeroFillFolded ? ", from zero (its zero fill folded)"
                            : ", accumulating into its output");
  if (epilogue) {
    size_t ops =
        std::distance(epilogue.getRegion().front().without_terminator().begin(),
                      epilogue.getRegion().front().without_terminator().end());
    remark << ", with the elementwise op after it (" << ops << " ops on "
           << epilogue.getNumDpsInputs() << " operands) as its epilogue, "
           << "writing "
           << typeName(getElementTypeOrSelf(epilogue.getDpsInits()[0]));
  }
  return launch;
}

Operation *emitSegmentedGemmKernel(ArrayRef<linalg::LinalgOp> segments,
                                   bool fromZero, int64_t maxBlocks,
                                   bool allowTf32, Operation *before,
                                   GemmPoll poll, GemmArrive arrive,
                                   std::string &why) {
  if (segments.empty() || maxBlocks < 1) {
    why = "it has no contraction or no block to run on";
    return nullptr;
  }
  FailureOr<GemmMatch> match =
      matchKernelGemm(segments.front(), allowTf32, why);
  if (failed(match))
    return nullptr;
  auto typesOf = [](linalg::LinalgOp op) {
    SmallVector<Type> types;
    for (Value operand : op->getOperands())
      types.push_back(getElementTypeOrSelf(operand));
    return types;
  };
  for (linalg::LinalgOp op : segments.drop_front()) {
    FailureOr<GemmMatch> other = matchKernelGemm(op, allowTf32, why);
    if (failed(other))
      return nullptr;
    if (other->m != match->m || other->n != match->n || other->k != match->k ||
        other->batch != match->batch || other->transA != match->transA ||
        other->transB != match->transB || other->batchDim != match->batchDim ||
        typesOf(op) != typesOf(segments.front()) ||
        op->getName() != segments.front()->getName()) {
      why = "its contractions differ in shape, layout or types (" +
            describeGemm(*match) + " against " + describeGemm(*other) + ")";
      return nullptr;
    }
  }
  GemmKernelBuilder builder(segments, *match, /*accumulate=*/!fromZero,
                            linalg::GenericOp(), before);
  builder.poll = poll;
  builder.arrive = arrive;
  builder.persistent = true;
  builder.maxBlocks = maxBlocks;
  gpu::LaunchOp launch = builder.build();
  int64_t tiles = ((match->m + kTileM - 1) / kTileM) *
                  ((match->n + kTileN - 1) / kTileN) * match->batch;
  auto remark = segments.front()->emitRemark();
  remark << "runs with " << segments.size() - 1
         << " more contraction(s) as one persistent generated tensor-core "
            "kernel ("
         << describeKernel(segments.front())
         << "): " << std::min<int64_t>(tiles * segments.size(), maxBlocks)
         << " blocks over " << tiles * segments.size() << " tiles, " << tiles
         << " per contraction of " << describeGemm(*match)
         << (fromZero ? ", from zero" : ", accumulating into its output");
  if (poll)
    remark << "; each tile polls its contraction's flags first";
  if (arrive)
    remark << "; the last tile of each contraction that raises flags raises "
              "them";
  return launch;
}

} // namespace braid::codegen

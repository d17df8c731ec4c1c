//===- MapToGPU.cpp - A bufferized program's compute onto a GPU -*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// After bufferization and the runtime calls for transfers, a program is host
// code over buffers: linalg ops, fused kernels (scf.forall {braid.kernel}),
// copies, allocations. This pass decides where each piece runs on the cuda
// target: contractions on cuBLASLt through the runtime, fused kernels as one
// block per row tile, everything else as grid-stride kernels; buffers that
// device work touches are allocated on the device.
//
// Every device operation of a rank is ordered on its compute stream by the
// runtime (gpu.launch and gpu.alloc without async tokens lower to
// mgpuStreamCreate/mgpuStreamSynchronize, which the Braid runtime maps to
// that stream and a no-op), so host code only enqueues.
//
//===----------------------------------------------------------------------===//

#include "braid/Codegen/Passes.h"
#include "braid/Conversion/XferToRuntime/MemRefAt.h"
#include "braid/Dialect/Xfer/IR/XferOps.h"
#include "braid/Dialect/Xfer/Transforms/KernelTrace.h"
#include "braid/Dialect/Xfer/Transforms/Schedule.h"

#include "GPU.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Affine/Utils.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include <optional>

namespace braid {
#define GEN_PASS_DEF_MAPTOGPU
#include "braid/Codegen/Passes.h.inc"
} // namespace braid

using namespace mlir;
using namespace braid::codegen;

/// The function a call in the module calls, when it has a body.
static func::FuncOp definedCallee(func::CallOp call) {
  auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
      call, call.getCalleeAttr());
  return callee && !callee.isExternal() ? callee : func::FuncOp();
}

/// The allocation every buffer `value` can be comes from, through views,
/// both sides of an scf.if or a select (ring attention's skipped blocks
/// keep their running buffers) and the values a called function returns
/// (a layer function's results): one of them when all are the same kind
/// of allocation, else null.
static Operation *commonAllocation(Value value, unsigned depth = 0) {
  if (depth > 16)
    return nullptr;
  auto common = [&](ValueRange values) -> Operation * {
    Operation *first = nullptr;
    for (Value v : values) {
      Operation *a = commonAllocation(v, depth + 1);
      if (!a || (first && a->getName() != first->getName()))
        return nullptr;
      first = first ? first : a;
    }
    return first;
  };
  auto either = [&](Value lhs, Value rhs) { return common({lhs, rhs}); };
  if (auto branch = value.getDefiningOp<scf::IfOp>()) {
    unsigned result = cast<OpResult>(value).getResultNumber();
    return either(branch.thenYield().getOperand(result),
                  branch.elseYield().getOperand(result));
  }
  if (auto call = value.getDefiningOp<func::CallOp>()) {
    func::FuncOp callee = definedCallee(call);
    if (!callee)
      return nullptr;
    unsigned result = cast<OpResult>(value).getResultNumber();
    SmallVector<Value> returned;
    callee.walk([&](func::ReturnOp ret) {
      returned.push_back(ret.getOperand(result));
    });
    return returned.empty() ? nullptr : common(returned);
  }
  if (auto select = value.getDefiningOp<arith::SelectOp>())
    return either(select.getTrueValue(), select.getFalseValue());
  if (Operation *allocation = allocationOf(value))
    return allocation;
  // allocationOf stops at a branch below views: follow them to it.
  Operation *def = value.getDefiningOp();
  if (auto metadata = dyn_cast_or_null<memref::ExtractStridedMetadataOp>(def))
    return commonAllocation(metadata.getSource(), depth + 1);
  if (auto view = dyn_cast_or_null<ViewLikeOpInterface>(def))
    return commonAllocation(view.getViewSource(), depth + 1);
  return nullptr;
}

/// Marks the memory plan's device arena (the memref over the address
/// braid_rt_device_arena returned).
static constexpr llvm::StringLiteral kDeviceArenaAttrName =
    "braid.device_arena";

/// Whether `allocation` (what allocationOf gave) is device memory: a
/// gpu.alloc, or a planned buffer of the device arena.
static bool isDeviceAllocation(Operation *allocation) {
  if (isa_and_nonnull<gpu::AllocOp>(allocation))
    return true;
  auto view = dyn_cast_or_null<memref::ViewOp>(allocation);
  Operation *arena = view ? view.getSource().getDefiningOp() : nullptr;
  return arena && arena->hasAttr(kDeviceArenaAttrName);
}

namespace {

// Grid-stride launches: enough blocks for a few waves of full occupancy
// (an SM holds 2048 threads), beyond which more blocks only add
// scheduling work; each thread's loop covers the rest.
constexpr int64_t kGridWaves = 4;
constexpr int64_t kThreadsPerSM = 2048;
constexpr int64_t kSharedAlignment = 16;

struct MapToGPUPass : public braid::impl::MapToGPUBase<MapToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Block reductions work on whole warps; CUDA allows 1024 threads.
    if (blockSize < 32 || blockSize > 1024 || blockSize % 32 != 0) {
      module.emitError() << "braid-map-to-gpu: block-size must be a multiple "
                            "of 32 from 32 to 1024, got "
                         << static_cast<int64_t>(blockSize);
      return signalPassFailure();
    }
    if (smCount < 1) {
      module.emitError() << "braid-map-to-gpu: sm-count must be positive, got "
                         << static_cast<int64_t>(smCount);
      return signalPassFailure();
    }
    if (sharedMemoryLimit < 0) {
      module.emitError() << "braid-map-to-gpu: shared-memory-limit must not "
                            "be negative";
      return signalPassFailure();
    }
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(&getContext()));
    SmallVector<func::FuncOp> functions;
    for (auto function : module.getOps<func::FuncOp>())
      if (!function.isExternal())
        functions.push_back(function);
    for (func::FuncOp function : functions)
      if (failed(mapFunction(function)))
        return signalPassFailure();
    // Buffers once every function's device work is known: a buffer handed
    // to a function (a layer's) takes the side that function gives it, and
    // a buffer it returns is freed on the side it was allocated.
    for (func::FuncOp function : functions)
      placeAllocations(function);
    for (func::FuncOp function : functions) {
      if (failed(placeBuffers(function)))
        return signalPassFailure();
      // What stays on the host is the schedule: launches, GEMM calls,
      // transfers and waits (generated without optimization, as on CPUs).
      function->setAttr(braid::xfer::kScheduleAttrName,
                        UnitAttr::get(&getContext()));
    }
  }

private:
  LogicalResult mapFunction(func::FuncOp function) {
    OpBuilder b(&getContext());
    // Copies are linalg copies, so that one emitter covers them.
    SmallVector<memref::CopyOp> copies;
    function.walk([&](memref::CopyOp copy) { copies.push_back(copy); });
    for (memref::CopyOp copy : copies) {
      if (copy.getSource() != copy.getTarget()) {
        b.setInsertionPoint(copy);
        linalg::CopyOp::create(b, copy.getLoc(), copy.getSource(),
                               copy.getTarget());
      }
      copy.erase();
    }

    SmallVector<scf::ForallOp> kernels;
    function.walk([&](scf::ForallOp forall) {
      if (forall->hasAttr(braid::dist::DistDialect::getKernelAttrName()))
        kernels.push_back(forall);
    });
    for (scf::ForallOp kernel : kernels)
      if (failed(kernel->hasAttr(braid::xfer::kGemmSegmentsAttrName)
                     ? mapGemmSegments(kernel)
                     : mapKernel(kernel)))
        return failure();

    // Contractions first: one may absorb the fill before it and the
    // elementwise op after it; what is left is collected afterwards.
    auto hostOps = [&](bool contractions) {
      SmallVector<linalg::LinalgOp> ops;
      function.walk([&](linalg::LinalgOp op) {
        if (!inDeviceCode(op) &&
            linalg::isaContractionOpInterface(op) == contractions)
          ops.push_back(op);
      });
      return ops;
    };
    for (bool contractions : {true, false})
      for (linalg::LinalgOp op : hostOps(contractions))
        if (failed(mapHostOp(op)))
          return failure();
    return success();
  }

  Value index(OpBuilder &b, Location loc, int64_t value) {
    return arith::ConstantIndexOp::create(b, loc, value);
  }

  /// What the trace says of `launch`, which runs `op`: what it computes
  /// (braid-kernel-events adds where it came from, the runtime the
  /// kernel's symbol), the bytes of the buffers it uses from outside, and a
  /// contraction's flops.
  static void describeLaunch(gpu::LaunchOp launch, Operation *op) {
    llvm::SetVector<Value> buffers;
    auto take = [&](Value value) {
      if (isa<MemRefType>(value.getType()))
        buffers.insert(value);
    };
    for (Value operand : op->getOperands())
      take(operand);
    op->walk([&](Operation *inner) {
      for (Value operand : inner->getOperands())
        if (!op->isAncestor(operand.getParentRegion()->getParentOp()))
          take(operand);
    });
    int64_t bytes = 0;
    for (Value buffer : buffers)
      bytes += braid::xfer::getStaticBytes(cast<MemRefType>(buffer.getType()))
                   .value_or(0);
    std::string computes = braid::xfer::describeComputation(op);
    braid::xfer::setTraceEvent(launch, computes.empty() ? "(kernel)" : computes,
                               bytes, braid::xfer::contractionFlops(op));
  }

  /// A fused kernel: one block per iteration.
  LogicalResult mapKernel(scf::ForallOp kernel) {
    Location loc = kernel.getLoc();
    if (!kernel.getOutputs().empty())
      return kernel.emitError() << "a fused kernel with shared outputs "
                                   "cannot be mapped to the GPU";
    ArrayRef<int64_t> lbs = kernel.getStaticLowerBound();
    ArrayRef<int64_t> ubs = kernel.getStaticUpperBound();
    ArrayRef<int64_t> steps = kernel.getStaticStep();
    if (ShapedType::isDynamicShape(lbs) || ShapedType::isDynamicShape(ubs) ||
        ShapedType::isDynamicShape(steps))
      return kernel.emitError()
             << "the cuda target needs fused kernels with static bounds";
    SmallVector<int64_t> trips;
    int64_t blocks = 1;
    for (auto [lb, ub, step] : llvm::zip(lbs, ubs, steps)) {
      trips.push_back(ub > lb ? (ub - lb + step - 1) / step : 0);
      blocks *= trips.back();
    }
    if (blocks == 0) {
      kernel.erase();
      return success();
    }
    if (blocks > std::numeric_limits<int32_t>::max())
      return kernel.emitError() << "a fused kernel of " << blocks
                                << " tiles exceeds the GPU's grid";

    // Scratch: every alloca of the tile, carved out of shared memory.
    Block *body = kernel.getBody();
    int64_t sharedBytes = 0;
    SmallVector<std::pair<memref::AllocaOp, int64_t>> scratch;
    for (Operation &op : body->without_terminator()) {
      auto alloca = dyn_cast<memref::AllocaOp>(op);
      if (!alloca)
        continue;
      MemRefType type = alloca.getType();
      if (!type.hasStaticShape() || !type.getLayout().isIdentity() ||
          !type.getElementType().isIntOrFloat())
        return alloca.emitError() << "fused-kernel scratch must be a static, "
                                     "identity-layout buffer of integers or "
                                     "floats";
      scratch.push_back({alloca, sharedBytes});
      int64_t bytes =
          type.getNumElements() * elementBytes(type.getElementType());
      sharedBytes +=
          (bytes + kSharedAlignment - 1) / kSharedAlignment * kSharedAlignment;
    }
    // Each block reduction adds a small static buffer of its own (a word
    // per warp); leave room for those.
    int64_t reductionBytes = 0;
    body->walk([&](linalg::LinalgOp op) {
      if (op.getNumReductionLoops() > 0)
        reductionBytes += 32 * 4;
    });
    if (sharedBytes + reductionBytes > sharedMemoryLimit)
      return kernel.emitError()
             << "this fused kernel needs " << sharedBytes + reductionBytes
             << " bytes of shared memory per tile, more than the "
             << static_cast<int64_t>(sharedMemoryLimit)
             << " the target allows; fuse with a smaller row tile";

    OpBuilder b(kernel);
    Value one = index(b, loc, 1);
    Value sharedSize = sharedBytes ? Value(arith::ConstantIntOp::create(
                                         b, loc, b.getI32Type(), sharedBytes))
                                   : Value();
    auto launch =
        gpu::LaunchOp::create(b, loc, index(b, loc, blocks), one, one,
                              index(b, loc, blockSize), one, one, sharedSize);
    describeLaunch(launch, kernel);
    Block &launchBody = launch.getBody().front();
    b.setInsertionPointToStart(&launchBody);
    gpu::TerminatorOp terminator = gpu::TerminatorOp::create(b, loc);
    b.setInsertionPoint(terminator);

    IRMapping mapping;
    // Iteration of this block: the block id delinearized over the trips.
    Value linear = launch.getBlockIds().x;
    SmallVector<Value> ivs(trips.size());
    for (size_t i = trips.size(); i-- > 0;) {
      Value position = linear;
      if (i > 0) {
        Value trip = index(b, loc, trips[i]);
        position = arith::RemUIOp::create(b, loc, linear, trip);
        linear = arith::DivUIOp::create(b, loc, linear, trip);
      }
      Value scaled =
          arith::MulIOp::create(b, loc, position, index(b, loc, steps[i]));
      ivs[i] = arith::AddIOp::create(b, loc, scaled, index(b, loc, lbs[i]));
    }
    for (auto [iv, value] : llvm::zip(kernel.getInductionVars(), ivs))
      mapping.map(iv, value);

    auto workgroup =
        gpu::AddressSpaceAttr::get(&getContext(), gpu::AddressSpace::Workgroup);
    if (sharedBytes) {
      auto bytesType = MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                                       MemRefLayoutAttrInterface(), workgroup);
      Value base = gpu::DynamicSharedMemoryOp::create(b, loc, bytesType);
      for (auto [alloca, offset] : scratch) {
        MemRefType type = alloca.getType();
        auto shared = MemRefType::get(type.getShape(), type.getElementType(),
                                      MemRefLayoutAttrInterface(), workgroup);
        Value view = memref::ViewOp::create(
            b, loc, shared, base, index(b, loc, offset), ValueRange{});
        mapping.map(alloca.getResult(), view);
      }
    }

    Value threadId = launch.getThreadIds().x;
    Value numThreads = launch.getBlockSize().x;
    SmallVector<braid::xfer::KernelSignalOp> raises;
    for (Operation &op : body->without_terminator()) {
      if (isa<memref::AllocaOp>(op))
        continue;
      if (auto wait = dyn_cast<braid::xfer::KernelWaitOp>(op)) {
        emitKernelWait(b, loc, mapping, wait, threadId);
        continue;
      }
      if (auto signal = dyn_cast<braid::xfer::KernelSignalOp>(op)) {
        // The raises that share an arrival word count each block once.
        if (!raises.empty() &&
            (raises.front().getArrivals() != signal.getArrivals() ||
             raises.front().getArrival() != signal.getArrival()))
          emitKernelSignals(b, loc, mapping, raises, threadId, blocks);
        raises.push_back(signal);
        continue;
      }
      if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
        if (!linalgOp.hasPureBufferSemantics())
          return op.emitError() << "expected a bufferized op in a fused kernel";
        if (failed(emitDeviceLoops(b, loc, mapping, linalgOp, threadId,
                                   numThreads, /*cooperative=*/true)))
          return failure();
        // The tile's ops hand data to each other through shared or global
        // memory, written and read by different threads.
        gpu::BarrierOp::create(b, loc);
        continue;
      }
      if (isa<ViewLikeOpInterface>(op) || isMemoryEffectFree(&op)) {
        if (op.getNumRegions() != 0)
          return op.emitError() << "cannot be part of a GPU kernel";
        Operation *clone = b.clone(op, mapping);
        // Views of scratch live in shared memory too.
        if (auto view = dyn_cast<ViewLikeOpInterface>(clone)) {
          auto source = dyn_cast<MemRefType>(view.getViewSource().getType());
          for (Value result : clone->getResults()) {
            auto type = dyn_cast<MemRefType>(result.getType());
            if (source && type &&
                type.getMemorySpace() != source.getMemorySpace())
              result.setType(
                  MemRefType::get(type.getShape(), type.getElementType(),
                                  type.getLayout(), source.getMemorySpace()));
          }
        }
        continue;
      }
      return op.emitError() << "cannot be part of a GPU kernel on the cuda "
                               "target";
    }
    if (!raises.empty())
      emitKernelSignals(b, loc, mapping, raises, threadId, blocks);
    ++numKernels;
    kernel.erase();
    return success();
  }

  /// Contractions that wait for flags (braid-kernel-signals' segments: an
  /// scf.forall over them whose body switches to each one's flag waits, its
  /// zero fill and itself): one persistent generated GEMM whose tiles poll
  /// their segment's flags. Where the generator declines them, each
  /// segment's waits are a one-block kernel that polls, and the contraction
  /// follows it on the stream like any other (cuBLASLt).
  LogicalResult mapGemmSegments(scf::ForallOp kernel) {
    auto body = dyn_cast<scf::IndexSwitchOp>(&kernel.getBody()->front());
    if (!body || kernel.getBody()->getOperations().size() != 2)
      return kernel.emitError()
             << "expected GEMM segments to be one 'scf.index_switch' over "
                "the segments";
    int64_t maxBlocks =
        cast<IntegerAttr>(kernel->getAttr(braid::xfer::kGemmSegmentsAttrName))
            .getInt();
    struct Segment {
      SmallVector<braid::xfer::KernelWaitOp> waits;
      linalg::FillOp fill;
      linalg::LinalgOp op;
      SmallVector<braid::xfer::KernelSignalOp> raises;
    };
    SmallVector<Segment> segments;
    for (Region &region : body.getCaseRegions()) {
      Segment &segment = segments.emplace_back();
      for (Operation &op : region.front().without_terminator()) {
        if (auto wait = dyn_cast<braid::xfer::KernelWaitOp>(op);
            wait && !segment.fill && !segment.op)
          segment.waits.push_back(wait);
        else if (auto fill = dyn_cast<linalg::FillOp>(op);
                 fill && !segment.fill && !segment.op)
          segment.fill = fill;
        else if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
                 linalgOp && !segment.op &&
                 linalg::isaContractionOpInterface(linalgOp) &&
                 linalgOp.hasPureBufferSemantics())
          segment.op = linalgOp;
        else if (auto signal = dyn_cast<braid::xfer::KernelSignalOp>(op);
                 signal && segment.op &&
                 (segment.raises.empty() ||
                  (segment.raises.front().getArrivals() ==
                       signal.getArrivals() &&
                   segment.raises.front().getArrival() == signal.getArrival())))
          segment.raises.push_back(signal);
        else
          return op.emitError()
                 << "expected a GEMM segment's flag waits, zero fill, "
                    "contraction and raises (on one arrival word), in that "
                    "order";
      }
      if (!segment.op)
        return kernel.emitError() << "a GEMM segment has no contraction";
    }

    std::string why;
    // From zero when every segment's fill is a zero fill right before its
    // contraction, accumulating when none has one.
    size_t zeroFilled = llvm::count_if(segments, [](const Segment &segment) {
      return segment.fill && zeroFillBefore(segment.op) == segment.fill;
    });
    size_t filled = llvm::count_if(
        segments, [](const Segment &segment) { return bool(segment.fill); });
    Operation *launch = nullptr;
    if (!gemmKernels) {
      why = "gemm-kernels is off";
    } else if (filled != 0 && zeroFilled != segments.size()) {
      why = "some of its contractions start from a zero fill and some do not";
    } else {
      SmallVector<linalg::LinalgOp> ops;
      for (Segment &segment : segments)
        ops.push_back(segment.op);
      auto poll = [&](OpBuilder &b, Location loc, unsigned index,
                      Value threadId) {
        IRMapping mapping;
        for (braid::xfer::KernelWaitOp wait : segments[index].waits)
          emitKernelWait(b, loc, mapping, wait, threadId);
      };
      // The segment's tiles count their arrivals; the last raises.
      auto arrive = [&](OpBuilder &b, Location loc, unsigned index,
                        Value threadId, int64_t tiles) {
        if (segments[index].raises.empty())
          return;
        IRMapping mapping;
        SmallVector<braid::xfer::KernelSignalOp> raises =
            segments[index].raises;
        emitKernelSignals(b, loc, mapping, raises, threadId, tiles);
      };
      bool waits = llvm::any_of(segments, [](const Segment &segment) {
        return !segment.waits.empty();
      });
      bool raises = llvm::any_of(segments, [](const Segment &segment) {
        return !segment.raises.empty();
      });
      launch = emitSegmentedGemmKernel(
          ops, /*fromZero=*/zeroFilled != 0, maxBlocks, allowTf32, kernel,
          waits ? GemmPoll(poll) : GemmPoll(),
          raises ? GemmArrive(arrive) : GemmArrive(), why);
    }
    if (launch) {
      describeLaunch(cast<gpu::LaunchOp>(launch), kernel);
      ++numGemmKernels;
      ++numSegmentedGemms;
      kernel.erase();
      return success();
    }
    kernel.emitRemark() << "its contractions' flag waits are one-block "
                           "polling kernels before them, not polls inside a "
                           "generated GEMM: "
                        << why;
    OpBuilder b(kernel);
    Location loc = kernel.getLoc();
    for (Segment &segment : segments) {
      if (!segment.waits.empty())
        oneThreadKernel(b, loc, "poll flags", [&](Value threadId) {
          IRMapping mapping;
          for (braid::xfer::KernelWaitOp wait : segment.waits)
            emitKernelWait(b, loc, mapping, wait, threadId);
        });
      if (segment.fill)
        segment.fill->moveBefore(kernel);
      segment.op->moveBefore(kernel);
      // Its raises by a one-block kernel after it on the stream.
      if (!segment.raises.empty())
        oneThreadKernel(b, loc, "raise flags", [&](Value threadId) {
          IRMapping mapping;
          emitKernelSignals(b, loc, mapping, segment.raises, threadId,
                            /*blocks=*/1);
        });
    }
    kernel.erase();
    return success();
  }

  /// A launch of one thread at `b`'s insertion point, named `name` in the
  /// trace, whose body `body` emits (given the thread's id).
  void oneThreadKernel(OpBuilder &b, Location loc, StringRef name,
                       llvm::function_ref<void(Value)> body) {
    Value one = index(b, loc, 1);
    auto launch =
        gpu::LaunchOp::create(b, loc, one, one, one, one, one, one, Value());
    braid::xfer::setTraceEvent(launch, name, 0, 0);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&launch.getBody().front());
    gpu::TerminatorOp terminator = gpu::TerminatorOp::create(b, loc);
    b.setInsertionPoint(terminator);
    body(launch.getThreadIds().x);
  }

  /// The generic address, as i64, of word `index` of the i32 buffer
  /// `flags`.
  Value wordAddress(OpBuilder &b, Location loc, Value flags, Value index) {
    auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, flags);
    Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, flags);
    Value element = arith::AddIOp::create(b, loc, metadata.getOffset(), index);
    Value bytes =
        arith::MulIOp::create(b, loc, element, this->index(b, loc, 4));
    Value address = arith::AddIOp::create(b, loc, base, bytes);
    return arith::IndexCastOp::create(b, loc, b.getI64Type(), address);
  }

  /// `if (threadId == 0)`, its body empty: what one thread of the block
  /// does for all of them.
  scf::IfOp ifFirstThread(OpBuilder &b, Location loc, Value threadId) {
    Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                        threadId, index(b, loc, 0));
    return scf::IfOp::create(b, loc, first, /*withElse=*/false);
  }

  /// xfer.kernel_wait: thread 0 polls the flag with acquire loads at
  /// system scope until it reaches the epoch (a wrapping comparison), then
  /// the block synchronizes, which orders every thread's later accesses
  /// after the acquire.
  void emitKernelWait(OpBuilder &b, Location loc, IRMapping &mapping,
                      braid::xfer::KernelWaitOp wait, Value threadId) {
    Value flag = wordAddress(b, loc, mapping.lookupOrDefault(wait.getFlags()),
                             mapping.lookupOrDefault(wait.getIndex()));
    Value epoch = mapping.lookupOrDefault(wait.getEpoch());
    scf::IfOp ifFirst = ifFirstThread(b, loc, threadId);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifFirst.thenBlock());
      auto poll = scf::WhileOp::create(b, loc, TypeRange{}, ValueRange{});
      b.createBlock(&poll.getBefore());
      Value seen = emitPtx(b, loc, b.getI32Type(),
                           "ld.acquire.sys.u32 $0, [$1];", "=r,l", {flag});
      Value ahead = arith::SubIOp::create(b, loc, seen, epoch);
      Value behind = arith::CmpIOp::create(
          b, loc, arith::CmpIPredicate::slt, ahead,
          arith::ConstantIntOp::create(b, loc, b.getI32Type(), 0));
      scf::ConditionOp::create(b, loc, behind, ValueRange{});
      b.createBlock(&poll.getAfter());
      scf::YieldOp::create(b, loc);
    }
    gpu::BarrierOp::create(b, loc);
  }

  /// xfer.kernel_signal, for `raises` that share an arrival word (and
  /// empties it): once the block's accesses are done (a barrier), thread 0
  /// counts the block's arrival (acquire-release at device scope: the last
  /// arrival sees every block's accesses); the last block resets the count
  /// for the next launch and raises each peer's flag with release at system
  /// scope.
  void emitKernelSignals(OpBuilder &b, Location loc, IRMapping &mapping,
                         SmallVector<braid::xfer::KernelSignalOp> &raises,
                         Value threadId, int64_t blocks) {
    gpu::BarrierOp::create(b, loc);
    scf::IfOp ifFirst = ifFirstThread(b, loc, threadId);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifFirst.thenBlock());
    braid::xfer::KernelSignalOp counted = raises.front();
    Value count =
        wordAddress(b, loc, mapping.lookupOrDefault(counted.getArrivals()),
                    mapping.lookupOrDefault(counted.getArrival()));
    Value before =
        emitPtx(b, loc, b.getI32Type(), "atom.acq_rel.gpu.add.u32 $0, [$1], 1;",
                "=r,l", {count});
    Value last = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::eq, before,
        arith::ConstantIntOp::create(b, loc, b.getI32Type(), blocks - 1));
    auto ifLast = scf::IfOp::create(b, loc, last, /*withElse=*/false);
    b.setInsertionPointToStart(ifLast.thenBlock());
    emitPtx(b, loc, Type(), "st.relaxed.gpu.u32 [$0], 0;", "l", {count});
    for (braid::xfer::KernelSignalOp signal : raises) {
      Value flag =
          wordAddress(b, loc, mapping.lookupOrDefault(signal.getFlags()),
                      mapping.lookupOrDefault(signal.getIndex()));
      Value add =
          arith::ConstantIntOp::create(b, loc, b.getI32Type(), signal.getAdd());
      emitPtx(b, loc, Type(), "red.release.sys.add.u32 [$0], $1;", "l,r",
              {flag, add});
    }
    raises.clear();
  }

  /// A linalg op in host code: cuBLASLt for contractions that qualify, a
  /// grid-stride kernel otherwise.
  LogicalResult mapHostOp(linalg::LinalgOp op) {
    Location loc = op.getLoc();
    if (!op.hasPureBufferSemantics())
      return op->emitError() << "expected a bufferized op";
    bool contraction = linalg::isaContractionOpInterface(op);
    std::string why;
    if (contraction && gemmKernels) {
      bool folded = false;
      linalg::GenericOp epilogue;
      if (Operation *launch =
              emitGemmKernel(op, allowTf32, why, folded, epilogue)) {
        describeLaunch(cast<gpu::LaunchOp>(launch), op);
        ++numGemmKernels;
        if (epilogue)
          epilogue->erase();
        op->erase();
        return success();
      }
      op->emitRemark() << "not a generated tensor-core kernel: " << why;
    }
    if (contraction && succeeded(replaceWithGemm(op, "cuBLASLt", why))) {
      ++numGemms;
      return success();
    }
    SmallVector<int64_t> ranges = op.getStaticLoopRanges();
    if (ShapedType::isDynamicShape(ranges))
      return op->emitError()
             << "the cuda target needs static shapes; this op has a dynamic "
                "iteration space";
    int64_t points = 1;
    for (auto [dim, iterator] : llvm::enumerate(op.getIteratorTypesArray()))
      if (iterator == utils::IteratorType::parallel)
        points *= ranges[dim];
    if (contraction)
      op->emitRemark() << "runs as a generated kernel, not on cuBLASLt: "
                       << why;
    if (points == 0) {
      op->erase();
      return success();
    }
    // A reduction to a few values over many elements (a tensor's largest
    // magnitude, say) is one block of 1024 threads reducing together;
    // one thread per output would leave the GPU idle.
    int64_t reduced = 1;
    for (auto [dim, iterator] : llvm::enumerate(op.getIteratorTypesArray()))
      if (iterator == utils::IteratorType::reduction)
        reduced *= ranges[dim];
    bool oneBlock =
        points <= 64 && reduced >= 8 * blockSize && hasBlockCombiner(op);
    OpBuilder b(op);
    Value one = index(b, loc, 1);
    // Sized by what each thread's loop iterates over (vectors where the op
    // is vectorized), so that no block starts with nothing to do.
    int64_t trips = threadLoopTrips(op);
    int64_t maxBlocks =
        kGridWaves * smCount * std::max<int64_t>(1, kThreadsPerSM / blockSize);
    int64_t blocks =
        oneBlock ? 1
                 : std::clamp<int64_t>((trips + blockSize - 1) / blockSize, 1,
                                       maxBlocks);
    int64_t threads = oneBlock ? 1024 : static_cast<int64_t>(blockSize);
    auto launch =
        gpu::LaunchOp::create(b, loc, index(b, loc, blocks), one, one,
                              index(b, loc, threads), one, one, Value());
    describeLaunch(launch, op);
    b.setInsertionPointToStart(&launch.getBody().front());
    gpu::TerminatorOp terminator = gpu::TerminatorOp::create(b, loc);
    b.setInsertionPoint(terminator);
    Value blockStart = arith::MulIOp::create(b, loc, launch.getBlockIds().x,
                                             launch.getBlockSize().x);
    Value threadId =
        arith::AddIOp::create(b, loc, blockStart, launch.getThreadIds().x);
    Value numThreads = arith::MulIOp::create(b, loc, launch.getGridSize().x,
                                             launch.getBlockSize().x);
    IRMapping mapping;
    if (failed(emitDeviceLoops(b, loc, mapping, op, threadId, numThreads,
                               oneBlock)))
      return failure();
    ++numKernels;
    op->erase();
    return success();
  }

  /// Whether `value`, a buffer, is only ever used by host code that keeps
  /// bookkeeping in it (loads, stores, deallocation, the runtime's calls);
  /// a function of the module it is handed to must use the argument that
  /// way too. `visiting` stops recursion through calls.
  static bool onlyHostBookkeeping(Value value,
                                  llvm::SmallPtrSetImpl<Value> &visiting) {
    if (!visiting.insert(value).second)
      return true;
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      if (inDeviceCode(user))
        return false;
      if (auto cast = dyn_cast<memref::CastOp>(user)) {
        if (!onlyHostBookkeeping(cast.getResult(), visiting))
          return false;
        continue;
      }
      if (auto call = dyn_cast<func::CallOp>(user)) {
        func::FuncOp callee = definedCallee(call);
        if (callee && !onlyHostBookkeeping(
                          callee.getArgument(use.getOperandNumber()), visiting))
          return false;
        continue;
      }
      if (!isa<memref::LoadOp, memref::StoreOp, memref::DeallocOp,
               memref::DimOp>(user))
        return false;
    }
    return true;
  }
  static bool onlyHostBookkeeping(Value value) {
    llvm::SmallPtrSet<Value, 8> visiting;
    return onlyHostBookkeeping(value, visiting);
  }

  /// Allocations that device work or the runtime uses go on the device.
  void placeAllocations(func::FuncOp function) {
    MLIRContext *context = &getContext();
    auto tokenType = gpu::AsyncTokenType::get(context);
    SmallVector<memref::AllocOp> allocs;
    function.walk([&](memref::AllocOp alloc) {
      if (!inDeviceCode(alloc) && !onlyHostBookkeeping(alloc.getResult()))
        allocs.push_back(alloc);
    });
    OpBuilder b(context);
    for (memref::AllocOp alloc : allocs) {
      Location loc = alloc.getLoc();
      b.setInsertionPoint(alloc);
      Value ready =
          gpu::WaitOp::create(b, loc, tokenType, ValueRange()).getAsyncToken();
      auto device = gpu::AllocOp::create(
          b, loc, alloc.getType(), tokenType, ValueRange{ready},
          alloc.getDynamicSizes(), alloc.getSymbolOperands(),
          /*hostShared=*/false);
      gpu::WaitOp::create(b, loc, Type(), ValueRange{device.getAsyncToken()});
      alloc.getResult().replaceAllUsesWith(device.getMemref());
      alloc.erase();
    }
  }

  /// The memory plan's arena (braid-plan-memory's host global) as device
  /// memory: the views of it that device work or the runtime uses view
  /// instead the device arena the runtime allocates once per rank and host
  /// arena (`braid_rt_device_arena`, keyed by the host global's address,
  /// so once per loaded artifact and function), one allocation for every
  /// call instead of a cudaMallocAsync per buffer and call. Views only host
  /// bookkeeping touches keep the host global's bytes.
  void placeArena(memref::GetGlobalOp arena) {
    SmallVector<memref::ViewOp> deviceViews;
    for (Operation *user : arena.getResult().getUsers())
      if (auto view = dyn_cast<memref::ViewOp>(user))
        if (!onlyHostBookkeeping(view.getResult()))
          deviceViews.push_back(view);
    if (deviceViews.empty())
      return;
    MLIRContext *context = &getContext();
    auto module = arena->getParentOfType<ModuleOp>();
    auto i64 = IntegerType::get(context, 64);
    auto callee = module.lookupSymbol<func::FuncOp>("braid_rt_device_arena");
    OpBuilder b(context);
    if (!callee) {
      b.setInsertionPointToStart(module.getBody());
      callee = func::FuncOp::create(b, module.getLoc(), "braid_rt_device_arena",
                                    b.getFunctionType({i64, i64}, {i64}));
      callee.setPrivate();
    }
    Location loc = arena.getLoc();
    b.setInsertionPointAfter(arena);
    MemRefType type = arena.getType();
    Value key = arith::IndexCastOp::create(
        b, loc, i64,
        memref::ExtractAlignedPointerAsIndexOp::create(b, loc, arena));
    Value bytes = arith::ConstantIntOp::create(
        b, loc, i64, *braid::xfer::getStaticBytes(type));
    Value address = func::CallOp::create(b, loc, callee, ValueRange{key, bytes})
                        .getResult(0);
    Value device = braid::memrefAt(b, loc, address, type);
    // Views of it are planned buffers (xfer::getArenaBytes), on the device.
    device.getDefiningOp()->setAttr(braid::xfer::kArenaAttrName,
                                    UnitAttr::get(context));
    device.getDefiningOp()->setAttr(kDeviceArenaAttrName,
                                    UnitAttr::get(context));
    for (memref::ViewOp view : deviceViews)
      view.getSourceMutable().assign(device);
  }

  /// Constants for the device, deallocations on the allocation's side, and
  /// no host access to device buffers.
  LogicalResult placeBuffers(func::FuncOp function) {
    MLIRContext *context = &getContext();
    auto tokenType = gpu::AsyncTokenType::get(context);
    OpBuilder b(context);
    // Constants (memref.get_global, host memory) that device code or the
    // runtime reads get a device copy for the function's run; the memory
    // plan's arena gets device memory of its own.
    SmallVector<memref::GetGlobalOp> globals, arenas;
    function.walk([&](memref::GetGlobalOp global) {
      if (inDeviceCode(global))
        return;
      if (global->hasAttr(braid::xfer::kArenaAttrName))
        arenas.push_back(global);
      else if (!onlyHostBookkeeping(global.getResult()))
        globals.push_back(global);
    });
    for (memref::GetGlobalOp arena : arenas)
      placeArena(arena);
    for (memref::GetGlobalOp global : globals) {
      Location loc = global.getLoc();
      if (global->getBlock() != &function.getBody().front())
        return global.emitError()
               << "the cuda target copies constants to the device at the "
                  "function's entry; this one is inside control flow";
      b.setInsertionPointAfter(global);
      Value ready =
          gpu::WaitOp::create(b, loc, tokenType, ValueRange()).getAsyncToken();
      auto device = gpu::AllocOp::create(b, loc, global.getType(), tokenType,
                                         ValueRange{ready}, ValueRange(),
                                         ValueRange(), /*hostShared=*/false);
      auto copy = gpu::MemcpyOp::create(b, loc, tokenType,
                                        ValueRange{device.getAsyncToken()},
                                        device.getMemref(), global.getResult());
      gpu::WaitOp::create(b, loc, Type(), ValueRange{copy.getAsyncToken()});
      global.getResult().replaceAllUsesExcept(device.getMemref(), copy);
      bool returned = false;
      for (OpOperand &use : device.getMemref().getUses())
        returned |= isa<func::ReturnOp>(use.getOwner());
      if (returned)
        continue; // the caller frees results
      for (Block &block : function.getBody())
        if (auto ret = dyn_cast<func::ReturnOp>(block.getTerminator())) {
          b.setInsertionPoint(ret);
          Value done = gpu::WaitOp::create(b, loc, tokenType, ValueRange())
                           .getAsyncToken();
          auto free = gpu::DeallocOp::create(
              b, loc, tokenType, ValueRange{done}, device.getMemref());
          gpu::WaitOp::create(b, loc, Type(), ValueRange{free.getAsyncToken()});
        }
    }
    SmallVector<memref::DeallocOp> deallocs;
    WalkResult untraced = function.walk([&](memref::DeallocOp dealloc) {
      Operation *allocation = commonAllocation(dealloc.getMemref());
      if (isa_and_nonnull<gpu::AllocOp>(allocation)) {
        deallocs.push_back(dealloc);
        return WalkResult::advance();
      }
      if (isa_and_nonnull<memref::AllocOp>(allocation))
        return WalkResult::advance(); // host bookkeeping
      // A buffer chosen by control flow: it could be on either side.
      dealloc.emitError() << "the cuda target cannot tell whether this "
                             "buffer is on the device or the host";
      return WalkResult::interrupt();
    });
    if (untraced.wasInterrupted())
      return failure();
    for (memref::DeallocOp dealloc : deallocs) {
      Location loc = dealloc.getLoc();
      b.setInsertionPoint(dealloc);
      Value ready =
          gpu::WaitOp::create(b, loc, tokenType, ValueRange()).getAsyncToken();
      auto free = gpu::DeallocOp::create(b, loc, tokenType, ValueRange{ready},
                                         dealloc.getMemref());
      gpu::WaitOp::create(b, loc, Type(), ValueRange{free.getAsyncToken()});
      dealloc.erase();
    }
    // Host code must not touch device buffers (it would read them before
    // the device wrote them, or fault).
    WalkResult result = function.walk([&](Operation *op) {
      if (inDeviceCode(op) || !isa<memref::LoadOp, memref::StoreOp>(op))
        return WalkResult::advance();
      Value buffer = isa<memref::LoadOp>(op)
                         ? cast<memref::LoadOp>(op).getMemRef()
                         : cast<memref::StoreOp>(op).getMemRef();
      if (isDeviceAllocation(allocationOf(buffer))) {
        op->emitError() << "host code accesses a device buffer; the cuda "
                           "target runs all compute on the GPU";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    return failure(result.wasInterrupted());
  }
};

} // namespace

Value braid::codegen::emitPtx(OpBuilder &b, Location loc, Type result,
                              StringRef text, StringRef constraints,
                              ValueRange operands) {
  std::string clobbered =
      constraints.empty() ? "~{memory}" : (constraints + ",~{memory}").str();
  auto op = LLVM::InlineAsmOp::create(
      b, loc, result ? TypeRange{result} : TypeRange{}, operands, text,
      clobbered, /*has_side_effects=*/true,
      /*is_align_stack=*/false, LLVM::TailCallKind::None,
      /*asm_dialect=*/LLVM::AsmDialectAttr(), /*operand_attrs=*/ArrayAttr());
  return result ? op.getResult(0) : Value();
}

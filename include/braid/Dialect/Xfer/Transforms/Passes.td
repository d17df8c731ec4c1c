//===- Passes.td - Xfer passes -----------------------------*- tablegen -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_DIALECT_XFER_TRANSFORMS_PASSES_TD
#define BRAID_DIALECT_XFER_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def CheckSchedule
    : InterfacePass<"braid-check-schedule", "mlir::FunctionOpInterface"> {
  let summary = "Proves a transfer schedule free of deadlocks and races";
  let description = [{
    Every rank runs the same program, so the k-th send with offset `+d`
    along an axis meets the k-th receive with offset `-d` on the peer, at
    the same program point. The pass walks each block in order and proves:

    - **matching**: every receive has its send and every send its receive
      (counts balance per grid, axis and offset), with equal byte counts;
    - **no deadlock**: a wait on a receive (or a send) comes after the
      matching send (or receive) is posted — otherwise the peer, running
      the same program, would be waiting at that wait before posting it;
    - **no race**: between a transfer and its wait, no op writes the
      transfer's source, and no op reads or writes its destination,
      deallocations included (buffers with the same allocation are assumed
      to overlap unless their static subviews are disjoint);
    - every request is waited in the block that posted it.

    A violation is an error naming the step, the ranks involved and the
    buffer; the schedules Braid generates always pass. The pass changes
    nothing.

    ```mlir
    // error: rank r waits at step 1 for the receive from rank r-1 along
    // axis 0 of @tp before the matching send is posted: deadlock
    %r = xfer.recv %b on @tp axes = [0] offset = -1 step = 1 : memref<8xf32>
    xfer.wait %r : !xfer.request
    %s = xfer.send %a on @tp axes = [0] offset = 1 step = 1 : memref<8xf32>
    xfer.wait %s : !xfer.request
    ```
  }];
}

def OutlineKernels : Pass<"braid-outline-kernels", "mlir::ModuleOp"> {
  let summary = "Moves each computation on buffers into a function of its own";
  let description = [{
    Every linalg op on buffers, and every loop nest marked `braid.kernel`
    (a chain `braid-fuse-memory-bound` fused), becomes a call to a private
    function holding it (`<function>_kernel_<n>`), taking the buffers and
    values it uses.
    The function that remains is the program's schedule: kernel calls,
    transfers and waits in one straight block, as a GPU program's host code
    is. Lowering loops then happens in many small functions instead of one
    huge one, which keeps the upstream passes that are super-linear in the
    size of a function (SCF to CF) linear in the size of the program; LLVM
    may inline the kernels back.

    Kernels are deduplicated: computations that are the same (the same ops,
    attributes and constants on the same operand types, locations aside)
    share one function, wherever in the module they are. A program of
    identical layers carries the kernels of one layer, called once per
    layer, and LLVM optimizes and generates each once.

    ```mlir
    linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x8xf32>)
                  outs(%c : memref<8x8xf32>)
    // becomes
    call @main_kernel_3(%a, %b, %c) : (memref<8x16xf32>, ...) -> ()
    ```
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
  let statistics = [
    Statistic<"numKernels", "kernels", "Number of kernel functions made">,
    Statistic<"numSharedCalls", "shared-calls",
              "Number of computations that call a kernel made before">
  ];
}

#endif // BRAID_DIALECT_XFER_TRANSFORMS_PASSES_TD

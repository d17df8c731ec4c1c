//===- Transport.cpp - How a schedule's transfers travel --------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "Transport.h"

#include "Decompositions.h"

using namespace mlir;
using namespace braid::dist;
using namespace braid::dist::overlap;

bool overlap::sharesMemory(CollectiveOpInterface op, std::string &why) {
  shard::GridOp grid = lookupGrid(op, op.getGridAttr());
  auto topology =
      grid ? grid->getAttrOfType<ArrayAttr>(DistDialect::getTopologyAttrName())
           : ArrayAttr();
  for (int16_t axis : op.getAxes()) {
    if (!topology || axis >= static_cast<int64_t>(topology.size()))
      continue;
    auto link = dyn_cast<LinkAttr>(topology[axis]);
    if (link && link.getLinkClass() == LinkClass::Network) {
      why = "grid axis " + std::to_string(axis) +
            " is a network link (dist.topology): the group spans nodes and "
            "shares no memory";
      return false;
    }
  }
  return true;
}

std::optional<LinkFigures> overlap::inKernelLink(CollectiveOpInterface op,
                                                 const Context &context,
                                                 std::string &why) {
  const OverlapOptions &options = context.options;
  if (options.fuseCollectives == braid::FuseCollectivesMode::Off) {
    why = "fuse-collectives=off";
    return std::nullopt;
  }
  if (options.comm == braid::CommMode::TwoSided) {
    why = isa<AllGatherOp>(op.getOperation())
              ? "the kernel stores into the peers' symmetric memory, and "
                "comm=two-sided"
              : "the kernel reads the partials from symmetric memory, and "
                "comm=two-sided";
    return std::nullopt;
  }
  if (!sharesMemory(op, why))
    return std::nullopt;
  const TargetDescription &target = context.model.getTarget();
  if (options.comm == braid::CommMode::Auto && !context.forcesInKernel() &&
      !target.oneSidedLink) {
    why = "preset '" + target.name +
          "' has no measured one-sided link (comm=symmetric or "
          "fuse-collectives=force use one)";
    return std::nullopt;
  }
  std::string reason;
  if (failed(matchDirectExchange(op, reason))) {
    why = "no symmetric form: " + reason;
    return std::nullopt;
  }
  return target.oneSidedLink ? *target.oneSidedLink : context.link(op);
}

bool overlap::wholeSymmetric(CollectiveOpInterface op, const Context &context,
                             std::string &why) {
  if (context.options.comm != braid::CommMode::Symmetric)
    return false;
  if (!sharesMemory(op, why))
    return false;
  std::string reason;
  if (failed(matchDirectExchange(op, reason))) {
    why = "no symmetric form: " + reason;
    return false;
  }
  int64_t peers = groupSizeOf(op) - 1;
  if (isa<ShiftOp, ShiftStartOp>(op.getOperation()))
    why = "comm=symmetric; a put to the peer";
  else
    why = "comm=symmetric; direct puts to the " + std::to_string(peers) +
          (peers == 1 ? " peer" : " peers");
  return true;
}

void overlap::noteTransport(Record &record, llvm::raw_ostream &remark,
                            bool symmetric, StringRef why) {
  record.transport = symmetric ? "symmetric" : "two-sided";
  record.reason += ("; transport " + record.transport + ": " + why).str();
  remark << "; transfers " << record.transport << " (" << why << ")";
}

void overlap::noteWholeTransport(CollectiveOpInterface op,
                                 const Context &context, Record &record,
                                 llvm::raw_ostream &remark) {
  std::string why;
  bool symmetric = wholeSymmetric(op, context, why);
  if (!why.empty())
    noteTransport(record, remark, symmetric, why);
}

bool overlap::chooseSymmetric(CollectiveOpInterface op, const Candidate &chosen,
                              const Context &context, std::string &why) {
  switch (context.options.comm) {
  case braid::CommMode::TwoSided:
    why = "comm=two-sided";
    return false;
  case braid::CommMode::Symmetric:
    if (!sharesMemory(op, why))
      return false;
    why = "comm=symmetric";
    return true;
  case braid::CommMode::Auto:
    if (!sharesMemory(op, why))
      return false;
    break;
  }
  const TargetDescription &target = context.model.getTarget();
  if (!target.oneSidedLink) {
    why = "preset '" + target.name +
          "' has no measured one-sided link (comm=symmetric forces them)";
    return false;
  }
  // Each ring step moves a piece: the steps' latencies and the bytes
  // (about the collective's larger side) at each transport's bandwidth.
  double bytes = std::max(tensorBytes(op.getInput()),
                          tensorBytes(op.getCollectiveResult()));
  int64_t steps = std::max<int64_t>(chosen.chunks, 1);
  LinkFigures twoSided = context.link(op);
  const LinkFigures &oneSided = *target.oneSidedLink;
  double a = steps * twoSided.latency + bytes / twoSided.bandwidth;
  double b = steps * oneSided.latency + bytes / oneSided.bandwidth;
  if (b < a) {
    why =
        "predicted " + us(b) + " of transfers against " + us(a) + " two-sided";
    return true;
  }
  why = "one-sided predicted no faster (" + us(b) + " against " + us(a) + ")";
  return false;
}

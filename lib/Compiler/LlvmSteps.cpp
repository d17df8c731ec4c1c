//===- LlvmSteps.cpp - From LLVM IR to objects ------------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "LlvmSteps.h"

#include "braid/Dialect/Xfer/Transforms/Schedule.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/StandardInstrumentations.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"
#include "llvm/Transforms/Utils/Cloning.h"

using namespace mlir;

namespace braid::compiler {

std::unique_ptr<llvm::TargetMachine>
createTargetMachine(StringRef cpu, llvm::CodeGenOptLevel level,
                    std::string &error) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  const llvm::Target *llvmTarget =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!llvmTarget)
    return nullptr;
  std::string cpuName =
      cpu == "native" ? llvm::sys::getHostCPUName().str() : cpu.str();
  // An unknown CPU would be a warning and then, for some names, a fatal
  // error in the backend: refuse it first.
  std::unique_ptr<llvm::MCSubtargetInfo> subtargets(
      llvmTarget->createMCSubtargetInfo(triple, "", ""));
  if (cpu != "native" &&
      (!subtargets || !subtargets->isCPUStringValid(cpuName))) {
    error = "unknown CPU '" + cpuName + "' for " + triple.str() +
            " (`llc -mcpu=help` lists the names)";
    return nullptr;
  }
  std::string features;
  if (cpu == "native") {
    llvm::SubtargetFeatures subtarget;
    for (auto &feature : llvm::sys::getHostCPUFeatures())
      subtarget.AddFeature(feature.first(), feature.second);
    features = subtarget.getString();
  }
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> machine(llvmTarget->createTargetMachine(
      triple, cpuName, features, options, llvm::Reloc::PIC_,
      /*CM=*/std::nullopt, level));
  if (!machine)
    error = "cannot create a target machine for " + cpuName;
  return machine;
}

/// LLVM's default pipeline at `optLevel` (0 to 3), as MLIR's
/// makeOptimizingTransformer builds it, but with optnone honoured: the new
/// pass manager skips optnone functions only through an instrumentation,
/// which that helper does not register, so schedules would be optimized
/// anyway (SLP vectorization of a whole model's schedule took most of a
/// cuda compile).
void optimizeModule(llvm::Module &module, int64_t optLevel,
                    llvm::TargetMachine *machine) {
  llvm::LoopAnalysisManager loops;
  llvm::FunctionAnalysisManager functions;
  llvm::CGSCCAnalysisManager sccs;
  llvm::ModuleAnalysisManager modules;
  llvm::PassInstrumentationCallbacks callbacks;
  llvm::OptNoneInstrumentation optNone(/*DebugLogging=*/false);
  optNone.registerCallbacks(callbacks);
  // Called-value propagation resolves indirect calls, which generated code
  // has none of; its solver walks every value of the module, optnone
  // schedules included, and took half of the optimization of an 80-layer
  // program (the entry's hundreds of weight arguments per layer call).
  callbacks.registerShouldRunOptionalPassCallback(
      [](llvm::StringRef pass, llvm::Any) {
        return pass != "CalledValuePropagationPass";
      });
  llvm::PipelineTuningOptions tuning;
  tuning.LoopUnrolling = true;
  tuning.LoopInterleaving = true;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  llvm::PassBuilder builder(machine, tuning, std::nullopt, &callbacks);
  builder.registerModuleAnalyses(modules);
  builder.registerCGSCCAnalyses(sccs);
  builder.registerFunctionAnalyses(functions);
  builder.registerLoopAnalyses(loops);
  builder.crossRegisterProxies(loops, functions, sccs, modules);
  const llvm::OptimizationLevel levels[] = {
      llvm::OptimizationLevel::O0, llvm::OptimizationLevel::O1,
      llvm::OptimizationLevel::O2, llvm::OptimizationLevel::O3};
  llvm::ModulePassManager passes =
      optLevel == 0
          ? builder.buildO0DefaultPipeline(llvm::OptimizationLevel::O0)
          : builder.buildPerModuleDefaultPipeline(levels[optLevel]);
  passes.run(module, modules);
}

/// Writes `module` as an object file to `path`.
LogicalResult emitObject(llvm::Module &module, llvm::TargetMachine &machine,
                         StringRef path, std::string &error) {
  std::error_code ec;
  llvm::ToolOutputFile object(path, ec, llvm::sys::fs::OF_None);
  if (ec) {
    error = "cannot write " + path.str() + ": " + ec.message();
    return failure();
  }
  llvm::legacy::PassManager codegen;
  if (machine.addPassesToEmitFile(codegen, object.os(), nullptr,
                                  llvm::CodeGenFileType::ObjectFile)) {
    error = "the target cannot emit object files";
    return failure();
  }
  codegen.run(module);
  object.keep();
  return success();
}

/// A failed assertion of the program (upstream lowers `cf.assert` to
/// puts(message) and abort()) becomes braid_rt_assert_failed(message): the
/// runtime's fatal path, which names the rank, ends every rank of the job
/// and exits with status 1, where abort() raised SIGABRT.
void reportFailedAssertions(llvm::Module &module) {
  llvm::Function *abortFunction = module.getFunction("abort");
  if (!abortFunction)
    return;
  llvm::LLVMContext &context = module.getContext();
  llvm::PointerType *pointer = llvm::PointerType::getUnqual(context);
  llvm::FunctionCallee failed = module.getOrInsertFunction(
      "braid_rt_assert_failed",
      llvm::FunctionType::get(llvm::Type::getVoidTy(context), {pointer},
                              /*isVarArg=*/false));
  if (auto *declared = llvm::dyn_cast<llvm::Function>(failed.getCallee()))
    declared->setDoesNotReturn();
  SmallVector<llvm::CallInst *> aborts;
  for (llvm::User *user : abortFunction->users())
    if (auto *call = llvm::dyn_cast<llvm::CallInst>(user))
      if (call->getCalledFunction() == abortFunction)
        aborts.push_back(call);
  for (llvm::CallInst *call : aborts) {
    llvm::Value *message = llvm::ConstantPointerNull::get(pointer);
    if (auto *print =
            llvm::dyn_cast_or_null<llvm::CallInst>(call->getPrevNode())) {
      llvm::Function *callee = print->getCalledFunction();
      if (callee && callee->getName() == "puts" && print->arg_size() == 1 &&
          print->use_empty()) {
        message = print->getArgOperand(0);
        print->eraseFromParent();
      }
    }
    llvm::CallInst *report =
        llvm::CallInst::Create(failed, {message}, "", call->getIterator());
    report->setDoesNotReturn();
    call->eraseFromParent();
  }
}

/// The cpu target's kernels on the rank's threads: each call of a kernel's
/// tile-range companion (`braid.tiles`, from braid-tile-kernels) over
/// [0, count) becomes braid_rt_parallel_for(thunk, context, count), where
/// the context holds the call's other arguments, on the caller's stack, and
/// the thunk unpacks them and calls the companion for its range.
void addTileThreads(llvm::Module &module, const llvm::StringSet<> &tiles) {
  llvm::LLVMContext &context = module.getContext();
  llvm::Type *i64 = llvm::Type::getInt64Ty(context);
  llvm::Type *ptr = llvm::PointerType::getUnqual(context);
  llvm::FunctionCallee parallel = module.getOrInsertFunction(
      "braid_rt_parallel_for",
      llvm::FunctionType::get(llvm::Type::getVoidTy(context), {ptr, ptr, i64},
                              /*isVarArg=*/false));
  for (const auto &entry : tiles) {
    llvm::Function *range = module.getFunction(entry.getKey());
    if (!range || range->isDeclaration() || range->arg_size() < 2)
      continue;
    SmallVector<llvm::Type *> fields;
    for (llvm::Argument &arg : llvm::drop_begin(range->args(), 2))
      fields.push_back(arg.getType());
    llvm::StructType *packed = llvm::StructType::get(context, fields);
    auto *thunk = llvm::Function::Create(
        llvm::FunctionType::get(llvm::Type::getVoidTy(context), {ptr, i64, i64},
                                /*isVarArg=*/false),
        llvm::GlobalValue::InternalLinkage, range->getName() + ".thunk",
        &module);
    {
      llvm::IRBuilder<> b(llvm::BasicBlock::Create(context, "", thunk));
      SmallVector<llvm::Value *> args = {thunk->getArg(1), thunk->getArg(2)};
      for (auto [i, type] : llvm::enumerate(fields))
        args.push_back(
            b.CreateLoad(type, b.CreateStructGEP(packed, thunk->getArg(0), i)));
      b.CreateCall(range, args);
      b.CreateRetVoid();
    }
    // The kernels' calls, over [0, count).
    auto fromZero = [&](llvm::User *user) -> llvm::CallInst * {
      auto *call = dyn_cast<llvm::CallInst>(user);
      if (!call || call->getCalledFunction() != range)
        return nullptr;
      auto *begin = dyn_cast<llvm::ConstantInt>(call->getArgOperand(0));
      return begin && begin->isZero() ? call : nullptr;
    };
    SmallVector<llvm::CallInst *> calls;
    for (llvm::User *user : range->users())
      if (llvm::CallInst *call = fromZero(user))
        calls.push_back(call);
    for (llvm::CallInst *call : calls) {
      llvm::Function *caller = call->getFunction();
      llvm::IRBuilder<> b(&caller->getEntryBlock(),
                          caller->getEntryBlock().begin());
      llvm::AllocaInst *slot = b.CreateAlloca(packed);
      b.SetInsertPoint(call);
      for (unsigned i = 0; i < fields.size(); ++i)
        b.CreateStore(call->getArgOperand(i + 2),
                      b.CreateStructGEP(packed, slot, i));
      b.CreateCall(parallel, {thunk, slot, call->getArgOperand(1)});
      call->eraseFromParent();
    }
  }
}

/// The cpu target's wider code paths: with --cpu=generic, every function
/// holding vector code (the kernels braid-vectorize-kernels made)
/// gets clones for x86-64-v3 (AVX2, FMA, F16C: native f16 conversions) and
/// x86-64-v4 (AVX-512), and its name a dispatcher that calls the widest
/// clone braid_rt_cpu_level() allows. The baseline stays for every other
/// x86-64. Called before optimization, so that each clone is vectorized and
/// generated for its own CPU (LLVM reads the "target-cpu" attribute).
void addCpuDispatch(llvm::Module &module) {
  auto hasVectors = [](const llvm::Function &function) {
    for (const llvm::Instruction &instruction : llvm::instructions(function))
      if (instruction.getType()->isVectorTy())
        return true;
    return false;
  };
  SmallVector<llvm::Function *> kernels;
  for (llvm::Function &function : module.functions())
    if (!function.isDeclaration() && !function.isVarArg() &&
        hasVectors(function))
      kernels.push_back(&function);
  if (kernels.empty())
    return;
  llvm::LLVMContext &context = module.getContext();
  llvm::Type *i64 = llvm::Type::getInt64Ty(context);
  llvm::FunctionCallee level = module.getOrInsertFunction(
      "braid_rt_cpu_level", llvm::FunctionType::get(i64, /*isVarArg=*/false));
  if (auto *declaration = dyn_cast<llvm::Function>(level.getCallee())) {
    declaration->setDoesNotThrow();
    declaration->setOnlyAccessesInaccessibleMemory();
    declaration->setWillReturn();
  }
  // Widest first: level 2 takes v4, level 1 v3, 0 the baseline.
  const std::pair<StringRef, int64_t> paths[] = {{"x86-64-v4", 2},
                                                 {"x86-64-v3", 1}};
  for (llvm::Function *kernel : kernels) {
    std::string name = kernel->getName().str();
    SmallVector<std::pair<llvm::Function *, int64_t>> clones;
    for (auto [cpu, required] : paths) {
      llvm::ValueToValueMapTy map;
      llvm::Function *clone = llvm::CloneFunction(kernel, map);
      clone->setName(name + "." + cpu.str());
      clone->addFnAttr("target-cpu", cpu);
      if (required == 2) {
        clone->addFnAttr("prefer-vector-width", "512");
        clone->addFnAttr("min-legal-vector-width", "512");
      }
      clone->removeFnAttr("target-features");
      clone->setLinkage(llvm::GlobalValue::InternalLinkage);
      clones.push_back({clone, required});
    }
    // The original becomes the baseline clone; a new function of its name
    // and signature dispatches.
    kernel->setName(name + ".generic");
    auto *dispatch = llvm::Function::Create(
        kernel->getFunctionType(), kernel->getLinkage(), name, &module);
    dispatch->copyAttributesFrom(kernel);
    kernel->replaceAllUsesWith(dispatch);
    kernel->setLinkage(llvm::GlobalValue::InternalLinkage);
    SmallVector<llvm::Value *> args;
    for (llvm::Argument &arg : dispatch->args())
      args.push_back(&arg);
    llvm::BasicBlock *entry = llvm::BasicBlock::Create(context, "", dispatch);
    llvm::IRBuilder<> b(entry);
    llvm::Value *have = b.CreateCall(level);
    auto call = [&](llvm::Function *callee) {
      llvm::CallInst *result = b.CreateCall(callee, args);
      result->setTailCall();
      if (callee->getReturnType()->isVoidTy())
        b.CreateRetVoid();
      else
        b.CreateRet(result);
    };
    for (auto [clone, required] : clones) {
      llvm::BasicBlock *take = llvm::BasicBlock::Create(context, "", dispatch);
      llvm::BasicBlock *next = llvm::BasicBlock::Create(context, "", dispatch);
      b.CreateCondBr(b.CreateICmpSGE(have, b.getInt64(required)), take, next);
      b.SetInsertPoint(take);
      call(clone);
      b.SetInsertPoint(next);
    }
    call(kernel);
  }
}

/// Moves the definitions of the functions named `schedules` out of `module`
/// into a module of their own, in `context`, so that they can be generated
/// apart (another thread, another optimization level) and linked back. The
/// two parts refer to each other's symbols, so every local symbol becomes
/// an external one of hidden visibility: still not exported from the
/// library. Global variables stay in `module`. Null when `module` defines
/// none of `schedules`.
std::unique_ptr<llvm::Module> splitSchedules(llvm::Module &module,
                                             const llvm::StringSet<> &schedules,
                                             llvm::LLVMContext &context) {
  auto isSchedule = [&](const llvm::GlobalValue *value) {
    return isa<llvm::Function>(value) && !value->isDeclaration() &&
           schedules.contains(value->getName());
  };
  if (llvm::none_of(module.functions(), [&](const llvm::Function &function) {
        return isSchedule(&function);
      }))
    return nullptr;
  for (llvm::GlobalValue &value : module.global_values()) {
    if (!value.hasLocalLinkage())
      continue;
    if (!value.hasName())
      value.setName("braid.local");
    value.setLinkage(llvm::GlobalValue::ExternalLinkage);
    value.setVisibility(llvm::GlobalValue::HiddenVisibility);
  }
  llvm::ValueToValueMapTy map;
  std::unique_ptr<llvm::Module> part =
      llvm::CloneModule(module, map, isSchedule);
  // Declarations of LLVM's special arrays (constructors, llvm.used) are not
  // valid; their definitions stay with `module`.
  for (llvm::GlobalVariable &global :
       llvm::make_early_inc_range(part->globals()))
    if (global.isDeclaration() && global.getName().starts_with("llvm."))
      global.eraseFromParent();
  for (llvm::Function &function : module.functions())
    if (schedules.contains(function.getName()) && !function.isDeclaration())
      function.deleteBody();
  // Into `context`, through bitcode: a context is one thread's.
  SmallString<0> bitcode;
  llvm::raw_svector_ostream os(bitcode);
  llvm::WriteBitcodeToFile(*part, os);
  part.reset();
  llvm::Expected<std::unique_ptr<llvm::Module>> moved = llvm::parseBitcodeFile(
      llvm::MemoryBufferRef(StringRef(bitcode.data(), bitcode.size()),
                            "braid-schedules"),
      context);
  if (!moved) {
    llvm::consumeError(moved.takeError());
    return nullptr;
  }
  return std::move(*moved);
}

} // namespace braid::compiler

/*===- entry_jit.c - A stand-in for a program with PTX kernels -------------===*
 *
 * Part of Braid.
 *
 *===----------------------------------------------------------------------===*
 *
 * What a program compiled with gpu-format=isa does: its kernels are PTX,
 * which a global constructor hands to mgpuModuleLoadJIT (optimization level
 * 3) when braid-exec-cuda loads the program, as gpu-to-llvm's code does;
 * braid_entry looks a kernel up. With ENTRY_JIT_BROKEN set, the "PTX" is
 * not PTX, so that the load fails with the JIT's log. No arguments, no
 * results, one rank (entry_jit.manifest).
 *
 *===----------------------------------------------------------------------===*/

#include <stdlib.h>

void *mgpuModuleLoadJIT(void *data, int optLevel);
void *mgpuModuleGetFunction(void *module, const char *name);

static char ptx[] = ".version 7.0\n"
                    ".target sm_80\n"
                    ".address_size 64\n"
                    "\n"
                    ".visible .entry braid_jit_probe()\n"
                    "{\n"
                    "  ret;\n"
                    "}\n";

static char notPtx[] = "not PTX";

static void *module;

__attribute__((constructor)) static void load(void) {
  module = mgpuModuleLoadJIT(getenv("ENTRY_JIT_BROKEN") ? notPtx : ptx, 3);
}

void braid_entry(void **argv) {
  (void)argv;
  mgpuModuleGetFunction(module, "braid_jit_probe");
}

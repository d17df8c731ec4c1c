/*===- braid-capi-test.c - Exercises Braid's C API ----------------*- C -*-===*\
|*                                                                            *|
|* Part of Braid.                                                             *|
|*                                                                            *|
|* braid-capi-test pipeline|errors|crash|run [ARTIFACT-PATH]                  *|
|* braid-capi-test report-pipeline|report-compile FILE OPTIONS               *|
|*                                                                            *|
|* pipeline: registers dialects on an MlirContext, runs Braid's pipeline on  *|
|*           a module to the dist stage and prints it and the report. *|
|* errors:   bad options, bad input and bad arguments (null modules and      *|
|*           strings) arrive as diagnostics; nothing crashes.                 *|
|* crash:    compiler crashes forced by the test-only BRAID_CAPI_TEST_CRASH  *|
|*           are failures with a diagnostic; the process lives on.           *|
|* run:      compiles an all-gather matmul from source to ARTIFACT-PATH, runs *|
|*           it on 2 ranks with buffers from here and compares every result   *|
|*           with a reference computed here; bad arguments to the artifact    *|
|*           functions (null pointers, indices out of range, rank counts) are *|
|*           errors, not crashes.                                             *|
|* report-pipeline: braidRunPipeline on FILE with OPTIONS (to the dist       *|
|*           stage); prints the JSON report, or the errors.                  *|
|* report-compile: braidCompileSource of FILE with OPTIONS; prints the JSON  *|
|*           report, or the errors (options tests compare entry points).     *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#include "braid-c/Braid.h"

#include "mlir-c/Diagnostics.h"
#include "mlir-c/IR.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An all-gather of row shards of x feeding a matmul with replicated w, in
 * upstream shard's SPMD form: rank r holds rows [4r, 4r+4) of an 8x16 x. */
static const char *program =
    "shard.grid @g(shape = 2)\n"
    "func.func @main(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>)\n"
    "    -> tensor<8x8xf32> {\n"
    "  %all = shard.all_gather %x on @g grid_axes = [0] gather_axis = 0\n"
    "      : tensor<4x16xf32> -> tensor<8x16xf32>\n"
    "  %zero = arith.constant 0.0 : f32\n"
    "  %empty = tensor.empty() : tensor<8x8xf32>\n"
    "  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<8x8xf32>)\n"
    "      -> tensor<8x8xf32>\n"
    "  %y = linalg.matmul ins(%all, %w : tensor<8x16xf32>, tensor<16x8xf32>)\n"
    "      outs(%init : tensor<8x8xf32>) -> tensor<8x8xf32>\n"
    "  return %y : tensor<8x8xf32>\n"
    "}\n";

static void printText(MlirStringRef text, void *userData) {
  fprintf((FILE *)userData, "%.*s", (int)text.length, text.data);
}

static void printLine(MlirStringRef text, void *userData) {
  fprintf((FILE *)userData, "%.*s\n", (int)text.length, text.data);
}

static MlirLogicalResult printDiagnostic(MlirDiagnostic diagnostic,
                                         void *userData) {
  (void)userData;
  fprintf(stdout, "diagnostic: ");
  mlirLocationPrint(mlirDiagnosticGetLocation(diagnostic), printText, stdout);
  fprintf(stdout, ": ");
  mlirDiagnosticPrint(diagnostic, printText, stdout);
  fprintf(stdout, "\n");
  return mlirLogicalResultSuccess();
}

static MlirContext createContext(void) {
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  braidRegisterCompilerDialects(registry);
  MlirContext context = mlirContextCreateWithRegistry(registry, false);
  mlirDialectRegistryDestroy(registry);
  braidRegisterPasses();
  mlirContextAttachDiagnosticHandler(context, printDiagnostic, NULL, NULL);
  return context;
}

static int testPipeline(void) {
  MlirContext context = createContext();
  MlirModule module =
      mlirModuleCreateParse(context, mlirStringRefCreateFromCString(program));
  if (mlirModuleIsNull(module)) {
    fprintf(stderr, "parse failed\n");
    return 1;
  }
  BraidCallbacks callbacks = {NULL, printLine, NULL, stdout};
  printf("report:\n");
  MlirLogicalResult result = braidRunPipeline(
      module, mlirStringRefCreateFromCString("overlap=force stop-after=dist"),
      &callbacks);
  if (mlirLogicalResultIsFailure(result)) {
    fprintf(stderr, "pipeline failed\n");
    return 1;
  }
  printf("module:\n");
  mlirOperationPrint(mlirModuleGetOperation(module), printText, stdout);
  printf("\n");
  mlirModuleDestroy(module);
  mlirContextDestroy(context);
  printf("version: %s\n", braidGetVersion());
  return 0;
}

static int testErrors(void) {
  MlirContext context = createContext();
  MlirModule module =
      mlirModuleCreateParse(context, mlirStringRefCreateFromCString(program));
  BraidCallbacks none = {NULL, NULL, NULL, NULL};
  /* A misspelt pipeline option is an error on the module, not a crash. */
  if (mlirLogicalResultIsSuccess(braidRunPipeline(
          module, mlirStringRefCreateFromCString("overlap=sometimes"), &none)))
    return 1;
  if (mlirLogicalResultIsSuccess(
          braidCompileModule(module, mlirStringRefCreateFromCString("emit=asm"),
                             mlirStringRefCreateFromCString(""), &none)))
    return 1;
  mlirModuleDestroy(module);
  mlirContextDestroy(context);

  /* Source with an error: the diagnostic callback gets it, located. */
  BraidCallbacks callbacks = {NULL, NULL, printLine, stdout};
  const char *bad =
      "shard.grid @g(shape = 3)\n"
      "func.func @main(%x: tensor<4x16xf32>) -> tensor<8x16xf32> {\n"
      "  %all = shard.all_gather %x on @g grid_axes = [0] gather_axis = 0\n"
      "      : tensor<4x16xf32> -> tensor<8x16xf32>\n"
      "  return %all : tensor<8x16xf32>\n"
      "}\n";
  if (mlirLogicalResultIsSuccess(
          braidCompileSource(mlirStringRefCreateFromCString(bad),
                             mlirStringRefCreateFromCString("bad.mlir"),
                             mlirStringRefCreateFromCString("emit=dist"),
                             mlirStringRefCreateFromCString(""), &callbacks)))
    return 1;
  if (mlirLogicalResultIsSuccess(
          braidCompileSource(mlirStringRefCreateFromCString(program),
                             mlirStringRefCreateFromCString("good.mlir"),
                             mlirStringRefCreateFromCString("overlap=maybe"),
                             mlirStringRefCreateFromCString(""), &callbacks)))
    return 1;
  /* A missing artifact. */
  if (braidArtifactLoad(mlirStringRefCreateFromCString("/nonexistent/a.so"),
                        &callbacks))
    return 1;

  /* Null modules and strings whose data is null but whose length is not. */
  MlirModule nullModule = {NULL};
  MlirStringRef empty = mlirStringRefCreateFromCString("");
  MlirStringRef dangling = {NULL, 8};
  if (mlirLogicalResultIsSuccess(
          braidRunPipeline(nullModule, empty, &callbacks)) ||
      mlirLogicalResultIsSuccess(
          braidCompileModule(nullModule, empty, empty, &callbacks)) ||
      mlirLogicalResultIsSuccess(
          braidCompileSource(dangling, empty, empty, empty, &callbacks)) ||
      mlirLogicalResultIsSuccess(
          braidCompileSource(mlirStringRefCreateFromCString(program), empty,
                             dangling, empty, &callbacks)) ||
      braidArtifactLoad(dangling, &callbacks))
    return 1;
  /* Without callbacks: still a failure, not a crash. */
  if (mlirLogicalResultIsSuccess(braidRunPipeline(nullModule, empty, NULL)))
    return 1;
  printf("errors: ok\n");
  return 0;
}

/* A compiler crash inside the compiling entry points (forced by their
 * test-only hook, BRAID_CAPI_TEST_CRASH) is a failure with one diagnostic:
 * this process survives each and compiles again afterwards. */
static int testCrash(void) {
  const char *kinds[] = {"segv", "fpe", "abort", "fatal"};
  BraidCallbacks callbacks = {NULL, NULL, printLine, stdout};
  MlirStringRef dist = mlirStringRefCreateFromCString("emit=dist");
  MlirStringRef none = mlirStringRefCreateFromCString("");
  for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); ++i) {
    setenv("BRAID_CAPI_TEST_CRASH", kinds[i], 1);
    if (mlirLogicalResultIsSuccess(braidCompileSource(
            mlirStringRefCreateFromCString(program),
            mlirStringRefCreateFromCString("crash.mlir"), dist, none,
            &callbacks)))
      return 1;
  }
  /* On a module of the caller's, in a context with threads. */
  setenv("BRAID_CAPI_TEST_CRASH", "segv", 1);
  MlirContext context = createContext();
  MlirModule module =
      mlirModuleCreateParse(context, mlirStringRefCreateFromCString(program));
  if (mlirLogicalResultIsSuccess(braidRunPipeline(
          module, mlirStringRefCreateFromCString("stop-after=dist"),
          &callbacks)) ||
      mlirLogicalResultIsSuccess(
          braidCompileModule(module, dist, none, &callbacks)))
    return 1;
  unsetenv("BRAID_CAPI_TEST_CRASH");
  BraidCallbacks quiet = {NULL, NULL, NULL, NULL};
  if (mlirLogicalResultIsFailure(braidCompileSource(
          mlirStringRefCreateFromCString(program),
          mlirStringRefCreateFromCString("after.mlir"), dist, none, &quiet)) ||
      mlirLogicalResultIsFailure(braidRunPipeline(
          module, mlirStringRefCreateFromCString("stop-after=dist"), &quiet)))
    return 1;
  mlirModuleDestroy(module);
  mlirContextDestroy(context);
  printf("crash: ok\n");
  return 0;
}

/* Bad arguments to the artifact functions: each one fails with a
 * diagnostic (or a null/zero answer) and nothing runs. Returns 1 when one
 * of them succeeds. */
static int testBadRunArguments(BraidArtifact artifact,
                               const void *const *inputs, void *const *outputs,
                               const BraidCallbacks *callbacks) {
  MlirStringRef none = mlirStringRefCreateFromCString("");
  /* Getters: a null artifact and indices out of range. */
  if (braidArtifactGetNumRanks(NULL) != 0 ||
      braidArtifactGetNumArguments(NULL) != 0 ||
      braidArtifactGetNumResults(NULL) != 0 ||
      braidArtifactGetArgumentType(NULL, 0).dtype ||
      braidArtifactGetArgumentType(artifact, -1).dtype ||
      braidArtifactGetArgumentType(artifact, 2).dtype ||
      braidArtifactGetResultType(artifact, 1).dtype ||
      braidArtifactGetResultType(artifact, INTPTR_MAX).dtype)
    return 1;
  printf("bad getters: ok\n");
  braidArtifactDestroy(NULL);

  /* Ranks that are not the program's: zero, negative, huge. */
  int64_t badRanks[] = {0, -1, INT64_MAX};
  for (size_t i = 0; i < sizeof(badRanks) / sizeof(badRanks[0]); ++i)
    if (mlirLogicalResultIsSuccess(braidArtifactRun(
            artifact, badRanks[i], inputs, outputs, none, callbacks)))
      return 1;

  /* Null artifact, buffer arrays, buffers and option text. */
  const void *missingInput[4] = {inputs[0], NULL, inputs[2], inputs[3]};
  void *missingOutput[2] = {outputs[0], NULL};
  MlirStringRef dangling = {NULL, 4};
  if (mlirLogicalResultIsSuccess(
          braidArtifactRun(NULL, 2, inputs, outputs, none, callbacks)) ||
      mlirLogicalResultIsSuccess(
          braidArtifactRun(artifact, 2, NULL, outputs, none, callbacks)) ||
      mlirLogicalResultIsSuccess(
          braidArtifactRun(artifact, 2, inputs, NULL, none, callbacks)) ||
      mlirLogicalResultIsSuccess(braidArtifactRun(artifact, 2, missingInput,
                                                  outputs, none, callbacks)) ||
      mlirLogicalResultIsSuccess(braidArtifactRun(
          artifact, 2, inputs, missingOutput, none, callbacks)) ||
      mlirLogicalResultIsSuccess(
          braidArtifactRun(artifact, 2, inputs, outputs, dangling, callbacks)))
    return 1;
  printf("bad run arguments: ok\n");
  return 0;
}

static int testRun(const char *path) {
  BraidCallbacks callbacks = {printText, NULL, printLine, stdout};
  printf("xfer:\n");
  if (mlirLogicalResultIsFailure(braidCompileSource(
          mlirStringRefCreateFromCString(program),
          mlirStringRefCreateFromCString("program.mlir"),
          mlirStringRefCreateFromCString("emit=xfer overlap=force"),
          mlirStringRefCreateFromCString(""), &callbacks)))
    return 1;
  if (mlirLogicalResultIsFailure(braidCompileSource(
          mlirStringRefCreateFromCString(program),
          mlirStringRefCreateFromCString("program.mlir"),
          mlirStringRefCreateFromCString("overlap=force check-schedule"),
          mlirStringRefCreateFromCString(path), &callbacks)))
    return 1;
  BraidArtifact artifact =
      braidArtifactLoad(mlirStringRefCreateFromCString(path), &callbacks);
  if (!artifact)
    return 1;
  int64_t ranks = braidArtifactGetNumRanks(artifact);
  printf("ranks %lld arguments %ld results %ld\n", (long long)ranks,
         (long)braidArtifactGetNumArguments(artifact),
         (long)braidArtifactGetNumResults(artifact));
  BraidTensorType x = braidArtifactGetArgumentType(artifact, 0);
  printf("arg 0: %s [%lld, %lld]\n", x.dtype, (long long)x.shape[0],
         (long long)x.shape[1]);

  float xs[2][4 * 16], w[2][16 * 8], y[2][8 * 8];
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 4 * 16; ++i)
      xs[r][i] = (float)((r * 64 + i) % 13) - 6.0f;
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 16 * 8; ++i)
      w[r][i] = (float)(i % 7) * 0.25f - 0.5f;
  const void *inputs[4] = {xs[0], w[0], xs[1], w[1]};
  void *outputs[2] = {y[0], y[1]};
  if (mlirLogicalResultIsFailure(
          braidArtifactRun(artifact, ranks, inputs, outputs,
                           mlirStringRefCreateFromCString(""), &callbacks)))
    return 1;

  /* Wrong rank count: an error, not a hang. */
  if (mlirLogicalResultIsSuccess(
          braidArtifactRun(artifact, 3, inputs, outputs,
                           mlirStringRefCreateFromCString(""), &callbacks)))
    return 1;
  if (testBadRunArguments(artifact, inputs, outputs, &callbacks))
    return 1;

  double worst = 0.0;
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 8; ++j) {
        double expected = 0.0;
        for (int k = 0; k < 16; ++k)
          expected += (double)xs[i / 4][(i % 4) * 16 + k] * w[r][k * 8 + j];
        double error = fabs(expected - y[r][i * 8 + j]);
        if (error > worst)
          worst = error;
      }
  printf("max error %s\n", worst < 1e-4 ? "ok" : "TOO LARGE");
  braidArtifactDestroy(artifact);
  return worst < 1e-4 ? 0 : 1;
}

/* Reads `path` whole (NUL-terminated); NULL after an error. */
static char *readFile(const char *path) {
  FILE *file = fopen(path, "rb");
  if (!file)
    return NULL;
  fseek(file, 0, SEEK_END);
  long size = ftell(file);
  fseek(file, 0, SEEK_SET);
  char *text = malloc((size_t)size + 1);
  if (text && fread(text, 1, (size_t)size, file) != (size_t)size) {
    free(text);
    text = NULL;
  }
  fclose(file);
  if (text)
    text[size] = 0;
  return text;
}

static int testReport(const char *mode, const char *path, const char *options) {
  BraidCallbacks callbacks = {NULL, printText, printLine, stdout};
  if (!strcmp(mode, "report-pipeline")) {
    MlirContext context = createContext();
    MlirModule module = mlirModuleCreateParseFromFile(
        context, mlirStringRefCreateFromCString(path));
    if (mlirModuleIsNull(module))
      return 1;
    MlirLogicalResult result = braidRunPipeline(
        module, mlirStringRefCreateFromCString(options), &callbacks);
    mlirModuleDestroy(module);
    mlirContextDestroy(context);
    return mlirLogicalResultIsFailure(result);
  }
  char *source = readFile(path);
  if (!source) {
    fprintf(stderr, "cannot read %s\n", path);
    return 1;
  }
  MlirLogicalResult result =
      braidCompileSource(mlirStringRefCreateFromCString(source),
                         mlirStringRefCreateFromCString(path),
                         mlirStringRefCreateFromCString(options),
                         mlirStringRefCreateFromCString(""), &callbacks);
  free(source);
  return mlirLogicalResultIsFailure(result);
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "pipeline"))
    return testPipeline();
  if (argc >= 2 && !strcmp(argv[1], "errors"))
    return testErrors();
  if (argc >= 2 && !strcmp(argv[1], "crash"))
    return testCrash();
  if (argc >= 3 && !strcmp(argv[1], "run"))
    return testRun(argv[2]);
  if (argc >= 4 && (!strcmp(argv[1], "report-pipeline") ||
                    !strcmp(argv[1], "report-compile")))
    return testReport(argv[1], argv[2], argv[3]);
  fprintf(stderr, "usage: braid-capi-test pipeline|errors|crash|run PATH|"
                  "report-pipeline FILE OPTIONS|report-compile FILE OPTIONS\n");
  return 2;
}

/*===- consumer.c - Uses an installed Braid through its C API ------------===*\
|*                                                                            *|
|* Part of Braid.                                                             *|
|*                                                                            *|
|* consumer-c IN.mlir: compiles IN.mlir to the dist stage with the C API and *|
|* prints it.                                                                 *|
\*===----------------------------------------------------------------------===*/

#include "braid-c/Braid.h"

#include <stdio.h>
#include <stdlib.h>

static void print(MlirStringRef text, void *userData) {
  fprintf((FILE *)userData, "%.*s\n", (int)text.length, text.data);
}

int main(int argc, char **argv) {
  if (argc < 2)
    return 2;
  FILE *file = fopen(argv[1], "rb");
  if (!file)
    return 1;
  static char source[1 << 20];
  size_t length = fread(source, 1, sizeof(source), file);
  fclose(file);
  BraidCallbacks callbacks = {print, NULL, print, stdout};
  MlirLogicalResult result =
      braidCompileSource(mlirStringRefCreate(source, length),
                         mlirStringRefCreateFromCString(argv[1]),
                         mlirStringRefCreateFromCString("emit=dist"),
                         mlirStringRefCreateFromCString(""), &callbacks);
  printf("%s\n", braidGetVersion());
  return mlirLogicalResultIsSuccess(result) ? 0 : 1;
}

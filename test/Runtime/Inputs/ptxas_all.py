# ===- ptxas_all.py - Every PTX file of a folder through ptxas -----------===#
#
# Part of Braid.
#
# ===----------------------------------------------------------------------===#
#
#   ptxas_all.py PTXAS DIR ARCH...   compiles every DIR/*.ptx for each ARCH
#                                    (sm_80, sm_90a, ...) and prints
#                                    "N PTX modules compile for ARCH ..."
#                                    and their entries, one per line; exits
#                                    1 naming the first one that does not.
#
# ===----------------------------------------------------------------------===#

import glob
import os
import subprocess
import sys


def main():
    ptxas, directory, archs = sys.argv[1], sys.argv[2], sys.argv[3:]
    files = sorted(glob.glob(os.path.join(directory, "*.ptx")))
    for path in files:
        for arch in archs:
            proc = subprocess.run([ptxas, f"-arch={arch}", path, "-o", os.devnull],
                                  capture_output=True, text=True)
            if proc.returncode != 0 or proc.stderr.strip():
                sys.exit(f"ptxas -arch={arch} {path}:\n{proc.stderr}")
    print(f"{len(files)} PTX modules compile for {' '.join(archs)}")
    for path in files:
        print(os.path.basename(path)[:-4])


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""End-to-end numerical tests of Braid's schedules: one pattern, one
configuration, compiled with braid-compile, run on MPI ranks (or a GPU) and
compared with a numpy reference.

Usage: e2e.py PATTERN --grid 4|2x2 [--axis A] [--dtype f32|f16|bf16] ...
(every option: e2e_patterns/driver.py). Each pattern is a module of
e2e_patterns/; a new pattern is a new module there.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_patterns.driver import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())

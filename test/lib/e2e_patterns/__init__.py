"""The end-to-end patterns of test/lib/e2e.py, one module per pattern (or
per family of patterns that share their text, as norm.py does).

A pattern module defines its pattern functions (see core.py for what one
returns) and `PATTERNS = {"name": function}`; this package imports every
module it holds and merges their PATTERNS, so adding a pattern is adding a
module. core.py holds what patterns share, driver.py the command line.
"""
import importlib
import pkgutil

from .core import Config  # noqa: F401

# Modules that hold no patterns (the driver imports this package).
_NOT_PATTERNS = ("core", "driver")


def _discover():
    patterns = {}
    for module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        if module in _NOT_PATTERNS:
            continue
        for name, function in importlib.import_module(
                f"{__name__}.{module}").PATTERNS.items():
            if name in patterns:
                raise ImportError(f"pattern {name!r} is defined by both "
                                  f"{patterns[name].__module__} and {module}")
            patterns[name] = function
    return patterns


#: Every pattern's name to its function.
PATTERNS = _discover()

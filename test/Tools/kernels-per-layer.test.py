"""Counts kernels, layer functions and calls in two LLVM-dialect files (2
and 8 layers) and asserts what kernels-per-layer.test says."""
import re
import sys

two, eight, form = sys.argv[1:]


def counts(path):
    text = open(path).read()
    kernels = len(re.findall(r"llvm\.func @transformer(?:_layer)?_kernel_\d+\(",
                             text))
    kernel_calls = len(re.findall(r"llvm\.call @transformer(?:_layer)?_kernel_",
                                  text))
    layers = len(re.findall(r"llvm\.func @transformer_layer\(", text))
    layer_calls = len(re.findall(r"llvm\.call @transformer_layer\(", text))
    return kernels, kernel_calls, layers, layer_calls


k2, kc2, l2, lc2 = counts(two)
k8, kc8, l8, lc8 = counts(eight)
assert k2 > 10 and k2 == k8, ("kernels", k2, k8)
if form == "outlined":
    assert l2 == l8 == 1, ("layer functions", l2, l8)
    assert (lc2, lc8) == (2, 8), ("layer calls", lc2, lc8)
    assert kc2 == kc8, ("kernel calls, all in the layer function", kc2, kc8)
else:
    assert l2 == l8 == 0, ("layer functions", l2, l8)
    assert kc8 > 3 * kc2, ("kernel calls", kc2, kc8)
print("ok", form, k2, "kernels")

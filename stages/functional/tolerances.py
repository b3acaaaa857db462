"""The one table of tolerances: maximum normwise relative error per op kind and dtype.

The error is ``max|got - ref| / max|ref|`` against a CPU float64 reference computed
from the same (float64) inputs, so a low-precision dtype pays for rounding its
inputs as well as for its arithmetic: bfloat16 has 8 significant bits (unit
roundoff 3.9e-3), float16 11 bits (4.9e-4), float32 24 bits (6e-8).

The low-precision rows follow from those bounds: "exact" ops only round their
inputs (error <= u, tolerance 2u), "pointwise" ops add one or two roundings
(<= 3u, tolerance 4u), the others leave room for error growth with the function
or the reduction length. The float32 rows are far looser than float32 needs on a
CPU (the largest errors are 1-6% of them), leaving room for GPU kernels that
reorder sums, yet tight enough that a float32 op secretly computed in half (errors
about 5e-4 and up) fails.
Measured headroom over 100 seeds: ``benchmarks/functional_tolerances.py``
(largest error / tolerance at most 0.66, 0 failures; table in benchmarks/README.md).
"""

from __future__ import annotations

__all__ = ["DTYPES", "KINDS", "TOLERANCES", "tolerance"]

DTYPES = ("float32", "float16", "bfloat16")

# kind -> (float32, float16, bfloat16)
TOLERANCES: dict[str, tuple[float, float, float]] = {
    # copies, indexing, comparisons-with-values: only input rounding
    "exact": (1e-6, 1e-3, 8e-3),
    # one rounding per element: add, mul, relu, where...
    "pointwise": (1e-5, 2e-3, 1.6e-2),
    # exp, log, tanh, pow...: the function amplifies the input's rounding
    "transcendental": (2e-5, 8e-3, 6e-2),
    # sums, means, norms, softmax: error grows with the reduced length
    "reduction": (2e-5, 1e-2, 6e-2),
    # matmul-like: dot products of length up to a few hundred
    "matmul": (1e-4, 1e-2, 6e-2),
    # convolutions: dot products over C*kH*kW, plus algorithm choice on GPUs
    "conv": (1e-4, 1e-2, 6e-2),
    # solvers, decompositions: condition number of the (well-conditioned) inputs times eps
    "linalg": (1e-3, 5e-2, 1.5e-1),
    # custom autograd Functions: forward and gradients, chains of the above
    "autograd": (1e-4, 2e-2, 1e-1),
}

KINDS = tuple(TOLERANCES)


def tolerance(kind: str, dtype: str) -> float:
    return TOLERANCES[kind][DTYPES.index(dtype)]

"""A wrong float32 kernel through a small library override: aten::cumsum on CPU is
replaced (torch.library) by one that is right in float64 and 2% off in float32, the
way a broken vendor kernel drifts only in the dtype it ships."""

from __future__ import annotations

import torch

from plantedmodels import Tiny

_LIB = torch.library.Library("aten", "IMPL")


def _cumsum(x: torch.Tensor, dim: int, dtype: torch.dtype | None = None) -> torch.Tensor:
    # The sum of the prefix through a lower-triangular matrix: no call back into cumsum.
    y = x.movedim(dim, -1)
    n = y.shape[-1]
    tri = torch.ones(n, n, dtype=y.dtype).tril()
    out = torch.matmul(y, tri.transpose(0, 1)).movedim(-1, dim)
    if x.dtype == torch.float32:
        out = out * 1.02
    return out if dtype is None else out.to(dtype)


_LIB.impl("cumsum", _cumsum, "CPU")


def build() -> torch.nn.Module:
    return Tiny()

"""Planted failures for the diagnosis tests (tests/analyze/test_planted.py) and
benchmarks/analyze_accuracy.py: a small model repository's package, copied into a
temporary repository and named with ``--model plantedmodels...:build``.

``GK_PLANT_DELAY_MS`` makes every forward sleep that long (a slower model against a
recorded baseline); ``plantedmodels.wrongkernel`` overrides a CPU kernel;
``cases.py`` beside this package holds a case that hangs and one that segfaults.
"""

from __future__ import annotations

import os
import time

import torch
from torch import nn


class Tiny(nn.Module):
    """A linear layer after a cumulative sum: two aten ops worth replaying, milliseconds per batch."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        delay_ms = float(os.environ.get("GK_PLANT_DELAY_MS", "0") or 0)
        if delay_ms > 0:
            time.sleep(delay_ms / 1000.0)
        return self.lin(torch.cumsum(x, dim=1))

    def example_input(self, batch_size: int = 8) -> torch.Tensor:
        return torch.randn(batch_size, 12, 16)


def build() -> nn.Module:
    return Tiny()

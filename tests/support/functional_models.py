"""A tiny model for the functional_test tests (``--model tests.support.functional_models:tiny``)."""

from __future__ import annotations

from typing import Any


def tiny() -> Any:
    import torch
    from torch import nn

    class Tiny(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(2, 3, 3, padding=1)
            self.bn = nn.BatchNorm2d(3)
            self.fc = nn.Linear(3, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(self.bn(self.conv(x)))
            return self.fc(y.mean(dim=(2, 3)))

        def example_input(self, batch_size: int = 2) -> torch.Tensor:
            return torch.randn(batch_size, 2, 5, 5)

    return Tiny()

"""gatekeeper: quality gates and circuit breakers for PyTorch on ROCm, CUDA and CPU."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"

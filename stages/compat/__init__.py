"""The parts of the compatibility_check stage, one module per check: ONNX export,
torch.compile, collectives (and the rank process they start), C++/HIP extensions,
sparse tensors and dependencies. Importing this package imports no torch."""

from __future__ import annotations

__all__: list[str] = []

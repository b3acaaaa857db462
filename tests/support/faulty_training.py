"""Training loops with planted interruptions, for the stability tests (run in the isolated worker).

The stage numbers its loops' seeds ``seed + 1000 + i``: with the default seed 0, loop 1 runs out of
host memory for real (a 1 PiB allocation the CPU allocator refuses), loop 2 hangs, and every other
loop is the real training loop of ``stages.functional.training``."""

from __future__ import annotations

import time
from typing import Any


def train_run(**kwargs: Any) -> dict[str, Any]:
    import torch

    from stages.functional.training import train_run as real

    loop = kwargs["seed"] - 1000
    if loop == 0:
        torch.empty(1 << 50, dtype=torch.uint8)  # out of memory: RuntimeError from the CPU allocator
    if loop == 1:
        time.sleep(3600)  # a hang: the worker is killed at the stage's time limit
    return real(**kwargs)

"""In the worker: train the model on a seeded synthetic task and report its loss curve and memory.

The task works for any model: a teacher of the same architecture (initialised with another seed,
in eval mode) labels a fixed pool of seeded input batches, and the student (the model under test,
initialised with ``seed``) learns to match the teacher's outputs by mean squared error with Adam.
The user's own loss replaces it with ``--train-step module:function``: ``function(model, batch)``
returns the loss tensor for one input batch (the harness does zero_grad, backward and the step).

Everything is seeded and, on the CPU, run on one thread: the same seed on the same stack gives the
same curve bit for bit, so the curves of two stacks can be compared seed by seed. TF32 is off.
"""

from __future__ import annotations

import importlib
import math
from typing import Any

from gatekeeper.core.errors import InputError
from stages.device import tf32_off

__all__ = ["POOL", "TEACHER_SEED_OFFSET", "resolve_hook", "train_run"]

POOL = 8  # input batches the steps cycle through
TEACHER_SEED_OFFSET = 7919


def resolve_hook(spec: str) -> Any:
    """``module:function`` of ``--train-step`` (an InputError names what is wrong)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise InputError(None, "--train-step", f"{spec!r} is not module:function", "e.g. mypkg.training:step")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise InputError(None, "--train-step", f"cannot import {module_name!r}: {err}", "check PYTHONPATH") from None
    hook = getattr(module, attr, None)
    if not callable(hook):
        raise InputError(None, "--train-step", f"{module_name} has no callable {attr!r}", "name a function")
    return hook


def _flat(out: Any) -> Any:
    import torch

    from stages.functional.compare import flatten

    parts = [t.float().reshape(-1) for t in flatten(out) if isinstance(t, torch.Tensor)]
    if not parts:
        raise TypeError("the model returned no tensor to train on; pass --train-step with your own loss")
    return torch.cat(parts)


def train_run(
    *,
    spec: str | None,
    seed: int,
    steps: int,
    batch_size: int,
    input_shape: tuple[int, ...] | None,
    device: str,
    lr: float,
    epochs: int = 1,
    train_step: str | None = None,
) -> dict[str, Any]:
    """``epochs`` x ``steps`` optimizer steps: the loss of every step, and memory (MB) after every epoch."""
    import psutil
    import torch

    from stages.models import load_model

    gpu = device.startswith("cuda")
    if not gpu:
        torch.set_num_threads(1)  # bitwise the same curve for the same seed (thread count changes reductions)
    tf32_off()
    hook = resolve_hook(train_step) if train_step else None
    loaded = load_model(spec, seed=seed)
    model = loaded.module.float().to(device).train()
    batches = [loaded.example_input(batch_size, input_shape, seed * 1000 + i).float().to(device) for i in range(POOL)]
    targets: list[Any] = []
    if hook is None:
        teacher = load_model(spec, seed=seed + TEACHER_SEED_OFFSET).module.float().to(device).eval()
        with torch.no_grad():
            targets = [_flat(teacher(x)).detach() for x in batches]
        del teacher
    torch.manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    process = psutil.Process()
    losses: list[float] = []
    memory: list[float] = []
    for epoch in range(epochs):
        for step in range(steps):
            x = batches[step % POOL]
            opt.zero_grad(set_to_none=True)
            if hook is not None:
                loss = hook(model, x)
            else:
                loss = torch.nn.functional.mse_loss(_flat(model(x)), targets[step % POOL])
            loss.backward()
            opt.step()
            value = float(loss.detach())
            if not math.isfinite(value):
                raise FloatingPointError(f"the loss became {value} at epoch {epoch + 1}, step {step + 1}")
            losses.append(value)
        if gpu:
            torch.cuda.synchronize()
            memory.append(torch.cuda.memory_allocated() / 2**20)
        else:
            memory.append(process.memory_info().rss / 2**20)
    return {"losses": losses, "memory_mb": memory, "threads": torch.get_num_threads()}

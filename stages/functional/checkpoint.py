"""Checkpoint restore: train, save model + optimizer + RNG + GradScaler state,
restore in a fresh process, continue, and compare with an uninterrupted run.

On the CPU the two must be bitwise identical at the same thread count (both
processes are pinned to one thread, recorded in the details); on a GPU the
comparison allows a small relative error and reports the nondeterminism it saw.
The training loop draws from all three RNGs a training script typically uses
(torch for the data noise, numpy for its scale, Python's ``random`` for the
learning-rate jitter), so a checkpoint that forgets one of them diverges.

``torch.load`` is called with ``weights_only=True`` (the safe default since
torch 2.6); numpy's RNG state is therefore stored as a tensor and plain numbers,
not as the pickled tuple ``np.random.get_state()`` returns.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

__all__ = ["GPU_TOLERANCE", "compare_states", "resume", "train"]

GPU_TOLERANCE = 1e-4  # max normwise relative difference of any parameter after restore, on GPUs
THREADS = 1


def _setup(spec: str | None, seed: int, device: str, batch_size: int, input_shape: tuple[int, ...] | None) -> tuple:
    import numpy as np
    import torch

    from stages.models import load_model

    torch.set_num_threads(THREADS)
    loaded = load_model(spec, seed=seed)
    model = loaded.module.to(device).train()
    base = loaded.example_input(batch_size, input_shape, seed).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cuda", enabled=device.startswith("cuda"))
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)
    return model, base, opt, scaler


def _steps(model: Any, base: Any, opt: Any, scaler: Any, n: int) -> None:
    import numpy as np
    import torch

    from stages.functional.model_compare import model_loss

    for _ in range(n):
        x = base + torch.randn_like(base) * float(np.random.uniform(0.05, 0.15))
        for group in opt.param_groups:
            group["lr"] = 1e-3 * (1.0 + 0.1 * random.random())  # a perturbation for the test, not a secret  # nosec B311
        opt.zero_grad(set_to_none=True)
        scaler.scale(model_loss(model(x))).backward()
        scaler.step(opt)
        scaler.update()


def _state(model: Any, opt: Any) -> dict[str, Any]:
    out = {f"model.{k}": v.detach().cpu().clone() for k, v in model.state_dict().items()}
    for pid, st in opt.state_dict()["state"].items():
        for k, v in st.items():
            if hasattr(v, "detach"):
                out[f"optim.{pid}.{k}"] = v.detach().cpu().clone()
    return out


def train(  # noqa: PLR0917 - called positionally through Worker.call
    spec: str | None,
    seed: int,
    device: str,
    batch_size: int,
    input_shape: tuple[int, ...] | None,
    steps: int,
    save_at: int | None = None,
    save_to: str | None = None,
) -> dict[str, Any]:
    """Train ``steps`` steps from the seed without interruption; after step ``save_at``, save a checkpoint."""
    model, base, opt, scaler = _setup(spec, seed, device, batch_size, input_shape)
    done = 0
    if save_at is not None and save_to:
        _steps(model, base, opt, scaler, save_at)
        _save(model, opt, scaler, device, steps=save_at, path=save_to)
        done = save_at
    _steps(model, base, opt, scaler, steps - done)
    return _state(model, opt)


def _save(model: Any, opt: Any, scaler: Any, device: str, *, steps: int, path: str) -> None:
    import numpy as np
    import torch

    state = np.random.get_state()
    assert isinstance(state, tuple)  # legacy=True (the default) gives the tuple: np.random's generator is MT19937
    keys, pos, has_gauss, gauss = state[1:]
    ckpt = {
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "scaler": scaler.state_dict(),
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if device.startswith("cuda") else [],
        "numpy_rng": {
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "gauss": float(gauss),
        },
        "python_rng": random.getstate(),
        "steps": steps,
    }
    tmp = f"{path}.tmp"
    torch.save(ckpt, tmp)
    os.replace(tmp, path)  # a half-written checkpoint is never restored


def resume(  # noqa: PLR0917 - called positionally through Worker.call
    spec: str | None,
    seed: int,
    device: str,
    batch_size: int,
    input_shape: tuple[int, ...] | None,
    steps: int,
    path: str,
) -> dict[str, Any]:
    """In a fresh process: restore everything from ``path`` and train ``steps`` more steps."""
    import numpy as np
    import torch

    # the example input is rebuilt from the original seed, like a data loader re-reading its dataset; the
    # model is built from another seed: the checkpoint, not the initialisation, must decide the outcome
    base = _setup(spec, seed, device, batch_size, input_shape)[1]
    model, _, opt, scaler = _setup(spec, seed + 1, device, batch_size, input_shape)
    # onto the CPU: RNG states must be CPU tensors; load_state_dict moves weights and optimizer state
    ckpt = torch.load(Path(path), map_location="cpu", weights_only=True)
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["optimizer"])
    scaler.load_state_dict(ckpt["scaler"])
    torch.set_rng_state(ckpt["torch_rng"])
    if ckpt["cuda_rng"]:
        torch.cuda.set_rng_state_all(ckpt["cuda_rng"])
    n = ckpt["numpy_rng"]
    np.random.set_state(("MT19937", n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["gauss"]))
    py = ckpt["python_rng"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    _steps(model, base, opt, scaler, steps)
    return _state(model, opt)


def compare_states(resumed: dict[str, Any], straight: dict[str, Any], *, bitwise: bool) -> tuple[bool, str, float]:
    """(identical enough, message, worst relative difference)."""
    import torch

    if set(resumed) != set(straight):
        missing = sorted(set(straight) ^ set(resumed))[:5]
        return False, f"state keys differ: {missing}", float("inf")
    worst, differing = 0.0, []
    for k, a in straight.items():
        b = resumed[k]
        if a.shape != b.shape or a.dtype != b.dtype:
            return False, f"{k}: {tuple(b.shape)} {b.dtype} vs {tuple(a.shape)} {a.dtype}", float("inf")
        if torch.equal(a, b):
            continue
        differing.append(k)
        if a.is_floating_point():
            rel = float((a.double() - b.double()).abs().max() / a.double().abs().max().clamp_min(1e-30))
        else:
            rel = float("inf")
        worst = max(worst, rel)
    if not differing:
        return True, f"bitwise identical ({len(straight)} tensors, {THREADS} thread)", 0.0
    if bitwise:
        return (
            False,
            f"{len(differing)} of {len(straight)} tensors differ (e.g. {differing[0]}), max relative {worst:.3g}",
            worst,
        )
    ok = worst <= GPU_TOLERANCE
    return (
        ok,
        f"not bitwise: {len(differing)} tensors differ, max relative {worst:.3g} (tolerance {GPU_TOLERANCE:g})",
        worst,
    )

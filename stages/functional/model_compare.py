"""The whole model on the device against the CPU in float64: outputs and every
parameter's gradient after one forward + backward in train mode."""

from __future__ import annotations

from typing import Any

__all__ = ["model_loss", "model_vs_cpu"]


def model_loss(out: Any) -> Any:
    """A scalar from whatever the model returns: the mean square of each floating output, summed."""
    import torch

    from stages.functional.compare import flatten

    # half outputs are squared in float32; a float64 reference stays float64 all the way
    floats = [o for o in flatten(out) if isinstance(o, torch.Tensor) and o.is_floating_point()]
    parts = [(o if o.dtype == torch.float64 else o.float()).pow(2).mean() for o in floats]
    if not parts:
        raise AssertionError("the model returned no floating-point tensor to backpropagate")
    return torch.stack(parts).sum()


def model_vs_cpu(
    spec: str | None, batch_size: int, input_shape: tuple[int, ...] | None, seed: int, device: str
) -> dict:
    """Forward + backward of the whole model on the device (float32) against the CPU in float64."""
    import copy

    import torch

    from stages.functional.compare import flatten
    from stages.models import load_model

    loaded = load_model(spec, seed=seed)
    x = loaded.example_input(batch_size, input_shape, seed)
    runs = {}
    for label, dtype, dev in (("ref", torch.float64, "cpu"), ("dev", torch.float32, device)):
        model = copy.deepcopy(loaded.module).to(device=dev, dtype=dtype).train()
        out = model(x.to(device=dev, dtype=dtype))
        model_loss(out).backward()
        outs = [o.detach().double().cpu() for o in flatten(out) if isinstance(o, torch.Tensor)]
        param_grads = {n: (p.grad.double().cpu() if p.grad is not None else None) for n, p in model.named_parameters()}
        runs[label] = (outs, param_grads)

    # A gradient that is mathematically zero (the bias of a convolution followed by batch norm) is
    # rounding noise on both sides: its cosine means nothing, and its error is measured against
    # the largest gradient of the model instead of against itself.
    ref_grads = [g for g in runs["ref"][1].values() if g is not None and g.numel()]
    grad_scale = max((float(g.abs().max()) for g in ref_grads), default=0.0)

    def compare(a: Any, b: Any, floor: float = 0.0) -> tuple[float | None, float]:
        a, b = a.flatten(), b.flatten()
        scale = max(float(b.abs().max()) if b.numel() else 0.0, floor)
        rel = float((a - b).abs().max()) / scale if b.numel() and scale > 0 else 0.0
        if b.numel() == 0 or float(b.abs().max()) <= 1e-6 * max(floor, 1e-300):
            return None, rel
        na, nb = float(a.norm()), float(b.norm())
        return float(torch.dot(a, b) / max(na * nb, 1e-300)), rel

    rows = {}
    for i, (o, ref) in enumerate(zip(runs["dev"][0], runs["ref"][0], strict=True)):
        rows[f"output[{i}]"] = compare(o, ref)
    for n, g in runs["dev"][1].items():
        r = runs["ref"][1][n]
        if g is None or r is None:
            if (g is None) != (r is None):
                rows[f"grad {n}"] = (0.0, float("inf"))
            continue
        rows[f"grad {n}"] = compare(g, r, grad_scale)
    grads = {k: v for k, v in rows.items() if k.startswith("grad")}
    return {
        "rows": rows,
        "grad_cosine_min": min((c for c, _ in grads.values() if c is not None), default=1.0),
        "output_cosine_min": min(
            (c for k, (c, _) in rows.items() if k.startswith("output") and c is not None), default=1.0
        ),
        "zero_gradients": sorted(k for k, (c, _) in grads.items() if c is None),
        "max_rel_error": max((e for _, e in rows.values()), default=0.0),
    }

"""Relative error of a device result against a CPU float64 reference."""

from __future__ import annotations

from typing import Any

__all__ = ["flatten", "rel_error", "to_reference"]


def flatten(value: Any) -> list[Any]:
    """The tensors in a (nested) result, in order; non-tensors are kept for an equality check."""
    if isinstance(value, list | tuple):
        return [x for v in value for x in flatten(v)]
    if isinstance(value, dict):
        return [x for k in sorted(value) for x in flatten(value[k])]
    return [value]


def to_reference(value: Any, dtype: Any, device: Any) -> Any:
    """Cast floating tensors to ``dtype`` on ``device``; integer and bool tensors keep their dtype."""
    import torch

    if isinstance(value, torch.Tensor):
        if value.is_floating_point():
            return value.to(device=device, dtype=dtype)
        return value.to(device=device)
    if isinstance(value, list | tuple):
        return type(value)(to_reference(v, dtype, device) for v in value)
    return value


def rel_error(got: Any, ref: Any) -> float:
    """Normwise relative error ``max|got - ref| / max|ref|`` over all tensors of a result.

    Shapes must match, integer/bool tensors must be equal, non-finite values must
    sit at the same places (a NaN where the reference has a number is an infinite
    error). Empty results compare equal when their shapes do.
    """
    import torch

    g_list, r_list = flatten(got), flatten(ref)
    if len(g_list) != len(r_list):
        raise AssertionError(f"result has {len(g_list)} parts, reference {len(r_list)}")
    worst = 0.0
    for g, r in zip(g_list, r_list, strict=True):
        if not isinstance(r, torch.Tensor):
            if isinstance(g, torch.Tensor):
                g = g.item()
            if isinstance(r, float) and isinstance(g, float):
                worst = max(worst, abs(g - r) / max(abs(r), 1e-30))
            elif g != r:
                raise AssertionError(f"value {g!r} != reference {r!r}")
            continue
        if not isinstance(g, torch.Tensor):
            raise AssertionError(f"got {type(g).__name__}, reference is a tensor")
        if tuple(g.shape) != tuple(r.shape):
            raise AssertionError(f"shape {tuple(g.shape)} != reference {tuple(r.shape)}")
        g = g.detach().cpu()
        r = r.detach().cpu()
        if g.is_sparse or g.layout != torch.strided:
            g = g.to_dense()
        if r.is_sparse or r.layout != torch.strided:
            r = r.to_dense()
        if not r.is_floating_point() and not r.is_complex():
            if not torch.equal(g.to(r.dtype), r):
                mismatch = int((g.to(r.dtype) != r).sum())
                raise AssertionError(f"{mismatch} of {r.numel()} integer/bool elements differ")
            continue
        if r.numel() == 0:
            continue
        g = g.to(torch.complex128 if r.is_complex() else torch.float64)
        r = r.to(g.dtype)
        finite = torch.isfinite(r)
        if not torch.equal(finite, torch.isfinite(g)):
            return float("inf")
        if not finite.all():
            # inf/nan must match exactly (same sign of inf); the rest is compared normally
            if not torch.equal(g[~finite].nan_to_num(0.0), r[~finite].nan_to_num(0.0)):
                return float("inf")
            g, r = g[finite], r[finite]
            if r.numel() == 0:
                continue
        scale = float(r.abs().max())
        diff = float((g - r).abs().max())
        worst = max(worst, diff / scale if scale > 0 else diff)
    return worst

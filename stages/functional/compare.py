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


def rel_error(got: Any, ref: Any, floor: float = 0.0) -> float:
    """Normwise relative error ``max|got - ref| / max(max|ref|, floor)`` over all tensors of a result.

    ``floor`` is for results that may be mathematically zero while their terms are
    not (the bias gradient of a convolution followed by batch norm): there the
    rounding error scales with the inputs, so a caller passes the inputs' magnitude.
    Shapes must match, integer/bool tensors must be equal, non-finite values must
    sit at the same places (a NaN where the reference has a number is an infinite
    error). Empty results compare equal when their shapes do.
    """
    g_list, r_list = flatten(got), flatten(ref)
    if len(g_list) != len(r_list):
        raise AssertionError(f"result has {len(g_list)} parts, reference {len(r_list)}")
    return max((_part_error(g, r, floor) for g, r in zip(g_list, r_list, strict=True)), default=0.0)


def _part_error(got: Any, ref: Any, floor: float) -> float:
    import torch

    if not isinstance(ref, torch.Tensor):
        value = got.item() if isinstance(got, torch.Tensor) else got
        if isinstance(ref, float) and isinstance(value, float):
            return abs(value - ref) / max(abs(ref), 1e-30)
        if value != ref:
            raise AssertionError(f"value {value!r} != reference {ref!r}")
        return 0.0
    if not isinstance(got, torch.Tensor):
        raise AssertionError(f"got {type(got).__name__}, reference is a tensor")
    if tuple(got.shape) != tuple(ref.shape):
        raise AssertionError(f"shape {tuple(got.shape)} != reference {tuple(ref.shape)}")
    g, r = got.detach().cpu(), ref.detach().cpu()
    if g.layout != torch.strided:
        g = g.to_dense()
    if r.layout != torch.strided:
        r = r.to_dense()
    if not r.is_floating_point() and not r.is_complex():
        if not torch.equal(g.to(r.dtype), r):
            mismatch = int((g.to(r.dtype) != r).sum())
            raise AssertionError(f"{mismatch} of {r.numel()} integer/bool elements differ")
        return 0.0
    if r.numel() == 0:
        return 0.0
    wide = torch.complex128 if r.is_complex() else torch.float64
    g, r = g.to(wide), r.to(wide)
    finite = torch.isfinite(r)
    if not torch.equal(finite, torch.isfinite(g)):
        return float("inf")
    if not finite.all():
        # inf/nan must match exactly (same sign of inf); the rest is compared normally
        if not torch.equal(g[~finite].nan_to_num(0.0), r[~finite].nan_to_num(0.0)):
            return float("inf")
        g, r = g[finite], r[finite]
        if r.numel() == 0:
            return 0.0
    scale = max(float(r.abs().max()), floor)
    diff = float((g - r).abs().max())
    return diff / scale if scale > 0 else diff

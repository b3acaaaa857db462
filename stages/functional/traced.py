"""Model-traced coverage: the aten ops *your* model runs, replayed on the device.

``capture`` runs the model's forward and backward in train mode on the CPU in
float32 under a ``TorchDispatchMode`` and records, for every distinct op and
input signature (shapes, dtypes, strides, layouts, scalar arguments), the
actual input values: replay then gets valid values for free (positive
``running_var``, in-range pooling indices), and the exact strides (stride-0
expanded inputs included) are rebuilt with ``as_strided`` over a copy of the
input's storage span. ``replay_op`` runs one op's signatures on the device and
on the CPU in float64 and compares them. Both run in an isolated worker; a
worker that crashed recaptures (deterministically) on its next call.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import Any

from stages.functional.model_compare import model_loss

__all__ = ["TRACE_TOLERANCE", "capture", "op_list", "replay_op"]

# ops whose output is random or uninitialised: checked for shape and dtype only
RANDOM_OPS = ("dropout", "bernoulli", "rand", "normal", "uniform", "multinomial", "exponential")
UNINITIALISED_OPS = ("empty", "new_empty", "empty_like", "empty_strided", "new_empty_strided")
# normwise relative error allowed for a float32 replay, by op family: one table, coarse on purpose
TRACE_TOLERANCE = {"conv": 1e-4, "mm": 1e-4, "norm": 1e-4, "default": 2e-5}


@dataclass
class _Tensor:
    base: Any  # a contiguous copy of the storage span the tensor views
    size: tuple[int, ...]
    stride: tuple[int, ...]

    def build(self, dtype: Any, device: Any) -> Any:
        base = self.base
        if base.is_floating_point() and dtype is not None:
            base = base.to(dtype)
        return base.to(device).as_strided(self.size, self.stride, 0)


_CAPTURES: dict[tuple[Any, ...], dict[str, list[tuple[str, Any, Any]]]] = {}


def _snap(x: Any) -> Any:
    import torch

    if isinstance(x, torch.Tensor):
        if x.layout != torch.strided:
            return x.detach().clone()
        size, stride = tuple(x.shape), tuple(x.stride())
        span = 1 + sum((s - 1) * st for s, st in zip(size, stride, strict=True)) if x.numel() else 0
        base = x.detach().as_strided((span,), (1,), x.storage_offset()).clone()
        return _Tensor(base, size, stride)
    if isinstance(x, list | tuple):
        return type(x)(_snap(v) for v in x)
    return x


def _describe(x: Any) -> str:
    import torch

    if isinstance(x, torch.Tensor):
        layout = "" if x.layout == torch.strided else f" {x.layout}"
        return f"{str(x.dtype).removeprefix('torch.')}{list(x.shape)}@{list(x.stride())}{layout}"
    if isinstance(x, list | tuple):
        return "[" + ", ".join(_describe(v) for v in x) + "]"
    return repr(x)


def capture(spec: str | None, batch_size: int, input_shape: tuple[int, ...] | None, seed: int) -> dict[str, list]:
    """op name -> [(signature, args, kwargs)] for the model's forward + backward (cached per worker)."""
    key = (spec, batch_size, input_shape, seed)
    if key in _CAPTURES:
        return _CAPTURES[key]
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from stages.functional.compare import flatten
    from stages.models import load_model

    loaded = load_model(spec, seed=seed)
    model = loaded.module.float().train()
    x = loaded.example_input(batch_size, input_shape, seed).float()
    seen: dict[str, list[tuple[str, Any, Any]]] = {}
    sigs: set[str] = set()

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            name = str(func.name()) if hasattr(func, "name") else str(func)
            sig = (
                f"{name}({', '.join(_describe(a) for a in args)}"
                + "".join(f", {k}={_describe(v)}" for k, v in sorted(kwargs.items()))
                + ")"
            )
            if sig in sigs:
                return func(*args, **kwargs)
            sigs.add(sig)
            snap = (_snap(args), _snap(kwargs))  # before the call: in-place ops mutate their inputs
            out = func(*args, **kwargs)
            # ops without a tensor result (promote_types, size queries) are metadata, not kernels
            if any(isinstance(t, torch.Tensor) for t in flatten(out)):
                seen.setdefault(name, []).append((sig, func, snap))
            return out

    with Record():
        out = model(x)
        loss = model_loss(out)
        loss.backward()
    _CAPTURES.clear()  # one model per worker at a time: the snapshots hold its activations
    _CAPTURES[key] = seen
    return seen


def op_list(spec: str | None, batch_size: int, input_shape: tuple[int, ...] | None, seed: int) -> dict[str, int]:
    """op name -> number of distinct signatures."""
    return {name: len(v) for name, v in capture(spec, batch_size, input_shape, seed).items()}


def _build(x: Any, dtype: Any, device: Any) -> Any:
    import torch

    if isinstance(x, _Tensor):
        return x.build(dtype, device)
    if isinstance(x, torch.Tensor):
        return x.to(device=device, dtype=dtype if x.is_floating_point() and dtype is not None else None)
    if isinstance(x, torch.device):
        return torch.device(device)
    if isinstance(x, torch.dtype) and dtype is not None and x.is_floating_point:
        return dtype  # keep a float64 replay in float64 through _to_copy(dtype=float32) and friends
    if isinstance(x, list | tuple):
        return type(x)(_build(v, dtype, device) for v in x)
    if isinstance(x, dict):
        return {k: _build(v, dtype, device) for k, v in x.items()}
    return x


def _magnitude(args: Any) -> float:
    """The largest floating input value: the scale of an op's rounding error when its result cancels."""
    if isinstance(args, _Tensor):
        b = args.base
        return float(b.abs().max()) if b.is_floating_point() and b.numel() else 0.0
    if isinstance(args, list | tuple):
        return max((_magnitude(a) for a in args), default=0.0)
    return 0.0


def _family(name: str) -> str:
    if "conv" in name:
        return "conv"
    if any(k in name for k in ("mm", "matmul", "linear", "bmm", "attention")):
        return "mm"
    if any(k in name for k in ("norm", "softmax", "sum", "mean", "var", "std")):
        return "norm"
    return "default"


def _first_tensor(sig: str) -> dict[str, Any]:
    """dtype and shape of the first tensor argument of a signature ``aten::op(float32[8, 12]@[12, 1], 1)``."""
    m = re.search(r"\((\w+)\[([\d, ]*)\]", sig)
    if m is None:
        return {}
    return {"dtype": m.group(1), "shape": [int(x) for x in m.group(2).split(",") if x.strip()]}


def replay_op(  # noqa: PLR0917 - called positionally through Worker.call
    spec: str | None, batch_size: int, input_shape: tuple[int, ...] | None, seed: int, name: str, device: str
) -> dict[str, Any]:
    """Replay every recorded signature of ``name`` on ``device`` (recorded dtypes) and on CPU float64."""
    import torch

    from stages.functional.compare import flatten, rel_error

    entries = capture(spec, batch_size, input_shape, seed)[name]
    short = name.rsplit("::", maxsplit=1)[-1].split(".", maxsplit=1)[0]
    if any(r in short for r in RANDOM_OPS):
        return {
            "status": "skipped",
            "message": "random op: untested (its output cannot be compared)",
            "signatures": len(entries),
        }
    if ("for_cpu" in short or "mkldnn" in short) and not device.startswith("cpu"):
        return {
            "status": "skipped",
            "message": "CPU-specific kernel: the device runs its own variant (see the whole-model comparison)",
            "signatures": len(entries),
        }
    tol = TRACE_TOLERANCE[_family(short)]
    dev = torch.device(device)
    worst, fallbacks, problems, no_reference = 0.0, [], [], 0
    drift: dict[str, Any] | None = None
    for sig, func, (args, kwargs) in entries:
        try:
            ref = func(*_build(args, torch.float64, "cpu"), **_build(kwargs, torch.float64, "cpu"))
        except (NotImplementedError, RuntimeError, TypeError):
            no_reference += 1  # no float64 CPU kernel for this signature: untested, not failed
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                got = func(*_build(args, None, dev), **_build(kwargs, None, dev))
            except (NotImplementedError, RuntimeError) as exc:
                text = str(exc).splitlines()[0][:200]
                # "Could not run 'aten::x' with arguments from the 'CUDA' backend", "not implemented for
                # 'BFloat16'", HIP's "no kernel image is available": the device lacks the op
                low = text.lower()
                missing = any(k in low for k in ("could not run", "not implemented", "no kernel"))
                kind = "missing" if missing or isinstance(exc, NotImplementedError) else "error"
                problems.append(f"{kind}: {sig}: {text}")
                continue
        tensors = [t for t in flatten(got) if isinstance(t, torch.Tensor)]
        if dev.type != "cpu" and any(t.device.type == "cpu" for t in tensors):
            fallbacks.append(sig)
        if any("fall back" in str(w.message).lower() for w in caught):
            fallbacks.append(sig)
        if short in UNINITIALISED_OPS or short.startswith("new_empty"):
            refs = [t for t in flatten(ref) if isinstance(t, torch.Tensor)]
            if [tuple(t.shape) for t in tensors] != [tuple(t.shape) for t in refs]:
                problems.append(f"shape: {sig}")
            continue
        try:
            err = rel_error(got, ref, floor=_magnitude(args))
        except AssertionError as exc:
            problems.append(f"mismatch: {sig}: {exc}")
            continue
        worst = max(worst, err)
        if not err <= tol:
            problems.append(f"drift: {sig}: relative error {err:.3g} > {tol:g}")
            if drift is None or not err <= drift["error"]:
                drift = {"op": name, "signature": sig, **_first_tensor(sig), "error": err, "tolerance": tol}
    result: dict[str, Any] = {"signatures": len(entries), "max_rel_error": worst, "fallbacks": sorted(set(fallbacks))}
    result["details"] = {"signatures": len(entries), "max_rel_error": worst, "problems": problems[:20]}
    if drift is not None:
        result["details"]["drift"] = drift  # the worst drifting signature, for the diagnosis
    if no_reference:
        result["details"]["no_float64_reference"] = no_reference
    if problems:
        result.update(
            status="failed", message=f"{len(problems)} of {len(entries)} signatures: " + "; ".join(problems)[:1500]
        )
    elif fallbacks:
        result.update(
            status="failed", message=f"falls back to CPU in {len(set(fallbacks))} of {len(entries)} signatures"
        )
    elif no_reference == len(entries):
        result.update(status="skipped", message="no CPU float64 kernel to compare with: untested")
    else:
        tested = len(entries) - no_reference
        result.update(status="passed", message=f"{tested} signatures, max relative error {worst:.2g}")
    return result

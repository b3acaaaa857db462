"""The ``attention`` category: scaled_dot_product_attention forced onto one backend at a time.

Each case pins one SDPA backend (flash, memory-efficient, math) with
``torch.nn.attention.sdpa_kernel`` and runs one shape: plain, causal, a padded
key mask, grouped-query heads, or a long causal sequence. Dropout is always off
(``dropout_p=0``): a random mask would make the comparison meaningless.

At the reduced size (batch 2, 128 tokens) the forward output and the gradients of
q, k and v (for a seeded upstream gradient) are compared with a float64 CPU
reference written out by hand (softmax(q k^T * scale + mask) v), so the
reference shares no code with any SDPA backend. The long case runs the forward
at the device's lengths (CPU 1024 tokens; GPU 8k, 16k and 32k) and compares a
seeded sample of query rows with the same float64 reference, which needs only
those rows (a full float64 reference at 32k tokens would not fit).

Which kernel really ran is read from the aten ops the call dispatched (a
``TorchDispatchMode``), and recorded in the check details: a forced backend is
never taken on trust. A backend the device (or this shape) does not offer is a
skip naming the backend and PyTorch's reason, never a pass.
"""

from __future__ import annotations

import warnings
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BACKENDS",
    "SHAPES",
    "AttentionCase",
    "Shape",
    "cases",
    "kernel_backend",
    "long_lengths",
    "run_attention_case",
]

# our name -> torch.nn.attention.SDPBackend member
BACKENDS: dict[str, str] = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "math": "MATH"}

# The reduced size every forward + backward comparison runs at.
BATCH, TOKENS = 2, 128
# Query rows of the long case compared with the float64 reference (first, last and seeded others).
SAMPLED_ROWS = 32
# Padded shape: valid keys per batch element (the rest masked out).
PADDED_LENGTHS = (TOKENS, 77)

# Normwise relative error limits (max|got - ref| / max|ref|) per dtype, forward and gradients.
# Measured on this machine's CPU (benchmarks/attention_errors.py, 5 seeds): the largest errors
# are at most 0.12 of these (docs/functional_test.md, "Attention").
TOLERANCE: dict[str, tuple[float, float]] = {
    "float32": (1e-4, 1e-4),
    "float16": (1e-2, 2e-2),
    "bfloat16": (6e-2, 1e-1),
}


@dataclass(frozen=True)
class Shape:
    heads: int
    kv_heads: int
    head_dim: int
    causal: bool = False
    padded: bool = False
    long: bool = False  # forward at the device's long lengths (sampled rows) instead of fwd + bwd at TOKENS

    @property
    def gqa(self) -> bool:
        return self.kv_heads != self.heads


SHAPES: dict[str, Shape] = {
    "plain_d64": Shape(4, 4, 64),
    "causal_d128": Shape(4, 4, 128, causal=True),
    "padded_d64": Shape(4, 4, 64, padded=True),
    "gqa_causal_d64": Shape(8, 2, 64, causal=True),
    "long_causal_d128": Shape(4, 4, 128, causal=True, long=True),
}


@dataclass(frozen=True)
class AttentionCase:
    name: str  # attention.<backend>.<shape>
    backend: str
    shape: str
    op: str = "aten::scaled_dot_product_attention"


def cases() -> list[AttentionCase]:
    return [AttentionCase(f"attention.{b}.{s}", b, s) for b in BACKENDS for s in SHAPES]


def long_lengths(device_type: str, backend: str) -> tuple[int, ...]:
    """Sequence lengths of the long case: CPU at most 1k; GPU 8k-32k (math only 8k: it
    materialises the whole B*H*L*L score matrix, 8.6 GB per 4 heads at 32k in half precision)."""
    if device_type == "cpu":
        return (1024,)
    return (8192,) if backend == "math" else (8192, 16384, 32768)


def kernel_backend(ops: Sequence[str]) -> str:
    """The backend that ran, from the aten ops it dispatched (math decomposes into bmm and softmax)."""
    names = " ".join(ops)
    for marker, backend in (
        ("flash_attention", "flash"),
        ("efficient_attention", "efficient"),
        ("cudnn_attention", "cudnn"),
    ):
        if marker in names:
            return backend
    if "bmm" in names or "softmax" in names:
        return "math"
    return "unknown"


def _kernels(ops: Sequence[str]) -> list[str]:
    return sorted({o for o in ops if "attention" in o or o in ("bmm", "_safe_softmax", "_softmax")})


class _OpLog:
    """Records the aten ops dispatched inside the block (the kernels of the forced backend)."""

    def __init__(self) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        log: list[str] = []

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                log.append(func.overloadpacket.__name__)
                return func(*args, **(kwargs or {}))

        self.ops = log
        self._mode = Mode()

    def __enter__(self) -> _OpLog:
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._mode.__exit__(*exc)


def _reference(q: Any, k: Any, v: Any, mask: Any, causal: bool) -> Any:
    """softmax(q k^T / sqrt(d) + mask) v in whatever dtype the inputs are (float64 here)."""
    import torch

    if k.shape[1] != q.shape[1]:  # grouped-query: each kv head serves heads/kv_heads query heads
        rep = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    if causal:
        lq, lk = q.shape[-2], k.shape[-2]
        keep = torch.ones(lq, lk, dtype=torch.bool).tril(diagonal=lk - lq)
        scores = scores.masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def _inputs(gen: Any, shape: Shape, batch: int, tokens: int) -> tuple[Any, Any, Any, Any]:
    import torch

    def randn(heads: int) -> Any:
        return torch.randn((batch, heads, tokens, shape.head_dim), generator=gen, dtype=torch.float64)

    q, k, v = randn(shape.heads), randn(shape.kv_heads), randn(shape.kv_heads)
    mask = None
    if shape.padded:  # key padding: batch element b sees its first PADDED_LENGTHS[b] keys
        valid = torch.tensor(PADDED_LENGTHS[:batch])
        mask = (torch.arange(tokens)[None, :] < valid[:, None])[:, None, None, :]
    return q, k, v, mask


def _sdpa(backend: str, qkv: Sequence[Any], mask: Any, shape: Shape) -> Any:
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    kwargs: dict[str, Any] = {"attn_mask": mask, "dropout_p": 0.0, "is_causal": shape.causal}
    if shape.gqa:
        kwargs["enable_gqa"] = True
    with sdpa_kernel(getattr(SDPBackend, BACKENDS[backend])):
        return F.scaled_dot_product_attention(*qkv, **kwargs)


def _refusal(err: BaseException, caught: list[Any], backend: str, device: str) -> str:
    """PyTorch's reason a forced backend refused the call ('' when the error is something else)."""
    text = str(err)
    if "No viable backend" not in text and "not supported" not in text.lower():
        return ""
    # PyTorch explains each refusal in a UserWarning ("Flash attention does not support ...")
    why = [str(w.message).strip().splitlines()[0] for w in caught if str(w.message).strip()]
    why = [w for w in why if any(s in w.lower() for s in ("kernel", "attention", "support", "requires"))]
    said = "; ".join(dict.fromkeys(why))[:300] or text.split(". ", maxsplit=1)[0][:200]
    return f"{backend}: not offered on {device} for this input (PyTorch: {said})"


def _forward_backward(
    case: AttentionCase, shape: Shape, dev: Any, dtype: Any, gen: Any
) -> tuple[float, float, list[str]]:
    """Forward + backward at the reduced size; (output error, gradient error, ops dispatched)."""
    import torch

    from stages.functional.compare import rel_error

    q, k, v, mask = _inputs(gen, shape, BATCH, TOKENS)
    grad = torch.randn((BATCH, shape.heads, TOKENS, shape.head_dim), generator=gen, dtype=torch.float64)
    ref_in = [t.clone().requires_grad_() for t in (q, k, v)]
    ref_out = _reference(ref_in[0], ref_in[1], ref_in[2], mask, shape.causal)
    ref_grads = torch.autograd.grad(ref_out, ref_in, grad)
    dev_in = [t.to(device=dev, dtype=dtype).requires_grad_() for t in (q, k, v)]
    dev_mask = mask.to(dev) if mask is not None else None
    with _OpLog() as log:
        out = _sdpa(case.backend, dev_in, dev_mask, shape)
        grads = torch.autograd.grad(out, dev_in, grad.to(device=dev, dtype=dtype))
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    return rel_error(out, ref_out), rel_error(list(grads), list(ref_grads)), log.ops


def _long_forward(case: AttentionCase, dev: Any, dtype: Any, gen: Any, tokens: int) -> tuple[float, list[str]]:
    """Forward at ``tokens``; the error over a seeded sample of query rows against float64."""
    import torch

    shape = SHAPES[case.shape]

    from stages.functional.compare import rel_error

    q, k, v, _ = _inputs(gen, shape, 1, tokens)
    rows = torch.randperm(tokens - 2, generator=gen)[: SAMPLED_ROWS - 2] + 1
    rows = torch.cat([torch.tensor([0, tokens - 1]), rows]).sort().values
    with torch.no_grad(), _OpLog() as log:
        out = _sdpa(case.backend, [t.to(device=dev, dtype=dtype) for t in (q, k, v)], None, shape)
        picked = out[:, :, rows.to(dev)].cpu()
    del out
    ref = torch.cat([_row_reference(q[:, :, int(r) : int(r) + 1], k, v, int(r), shape.causal) for r in rows], dim=2)
    return rel_error(picked, ref), log.ops


def _row_reference(q_row: Any, k: Any, v: Any, row: int, causal: bool) -> Any:
    """The float64 reference of one query row: with a causal mask it sees keys 0..row only."""
    if causal:
        k, v = k[:, :, : row + 1], v[:, :, : row + 1]
    return _reference(q_row, k, v, None, causal=False)


def run_attention_case(name: str, device: str, dtypes: Sequence[str], seed: int) -> dict[str, Any]:
    """Run one case in every dtype; returns {"status", "message", "details"} (skipped: backend refused)."""
    import torch

    case = next((c for c in cases() if c.name == name), None)
    if case is None:
        raise ValueError(f"unknown attention case {name}")
    shape = SHAPES[case.shape]
    dev = torch.device(device)
    missing = _missing_api(shape)
    if missing:
        return {"status": "skipped", "message": f"{case.backend}: {missing}", "details": {"backend": case.backend}}
    base = zlib.crc32(name.encode()) + 7919 * seed
    errors: dict[str, list[float]] = {}
    refused: dict[str, str] = {}
    problems: list[str] = []
    used: set[str] = set()
    kernels: set[str] = set()
    lengths = long_lengths(dev.type, case.backend) if shape.long else (TOKENS,)
    for dtype_name in dtypes:
        dtype = getattr(torch, dtype_name)
        fwd_tol, bwd_tol = TOLERANCE[dtype_name]
        gen = torch.Generator().manual_seed(base)
        errs: list[float] = []
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                if shape.long:
                    for tokens in lengths:
                        err, ops = _long_forward(case, dev, dtype, gen, tokens)
                        errs.append(err)
                        used.add(kernel_backend(ops))
                        kernels.update(_kernels(ops))
                        if not err <= fwd_tol:
                            problems.append(f"{dtype_name} {tokens} tokens: output error {err:.3g} > {fwd_tol:g}")
                else:
                    fwd, bwd, ops = _forward_backward(case, shape, dev, dtype, gen)
                    errs += [fwd, bwd]
                    used.add(kernel_backend(ops))
                    kernels.update(_kernels(ops))
                    if not fwd <= fwd_tol:
                        problems.append(f"{dtype_name}: output error {fwd:.3g} > {fwd_tol:g}")
                    if not bwd <= bwd_tol:
                        problems.append(f"{dtype_name}: gradient error {bwd:.3g} > {bwd_tol:g}")
        except RuntimeError as err:
            reason = _refusal(err, caught, case.backend, dev.type)
            if not reason:
                problems.append(f"{dtype_name}: {type(err).__name__}: {str(err).splitlines()[0][:300]}")
            else:
                refused[dtype_name] = reason
            continue
        except AssertionError as err:  # shapes or non-finite values that rel_error refuses
            problems.append(f"{dtype_name}: {err}")
            continue
        errors[dtype_name] = errs
    details: dict[str, Any] = {
        "backend": case.backend,
        "backend_used": sorted(used),
        "kernels": sorted(kernels),
        "shape": {**vars(shape), "batch": 1 if shape.long else BATCH, "tokens": list(lengths)},
        "dropout_p": 0.0,
        "errors": errors,
    }
    if refused:
        details["refused"] = refused
    wrong = sorted(used - {case.backend})
    if wrong:
        problems.append(f"forced {case.backend} but {', '.join(wrong)} ran (kernels: {', '.join(sorted(kernels))})")
    if problems:
        return {"status": "failed", "message": "; ".join(problems), "details": details}
    if not errors:  # every dtype refused: the backend is not offered here (a skip, never a pass)
        return {"status": "skipped", "message": next(iter(refused.values()), "no dtype ran"), "details": details}
    worst = ", ".join(f"{d} {max(e):.2g}" for d, e in errors.items())
    what = f"forward at {', '.join(map(str, lengths))} tokens" if shape.long else "forward + backward"
    note = f" (refused in {', '.join(refused)}: {next(iter(refused.values()))})" if refused else ""
    message = f"{case.backend} ran; {what}: max relative error {worst}{note}"
    return {"status": "passed", "message": message, "details": details}


def _missing_api(shape: Shape) -> str:
    import inspect

    import torch
    import torch.nn.functional as F

    try:
        from torch.nn.attention import sdpa_kernel  # noqa: F401 - torch 2.3+
    except ImportError:
        return f"torch {torch.__version__} has no torch.nn.attention.sdpa_kernel (torch 2.3+)"
    if shape.gqa:
        try:
            params = inspect.signature(F.scaled_dot_product_attention).parameters
        except (TypeError, ValueError):  # a builtin without a signature: try the call
            return ""
        if "enable_gqa" not in params:
            return f"torch {torch.__version__} has no enable_gqa (torch 2.5+)"
    return ""

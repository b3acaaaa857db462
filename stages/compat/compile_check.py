"""torch.compile (inductor): compile the model, compare with eager, time the
first compiled call, and say whether the kernel cache made it warm.

Runs in an isolated worker whose environment points TORCHINDUCTOR_CACHE_DIR and
TRITON_CACHE_DIR into the kernel cache (``gatekeeper.kernel_cache.key.cache_env``),
so a second run on a runner that keeps the cache starts warm.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

__all__ = ["compile_and_compare", "count_files"]


def count_files(root: str | None) -> int:
    if not root or not Path(root).is_dir():
        return 0
    return sum(len(files) for _, _, files in os.walk(root))


def compile_and_compare(
    *,
    model_spec: str | None,
    seed: int,
    batch_size: int,
    input_shape: tuple[int, ...] | None,
    device: str,
    atol: float,
    no_grad: bool = False,
) -> dict[str, Any]:
    """Return {"status", "message", "details"}; details hold compile_time_s, cache_hit, max_abs_error."""
    import torch
    from torch._dynamo.utils import counters

    from stages.models import load_model

    loaded = load_model(model_spec, seed=seed)
    model = loaded.module.eval().to(device)
    x = loaded.example_input(batch_size, input_shape, seed).to(device)
    cache_dir = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    files_before = count_files(cache_dir)
    # Autograd stays on by default: under no_grad an eval-mode TransformerEncoderLayer takes the fused
    # fast path, which inductor in torch 2.13 crashes on for non-contiguous inputs (pytorch/pytorch#193966);
    # no_grad=True (--compile-no-grad) checks that inference path on purpose.
    grad_mode = torch.no_grad() if no_grad else torch.enable_grad()
    with grad_mode:
        want = model(x)
        torch._dynamo.reset()
        counters.clear()
        compiled = torch.compile(model, backend="inductor")
        t0 = time.monotonic()
        got = compiled(x)
        if device != "cpu":
            torch.cuda.synchronize()
        compile_time = time.monotonic() - t0
        again = compiled(x)  # a second call must not recompile and must agree with the first
    inductor = dict(counters["inductor"])
    hits, misses = inductor.get("fxgraph_cache_hit", 0), inductor.get("fxgraph_cache_miss", 0)
    files_after = count_files(cache_dir)
    # The FX graph cache counters say it directly; without them, a cache that gained no files served the compile.
    cache_hit = (hits > 0 and misses == 0) if hits + misses else (files_before > 0 and files_after == files_before)
    got, want, again = got.detach(), want.detach(), again.detach()
    err = float((got.double() - want.double()).abs().max().cpu()) if want.numel() else 0.0
    details = {
        "compile_time_s": compile_time,
        "cache_hit": cache_hit,
        "max_abs_error": err,
        "fxgraph_cache_hit": hits,
        "fxgraph_cache_miss": misses,
        "cache_files_before": files_before,
        "cache_files_after": files_after,
        "cache_dir": cache_dir,
        "no_grad": no_grad,
    }
    problems = []
    if err > atol:
        problems.append(f"compiled vs eager max abs error {err:.3g} > {atol:g}")
    if not torch.equal(again, got):
        problems.append("a second compiled call gave different numbers")
    warm = "warm (cache hit)" if cache_hit else "cold (cache miss)"
    mode = "no_grad" if no_grad else "autograd on"
    msg = f"inductor on {device} ({mode}): first call {compile_time:.1f} s, {warm}; "
    msg += f"max abs error {err:.3g} (tolerance {atol:g})"
    return {"status": "failed" if problems else "passed", "message": "; ".join(problems) or msg, "details": details}

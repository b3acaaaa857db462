"""Run catalog cases in long-lived isolated workers (``stages.isolate.Worker``).

Worker side: ``run_case`` runs one case over dtypes and seeds and returns its
errors. Parent side: ``CaseRunner`` keeps a pool of workers (one per thread),
sends each case as one call with a timeout, and restarts a worker only after a
crash or a timeout, so a segfault, an abort or a hang costs one case, not the stage.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from stages.device import tf32_off
from stages.isolate import IsolatedOutcome, Worker

__all__ = ["CaseRunner", "run_case", "warm"]

_WARM_TIMEOUT_S = 180.0  # a fresh worker imports torch (and the catalog) before its first case


def warm(threads: int) -> str:
    """First call in a fresh worker: pay the imports outside any case's timeout."""
    import torch

    from stages.functional.catalog import all_cases

    if threads > 0:
        torch.set_num_threads(threads)
    # float32 means float32: TF32 convolutions (cuDNN's default on NVIDIA Ampere and later) would fail
    # the float32 tolerances by design, so the catalog and the replays run with TF32 off
    tf32_off()
    all_cases()
    return f"torch {torch.__version__}, {torch.get_num_threads()} threads"


def _unsupported_here(err: BaseException, device: str, dtype: str) -> bool:
    # CPU kernels lack some float16/bfloat16 variants; on the CPU that is no news.
    # On a GPU a missing low-precision kernel is exactly what this stage reports.
    text = str(err)
    return device == "cpu" and dtype != "float32" and ("not implemented for" in text or "Unsupported" in text)


def run_case(name: str, device: str, dtypes: Sequence[str], seeds: Sequence[int]) -> dict[str, Any]:
    """Run one case: every dtype it supports x every seed, against CPU float64.

    Returns ``{"status", "message", "details": {"errors": {dtype: [per seed]}, ...}}``;
    a failure is a result, not an exception, so its errors still feed the statistics.
    """
    import torch

    from stages.functional.catalog import all_cases
    from stages.functional.compare import rel_error, to_reference
    from stages.functional.tolerances import tolerance

    warnings.filterwarnings("ignore", message="Using padding='same'")  # a perf note on even kernels, not a result
    case = all_cases()[name]
    dev = torch.device(device)
    base = zlib.crc32(name.encode())
    errors: dict[str, list[float]] = {}
    problems: list[str] = []
    unsupported: dict[str, str] = {}
    for dtype in [d for d in case.dtypes if d in dtypes]:
        tol = tolerance(case.kind, dtype)
        errs: list[float] = []
        for seed in seeds:
            gen = torch.Generator().manual_seed(base + 7919 * seed)
            args = case.make(gen)
            ref_args = case.layout(*args) if case.layout else args
            ref = case.call(*ref_args)
            dev_args = to_reference(args, getattr(torch, dtype), dev)
            if case.layout:
                dev_args = case.layout(*dev_args)
            try:
                got = case.call(*dev_args)
                if dev.type == "cuda":
                    torch.cuda.synchronize(dev)
                err = rel_error(got, ref)
            except AssertionError as exc:
                problems.append(f"{dtype} seed {seed}: {exc}")
                break
            except Exception as exc:
                if _unsupported_here(exc, device, dtype):
                    unsupported[dtype] = str(exc).splitlines()[0][:200]
                    break
                problems.append(f"{dtype} seed {seed}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
                break
            errs.append(err)
            if not err <= tol:
                problems.append(f"{dtype} seed {seed}: relative error {err:.3g} > tolerance {tol:g}")
                break
        if errs:
            errors[dtype] = errs
    if case.gradcheck:
        problem = _gradcheck(case, dev, base)
        if problem:
            problems.append(problem)
    details: dict[str, Any] = {"op": case.op, "kind": case.kind, "errors": errors}
    if unsupported:
        details["unsupported"] = unsupported
    worst = {d: max(e) for d, e in errors.items()}
    summary = ", ".join(f"{d} {w:.2g}" for d, w in worst.items()) or "no dtype ran"
    if problems:
        return {"status": "failed", "message": "; ".join(problems), "details": details}
    note = f" (not on this device: {', '.join(unsupported)})" if unsupported else ""
    return {"status": "passed", "message": f"max relative error {summary}{note}", "details": details}


def _gradcheck(case: Any, dev: Any, base: int) -> str:
    """gradcheck and gradgradcheck of a custom autograd Function in float64 (on the device when it has float64)."""
    import torch

    gen = torch.Generator().manual_seed(base)
    inputs = [
        t.to(dev).requires_grad_(t.is_floating_point()) if isinstance(t, torch.Tensor) else t
        for t in case.make(gen)[:-1]  # the last input is the upstream gradient
    ]
    try:
        torch.autograd.gradcheck(case.forward, inputs, eps=1e-6, atol=1e-5, rtol=1e-4)
        torch.autograd.gradgradcheck(case.forward, inputs, eps=1e-6, atol=1e-5, rtol=1e-4)
    except Exception as exc:  # GradcheckError carries the numerical and analytical Jacobians
        return f"gradcheck float64: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
    return ""


class CaseRunner:
    """A pool of ``workers`` isolated workers; ``map`` runs calls over them, batched per worker."""

    def __init__(self, workers: int, *, timeout: float, env: dict[str, str] | None = None) -> None:
        self.size = max(1, workers)
        self.timeout = timeout
        self.threads = 1 if self.size > 1 else 0  # one torch thread per worker when they share the cores
        self._env = {**(env or {}), "OMP_NUM_THREADS": str(self.threads or os.cpu_count() or 1)}
        self._free: list[Worker] = []
        self._all: list[Worker] = []
        self._cold: set[int] = set()
        self._lock = threading.Lock()
        self.restarts = 0

    def _take(self) -> Worker:
        with self._lock:
            if self._free:
                return self._free.pop()
            worker = Worker(env=self._env)
            self._all.append(worker)
            self._cold.add(id(worker))
            return worker

    def call(self, target: str, *args: Any, timeout: float | None = None, **kwargs: Any) -> IsolatedOutcome:
        worker = self._take()
        try:
            if id(worker) in self._cold:
                warmed = worker.call("stages.functional.runner:warm", self.threads, timeout=_WARM_TIMEOUT_S)
                if not warmed.ok:
                    return warmed
                self._cold.discard(id(worker))
            outcome = worker.call(target, *args, timeout=timeout or self.timeout, **kwargs)
            if outcome.kind in ("crashed", "timeout"):
                self.restarts += 1
                self._cold.add(id(worker))  # restarted on its next call: warm it first
            return outcome
        finally:
            with self._lock:
                self._free.append(worker)

    def map(
        self,
        target: str,
        items: Sequence[tuple[Any, ...]],
        *,
        on_done: Callable[[int, IsolatedOutcome], None] | None = None,
        timeout: float | None = None,
        deadline: float | None = None,
    ) -> list[IsolatedOutcome | None]:
        """Call ``target(*item)`` for each item; results in item order (None: not started before ``deadline``)."""
        results: list[IsolatedOutcome | None] = [None] * len(items)

        def one(i: int) -> None:
            if deadline is not None and time.monotonic() >= deadline:
                return
            outcome = self.call(target, *items[i], timeout=timeout)
            results[i] = outcome
            if on_done:
                on_done(i, outcome)

        with ThreadPoolExecutor(self.size) as pool:
            list(pool.map(one, range(len(items))))
        return results

    def close(self) -> None:
        for worker in self._all:
            worker.close()

    def __enter__(self) -> CaseRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

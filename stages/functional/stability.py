"""Training stability (``functional_test --stability-loops L --stability-epochs E``).

L training loops of E epochs (``--train-steps`` steps each, 20 when that is 0), each loop in a fresh
isolated process: a loop that raises, crashes or hangs is an interruption, counted by kind:

- ``oom``: out of memory (``torch.OutOfMemoryError``, "HIP/CUDA out of memory", and the host's: the CPU
  allocator's "can't allocate memory", which failure analysis files under ``infra_error``);
- ``launch_timeout``: "the launch timed out and was terminated" (``hipErrorLaunchTimeOut``, the
  watchdog killed a kernel);
- ``illegal_address``: "an illegal memory access was encountered", ``hipErrorIllegalAddress``;
- ``hang``: the loop did not finish within its time limit (the worker is killed);
- ``crash``: the worker process died (a signal) with nothing more said;
- ``other``: any other exception (its first line is in the check).

The kinds are the failure-analysis categories the stage can tell from one exception
(``device_oom``, ``gpu_hang_or_timeout``, ``illegal_memory_access``; ``KIND_CATEGORIES``); the stages
may not import ``gatekeeper.analyze`` (a layer above them), so tests/stages/test_functional_training.py
holds this classifier to the analyzer's verdict on the real runtime messages of
tests/analyze/catalogues/. A crash's own message (ROCr's "Memory access fault by GPU" before its abort,
on stderr) is in the stage log, where ``gatekeeper analyze`` reads it.

Memory growth: the memory after each epoch (allocated device memory on a GPU, the process's RSS on
the CPU), relative to the end of the first epoch (which allocates the optimizer state and the
caches), pooled over the loops that finished; its Theil-Sen slope in MB per epoch with the 95%
interval (``memory_growth_mb_per_epoch``, ``.ci_low``, ``.ci_high``).
"""

from __future__ import annotations

import re
from typing import Any

from gatekeeper.contract.metric_points import point_name
from gatekeeper.stats.compare import theil_sen_slope
from stages.functional.steps import Plan
from stages.isolate import IsolatedOutcome, run_isolated

__all__ = ["KINDS", "KIND_CATEGORIES", "classify", "memory_growth", "run"]

KINDS = ("oom", "launch_timeout", "illegal_address", "hang", "crash", "other")
# the failure-analysis categories (gatekeeper/analyze/known_issues.yaml) a kind can be a case of
KIND_CATEGORIES = {
    "oom": ("device_oom", "infra_error"),  # the device's memory, or the host's
    "launch_timeout": ("gpu_hang_or_timeout",),
    "illegal_address": ("illegal_memory_access",),
    "hang": ("gpu_hang_or_timeout",),
}
_OOM = r"OutOfMemoryError|\bout of memory\b|can't allocate memory|ErrorOutOfMemory|ERROR_OUT_OF_MEMORY"
_LAUNCH_TIMEOUT = r"launch timed out|ErrorLaunchTimeOut|ERROR_LAUNCH_TIMEOUT"
_ILLEGAL = r"illegal memory access|illegal address|ErrorIllegalAddress|ERROR_ILLEGAL_ADDRESS"
_PATTERNS = (
    ("oom", re.compile(_OOM, re.I)),
    ("launch_timeout", re.compile(_LAUNCH_TIMEOUT, re.I)),
    ("illegal_address", re.compile(_ILLEGAL, re.I)),
)
DEFAULT_STEPS = 20
TARGET = "stages.functional.training:train_run"


def classify_text(text: str) -> str | None:
    """The kind an error message names (None: none of oom, launch timeout, illegal address)."""
    for kind, pattern in _PATTERNS:
        if pattern.search(text):
            return kind
    return None


def classify(outcome: IsolatedOutcome) -> str | None:
    """None for a loop that finished; else its interruption kind."""
    if outcome.kind == "ok":
        return None
    if outcome.kind == "timeout":
        return "hang"
    said = classify_text(f"{outcome.error_type}: {outcome.message}")
    if said:
        return said
    return "crash" if outcome.kind == "crashed" else "other"


def memory_growth(series: list[list[float]]) -> tuple[float, float, float] | None:
    """Theil-Sen slope (MB per epoch) and 95% interval of memory after epochs 2.. relative to epoch 1."""
    xs: list[float] = []
    ys: list[float] = []
    for mb in series:
        if len(mb) < 2:
            continue
        for epoch, value in enumerate(mb[1:], start=1):
            xs.append(float(epoch))
            ys.append(value - mb[1])
    if len(xs) < 3 or len(set(xs)) < 2:
        return None
    return theil_sen_slope(xs, ys)


def run(
    rec: Any,
    plan: Plan,
    *,
    loops: int,
    epochs: int,
    steps: int,
    lr: float,
    train_step: str | None,
    timeout: float | None = None,
    target: str = TARGET,
) -> dict[str, Any]:
    steps = steps or DEFAULT_STEPS
    counts = dict.fromkeys(KINDS, 0)
    series: list[list[float]] = []
    rows = []
    for i in range(loops):
        seed = plan.seed + 1000 + i
        outcome = run_isolated(
            target,
            timeout=timeout if timeout is not None else plan.timeout + 5.0 * steps * epochs,
            spec=plan.model,
            seed=seed,
            steps=steps,
            epochs=epochs,
            batch_size=plan.batch_size,
            input_shape=plan.input_shape,
            device=plan.dev,
            lr=lr,
            train_step=train_step,
        )
        name = f"stability.loop.{i + 1}"
        kind = classify(outcome)
        if kind is None:
            memory = outcome.value["memory_mb"]
            series.append(memory)
            said = f"{epochs} epochs of {steps} steps; memory " + " -> ".join(f"{m:.1f}" for m in memory) + " MB"
            rec.record(name, "passed", said, duration_s=outcome.duration_s)
            rows.append({"loop": i + 1, "seed": seed, "status": "finished", "memory_mb": memory})
            continue
        counts[kind] += 1
        first = outcome.message.strip().splitlines()[0] if outcome.message.strip() else outcome.kind
        if kind == "hang":
            first = f"check {first} (the worker was killed)"  # the wording failure analysis reads as a hang
        rec.record(name, "failed", f"interrupted ({kind}): {first}", duration_s=outcome.duration_s)
        rows.append({"loop": i + 1, "seed": seed, "status": "interrupted", "kind": kind, "message": first})
    total = sum(counts.values())
    rec.metric("train_interruptions", float(total), "count", "lower", description=f"of {loops} training loops")
    for kind, n in counts.items():
        rec.metric(point_name("train_interruptions", {"kind": kind}), float(n), "count", "lower")
    growth = memory_growth(series)
    if growth is None:
        why = (
            f"memory growth needs 3 points after the first epoch (--stability-epochs {epochs}, "
            f"{len(series)} loops finished): 2 loops of 3 epochs, or 1 of 4"
        )
        rec.skip("stability.memory_growth", why)
    else:
        slope, lo, hi = growth
        where = f"after epoch 1, over {len(series)} loops"
        rec.metric("memory_growth_mb_per_epoch", slope, "MB/epoch", "lower", description=f"Theil-Sen slope {where}")
        rec.metric("memory_growth_mb_per_epoch.ci_low", lo, "MB/epoch", "lower", description="95% interval, low end")
        rec.metric("memory_growth_mb_per_epoch.ci_high", hi, "MB/epoch", "lower", description="95% interval, high end")
        rec.record("stability.memory_growth", "passed", f"{slope:+.2f} MB/epoch [95% CI {lo:+.2f}, {hi:+.2f}] {where}")
    return {
        "loops": loops,
        "epochs": epochs,
        "steps": steps,
        "interruptions": counts,
        "memory_growth_mb_per_epoch": growth[0] if growth else None,
        "runs": rows,
    }

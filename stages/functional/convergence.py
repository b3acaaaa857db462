"""Training convergence parity (``functional_test --train-steps N --train-seeds K``).

The model trains for N steps on the seeded synthetic task of ``stages.functional.training``, once
per seed, each seed in a fresh process. Per run the stage reports the final loss (the mean of the
last tenth of the steps) and, over the seeds, its mean and spread (standard deviation).

With ``--golden-save DIR`` the curves are kept in ``DIR/convergence.json`` beside the golden outputs
of the parity feature (``stages.functional.golden``); with ``--golden DIR`` this run's curves are
compared with them, seed by seed (the same seed gives the same initial weights and data on both
stacks):

- ``convergence_curve_distance``: the largest relative RMS distance of a seed's curve from the
  golden's, ``sqrt(mean_t (loss_t - golden_t)^2) / sqrt(mean_t golden_t^2)``; a seed that did not
  finish counts as 1 (fails closed). The early steps, where the curves fall fastest, dominate it:
  an optimizer that takes other steps (a learning rate 1.5x) moves it by tens of percent, while
  two stacks running the same arithmetic differ by rounding.
- ``convergence_spread_p``: the one-sided F-test (``scipy.stats.f``) that this run's final losses
  vary more across seeds than the golden's (the "±0.5 became ±1.2" of the field report); the ratio
  of the two standard deviations is ``convergence_spread_ratio``. With 3 seeds only a large widening
  is significant: use 10 or more for a sensitive test. The F-test assumes normal final losses.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import platform
import statistics
from pathlib import Path
from typing import Any

from gatekeeper.core import files
from gatekeeper.core.errors import InputError
from gatekeeper.core.files import atomic_write
from stages.functional.steps import Plan
from stages.isolate import run_isolated

__all__ = [
    "FILE",
    "MAX_DISTANCE",
    "SPREAD_ALPHA",
    "curve_distance",
    "final_loss",
    "read_golden",
    "record",
    "run",
    "spread_test",
]

FILE = "convergence.json"
SCHEMA_VERSION = 1
MAX_DISTANCE = 0.05  # the stage's own limit (the convergence-parity gate reads the metric)
SPREAD_ALPHA = 0.01  # the convergence-spread gate's limit on the p-value
_MAX_BYTES = 16 << 20
TARGET = "stages.functional.training:train_run"


def final_loss(curve: list[float]) -> float:
    """The mean of the last tenth of the curve (at least the last step): one step is noisy."""
    n = max(1, len(curve) // 10)
    return statistics.fmean(curve[-n:])


def curve_distance(curve: list[float], golden: list[float]) -> float:
    """Relative RMS distance of two curves of the same length (1.0 when they cannot be compared)."""
    if len(curve) != len(golden) or not golden:
        return 1.0
    diff = math.sqrt(statistics.fmean((a - g) ** 2 for a, g in zip(curve, golden, strict=True)))
    scale = math.sqrt(statistics.fmean(g * g for g in golden))
    return diff / scale if scale > 0 else (0.0 if diff == 0 else 1.0)


def spread_test(finals: list[float], golden_finals: list[float]) -> tuple[float | None, float | None]:
    """(std ratio this/golden, one-sided F-test p that this run's variance is larger); None without 2 of each."""
    if len(finals) < 2 or len(golden_finals) < 2:
        return None, None
    from scipy import stats

    v, g = statistics.variance(finals), statistics.variance(golden_finals)
    if g == 0:
        return (None, 1.0) if v == 0 else (math.inf, 0.0)
    return math.sqrt(v / g), float(stats.f.sf(v / g, len(finals) - 1, len(golden_finals) - 1))


def _config(plan: Plan, steps: int, lr: float, train_step: str | None) -> dict[str, Any]:
    from stages.models import DEMO_SPEC

    return {
        "model": plan.model or DEMO_SPEC,
        "batch_size": plan.batch_size,
        "input_shape": list(plan.input_shape) if plan.input_shape else None,
        "steps": steps,
        "lr": lr,
        "train_step": train_step,
    }


def read_golden(
    directory: Path, plan: Plan, *, steps: int, seeds: int, lr: float, train_step: str | None
) -> dict[str, Any]:
    """``DIR/convergence.json``, checked against this run's training configuration (InputError if unusable)."""
    path = directory / FILE
    where = str(path)
    hint = "save one with --golden-save DIR --train-steps N on the reference stack"
    if not os.path.lexists(path):
        raise InputError(where, "--golden", "no loss curves in this golden (--train-steps was not saved)", hint)
    try:  # the strict reader: a regular file, bounded, no duplicate key
        doc = files.read_json(path, what="convergence golden", max_bytes=_MAX_BYTES)
    except InputError as err:
        raise InputError(where, err.where, f"not a readable convergence golden: {err.problem}", hint) from None
    if not isinstance(doc, dict) or doc.get("schema_version") != SCHEMA_VERSION:
        raise InputError(where, "schema_version", f"not {SCHEMA_VERSION}", hint)
    curves = doc.get("curves")
    if not isinstance(curves, dict) or not isinstance(doc.get("config"), dict) or not curves:
        raise InputError(where, "curves", "missing or empty", hint)
    for seed, curve in curves.items():
        if (
            not (isinstance(curve, list) and all(isinstance(x, int | float) and math.isfinite(x) for x in curve))
            or not str(seed).lstrip("-").isdigit()
        ):
            raise InputError(where, f"curves.{seed}", "not a list of finite losses under a seed number", hint)
    ours = _config(plan, steps, lr, train_step)
    for key, value in ours.items():
        if doc["config"].get(key) != value:
            raise InputError(
                where,
                f"config.{key}",
                f"the golden was trained with {doc['config'].get(key)!r}, this run uses {value!r}",
                "train with the golden's --model/--batch-size/--input-shape/--train-steps/--train-lr/--train-step",
            )
    missing = [s for s in range(plan.seed, plan.seed + seeds) if str(s) not in curves]
    if missing:
        have = ", ".join(sorted(curves, key=int))
        raise InputError(where, "curves", f"no curve for seed(s) {missing}", f"train seeds the golden has ({have})")
    short = [s for s, c in curves.items() if len(c) != steps]
    if short:
        raise InputError(where, "curves", f"seed(s) {short} do not have {steps} losses", hint)
    return doc


def _stack(device: str) -> dict[str, Any]:
    import torch

    name = torch.cuda.get_device_name(0) if device.startswith("cuda") else platform.processor() or "cpu"
    return {
        "torch": torch.__version__,
        "device": device,
        "device_name": name,
        "hip": getattr(torch.version, "hip", None),
    }


def run(
    rec: Any,
    plan: Plan,
    *,
    steps: int,
    seeds: int,
    lr: float,
    train_step: str | None,
    golden: dict[str, Any] | None,
    save_dir: Path | None,
) -> dict[str, Any]:
    """Train every seed in a fresh process; record the metrics, save and/or compare the curves."""
    curves: dict[int, list[float]] = {}
    failed: list[int] = []
    for seed in range(plan.seed, plan.seed + seeds):
        outcome = run_isolated(
            TARGET,
            timeout=plan.timeout + 5.0 * steps,
            spec=plan.model,
            seed=seed,
            steps=steps,
            batch_size=plan.batch_size,
            input_shape=plan.input_shape,
            device=plan.dev,
            lr=lr,
            train_step=train_step,
        )
        name = f"convergence.seed.{seed}"
        if not outcome.ok:
            rec.outcome(name, outcome)
            failed.append(seed)
            continue
        curve = outcome.value["losses"]
        curves[seed] = curve
        rec.record(
            name,
            "passed",
            f"loss {curve[0]:.4g} -> {final_loss(curve):.4g} in {steps} steps",
            duration_s=outcome.duration_s,
            details={"losses": curve, "threads": outcome.value["threads"]},
        )
    summary = record(rec, curves, failed, golden, steps=steps)
    if save_dir is not None and curves:
        doc = {
            "schema_version": SCHEMA_VERSION,
            "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "stack": _stack(plan.dev),
            "config": _config(plan, steps, lr, train_step),
            "curves": {str(s): c for s, c in curves.items()},
        }
        save_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(save_dir / FILE, json.dumps(doc, indent=1))
        summary["saved_to"] = str(save_dir / FILE)
    return summary


def record(
    rec: Any, curves: dict[int, list[float]], failed: list[int], golden: dict[str, Any] | None, *, steps: int
) -> dict[str, Any]:
    """Metrics and checks from the curves of this run (and the golden's, when given)."""
    finals = [final_loss(c) for _, c in sorted(curves.items())]
    spread = statistics.stdev(finals) if len(finals) > 1 else None
    if finals:
        rec.metric(
            "convergence_final_loss", statistics.fmean(finals), "loss", "lower", samples=finals,
            description=f"mean over {len(finals)} seeds of the mean loss of the last tenth of {steps} steps",
        )  # fmt: skip
    rec.metric("convergence_final_loss_spread", spread, "loss", "lower", description="standard deviation over seeds")
    summary: dict[str, Any] = {
        "steps": steps,
        "seeds": sorted(curves),
        "failed_seeds": failed,
        "final_losses": finals,
        "spread": spread,
    }
    if golden is None:
        why = "no --golden DIR: nothing to compare the curves with (save one with --golden-save DIR)"
        rec.skip("convergence.parity", why)
        rec.skip("convergence.spread", why)
        return summary
    theirs = {int(s): c for s, c in golden["curves"].items()}
    stack = golden.get("stack") or {}
    against = f"the golden of torch {stack.get('torch')} on {stack.get('device_name')}"
    distances = {}
    for seed in [*sorted(curves), *failed]:
        if seed not in theirs:
            raise InputError(None, "--golden", f"the golden has no curve for seed {seed}", "use the golden's seeds")
        distances[seed] = curve_distance(curves[seed], theirs[seed]) if seed in curves else 1.0
    worst_seed = max(distances, key=lambda s: distances[s])
    distance = distances[worst_seed]
    rec.metric(
        "convergence_curve_distance", distance, "ratio", "lower",
        description=f"largest relative RMS distance of a seed's loss curve from {against}",
    )  # fmt: skip
    said = f"largest curve distance {distance:.3g} (seed {worst_seed}) against {against}"
    status = "failed" if distance > MAX_DISTANCE or failed else "passed"
    reason = f"; seeds {failed} did not finish" if failed else ""
    rec.record(
        "convergence.parity", status, f"{said} (limit {MAX_DISTANCE:g}){reason}", details={"distances": distances}
    )
    golden_finals = [final_loss(c) for _, c in sorted(theirs.items())]
    ratio, p = spread_test(finals, golden_finals)
    if p is None:
        rec.skip(
            "convergence.spread",
            f"the spread needs 2 seeds on each side ({len(finals)} here, {len(golden_finals)} golden)",
        )
    else:
        rec.metric("convergence_spread_p", p, "p-value", "higher", description="one-sided F-test, this run wider")
        if ratio is not None and math.isfinite(ratio):
            rec.metric("convergence_spread_ratio", ratio, "ratio", "lower", description="std over seeds, this / golden")
        g_spread = statistics.stdev(golden_finals)
        shown = f"final-loss spread {spread:.3g} against {g_spread:.3g} in the golden (p={p:.3g})"
        rec.record("convergence.spread", "failed" if p < SPREAD_ALPHA else "passed", shown)
    return summary | {"distance": distance, "distances": distances, "spread_p": p, "spread_ratio": ratio}

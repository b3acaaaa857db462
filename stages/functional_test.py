"""functional_test: operator coverage, precision drift, model-traced ops, custom
autograd, checkpoint restore and sparse tensors, on the device against a CPU
float64 reference.

Produces the field report's table for any stack: per category (basic_math,
convolution, reduction, matrix, custom_backward, distributed, attention) the cases, pass
rate and failing ops; the relative-error distribution per dtype over seeds; the
aten ops the model really runs, replayed one by one; the whole model's gradients
against CPU float64; checkpoint restore in a fresh process; sparse COO/CSR;
with --golden-save/--golden, the model's outputs and gradients against another stack's.
Every case runs in an isolated worker with a timeout (see stages/functional/runner.py).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from gatekeeper.contract.failures import CheckKind, MetricKind
from gatekeeper.core.errors import InputError
from stages._stage import StageContext, stage_main
from stages.functional import parity, steps
from stages.functional.catalog import CATEGORIES
from stages.functional.report import Tally, write_markdown
from stages.functional.runner import CaseRunner
from stages.functional.tolerances import DTYPES

NAME = "functional_test"
DESCRIPTION = (
    "Operator catalog, precision over seeds, model-traced ops, autograd, checkpoints and sparse vs CPU float64."
)

__all__ = ["DESCRIPTION", "NAME", "Options", "add_arguments", "main", "run"]


@dataclass(frozen=True)
class Options:
    seeds: int = 10
    categories: str = "all"
    dtypes: str = ",".join(DTYPES)
    opinfo: bool = False
    opinfo_budget: float = 120.0
    checkpoint_trials: int = 5
    checkpoint_steps: int = 3
    cases: Path | None = None
    no_traced: bool = False
    no_sparse: bool = False
    workers: int = 2
    golden_save: Path | None = None
    golden: Path | None = None
    # training convergence and stability (stages/functional/convergence.py, stability.py): opt-in
    train_steps: int = 0
    train_seeds: int = 3
    train_lr: float = 1e-3
    train_step: str | None = None
    stability_loops: int = 0
    stability_epochs: int = 3


_DRIFT_FIX = (
    "compare the op on this device with CPU float64 at the shape and dtype in the message; a change since the "
    "baseline points at the torch/ROCm/CUDA library upgrade (rocBLAS, MIOpen, hipBLASLt); waive the check with a "
    "checks: waiver (owner, ticket, expiry) while it is fixed upstream"
)

# Every check and metric this stage writes, with the failure category of each (contract/failures.py).
CHECKS = (
    *(
        CheckKind(f"{category}.*", "numerical_mismatch", f"catalog cases of {category} vs CPU float64", _DRIFT_FIX)
        for category in CATEGORIES
        if category not in ("distributed", "attention")
    ),
    CheckKind(
        "attention.*",
        "numerical_mismatch",
        "scaled dot-product attention with one backend forced, vs CPU float64",
        "disable the failing SDPA backend for this device (torch.backends.cuda.enable_*_sdp) and report it upstream",
    ),
    CheckKind(
        "distributed.*",
        "collective_comm_error",
        "collectives in 2 rank processes give the right result",
        "rerun with NCCL_DEBUG=INFO (RCCL too) and compare the RCCL/NCCL version with a passing machine",
        on_timeout="collective_comm_error",
    ),
    CheckKind(
        "user.*",
        "numerical_mismatch",
        "the repository's own case_* functions (--cases)",
        "run the failing case_* function from --cases alone on the device",
    ),
    CheckKind(
        "traced.capture",
        "configuration_error",
        "the model runs forward and backward once, so its aten ops can be listed",
        "run the model's factory and example_input(batch_size) by hand: the model itself fails or hangs",
    ),
    CheckKind(
        "traced.model.forward_backward",
        "numerical_mismatch",
        "the whole model's outputs and gradients on the device vs CPU float64",
        "look for the drifting ops among the traced.* checks; the worst row of the details names the layer",
    ),
    CheckKind(
        "traced*",
        "numerical_mismatch",
        "every aten op the model runs, replayed on the device vs CPU float64",
        _DRIFT_FIX,
    ),
    CheckKind(
        "checkpoint*",
        "numerical_mismatch",
        "save, restore in a fresh process and continue gives the uninterrupted result",
        "compare the restored state dict with the saved one (optimizer state, RNG state, buffers)",
    ),
    CheckKind(
        "sparse*",
        "numerical_mismatch",
        "sparse COO/CSR operations on the device vs dense CPU",
        "check whether the sparse op is implemented for this device (torch's sparse support differs per backend)",
    ),
    CheckKind(
        "golden.*",
        "numerical_mismatch",
        "the model's outputs and gradients vs a golden saved on another stack",
        "compare the two stacks' versions in the golden's meta.json; find the drifting op with the traced checks",
    ),
    CheckKind(
        "convergence*",
        "numerical_mismatch",
        "training loss curves over seeds vs the golden's (--train-steps), and their spread",
        "compare the loss curves in convergence.json with the golden's: the first step where they part names the op "
        "to look at (the traced checks replay it)",
    ),
    CheckKind(
        "stability.memory_growth",
        "performance_regression",
        "memory does not grow from epoch to epoch over repeated training loops",
        "look for tensors kept across epochs (losses appended with their graph, caches keyed by step)",
    ),
    CheckKind(
        "stability*",
        "segfault",
        "repeated training loops finish without an out-of-memory, launch timeout, illegal address, crash or hang",
        "the message names the interruption: rerun that loop alone with the device's debug settings "
        "(AMD_SERIALIZE_KERNEL=3 or CUDA_LAUNCH_BLOCKING=1)",
    ),
    CheckKind(
        "opinfo.*",
        "numerical_mismatch",
        "PyTorch's OpInfo samples on the device vs CPU",
        "rerun the OpInfo named in the check; compare with torch's own test for that op on this device",
    ),
)
METRICS = (
    MetricKind("op_pass_rate*", "numerical_mismatch", "share of catalog cases that match CPU float64"),
    MetricKind("max_rel_error*", "numerical_mismatch", "largest relative error vs CPU float64"),
    MetricKind("rel_error_*", "numerical_mismatch", "relative error distribution vs CPU float64"),
    MetricKind("user_case_pass_rate", "numerical_mismatch", "share of --cases that passed"),
    MetricKind("traced_op_pass_rate", "numerical_mismatch", "share of the model's aten ops that match"),
    MetricKind("model_*", "numerical_mismatch", "whole-model outputs and gradients vs CPU float64"),
    MetricKind("checkpoint_restore_rate", "numerical_mismatch", "share of restores that continue exactly"),
    MetricKind("sparse_pass_rate", "numerical_mismatch", "share of sparse cases that pass"),
    MetricKind("opinfo_pass_rate", "numerical_mismatch", "share of OpInfo samples that pass"),
    MetricKind("golden_*", "numerical_mismatch", "parity with a golden of another stack"),
    MetricKind("convergence_*", "numerical_mismatch", "training loss curves and their spread vs the golden's"),
    MetricKind("train_interruptions*", "segfault", "training loops interrupted (by kind)"),
    MetricKind("memory_growth_mb_per_epoch*", "performance_regression", "memory growth per training epoch"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("functional_test options")
    g.add_argument("--seeds", type=int, default=10, help="seeds per catalog case and dtype (default 10; nightly: 100)")
    g.add_argument(
        "--categories", default="all", help=f"comma list of {', '.join(CATEGORIES)}; 'all' (default) or 'none'"
    )
    g.add_argument("--dtypes", default=",".join(DTYPES), help="comma list of float32, float16, bfloat16 (default all)")
    g.add_argument("--opinfo", action="store_true", help="also sweep PyTorch's OpInfo database (needs expecttest)")
    g.add_argument("--opinfo-budget", type=float, default=120.0, help="seconds for the OpInfo sweep (default 120)")
    g.add_argument("--checkpoint-trials", type=int, default=5, help="save/restore trials (default 5; 0 skips them)")
    g.add_argument("--checkpoint-steps", type=int, default=3, help="training steps before and after the restore")
    g.add_argument("--cases", type=Path, help="a .py file whose top-level case_*(device) functions are extra checks")
    g.add_argument("--no-traced", action="store_true", help="skip the model-traced op replay and whole-model check")
    g.add_argument("--no-sparse", action="store_true", help="skip the sparse tensor checks")
    g.add_argument("--workers", type=int, default=2, help="isolated worker processes running cases (default 2)")
    g.add_argument(
        "--golden-save",
        type=Path,
        metavar="DIR",
        help="save the model's outputs and gradients (and the stack that made them) as a golden in DIR",
    )
    g.add_argument(
        "--golden",
        type=Path,
        metavar="DIR",
        help="compare the model's outputs and gradients with the golden in DIR (saved on another stack)",
    )
    g.add_argument("--train-steps", type=int, default=0, help="convergence: train N steps per seed (default 0: off)")
    g.add_argument("--train-seeds", type=int, default=3, help="convergence: seeds, each in a fresh process (default 3)")
    g.add_argument("--train-lr", type=float, default=1e-3, help="learning rate of the convergence runs (Adam)")
    g.add_argument("--train-step", metavar="MODULE:FUNCTION", help="your loss: function(model, batch) -> loss tensor")
    g.add_argument("--stability-loops", type=int, default=0, help="stability: repeated training loops (default 0: off)")
    g.add_argument("--stability-epochs", type=int, default=3, help="epochs per stability loop (default 3)")


def _split(text: str, allowed: tuple[str, ...], option: str) -> tuple[str, ...]:
    if text.strip() == "all":
        return allowed
    if text.strip() == "none":
        return ()
    items = tuple(x.strip() for x in text.split(",") if x.strip())
    unknown = [x for x in items if x not in allowed]
    if unknown or not items:
        raise InputError(None, option, f"unknown value {', '.join(unknown) or repr(text)}", f"use {', '.join(allowed)}")
    return tuple(x for x in allowed if x in items)


def _validate(opts: Options) -> None:
    for option, value, low in (
        ("--seeds", opts.seeds, 1),
        ("--workers", opts.workers, 1),
        ("--checkpoint-trials", opts.checkpoint_trials, 0),
        ("--checkpoint-steps", opts.checkpoint_steps, 1),
        ("--train-steps", opts.train_steps, 0),
        ("--train-seeds", opts.train_seeds, 1),
        ("--stability-loops", opts.stability_loops, 0),
        ("--stability-epochs", opts.stability_epochs, 1),
    ):
        if value < low:
            raise InputError(None, option, f"{value} is below {low}", f"pass {option} {max(low, 1)} or more")
    if opts.opinfo_budget <= 0:
        raise InputError(
            None,
            "--opinfo-budget",
            f"{opts.opinfo_budget:g} is not a positive number of seconds",
            "pass a positive --opinfo-budget in seconds",
        )
    if not opts.train_lr > 0:
        raise InputError(None, "--train-lr", f"{opts.train_lr:g} is not a positive learning rate", "e.g. 1e-3")
    if opts.train_step:
        from stages.functional.training import resolve_hook

        resolve_hook(opts.train_step)  # an unusable hook: exit 2 before any work


def _golden_meta(ctx: StageContext) -> dict:
    from stages.functional.golden import read_meta
    from stages.models import DEMO_SPEC, parse_shape

    shape = parse_shape(ctx.common.input_shape)
    config = {
        "model": ctx.common.model or DEMO_SPEC,
        "batch_size": ctx.common.batch_size,
        "input_shape": list(shape) if shape else None,
        "seed": ctx.common.seed,
    }
    return read_meta(Path(ctx.options.golden), config)


def _training(ctx: StageContext, plan: steps.Plan, golden: dict | None = None) -> None:
    """Convergence parity and stability: opt-in (--train-steps, --stability-loops); skipped with the reason."""
    from stages.functional import convergence, stability

    opts, rec = ctx.options, ctx.rec
    if opts.train_steps:
        header = f"convergence: {opts.train_steps} steps x {opts.train_seeds} seeds, a fresh process each"
        with rec.group("convergence", header):
            rec.summary["convergence"] = convergence.run(
                rec,
                plan,
                steps=opts.train_steps,
                seeds=opts.train_seeds,
                lr=opts.train_lr,
                train_step=opts.train_step,
                golden=golden,
                save_dir=Path(opts.golden_save) if opts.golden_save else None,
            )
    else:
        rec.skip("convergence", "--train-steps 0 (the default): convergence parity is opt-in")
    if opts.stability_loops:
        header = f"stability: {opts.stability_loops} training loops x {opts.stability_epochs} epochs"
        with rec.group("stability", header):
            rec.summary["stability"] = stability.run(
                rec,
                plan,
                loops=opts.stability_loops,
                epochs=opts.stability_epochs,
                steps=opts.train_steps,
                lr=opts.train_lr,
                train_step=opts.train_step,
            )
    else:
        rec.skip("stability", "--stability-loops 0 (the default): training stability is opt-in")


def run(ctx: StageContext) -> None:
    from stages.functional.user_cases import discover
    from stages.models import parse_shape, resolve_model

    opts: Options = ctx.options
    _validate(opts)
    categories = _split(opts.categories, CATEGORIES, "--categories")
    dtypes = _split(opts.dtypes, DTYPES, "--dtypes")
    user = discover(opts.cases) if opts.cases else []  # bad --cases file: exit 2 before any work
    golden_meta = _golden_meta(ctx) if opts.golden else None  # an unusable golden: exit 2 before any work
    if not opts.no_traced or opts.checkpoint_trials or opts.golden or opts.golden_save:
        # A model that does not import: exit 2 with one line before any work, not an error per worker. It is
        # only imported here; building it belongs in the workers (a factory that crashes is a failed check).
        resolve_model(ctx.common.model)
    plan = steps.Plan(
        device=ctx.device,
        categories=categories,
        dtypes=dtypes,
        seeds=tuple(range(ctx.common.seed, ctx.common.seed + opts.seeds)),
        timeout=ctx.common.check_timeout,
        model=ctx.common.model,
        batch_size=ctx.common.batch_size,
        input_shape=parse_shape(ctx.common.input_shape),
        seed=ctx.common.seed,
    )
    conv_golden = None
    if opts.golden and opts.train_steps:  # loss curves of another stack: exit 2 before any work if unusable
        from stages.functional.convergence import read_golden

        conv_golden = read_golden(
            Path(opts.golden), plan, steps=opts.train_steps, seeds=opts.train_seeds, lr=opts.train_lr,
            train_step=opts.train_step,
        )  # fmt: skip
    rec, tally = ctx.rec, Tally()
    summary = rec.summary
    with CaseRunner(opts.workers, timeout=plan.timeout) as runner:
        in_process = tuple(c for c in categories if c not in ("distributed", "attention"))
        if in_process:
            with rec.group(
                "catalog", f"operator catalog: {', '.join(in_process)} x {', '.join(dtypes)} x {opts.seeds} seeds"
            ):
                steps.catalog(rec, runner, plan, tally)
        if "attention" in categories:
            with rec.group("attention", "attention: SDPA with one backend forced per case, vs CPU float64"):
                summary["attention"] = steps.attention(rec, runner, plan, tally)
        if "distributed" in categories:
            with rec.group("distributed", "distributed: collectives in 2 rank processes"):
                summary["distributed"] = steps.distributed(rec, plan, tally)
        if categories:
            tally.emit(rec)
            summary["categories"] = tally.table()
            summary["precision"] = tally.precision()
        if user and opts.cases:
            with rec.group("user", f"user cases from {opts.cases}"):
                summary["user_cases"] = steps.user_cases(rec, runner, plan, Path(opts.cases), user)
        if opts.no_traced:
            rec.skip("traced", "--no-traced was given")
        else:
            with rec.group("traced", f"model-traced ops: {plan.model or 'demo model'} forward + backward"):
                summary["traced"] = steps.traced(rec, runner, plan)
        if opts.checkpoint_trials:
            with rec.group("checkpoint", f"checkpoint restore: {opts.checkpoint_trials} trials"):
                summary["checkpoint"] = steps.checkpoints(
                    rec, runner, plan, opts.checkpoint_trials, opts.checkpoint_steps
                )
        else:
            rec.skip("checkpoint", "--checkpoint-trials 0")
        if opts.no_sparse:
            rec.skip("sparse", "--no-sparse was given")
        else:
            with rec.group("sparse", "sparse tensors: COO, CSR, coalesce, sparse x dense"):
                summary["sparse"] = steps.sparse(rec, runner, plan)
        if opts.golden and golden_meta:
            with rec.group("golden", f"cross-stack parity: outputs and gradients vs the golden in {opts.golden}"):
                summary["golden"] = parity.golden_compare(rec, runner, plan, Path(opts.golden), golden_meta)
        if opts.golden_save:
            with rec.group("golden_save", f"golden outputs and gradients -> {opts.golden_save}"):
                summary["golden_save"] = parity.golden_save(rec, runner, plan, Path(opts.golden_save))
        _training(ctx, plan, conv_golden)
        if opts.opinfo:
            with rec.group("opinfo", f"OpInfo sweep (budget {opts.opinfo_budget:g} s)"):
                summary["opinfo"] = steps.opinfo(rec, runner, plan, opts.opinfo_budget)
        summary["worker_restarts"] = runner.restarts
    path = write_markdown(
        ctx.out_dir / f"{NAME}.md", summary, f"{ctx.device.torch_device} ({ctx.environment.device_name or 'CPU'})"
    )
    rec.log(f"summary table -> {path}")


def main(argv: list[str] | None = None) -> int:
    return stage_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    sys.exit(main())

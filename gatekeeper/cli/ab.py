"""``gatekeeper ab``: a stage for base and head alternately (ABAB), judged."""

from __future__ import annotations

import argparse

from gatekeeper.cli import terminal

__all__ = ["add_parser"]


def _run(args: argparse.Namespace) -> int:
    from gatekeeper.run.ab import run_ab

    stage_args = args.stage_args[1:] if args.stage_args[:1] == ["--"] else args.stage_args
    return run_ab(
        base=args.base,
        out=args.out,
        stage=args.stage,
        rounds=args.rounds,
        max_processes=args.max_processes,
        max_seconds=args.max_seconds,
        min_effect=args.min_effect,
        metric=args.metric,
        max_cv=args.max_cv,
        stage_args=stage_args,
        log=terminal.out,
    )


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ab",
        help="run a stage for base and head alternately (ABAB) until the judge decides",
        description="Check out --base in a temporary worktree, run the stage for base and head alternately, a round "
        "at a time, until the sequential judge decides or the budget is spent. Exit 1 on a regression, 3 "
        "inconclusive, 0 otherwise. Stage options go after --.",
    )
    p.add_argument("--base", required=True, help="the commit, branch or tag to compare against")
    p.add_argument("--stage", default="performance_baseline", help="default: performance_baseline")
    p.add_argument("--rounds", type=int, help="at most this many ABAB rounds (default: as --max-processes allows)")
    p.add_argument(
        "--max-processes", type=int, default=20, help="budget: processes per side, in whole rounds (default 20)"
    )
    p.add_argument("--max-seconds", type=float, help="budget: start no round after this many seconds")
    p.add_argument(
        "--min-effect", type=float, default=0.03, help="the tolerance the rounds decide on (default 0.03 = +3%%)"
    )
    p.add_argument("--metric", default="latency_ms", help="the metric with per-process samples (default latency_ms)")
    p.add_argument(
        "--max-cv",
        type=float,
        default=0.05,
        help="a side whose process medians vary more (CV) is inconclusive; 0 < max-cv <= 0.5 (default 0.05)",
    )
    p.add_argument("--out", required=True, help="directory for each run's artifacts and ab.json")
    p.add_argument("stage_args", nargs=argparse.REMAINDER, help="-- then options for the stage")
    p.set_defaults(handler=_run)

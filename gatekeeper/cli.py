"""The ``gatekeeper`` command: argparse and dispatch only.

Each subcommand parses its arguments and calls one library function with
explicit keyword arguments. InputError is caught here, in one place, and
becomes one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from gatekeeper import __version__
from gatekeeper.errors import InputError
from gatekeeper.exitcodes import ExitCode

__all__ = ["main"]

Handler = Callable[[argparse.Namespace], int]


def _cmd_stage(args: argparse.Namespace) -> int:
    from stages import STAGES, load_stage

    if args.name not in STAGES:
        raise InputError(None, "stage", f"unknown stage {args.name!r}", f"one of: {', '.join(STAGES)}")
    return load_stage(args.name).main(args.stage_args)


def _cmd_ab(args: argparse.Namespace) -> int:
    from gatekeeper.ab import run_ab

    stage_args = args.stage_args[1:] if args.stage_args[:1] == ["--"] else args.stage_args
    return run_ab(
        base=args.base,
        out=args.out,
        stage=args.stage,
        rounds=args.rounds,
        metric=args.metric,
        max_cv=args.max_cv,
        stage_args=stage_args,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gatekeeper",
        description="Quality gates and circuit breakers for PyTorch on ROCm, CUDA and CPU.",
        epilog="Exit codes: 0 pass, 1 blocked by a gate, 2 usage or input error, 3 passed with warnings, "
        "4 circuit breaker open (skipped).",
    )
    parser.add_argument("--version", action="version", version=f"gatekeeper {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("stage", help="run one stage (gatekeeper stage NAME --help for its options)", add_help=False)
    p.add_argument("name", help="verify_hip, functional_test, performance_baseline or compatibility_check")
    p.add_argument("stage_args", nargs=argparse.REMAINDER)
    p.set_defaults(handler=_cmd_stage)

    p = sub.add_parser(
        "ab",
        help="run a stage for base and head alternately (ABAB) and judge the difference",
        description="Check out --base in a temporary worktree, run the stage for base and head alternately, and "
        "compare. Exit 1 on a regression, 3 inconclusive, 0 otherwise. Stage options go after --.",
    )
    p.add_argument("--base", required=True, help="the commit, branch or tag to compare against")
    p.add_argument("--stage", default="performance_baseline", help="default: performance_baseline")
    p.add_argument("--rounds", type=int, default=2, help="ABAB rounds (default 2)")
    p.add_argument("--metric", default="latency_ms", help="the metric with per-process samples (default latency_ms)")
    p.add_argument("--max-cv", type=float, default=0.05, help="a side fluctuating more is inconclusive (0.05)")
    p.add_argument("--out", required=True, help="directory for each run's artifacts and ab.json")
    p.add_argument("stage_args", nargs=argparse.REMAINDER, help="-- then options for the stage")
    p.set_defaults(handler=_cmd_ab)

    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exit_:
        return ExitCode.PASS if exit_.code == 0 else ExitCode.INPUT_ERROR
    handler: Handler = args.handler
    try:
        return int(handler(args))
    except InputError as err:
        print(f"gatekeeper: {err.line()}", file=sys.stderr)
        return ExitCode.INPUT_ERROR
    except KeyboardInterrupt:
        print("gatekeeper: interrupted", file=sys.stderr)
        return ExitCode.INPUT_ERROR

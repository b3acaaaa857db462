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


def _cmd_analyze(args: argparse.Namespace) -> int:
    from gatekeeper.analyze import analyze

    analyze(
        logs=args.logs,
        artifacts=args.artifacts,
        known_issues=args.known_issues,
        fmt=args.format,
        out=args.out,
        bundle=args.bundle,
    )
    return ExitCode.PASS  # a diagnosis of any category is a success of the analysis


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

    p = sub.add_parser("analyze", help="classify a failed job's logs: category, known issue, remediation")
    p.add_argument("logs", nargs="*", help="log files (gzip ok; - for stdin; default: --artifacts/*.log, else stdin)")
    p.add_argument("--artifacts", help="stage artifacts directory: environment and failed checks are evidence too")
    p.add_argument("--known-issues", help="the repository's known-issues.yaml (added to the built-in signatures)")
    p.add_argument("--format", choices=["json", "md", "text"], default="text")
    p.add_argument("--out", help="write the diagnosis here (atomically) instead of stdout")
    p.add_argument("--bundle", help="for an unknown failure, write a reproduction bundle into this directory")
    p.set_defaults(handler=_cmd_analyze)

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

"""The ``gatekeeper`` command: argparse and dispatch only.

Each subcommand parses its arguments and calls one library function with
explicit keyword arguments. InputError is caught here, in one place, and
becomes one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gatekeeper import __version__
from gatekeeper.errors import InputError
from gatekeeper.exitcodes import ExitCode

if TYPE_CHECKING:
    from gatekeeper.verdict import Verdict

__all__ = ["main"]

Handler = Callable[[argparse.Namespace], int]


def _cmd_stage(args: argparse.Namespace) -> int:
    from stages import STAGES, load_stage

    if args.name not in STAGES:
        raise InputError(None, "stage", f"unknown stage {args.name!r}", f"one of: {', '.join(STAGES)}")
    return load_stage(args.name).main(args.stage_args)


def _print_verdict(verdict: Verdict) -> int:
    from gatekeeper.render import banner

    print(banner(verdict), file=sys.stderr if verdict.result != "pass" else sys.stdout)
    return int(verdict.exit_code)


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from gatekeeper.workflow import run_evaluate

    verdict = run_evaluate(
        artifacts=args.artifacts,
        gates_path=args.gates,
        out=args.out or args.artifacts,
        baseline=args.baseline,
        channel=args.channel,
    )
    print(f"gatekeeper: wrote {args.out or args.artifacts}/verdict.json, verdict.md, gates.junit.xml, metrics.txt")
    return _print_verdict(verdict)


def _cmd_pipeline(args: argparse.Namespace) -> int:
    from gatekeeper.pipeline import PipelineOptions, run_pipeline

    verdict = run_pipeline(
        PipelineOptions(
            out=args.out,
            gates=args.gates,
            device=args.device,
            channel=args.channel,
            model=args.model,
            baseline=args.baseline,
            stages=tuple(args.stages.split(",")) if args.stages else (),
            stage_args=_stage_args(args.stage_arg),
            stage_timeout=args.stage_timeout,
            quick=args.quick,
        )
    )
    md = (args.out / "verdict.md").read_text(encoding="utf-8")
    print("\n" + md)
    return _print_verdict(verdict)


def _stage_args(items: list[str]) -> dict[str, list[str]]:
    import shlex

    out: dict[str, list[str]] = {}
    for item in items:
        name, sep, rest = item.partition("=")
        if not sep:
            raise InputError(
                None, "--stage-arg", f"{item!r} is not STAGE=ARGS", 'e.g. --stage-arg functional_test="--seeds 2"'
            )
        out.setdefault(name, []).extend(shlex.split(rest))
    return out


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

    p = sub.add_parser("evaluate", help="evaluate stage artifacts against gates.yaml and baselines; write the verdict")
    p.add_argument(
        "--artifacts", type=Path, default=Path("artifacts"), help="directory of <stage>.json (default: artifacts)"
    )
    p.add_argument("--gates", type=Path, default=Path("gates.yaml"), help="gates file (default: gates.yaml)")
    p.add_argument("--baseline", help="baseline store: DIR, sqlite:PATH, gitlab: or git:BRANCH")
    p.add_argument(
        "--channel", choices=["stable", "nightly"], help="default: $GATEKEEPER_CHANNEL, else the stages' own"
    )
    p.add_argument("--out", type=Path, help="where to write the verdict (default: the artifacts directory)")
    p.set_defaults(handler=_cmd_evaluate)

    p = sub.add_parser("pipeline", help="run every stage, then evaluate (the whole job on one machine)")
    p.add_argument("--out", type=Path, default=Path("artifacts"))
    p.add_argument("--gates", type=Path, default=Path("gates.yaml"))
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--channel", choices=["stable", "nightly"])
    p.add_argument("--model", help="module:factory (default: the built-in demo model)")
    p.add_argument("--baseline", help="baseline store: DIR, sqlite:PATH, gitlab: or git:BRANCH")
    p.add_argument("--stages", help="comma-separated subset, in pipeline order (default: all)")
    p.add_argument(
        "--stage-arg", action="append", default=[], metavar="STAGE=ARGS", help="extra arguments for one stage"
    )
    p.add_argument("--stage-timeout", type=float, default=3600.0, help="seconds before a stage process is killed")
    p.add_argument("--quick", action="store_true", help="reduced seeds, processes and trials: a fast smoke run")
    p.set_defaults(handler=_cmd_pipeline)

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

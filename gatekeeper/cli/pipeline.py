"""``gatekeeper pipeline``: every stage, then evaluate (the whole job on one machine)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gatekeeper.cli import terminal
from gatekeeper.cli._shared import GATES_HELP
from gatekeeper.core.errors import InputError

__all__ = ["add_parser"]


def _run(args: argparse.Namespace) -> int:
    from gatekeeper.evaluate.gates import default_gates_path
    from gatekeeper.run.pipeline import PipelineOptions, run_pipeline

    verdict = run_pipeline(
        PipelineOptions(
            out=args.out,
            gates=default_gates_path(args.gates),
            device=args.device,
            channel=args.channel,
            model=args.model,
            baseline=args.baseline,
            record=args.record,
            stages=tuple(args.stages.split(",")) if args.stages else (),
            stage_args=_stage_args(args.stage_arg),
            stage_timeout=args.stage_timeout,
            quick=args.quick,
        ),
        log=terminal.out,
    )
    # For a terminal: columns fitted to its width and the reasons below; verdict.md keeps the markdown.
    terminal.out("\n" + terminal.verdict_table(verdict) + "\n")
    return terminal.show_banner(verdict)


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


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pipeline", help="run every stage, then evaluate (the whole job on one machine)")
    p.add_argument("--out", type=Path, default=Path("artifacts"))
    p.add_argument("--gates", type=Path, help=GATES_HELP)
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--channel", choices=["stable", "nightly"])
    p.add_argument("--model", help="module:factory (default: the built-in demo model)")
    p.add_argument(
        "--baseline",
        help="baseline store: DIR or file:DIR, sqlite:PATH, postgresql://USER@HOST/DB, gitlab: or git:BRANCH",
    )
    p.add_argument("--record", metavar="STORE", help="keep this run's results and verdict in a history store")
    p.add_argument("--stages", help="comma-separated subset, in pipeline order (default: all)")
    p.add_argument(
        "--stage-arg", action="append", default=[], metavar="STAGE=ARGS", help="extra arguments for one stage"
    )
    p.add_argument("--stage-timeout", type=float, default=3600.0, help="seconds before a stage process is killed")
    p.add_argument("--quick", action="store_true", help="reduced seeds, processes and trials: a fast smoke run")
    p.set_defaults(handler=_run)

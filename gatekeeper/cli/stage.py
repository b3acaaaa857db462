"""``gatekeeper stage NAME``: run one stage script in this process."""

from __future__ import annotations

import argparse

from gatekeeper.core.errors import InputError

__all__ = ["add_parser"]


def _run(args: argparse.Namespace) -> int:
    from stages import STAGES, load_stage

    if args.name not in STAGES:
        raise InputError(None, "stage", f"unknown stage {args.name!r}", f"one of: {', '.join(STAGES)}")
    return load_stage(args.name).main(args.stage_args)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("stage", help="run one stage (gatekeeper stage NAME --help for its options)", add_help=False)
    p.add_argument("name", help="verify_hip, functional_test, performance_baseline or compatibility_check")
    p.add_argument("stage_args", nargs=argparse.REMAINDER)
    p.set_defaults(handler=_run)

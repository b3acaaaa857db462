"""``gatekeeper stage NAME``: run one stage script in this process."""

from __future__ import annotations

import argparse

from gatekeeper.core.errors import InputError

__all__ = ["add_parser"]


def _run(args: argparse.Namespace) -> int:
    from stages import STAGES, load_stage

    if args.stage_help or args.name is None:
        # `gatekeeper stage --help`: this command's help (each stage's own is `gatekeeper stage NAME --help`)
        print(_HELP.format(stages="\n".join(f"  {n:22} {load_stage(n).DESCRIPTION}" for n in STAGES)), end="")
        if args.name is None and not args.stage_help:
            raise InputError(None, "stage", "no stage named", f"one of: {', '.join(STAGES)}")
        return 0
    if args.name not in STAGES:
        raise InputError(None, "stage", f"unknown stage {args.name!r}", f"one of: {', '.join(STAGES)}")
    return load_stage(args.name).main(args.stage_args)


_HELP = """usage: gatekeeper stage NAME [options]

Run one stage; it writes <out>/NAME.json, NAME.junit.xml and NAME.log.
Exit 0 when its checks passed or were skipped, 1 when a check failed, 2 on bad options.

stages:
{stages}

gatekeeper stage NAME --help lists the options of stage NAME.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("stage", help="run one stage (gatekeeper stage NAME --help for its options)", add_help=False)
    p.add_argument("name", nargs="?", help="verify_hip, functional_test, performance_baseline or compatibility_check")
    p.add_argument("-h", "--help", dest="stage_help", action="store_true", help="this help (NAME --help: the stage's)")
    p.add_argument("stage_args", nargs=argparse.REMAINDER)
    p.set_defaults(handler=_run)

"""``gatekeeper report``: the HTML (or markdown) report of one pipeline."""

from __future__ import annotations

import argparse
from pathlib import Path

from gatekeeper.cli import terminal
from gatekeeper.core.exitcodes import ExitCode

__all__ = ["add_parser"]


def _run(args: argparse.Namespace) -> int:
    from gatekeeper.report import write_report

    path = write_report(
        artifacts=args.artifacts,
        out=args.out,
        fmt=args.format,
        history=args.history,
        baseline=args.baseline,
        limit=args.runs,
    )
    terminal.out(f"gatekeeper: wrote {path}")
    return ExitCode.PASS


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write the HTML (or markdown) report of one pipeline's artifacts")
    p.add_argument("--artifacts", type=Path, default=Path("artifacts"), help="directory of <stage>.json, verdict.json")
    p.add_argument("--history", help="store of earlier runs for trends: DIR, sqlite:PATH, ...")
    p.add_argument("--baseline", help="baseline store for the latency comparison (default: newest run in --history)")
    p.add_argument("--out", type=Path, default=Path("report.html"), help="output file (default: report.html)")
    p.add_argument("--format", choices=["html", "md"], default="html", help="html (default) or md (an MR note)")
    p.add_argument("--runs", type=int, default=10, help="runs shown in trends, this one included (default 10)")
    p.set_defaults(handler=_run)

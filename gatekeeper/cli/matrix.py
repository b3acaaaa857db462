"""``gatekeeper matrix``: the torch x ROCm x GPU version matrix."""

from __future__ import annotations

import argparse
from pathlib import Path

from gatekeeper.cli import terminal
from gatekeeper.core.exitcodes import ExitCode

__all__ = ["add_parser"]


def _run(args: argparse.Namespace) -> int:
    from gatekeeper.report.matrix_page import write_matrix

    paths = write_matrix(history=args.history, matrix_file=args.matrix_file, out=args.out, limit=args.limit)
    terminal.out(f"gatekeeper: wrote {', '.join(str(p) for p in paths)}")
    return ExitCode.PASS


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("matrix", help="the torch x ROCm x GPU version matrix from the history store and matrix.yaml")
    p.add_argument("--history", help="store of recorded runs: DIR, sqlite:PATH, ...")
    p.add_argument("--matrix-file", type=Path, help="EOL dates and CVEs (default: ./matrix.yaml when present)")
    p.add_argument("--out", type=Path, default=Path("matrix"), help="directory for matrix.md/.html/.csv")
    p.add_argument("--limit", type=int, default=1000, help="runs read from the store per stage (default 1000)")
    p.set_defaults(handler=_run)

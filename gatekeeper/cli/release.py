"""``gatekeeper report``, ``matrix`` and ``advise``: arguments and dispatch only."""

from __future__ import annotations

import argparse
from pathlib import Path

from gatekeeper.core.exitcodes import ExitCode

__all__ = ["add_parsers"]


def _cmd_report(args: argparse.Namespace) -> int:
    from gatekeeper.report import write_report

    path = write_report(
        artifacts=args.artifacts,
        out=args.out,
        fmt=args.format,
        history=args.history,
        baseline=args.baseline,
        limit=args.runs,
    )
    print(f"gatekeeper: wrote {path}")
    return ExitCode.PASS


def _cmd_matrix(args: argparse.Namespace) -> int:
    from gatekeeper.report.matrix_page import write_matrix

    paths = write_matrix(history=args.history, matrix_file=args.matrix_file, out=args.out, limit=args.limit)
    print(f"gatekeeper: wrote {', '.join(str(p) for p in paths)}")
    return ExitCode.PASS


def _cmd_advise(args: argparse.Namespace) -> int:
    from gatekeeper.release.advise import AdviseInputs, run_advise

    text = run_advise(
        AdviseInputs(
            downstream=tuple(d.strip() for d in (args.downstream or "").split(",") if d.strip()),
            model_family=args.model_family,
            rocm_minor_locked=args.rocm_minor_locked,
            needs_nightly_feature=args.needs_nightly_feature,
            compat_owner=args.compat_owner,
        ),
        history=args.history,
        breaker_state=tuple(args.breaker_state),
        arch=args.arch,
        runs=args.runs,
        fmt=args.format,
    )
    print(text, end="")
    return ExitCode.PASS


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """report, matrix, advise: the release manager's commands."""
    p = sub.add_parser("report", help="write the HTML (or markdown) report of one pipeline's artifacts")
    p.add_argument("--artifacts", type=Path, default=Path("artifacts"), help="directory of <stage>.json, verdict.json")
    p.add_argument("--history", help="store of earlier runs for trends: DIR, sqlite:PATH, ...")
    p.add_argument("--baseline", help="baseline store for the latency comparison (default: newest run in --history)")
    p.add_argument("--out", type=Path, default=Path("report.html"), help="output file (default: report.html)")
    p.add_argument("--format", choices=["html", "md"], default="html", help="html (default) or md (an MR note)")
    p.add_argument("--runs", type=int, default=10, help="runs shown in trends, this one included (default 10)")
    p.set_defaults(handler=_cmd_report)

    p = sub.add_parser("matrix", help="the torch x ROCm x GPU version matrix from the history store and matrix.yaml")
    p.add_argument("--history", help="store of recorded runs: DIR, sqlite:PATH, ...")
    p.add_argument("--matrix-file", type=Path, help="EOL dates and CVEs (default: ./matrix.yaml when present)")
    p.add_argument("--out", type=Path, default=Path("matrix"), help="directory for matrix.md/.html/.csv")
    p.add_argument("--limit", type=int, default=1000, help="runs read from the store per stage (default 1000)")
    p.set_defaults(handler=_cmd_matrix)

    p = sub.add_parser("advise", help="stable or nightly for this repo: hard rules, then recorded evidence")
    p.add_argument("--history", help="store of recorded runs of both channels: DIR, sqlite:PATH, ...")
    p.add_argument("--downstream", help="comma-separated downstream runtimes, e.g. onnxruntime,tensorrt")
    p.add_argument("--model-family", choices=["cnn", "vit", "diffusion", "llm", "other"], default="other")
    p.add_argument(
        "--rocm-minor-locked",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the ROCm minor version is pinned (default: yes)",
    )
    p.add_argument("--needs-nightly-feature", action="store_true", help="the repo needs a nightly-only feature")
    p.add_argument("--compat-owner", help="who owns compatibility fixes for this repo")
    p.add_argument(
        "--breaker-state", action="append", default=[], metavar="FILE", help="breaker state JSON (file or directory)"
    )
    p.add_argument("--arch", help="device architecture, e.g. gfx90a (default: that of the newest recorded run)")
    p.add_argument("--runs", type=int, default=10, help="recent runs per channel weighed (default 10)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.set_defaults(handler=_cmd_advise)

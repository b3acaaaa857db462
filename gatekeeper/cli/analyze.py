"""``gatekeeper analyze``: a failed job's logs classified."""

from __future__ import annotations

import argparse

from gatekeeper.cli import terminal
from gatekeeper.core.exitcodes import ExitCode

__all__ = ["add_parser"]


def _run(args: argparse.Namespace) -> int:
    import sys

    from gatekeeper.analyze import analyze, nothing_failed, report_text

    if args.only_failed:
        if args.artifacts is None:
            from gatekeeper.core.errors import InputError

            raise InputError(
                None,
                "--only-failed",
                "needs --artifacts (the verdict and the stages say what failed)",
                "add --artifacts DIR (the stage artifacts of the failed pipeline)",
            )
        why = nothing_failed(args.artifacts)
        if why is not None:
            print(f"gatekeeper: nothing to diagnose in {args.artifacts}: {why}", file=sys.stderr)
            return ExitCode.PASS

    diagnosis = analyze(
        logs=args.logs,
        artifacts=args.artifacts,
        known_issues=args.known_issues,
        fmt=args.format,
        out=args.out,
        bundle=args.bundle,
        gates=args.gates,
        use_model=not args.no_model,
    )
    if args.out is None:
        text = report_text(diagnosis, args.format)
        if args.format == "json":
            terminal.out_json_text(text)
        else:
            terminal.out(text, end="")
    return ExitCode.PASS  # a diagnosis of any category is a success of the analysis


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("analyze", help="classify a failed job's logs: category, known issue, remediation")
    p.add_argument("logs", nargs="*", help="log files (gzip ok; - for stdin; default: --artifacts/*.log, else stdin)")
    p.add_argument("--artifacts", help="stage artifacts directory: environment and failed checks are evidence too")
    p.add_argument("--known-issues", help="the repository's known-issues.yaml (added to the built-in signatures)")
    p.add_argument("--format", choices=["json", "md", "text"], default="text")
    p.add_argument("--out", help="write the diagnosis here (atomically) instead of stdout")
    p.add_argument("--bundle", help="for an unknown failure, write a reproduction bundle into this directory")
    p.add_argument("--gates", help="gates.yaml: check the waivers known issues name, report the matching waiver")
    p.add_argument(
        "--only-failed",
        action="store_true",
        help="with --artifacts: write nothing when the verdict passed and no stage failed (the CI job runs always)",
    )
    p.add_argument(
        "--no-model", action="store_true", help="signatures only: no learned second opinion when none matches"
    )
    p.set_defaults(handler=_run)

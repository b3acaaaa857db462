"""``gatekeeper doctor``: this machine's GPU stack (or a capture), checked."""

from __future__ import annotations

import argparse

from gatekeeper.core.exitcodes import ExitCode

__all__ = ["add_parser"]


def _run(args: argparse.Namespace) -> int:
    from gatekeeper.machine.doctor import render_json, render_text, run_doctor

    report = run_doctor(capture=args.capture, from_dir=args.from_dir, timeout=args.timeout)
    print(render_json(report) if args.format == "json" else render_text(report), end="")
    if args.capture is not None and args.format == "text":
        print(f"capture saved to {args.capture} (diagnose it elsewhere: gatekeeper doctor --from {args.capture})")
    return ExitCode.BLOCKED if report.has_errors else ExitCode.PASS


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor",
        help="check this machine's GPU stack (or a capture): what is installed, what will fail, what to do",
        epilog="Exit codes: 0 no error finding, 1 an error finding (something will fail), 2 bad input.",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("--capture", metavar="DIR", help="also save the raw tool outputs to DIR")
    where.add_argument("--from", dest="from_dir", metavar="DIR", help="diagnose a capture instead of this machine")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--timeout", type=float, default=20.0, help="seconds per tool (rocm-smi can hang); default 20")
    p.set_defaults(handler=_run)

"""``gatekeeper advise``: stable or nightly for this repository."""

from __future__ import annotations

import argparse

from gatekeeper.cli import terminal
from gatekeeper.core.exitcodes import ExitCode

__all__ = ["add_parser"]


def _run(args: argparse.Namespace) -> int:
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
    if args.format == "json":
        terminal.out_json_text(text)
    else:
        terminal.out(text, end="")
    return ExitCode.PASS


def add_parser(sub: argparse._SubParsersAction) -> None:
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
    p.set_defaults(handler=_run)

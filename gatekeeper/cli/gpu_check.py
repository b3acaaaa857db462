"""``gatekeeper gpu-check``: every stage at GPU sizes on the GPU that is present (small sizes on a CPU),
then a one-page summary (also written to ``<out>/gpu_check.txt``)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from gatekeeper.cli import terminal
from gatekeeper.cli._shared import GATES_HELP

__all__ = ["add_parser"]


def _run(args: argparse.Namespace) -> int:
    from gatekeeper.evaluate.gates import default_gates_path
    from gatekeeper.run.gpu_check import GpuCheckOptions, run_gpu_check

    result = run_gpu_check(
        GpuCheckOptions(
            out=args.out,
            gates=default_gates_path(args.gates),
            device=args.device,
            sizes=args.sizes,
            model=args.model,
            stage_timeout=args.stage_timeout,
        ),
        dict(os.environ),
        log=terminal.out,
    )
    terminal.out("\n" + result.summary)
    terminal.out(f"(this summary: {result.summary_path})")
    return terminal.show_banner(result.verdict)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "gpu-check", help="every stage at GPU sizes on the GPU present (small sizes on a CPU), then a one-page summary"
    )
    p.add_argument("--out", type=Path, default=Path("artifacts/gpu_check"), help="default: artifacts/gpu_check")
    p.add_argument("--gates", type=Path, help=GATES_HELP)
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--sizes", default="auto", choices=["auto", "gpu", "cpu"], help="auto: GPU sizes when a GPU is seen")
    p.add_argument("--model", help="module:factory (default: the built-in demo model)")
    p.add_argument("--stage-timeout", type=float, default=7200.0, help="seconds before a stage process is killed")
    p.set_defaults(handler=_run)

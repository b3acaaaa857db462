"""The opt-in measurements of performance_baseline beside the timing runs: compute efficiency
(``--efficiency``), host-device copy bandwidth (``--copy-bandwidth``) and serving under load
(``--load qps=...``). None runs by default, so ``make demo`` costs what it did; gpu_check turns
them all on. Each records its own checks, metrics and summary part."""

from __future__ import annotations

import argparse
from typing import Any

from stages._stage import StageContext

__all__ = ["add_arguments", "run", "validate"]


def add_arguments(g: argparse._ArgumentGroup) -> None:
    g.add_argument(
        "--efficiency",
        action="store_true",
        help="matmul and conv2d TFLOPS per dtype, and the fraction of the rated peak",
    )
    g.add_argument(
        "--copy-bandwidth", action="store_true", help="host-device copy GB/s, pinned and pageable, both directions"
    )
    g.add_argument("--copy-sizes", default="auto", metavar="MB,MB", help="copy sizes in MB (auto: GPU 1,4,16,64,256)")
    g.add_argument(
        "--load", metavar="qps=R1,R2", help="open-loop load test at these request rates, e.g. qps=50,100,200"
    )
    g.add_argument("--load-duration", default="30s", metavar="DURATION", help="per rate (default 30s)")
    g.add_argument("--max-batch", type=int, default=1, help="dynamic batching: requests per model call (default 1)")
    g.add_argument("--max-wait-ms", type=float, default=0.0, help="dynamic batching: wait for more requests (ms)")
    g.add_argument("--load-timeout", type=float, default=1.0, help="seconds before a request counts as a timeout")


def validate(opts: Any, parse_duration: Any) -> None:
    """Bad options of these measurements are an input error before any timing process starts."""
    from gatekeeper.core.errors import InputError

    if opts.copy_bandwidth:
        from stages.perf import copy_bandwidth

        copy_bandwidth.parse_sizes(opts.copy_sizes, gpu=True)
    if opts.load:
        from stages.perf import load

        load.parse_rates(opts.load)
        parse_duration(opts.load_duration, "--load-duration")
        if opts.max_batch < 1:
            raise InputError(
                None, "--max-batch", f"must be at least 1 (got {opts.max_batch})", "pass --max-batch 1 or more"
            )
        if opts.max_wait_ms < 0:
            raise InputError(
                None,
                "--max-wait-ms",
                f"must not be negative (got {opts.max_wait_ms:g})",
                "pass --max-wait-ms 0 or more",
            )
        if opts.load_timeout <= 0:
            raise InputError(
                None,
                "--load-timeout",
                f"must be a positive number of seconds (got {opts.load_timeout:g})",
                "pass a positive --load-timeout in seconds",
            )


def run(ctx: StageContext, parse_duration: Any) -> None:
    opts, rec = ctx.options, ctx.rec
    if opts.efficiency:
        from stages.perf import efficiency

        with rec.group("efficiency", "compute efficiency: matmul and conv2d per dtype vs the rated peak"):
            rec.summary["efficiency"] = efficiency.run(ctx)
    if opts.copy_bandwidth:
        from stages.perf import copy_bandwidth

        with rec.group("copy_bandwidth", "host-device copy bandwidth, pinned and pageable"):
            rec.summary["copy_bandwidth"] = copy_bandwidth.run(ctx, opts.copy_sizes)
    if opts.load:
        from stages.perf import load

        seconds = parse_duration(opts.load_duration, "--load-duration")
        with rec.group("load", f"serving under load: open loop, Poisson arrivals, {opts.load}, {seconds:g} s each"):
            rec.summary["load"] = load.run(
                ctx,
                opts.load,
                seconds,
                max_batch=opts.max_batch,
                max_wait_ms=opts.max_wait_ms,
                timeout_s=opts.load_timeout,
            )

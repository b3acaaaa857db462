"""Collective bandwidth: all_reduce, all_gather and reduce_scatter timed at geometric sizes
in the rank processes of the collectives check, reported as nccl-tests' bus bandwidth.

nccl-tests (doc/PERFORMANCE.md) defines, for a collective of S bytes taking t seconds
on n ranks: the algorithm bandwidth ``algbw = S / t`` and the bus bandwidth
``busbw = algbw * 2(n-1)/n`` for all_reduce and ``algbw * (n-1)/n`` for all_gather and
reduce_scatter, where S is the buffer of all_reduce and the whole gathered (or
scattered) array of the other two (n times the per-rank part). busbw is comparable
across rank counts and with the link's peak. GB/s is 1e9 bytes per second, as there.

A size here is that S in MiB (2**20 bytes). The time of one iteration is the slowest
rank's (the collective is done when every rank is); the metric is busbw of the mean
time over the timed iterations, and its samples are the per-iteration busbw values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gatekeeper.core.errors import InputError
from stages._stage import SkipCheck
from stages.compat.rank import BANDWIDTH_OPS

__all__ = [
    "BANDWIDTH_OPS",
    "CPU_SIZES_MB",
    "GPU_SIZES_MB",
    "BandwidthPoint",
    "bus_factor",
    "interpret",
    "metric_name",
    "parse_sizes",
    "record_bandwidth",
]

# Geometric: the default CPU list stays cheap (gloo over loopback, about 2 s on 2 cores);
# a GPU run covers 1 MiB to 256 MiB in powers of two.
CPU_SIZES_MB = (1, 8, 64)
GPU_SIZES_MB = (1, 2, 4, 8, 16, 32, 64, 128, 256)
MAX_SIZE_MB = 4096  # a typo guard: 4 GiB per collective


@dataclass(frozen=True)
class BandwidthPoint:
    op: str
    size_mb: int
    seconds: float  # mean over iterations of the slowest rank's time
    algbw_gbps: float
    busbw_gbps: float
    samples: tuple[float, ...]  # busbw per iteration

    @property
    def metric(self) -> str:
        return metric_name(self.op, self.size_mb)


def metric_name(op: str, size_mb: int) -> str:
    """``collective_busbw_gbps[op=all_reduce,size_mb=64]``: the point's keys sorted by name."""
    return f"collective_busbw_gbps[op={op},size_mb={size_mb}]"


def bus_factor(op: str, world: int) -> float:
    """nccl-tests' correction from algorithm to bus bandwidth."""
    if op == "all_reduce":
        return 2 * (world - 1) / world
    if op in ("all_gather", "reduce_scatter"):
        return (world - 1) / world
    raise ValueError(f"no bus bandwidth factor for {op}")


def parse_sizes(text: str, *, gpu: bool) -> tuple[int, ...]:
    """``auto`` (the device's default list), ``none``, or a comma list of whole MiB."""
    spec = text.strip().lower()
    if spec == "auto":
        return GPU_SIZES_MB if gpu else CPU_SIZES_MB
    if spec in ("none", ""):
        return ()
    hint = f"e.g. --bandwidth-sizes 1,8,64 (whole MiB, 1 to {MAX_SIZE_MB}), auto or none"
    sizes = []
    for raw in spec.split(","):
        part = raw.strip()
        if not part.isdigit() or not 1 <= int(part) <= MAX_SIZE_MB:
            raise InputError(None, "--bandwidth-sizes", f"{part!r} is not a size in whole MiB", hint)
        sizes.append(int(part))
    return tuple(sorted(set(sizes)))


def interpret(events: Sequence[Sequence[dict[str, Any]]], world: int) -> tuple[list[BandwidthPoint], str]:
    """Points measured by every rank, and the problem that stopped the measurement ('' if none)."""
    by_rank = [{(e["op"], e["size_mb"]): e["seconds"] for e in evs if e["event"] == "bandwidth"} for evs in events]
    points = []
    for key in by_rank[0] if by_rank else {}:
        per_rank = [r.get(key) for r in by_rank]
        if any(p is None for p in per_rank):
            continue
        iters = min(len(p) for p in per_rank)  # type: ignore[arg-type]
        if iters == 0:
            continue
        slowest = [max(p[i] for p in per_rank) for i in range(iters)]  # type: ignore[index]
        op, size_mb = key
        size = size_mb * (1 << 20)
        mean = sum(slowest) / iters
        factor = bus_factor(op, world)
        samples = tuple(size / max(t, 1e-12) / 1e9 * factor for t in slowest)
        algbw = size / max(mean, 1e-12) / 1e9
        points.append(BandwidthPoint(op, size_mb, mean, algbw, algbw * factor, samples))
    problems = []
    for rank, evs in enumerate(events):
        for e in evs:
            if e["event"] in ("error", "watchdog") and str(e.get("collective", "")).startswith("bandwidth"):
                first = str(e.get("message", "")).strip().splitlines()
                problems.append(f"rank {rank}: {e['collective']}: {first[0] if first else e['event']}")
    return points, "; ".join(problems)


def record_bandwidth(rec: Any, result: Any, sizes: tuple[int, ...], *, skip_reason: str = "") -> dict[str, Any]:
    """On a stage ``Recorder``: the check ``collectives.bandwidth`` and one busbw metric per op and size
    (None where not measured)."""
    if not sizes:
        rec.skip("collectives.bandwidth", skip_reason or "--bandwidth-sizes none")
        return {"skipped": skip_reason or "--bandwidth-sizes none"}
    measured = {p.metric: p for p in result.bandwidth}
    for op in BANDWIDTH_OPS:
        for size in sizes:
            p = measured.get(metric_name(op, size))
            rec.metric(
                metric_name(op, size),
                p.busbw_gbps if p else None,
                "GB/s",
                "higher",
                samples=list(p.samples) if p else None,
                description=f"{result.backend}, {result.world_size} ranks: nccl-tests busbw of {op}, {size} MiB",
            )
    table = {
        p.metric: {"busbw_gbps": p.busbw_gbps, "algbw_gbps": p.algbw_gbps, "seconds": p.seconds}
        for p in result.bandwidth
    }
    missing = len(BANDWIDTH_OPS) * len(sizes) - len(measured)
    with rec.check("collectives.bandwidth") as h:
        h.details = {
            "backend": result.backend,
            "world_size": result.world_size,
            "sizes_mb": list(sizes),
            "points": table,
        }
        if result.bandwidth_problem:
            raise AssertionError(f"bandwidth measurement stopped: {result.bandwidth_problem}")
        if missing and any(r.status != "passed" for r in result.results):
            raise SkipCheck(f"not run: a collective check did not pass ({missing} points not measured)")
        exits = "; ".join(result.rank_exits)
        assert not missing, f"{missing} of {len(BANDWIDTH_OPS) * len(sizes)} points not measured ({exits})"
        top = max(sizes)
        h.message = (
            ", ".join(f"{op} {measured[metric_name(op, top)].busbw_gbps:.3g} GB/s" for op in BANDWIDTH_OPS)
            + f" bus bandwidth at {top} MiB"
        )
    return {"sizes_mb": list(sizes), "points": table}

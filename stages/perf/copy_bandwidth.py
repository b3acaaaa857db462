"""Host-device copy bandwidth (``performance_baseline --copy-bandwidth``): host to device and device to
host, from pinned (page-locked) and pageable host memory, 1 MB to 256 MB.

A board whose PCIe link runs below its maximum (verify_hip's ``hygiene.pcie_link``) shows here as
lower GB/s; the field report measured 35% slower copies on PCIe 3.0 boards. Each point is
``dst.copy_(src)`` (``non_blocking`` from pinned memory, as a DataLoader with ``pin_memory`` does),
timed with ``torch.utils.benchmark.Timer.blocked_autorange`` in the isolated worker; GB/s is 1e9
bytes per second and a size is in MB (1e6 bytes), as copy benchmarks print them.

The measuring function works on any torch device; without a GPU there is no host-device copy to
measure, so on CPU every point is a skipped check with the reason and its metric is written with
value None and that reason (``copy_bandwidth_gbps[dir=h2d,pinned=true,size_mb=64]``).
"""

from __future__ import annotations

from typing import Any

from gatekeeper.contract.metric_points import SKIPPED, point_name
from gatekeeper.core.errors import InputError
from stages._stage import SkipCheck, StageContext
from stages.isolate import Worker

__all__ = ["CPU_SIZES_MB", "DIRECTIONS", "GPU_SIZES_MB", "measure_copy", "parse_sizes", "run"]

DIRECTIONS = ("h2d", "d2h")
GPU_SIZES_MB = (1, 4, 16, 64, 256)
CPU_SIZES_MB = (1, 64)  # named on CPU too, so a gate on a point says why it was not measured
MAX_SIZE_MB = 4096
MIN_RUN_S = 0.5


def parse_sizes(text: str, *, gpu: bool) -> tuple[int, ...]:
    """``auto`` (the device's list) or a comma list of whole MB."""
    spec = text.strip().lower()
    if spec == "auto":
        return GPU_SIZES_MB if gpu else CPU_SIZES_MB
    sizes = []
    for raw in spec.split(","):
        part = raw.strip()
        if not part.isdigit() or not 1 <= int(part) <= MAX_SIZE_MB:
            raise InputError(
                None,
                "--copy-sizes",
                f"{part!r} is not a size in whole MB",
                f"e.g. 1,64,256 (1 to {MAX_SIZE_MB}) or auto",
            )
        sizes.append(int(part))
    return tuple(sorted(set(sizes)))


def measure_copy(direction: str, pinned: bool, size_mb: int, device: str, min_run_s: float = MIN_RUN_S) -> dict:
    """In the worker: GB/s of copying ``size_mb`` MB between host memory and ``device``."""
    import torch
    from torch.utils import benchmark

    if direction not in DIRECTIONS:
        raise ValueError(f"unknown direction {direction!r}")
    dev = torch.device(device)
    if pinned and dev.type == "cpu":
        raise SkipCheck("pinned memory is page-locked host memory for a device's DMA: there is no device here")
    n = size_mb * 1_000_000
    host = torch.empty(n, dtype=torch.uint8, pin_memory=pinned)
    host.fill_(1)
    other = torch.empty(n, dtype=torch.uint8, device=dev)
    other.fill_(2)
    src, dst = (host, other) if direction == "h2d" else (other, host)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)

    def copy() -> None:
        dst.copy_(src, non_blocking=pinned)
        sync()  # a non-blocking copy is done when the stream is

    for _ in range(3):
        copy()
    m = benchmark.Timer(stmt="copy()", globals={"copy": copy}).blocked_autorange(min_run_time=min_run_s)
    if not torch.equal(dst[:4096], src[:4096]):
        raise AssertionError(f"{direction} copy of {size_mb} MB delivered other bytes than it was given")
    samples = [n / t / 1e9 for t in m.times if t > 0]
    return {"gbps": n / m.median / 1e9, "samples": samples, "seconds_per_copy": m.median, "bytes": n}


def metric_name(direction: str, pinned: bool, size_mb: int) -> str:
    """``copy_bandwidth_gbps[dir=h2d,pinned=true,size_mb=64]`` (keys sorted)."""
    return point_name("copy_bandwidth_gbps", {"dir": direction, "pinned": str(pinned).lower(), "size_mb": size_mb})


def run(ctx: StageContext, sizes_spec: str) -> dict[str, Any]:
    rec, info = ctx.rec, ctx.device
    sizes = parse_sizes(sizes_spec, gpu=info.is_gpu)
    points = [(d, p, s) for d in DIRECTIONS for p in (True, False) for s in sizes]
    rows: list[dict[str, Any]] = []
    if not info.is_gpu:
        why = f"no GPU ({info.no_gpu_reason()}): host-device copies need a device"
        for d, p, s in points:
            name = metric_name(d, p, s)
            rec.skip(name.replace("copy_bandwidth_gbps", "copy", 1), why)
            rec.metric(name, None, "GB/s", "higher", description=f"{SKIPPED}{why}")
            rows.append({"dir": d, "pinned": p, "size_mb": s, "status": "skipped", "reason": why})
        return {"sizes_mb": list(sizes), "points": rows}
    with Worker() as worker:
        for d, p, s in points:
            name = metric_name(d, p, s)
            outcome = worker.call(
                "stages.perf.copy_bandwidth:measure_copy", d, p, s, info.torch_device, timeout=ctx.common.check_timeout
            )
            check_name = name.replace("copy_bandwidth_gbps", "copy", 1)
            if not outcome.ok:
                check = rec.outcome(check_name, outcome)
                first = check.message.strip().splitlines()[0] if check.message.strip() else check.status
                rec.metric(name, None, "GB/s", "higher", description=f"{SKIPPED}{first}")
                rows.append({"dir": d, "pinned": p, "size_mb": s, "status": check.status, "reason": first})
                continue
            v = outcome.value
            rec.metric(name, v["gbps"], "GB/s", "higher", samples=v["samples"], description=f"{s} MB, median block")
            memory = "pinned" if p else "pageable"
            rec.record(check_name, "passed", f"{v['gbps']:.2f} GB/s ({memory})", duration_s=outcome.duration_s)
            rows.append({"dir": d, "pinned": p, "size_mb": s, "status": "measured", "gbps": v["gbps"]})
    return {"sizes_mb": list(sizes), "points": rows}

"""Compute efficiency (``performance_baseline --efficiency``): matmul and conv2d throughput per dtype
as achieved TFLOPS, and as a fraction of the device's rated peak (``gatekeeper.machine.peaks``).

Each point (op, dtype) runs in the isolated worker (a kernel that crashes or hangs is a failed check)
and is timed with ``torch.utils.benchmark.Timer.blocked_autorange``: throughput is a mean over many
calls, so its blocks (synchronised on a GPU) are the right unit here, unlike the per-iteration
latencies of the timing child. The shapes are large enough to saturate a datacenter GPU
(``GPU_SHAPES``); on a CPU they are small (``CPU_SHAPES``: a 2-core runner would take minutes).

Metrics per point, keys sorted: ``tflops[dtype=float16,op=matmul]`` (TOPS for int8; samples: one per
block) and ``compute_efficiency[dtype=float16,op=matmul]`` (achieved / rated, 0..1), written with value
None and the reason when the device has no rated peak in the table (a CPU, an unknown GPU).
int8 is a matmul (``torch._int_mm``: int8 in, int32 out) where the device has it; torch has no eager
int8 convolution, so ``conv2d`` int8 is skipped with that reason.
"""

from __future__ import annotations

from typing import Any

from gatekeeper.contract.metric_points import SKIPPED, point_name
from gatekeeper.machine.peaks import DeviceFacts, PeakResolution, resolve
from stages._stage import SkipCheck, StageContext
from stages.device import tf32_off
from stages.isolate import Worker

__all__ = ["CPU_SHAPES", "DTYPES", "GPU_SHAPES", "OPS", "conv_flops", "matmul_flops", "measure_point", "run"]

OPS = ("matmul", "conv2d")
DTYPES = ("float32", "float16", "bfloat16", "int8")
# matmul: n (an n x n x n product); conv2d: (batch, channels in = out, height = width), 3x3 kernel, padding 1
GPU_SHAPES: dict[str, Any] = {"matmul": 8192, "conv2d": (32, 256, 56)}
CPU_SHAPES: dict[str, Any] = {"matmul": 256, "conv2d": (2, 32, 16)}
GPU_MIN_RUN_S = 1.0
CPU_MIN_RUN_S = 0.2


def matmul_flops(n: int) -> float:
    return 2.0 * n**3


def conv_flops(batch: int, channels: int, hw: int) -> float:
    """A 3x3 convolution, stride 1, padding 1, channels in = out: 2 x N x C_out x H x W x C_in x 9."""
    return 2.0 * batch * channels * hw * hw * channels * 9


def measure_point(op: str, dtype: str, device: str, shape: Any, min_run_s: float) -> dict[str, Any]:
    """In the worker: time ``op`` in ``dtype`` on ``device``; TFLOPS per block and their median."""
    import torch
    from torch.utils import benchmark

    # float32 means float32: TF32 (NVIDIA) / XF32 (MI300) would report another dtype's throughput
    tf32_off()
    if not torch.backends.flags_frozen():  # frozen only by torch's test helpers in this process (see tf32_off)
        torch.backends.cudnn.benchmark = (
            True  # the fastest convolution algorithm (MIOpen/cuDNN find), as a tuned job would
        )
    gen = torch.Generator().manual_seed(0)
    if op == "matmul":
        n = int(shape)
        flops = matmul_flops(n)
        if dtype == "int8":
            a = torch.randint(-64, 64, (n, n), generator=gen, dtype=torch.int8).to(device)
            b = torch.randint(-64, 64, (n, n), generator=gen, dtype=torch.int8).to(device)
            try:
                torch._int_mm(a, b)
            except (RuntimeError, NotImplementedError) as err:
                first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                raise SkipCheck(f"int8 matmul (torch._int_mm) is not available here: {first}") from None

            def fn() -> Any:
                return torch._int_mm(a, b)

        else:
            t = getattr(torch, dtype)
            a = torch.randn(n, n, generator=gen).to(device=device, dtype=t)
            b = torch.randn(n, n, generator=gen).to(device=device, dtype=t)

            def fn() -> Any:
                return a @ b

    elif op == "conv2d":
        if dtype == "int8":
            raise SkipCheck("torch has no eager int8 conv2d (quantized convolution goes through quantized engines)")
        batch, channels, hw = (int(x) for x in shape)
        flops = conv_flops(batch, channels, hw)
        t = getattr(torch, dtype)
        x = torch.randn(batch, channels, hw, hw, generator=gen).to(device=device, dtype=t)
        w = torch.randn(channels, channels, 3, 3, generator=gen).to(device=device, dtype=t)

        def fn() -> Any:
            return torch.nn.functional.conv2d(x, w, padding=1)

    else:
        raise ValueError(f"unknown op {op!r}")
    with torch.inference_mode():
        for _ in range(3):  # kernel selection, MIOpen/cuDNN find, allocator warm-up
            fn()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        m = benchmark.Timer(stmt="fn()", globals={"fn": fn}).blocked_autorange(min_run_time=min_run_s)
    samples = [flops / t / 1e12 for t in m.times if t > 0]
    props: dict[str, Any] = {}
    if device.startswith("cuda"):
        p = torch.cuda.get_device_properties(torch.device(device))
        props = {"compute_units": int(p.multi_processor_count), "name": p.name}
    return {
        "tflops": flops / m.median / 1e12,
        "samples": samples,
        "seconds_per_call": m.median,
        "flops": flops,
        "calls": m.number_per_run * len(m.times),
        **props,
    }


def _device_facts(ctx: StageContext, measured: dict[str, Any]) -> DeviceFacts:
    info = ctx.device
    if not info.is_gpu:
        return DeviceFacts(ctx.environment.device_name or "cpu", None, None, "torch")
    arch = info.gfx_arch if info.kind == "rocm" else info.compute_capability
    return DeviceFacts(measured.get("name") or info.name, arch, measured.get("compute_units"), "torch")


def _resolution(ctx: StageContext, measured: dict[str, Any]) -> PeakResolution:
    if not ctx.device.is_gpu:
        return PeakResolution(None, reason="a CPU has no rated peak in the table: TFLOPS only, no fraction")
    return resolve(_device_facts(ctx, measured))


def run(ctx: StageContext) -> dict[str, Any]:
    """Measure every (op, dtype) point; record checks and metrics; return the summary table."""
    rec, info = ctx.rec, ctx.device
    gpu = info.is_gpu
    shapes = GPU_SHAPES if gpu else CPU_SHAPES
    min_run_s = GPU_MIN_RUN_S if gpu else CPU_MIN_RUN_S
    rows: list[dict[str, Any]] = []
    peak: PeakResolution | None = None
    with Worker() as worker:
        for op in OPS:
            for dtype in DTYPES:
                point = {"dtype": dtype, "op": op}
                name = point_name("efficiency", point)
                unit = "TOPS" if dtype == "int8" else "TFLOPS"
                outcome = worker.call(
                    "stages.perf.efficiency:measure_point",
                    op,
                    dtype,
                    info.torch_device,
                    shapes[op],
                    min_run_s,
                    timeout=ctx.common.check_timeout,
                )
                if not outcome.ok:
                    check = rec.outcome(name, outcome)
                    why = f"{SKIPPED}{check.message.strip().splitlines()[0] if check.message.strip() else check.status}"
                    rec.metric(point_name("tflops", point), None, unit, "higher", description=why)
                    rec.metric(point_name("compute_efficiency", point), None, "ratio", "higher", description=why)
                    rows.append({**point, "status": check.status, "reason": check.message.splitlines()[0]})
                    continue
                v = outcome.value
                if peak is None:
                    peak = _resolution(ctx, v)
                rated = peak.peak(dtype)
                fraction = v["tflops"] / rated if rated else None
                rec.metric(
                    point_name("tflops", point), v["tflops"], unit, "higher", samples=v["samples"],
                    description=f"{op} {dtype} {shapes[op]}: median of {len(v['samples'])} timed blocks",
                )  # fmt: skip
                if fraction is None:
                    rec.metric(
                        point_name("compute_efficiency", point), None, "ratio", "higher",
                        description=f"{SKIPPED}{peak.reason}",
                    )  # fmt: skip
                    said = f"{v['tflops']:.3g} {unit} (no rated peak: {peak.reason})"
                else:
                    assert peak.product is not None  # narrows for mypy: a rated figure has a product  # nosec B101
                    rec.metric(
                        point_name("compute_efficiency", point), fraction, "ratio", "higher",
                        description=f"of the {rated:.4g} {unit} rated for {peak.product.name} ({peak.reason})",
                    )  # fmt: skip
                    said = f"{v['tflops']:.3g} {unit}, {fraction:.0%} of the {rated:.4g} rated for {peak.product.name}"
                rec.record(name, "passed", said, duration_s=outcome.duration_s, details={"shape": shapes[op], **v})
                rows.append(
                    {**point, "status": "measured", "tflops": v["tflops"], "rated": rated, "efficiency": fraction}
                )
    return {
        "shapes": {k: list(s) if isinstance(s, tuple) else s for k, s in shapes.items()},
        "min_run_s": min_run_s,
        "peak": None
        if peak is None
        else {
            "product": peak.product.name if peak.product else None,
            "scale": peak.scale,
            "reason": peak.reason,
            "source": peak.product.source if peak.product else None,
        },
        "points": rows,
    }

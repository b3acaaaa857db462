"""verify_hip: is the device stack usable at all? Device visibility, versions,
and smoke kernels (matmul, conv2d, a reduction) on the device against a CPU
float64 reference, each isolated so a kernel that crashes is a failed check."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from stages._stage import StageContext, stage_main
from stages.isolate import Worker

NAME = "verify_hip"
DESCRIPTION = "Device visibility, versions and smoke kernels against a CPU float64 reference."


@dataclass(frozen=True)
class Options:
    smoke_timeout: float = 120.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--smoke-timeout", type=float, default=120.0, help="seconds per smoke kernel")


# Smoke kernels: (name, relative tolerance in float32). Each runs in the worker.
SMOKE = {
    "matmul": 1e-4,
    "conv2d": 1e-4,  # the field report's 1x3x256x256 input, 64x3x3x3 weight, stride 1, padding 1
    "reduction": 1e-5,
}


def smoke_kernel(kind: str, device: str, rtol: float) -> dict:
    """Run one smoke kernel on ``device`` in float32 and compare with CPU float64."""
    import torch

    gen = torch.Generator().manual_seed(0)
    if kind == "matmul":
        a, b = (
            torch.randn(512, 384, generator=gen, dtype=torch.float64),
            torch.randn(384, 256, generator=gen, dtype=torch.float64),
        )
        ref = a @ b
        got = a.float().to(device) @ b.float().to(device)
    elif kind == "conv2d":
        x = torch.randn(1, 3, 256, 256, generator=gen, dtype=torch.float64)
        w = torch.randn(64, 3, 3, 3, generator=gen, dtype=torch.float64)
        ref = torch.nn.functional.conv2d(x, w, stride=1, padding=1)
        got = torch.nn.functional.conv2d(x.float().to(device), w.float().to(device), stride=1, padding=1)
    elif kind == "reduction":
        x = torch.rand(1 << 20, generator=gen, dtype=torch.float64)
        ref = torch.stack([x.sum(), x.mean(), x.amax(), x.norm()])
        xd = x.float().to(device)
        got = torch.stack([xd.sum(), xd.mean(), xd.amax(), xd.norm()])
    else:
        raise ValueError(f"unknown smoke kernel {kind}")
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()
    got = got.cpu().double()
    denom = ref.abs().max().clamp_min(1e-12)
    rel = float((got - ref).abs().max() / denom)
    assert torch.isfinite(got).all(), f"{kind}: non-finite output on {device}"
    assert rel <= rtol, f"{kind}: max relative error {rel:.3g} > {rtol:g} on {device} (vs CPU float64)"
    return {"message": f"max relative error {rel:.3g} (tolerance {rtol:g})", "details": {"max_rel_error": rel}}


def run(ctx: StageContext) -> None:
    rec, info, env = ctx.rec, ctx.device, ctx.environment
    with rec.group("device", "device visibility and versions"):
        if info.is_gpu:
            rec.record("device.visible", "passed", f"{info.count} device(s): {info.name}")
        else:
            rec.skip("device.visible", f"no GPU: {info.no_gpu_reason()}")
        rec.metric("device_count", float(info.count), "devices", "higher")
        rec.metric("device_available", 1.0 if info.is_gpu else 0.0, "bool", "higher")
        build = (
            "HIP " + env.hip_version
            if env.hip_version
            else ("CUDA " + env.cuda_version if env.cuda_version else "CPU-only")
        )
        rec.record("torch.build", "passed", f"torch {env.torch_version} ({build} build)")
    with rec.group("smoke", "smoke kernels vs CPU float64"), Worker() as worker:
        for kind, rtol in SMOKE.items():
            outcome = worker.call(
                "stages.verify_hip:smoke_kernel", kind, info.torch_device, rtol, timeout=ctx.options.smoke_timeout
            )
            check = rec.outcome(f"smoke.{kind}", outcome)
            err = check.details.get("max_rel_error")
            rec.metric(f"smoke_rel_error.{kind}", err, "ratio", "lower")


def main(argv: list[str] | None = None) -> int:
    return stage_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    sys.exit(main())

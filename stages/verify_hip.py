"""verify_hip: is the device stack usable at all, and will this torch build run on it?

Checked in this order, so a doomed run is found before any kernel: device
visibility, versions (ROCm, HIP, MIOpen, rocBLAS/hipBLASLt, driver; CUDA and
compute capability on NVIDIA), arch compatibility predicted from names, smoke
kernels (matmul, conv2d, a reduction) on the device against a CPU float64
reference, each isolated so a kernel that crashes is a failed check, and
environment hygiene. On CPU every GPU-only check is skipped with the reason.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from typing import Any

from gatekeeper.contract.failures import CheckKind, MetricKind
from gatekeeper.machine import archcompat, pcie_link
from gatekeeper.machine.findings import Finding, count_problems
from gatekeeper.machine.hygiene import FsFacts, hygiene_findings
from gatekeeper.machine.probes import versions
from stages import device as devmod
from stages._stage import Recorder, SkipCheck, StageContext, stage_main
from stages.isolate import Worker, run_isolated

NAME = "verify_hip"
DESCRIPTION = "Device visibility, versions, arch compatibility, smoke kernels vs CPU float64, environment hygiene."


@dataclass(frozen=True)
class Options:
    smoke_timeout: float = 120.0


# Every check and metric this stage writes, with the failure category of each (contract/failures.py).
CHECKS = (
    CheckKind(
        "device.*",
        "device_not_available",
        "torch sees the GPU and its memory",
        "check the runner: /dev/kfd and /dev/dri (ROCm) or the NVIDIA driver, the device nodes passed to the "
        "container, and the job's runner tags",
    ),
    CheckKind(
        "versions.*",
        "library_mismatch",
        "the ROCm, HIP, MIOpen, rocBLAS/hipBLASLt, driver and CUDA versions can be read",
        "install the ROCm (or CUDA) user space the torch build was made for",
    ),
    CheckKind(
        "torch.build",
        "library_mismatch",
        "torch imports and says which GPU build it is",
        "install a torch wheel built for this ROCm/CUDA version",
    ),
    CheckKind(
        "arch.compatible",
        "no_binary_for_gpu",
        "the torch build carries code for this GPU's gfx arch or compute capability",
        "install a torch build that includes this GPU's arch (or build with PYTORCH_ROCM_ARCH / TORCH_CUDA_ARCH_LIST)",
    ),
    CheckKind(
        "smoke.*",
        "numerical_mismatch",
        "matmul, conv2d and a reduction on the device match CPU float64",
        "rerun the smoke kernel alone; compare the ROCm/CUDA library versions with a machine where it passes",
    ),
    CheckKind(
        "hygiene.dev_*",
        "device_not_available",
        "the device nodes (/dev/kfd, /dev/dri) exist and are read-write for the job's user",
        "pass the device nodes into the container (--device /dev/kfd --device /dev/dri) and add the user to them",
    ),
    CheckKind(
        "hygiene.groups",
        "device_not_available",
        "the job's user is in the groups that own the device nodes (video, render)",
        "add the runner's user to the video and render groups (or run the container with --group-add)",
    ),
    *(
        CheckKind(
            pattern,
            "device_not_available",
            "no *_VISIBLE_DEVICES variable hides every GPU (alone or combined with another)",
            "unset the variable, or list the device ids the job may use",
        )
        for pattern in ("hygiene.*VISIBLE_DEVICES", "hygiene.visible_devices*")
    ),
    CheckKind(
        "hygiene.HSA_OVERRIDE_GFX_VERSION",
        "configuration_error",
        "HSA_OVERRIDE_GFX_VERSION is unset or a valid target",
        "unset HSA_OVERRIDE_GFX_VERSION, or give a valid target such as 10.3.0",
    ),
    CheckKind(
        "hygiene.pcie_link",
        "performance_regression",
        "the GPU's PCIe link runs at its maximum generation and width under load",
        "reseat the card or move it to a slot wired for its full width; check the BIOS link settings",
    ),
    CheckKind(
        "hygiene.*",
        "configuration_error",
        "the allocator settings (PYTORCH_HIP_ALLOC_CONF, PYTORCH_CUDA_ALLOC_CONF) are ones torch accepts",
        "fix or unset the variable named in the message (torch rejects it at the first allocation)",
    ),
)
METRICS = (
    MetricKind("device_count", "device_not_available", "GPUs torch sees"),
    MetricKind("device_available", "device_not_available", "1 when torch sees a GPU"),
    MetricKind("arch_compatible", "no_binary_for_gpu", "1 when the torch build carries this GPU's arch"),
    MetricKind("smoke_rel_error.*", "numerical_mismatch", "smoke kernel error vs CPU float64"),
    MetricKind("hygiene_problems", "configuration_error", "environment hygiene problems"),
    MetricKind("pcie_link_*", "performance_regression", "the GPU's PCIe link generation and width"),
)


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


def _versioned(rec: Recorder, name: str, value: str | None, why_missing: str, found: dict[str, Any]) -> None:
    found[name] = value
    if value:
        rec.record(f"versions.{name}", "passed", value)
    else:
        rec.skip(f"versions.{name}", why_missing)


def _device(ctx: StageContext) -> dict[str, Any]:
    rec, info, env = ctx.rec, ctx.device, ctx.environment
    if info.is_gpu:
        gib = [f"{b / 2**30:.1f} GiB" for b in info.memory_bytes]
        listing = "; ".join(f"{i}: {n} ({m})" for i, (n, m) in enumerate(zip(info.names, gib, strict=False)))
        rec.record("device.visible", "passed", f"{info.count} device(s): {listing or info.name}")
        if gib:
            rec.record("device.memory", "passed", ", ".join(gib))
        else:
            rec.record("device.memory", "info", "device memory unknown (torch reported none)")
    else:
        rec.skip("device.visible", f"no GPU: {info.no_gpu_reason()}")
        rec.skip("device.memory", f"no GPU: {info.no_gpu_reason()}")
    rec.metric("device_count", float(info.count), "devices", "higher")
    rec.metric("device_available", 1.0 if info.is_gpu else 0.0, "bool", "higher")
    build = "HIP " + env.hip_version if env.hip_version else ("CUDA " + env.cuda_version if env.cuda_version else "")
    rec.record("torch.build", "passed", f"torch {env.torch_version} ({build or 'CPU-only'} build)")
    return {
        "available": info.is_gpu,
        "kind": info.kind,
        "count": info.count,
        "names": list(info.names),
        "memory_bytes": list(info.memory_bytes),
        "why_cpu": info.why_cpu or None,
        "torch": env.torch_version,
        "build": build or "CPU-only",
    }


def _versions(ctx: StageContext) -> dict[str, Any]:
    rec, info, env = ctx.rec, ctx.device, ctx.environment
    found: dict[str, Any] = {}
    root = devmod.rocm_root()
    no_rocm = "no ROCm install (.info/version under $ROCM_PATH, $ROCM_HOME or /opt/rocm)"
    _versioned(rec, "rocm", devmod.read_rocm_version(), no_rocm, found)
    _versioned(rec, "hip_runtime", env.hip_version, "not a HIP build of torch", found)
    miopen = env.extra.get("miopen_version") if info.kind == "rocm" else None
    why = "needs a ROCm GPU (torch exposes MIOpen through torch.backends.cudnn on ROCm)"
    _versioned(rec, "miopen", str(miopen) if miopen else None, why, found)
    libs = versions.scan_libraries(root) if root else {}
    for lib in ("rocblas", "hipblaslt"):
        why = f"not found under {root}/lib" if root else no_rocm
        _versioned(rec, lib, libs.get(lib), why, found)
    if info.kind == "rocm":
        why = "amdgpu module exposes no version (in-tree kernel driver)"
    elif info.kind == "cuda":
        why = "torch did not report the CUDA driver version"
    else:
        why = f"no GPU: {info.no_gpu_reason()}"
    _versioned(rec, "driver", env.driver, why, found)
    _versioned(rec, "cuda", env.cuda_version, "not a CUDA build of torch", found)
    why = "needs an NVIDIA GPU" if info.kind != "cuda" else "not reported"
    _versioned(rec, "compute_capability", info.compute_capability, why, found)
    return found


def _arch(ctx: StageContext) -> archcompat.ArchResult | None:
    rec, info = ctx.rec, ctx.device
    if not info.is_gpu:
        rec.skip("arch.compatible", f"no GPU: {info.no_gpu_reason()}")
        return None
    if info.kind == "rocm":
        result = archcompat.check_rocm(
            info.gfx_arch or "",
            info.arch_list,
            override=os.environ.get("HSA_OVERRIDE_GFX_VERSION"),
            rocm_family=versions.family(ctx.environment.hip_version),
        )
    else:
        result = archcompat.check_cuda(info.compute_capability or "", info.arch_list)
    notes = "".join(f"\nnote: {n}" for n in result.notes)
    if result.compatible is None:
        rec.skip("arch.compatible", result.message + notes)
        return result
    rec.metric("arch_compatible", 1.0 if result.compatible else 0.0, "bool", "higher")
    status = "passed" if result.compatible else "failed"
    fix = f"\nfix: {result.remediation}" if result.remediation else ""
    rec.record("arch.compatible", status, result.message + fix + notes, details=result.to_dict())
    return result


def _smoke(ctx: StageContext, arch: archcompat.ArchResult | None) -> None:
    rec, info = ctx.rec, ctx.device
    if arch is not None and arch.compatible is False:
        for kind in SMOKE:
            rec.skip(f"smoke.{kind}", f"not run: arch.compatible failed ({arch.message}); no GPU time spent")
            rec.metric(f"smoke_rel_error.{kind}", None, "ratio", "lower")
        return
    with Worker() as worker:
        for kind, rtol in SMOKE.items():
            outcome = worker.call(
                "stages.verify_hip:smoke_kernel", kind, info.torch_device, rtol, timeout=ctx.options.smoke_timeout
            )
            check = rec.outcome(f"smoke.{kind}", outcome)
            rec.metric(f"smoke_rel_error.{kind}", check.details.get("max_rel_error"), "ratio", "lower")


def pcie_under_load(device: str, busy_s: float = 0.3) -> dict[str, Any]:
    """In the worker: the sysfs link files of ``device`` and its bridges, read while matmuls keep it busy
    (GPUs lower their link speed when idle)."""
    import time

    import torch

    props = torch.cuda.get_device_properties(torch.device(device))
    bus = getattr(props, "pci_bus_id", None)
    if bus is None:
        raise SkipCheck(f"torch {torch.__version__} does not report the device's PCI address (pci_bus_id)")
    bdf = f"{getattr(props, 'pci_domain_id', 0) or 0:04x}:{bus:02x}:{getattr(props, 'pci_device_id', 0) or 0:02x}.0"
    a = torch.randn(2048, 2048, device=device)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    a @ a
    torch.cuda.synchronize()
    one = max(time.perf_counter() - t0, 1e-5)
    for _ in range(min(int(busy_s / one) + 1, 10_000)):  # queued: they run while the files are read
        a @ a
    text, vendors = pcie_link.read_sysfs(bdf)
    torch.cuda.synchronize()
    return {"bdf": bdf, "text": text, "vendors": vendors}


def _pcie(ctx: StageContext) -> tuple[list[Finding], dict[str, Any]]:
    """The GPU's PCIe link (current and maximum), read under load; below its maximum is a hygiene problem."""
    rec, info = ctx.rec, ctx.device
    if not info.is_gpu:
        return pcie_link.link_findings(None, why_missing=f"no GPU: {info.no_gpu_reason()}"), {}
    outcome = run_isolated("stages.verify_hip:pcie_under_load", info.torch_device, timeout=ctx.options.smoke_timeout)
    if not outcome.ok:
        why = outcome.message.split("\nTraceback", 1)[0].split(": ", 1)[-1] if outcome.message else outcome.kind
        if outcome.kind == "raised" and outcome.error_type != "SkipCheck":
            why = f"reading the PCIe link failed: {why}"
        return pcie_link.link_findings(None, why_missing=why), {}
    v = outcome.value
    links = pcie_link.parse_read(v["text"])
    link = pcie_link.external_link(links, v["bdf"], v["vendors"])
    why = f"no PCIe link files under /sys/bus/pci/devices/{v['bdf']} (not on PCIe, or /sys not visible here)"
    findings = pcie_link.link_findings(link, why_missing=why)
    if link is not None:
        for name, value in (
            ("pcie_link_gen", link.current.generation),
            ("pcie_link_width", link.current.width),
            ("pcie_link_gen_max", link.maximum.generation),
            ("pcie_link_width_max", link.maximum.width),
        ):
            rec.metric(name, None if value is None else float(value), "count", "higher", description=f"{link.device}")
    return findings, {"gpu": v["bdf"], "link": link.to_dict() if link else None, "chain": [x.to_dict() for x in links]}


def _hygiene(ctx: StageContext) -> list[Finding]:
    rec, info, env = ctx.rec, ctx.device, ctx.environment
    amd = info.kind == "rocm" or bool(env.hip_version) or devmod.rocm_root() is not None
    # the same rule as the default device-required gate: a GPU is required on GPU runners only
    gpu_expected = info.is_gpu or os.environ.get("GATEKEEPER_REQUIRE_DEVICE") == "1"
    findings = hygiene_findings(os.environ, FsFacts.probe(), amd=amd, gpu_expected=gpu_expected)
    pcie_findings, pcie_facts = _pcie(ctx)
    findings += pcie_findings
    rec.summary["pcie"] = pcie_facts
    for f in findings:
        if f.severity == "skipped":
            rec.skip(f.check, f.message)
        elif f.severity == "error":
            rec.record(f.check, "failed", f"{f.message}\nfix: {f.remediation}")
        else:
            # ok is a pass; a warning or a note is a fact (info): shown, counted, never a pass
            prefix = "WARNING: " if f.severity == "warning" else ""
            fix = f"\nfix: {f.remediation}" if f.remediation else ""
            rec.record(f.check, "passed" if f.severity == "ok" else "info", prefix + f.message + fix)
    rec.metric("hygiene_problems", float(count_problems(findings)), "count", "lower")
    return findings


def run(ctx: StageContext) -> None:
    rec = ctx.rec
    with rec.group("device", "device visibility"):
        device = _device(ctx)
    with rec.group("versions", "ROCm / HIP / CUDA versions"):
        found = _versions(ctx)
    with rec.group("arch", "arch compatibility, predicted before any kernel"):
        arch = _arch(ctx)
    with rec.group("smoke", "smoke kernels vs CPU float64"):
        _smoke(ctx, arch)
    with rec.group("hygiene", "environment hygiene"):
        findings = _hygiene(ctx)
    rec.summary["verify_hip"] = {
        "device": device,
        "versions": found,
        "arch": arch.to_dict() if arch else None,
        "hygiene": [f.to_dict() for f in findings],
    }


def main(argv: list[str] | None = None) -> int:
    return stage_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    sys.exit(main())

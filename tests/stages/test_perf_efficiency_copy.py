"""Compute efficiency and host-device copy bandwidth: the measuring functions run on any torch device
(here the CPU, small shapes), the stage turns them into TFLOPS / GB/s metrics, a fraction of the rated
peak where the table has one, and skipped checks with the reason where there is nothing to measure."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from gatekeeper.contract.stage_report import Environment
from stages import performance_baseline as pb
from stages._stage import CommonOptions, Recorder, SkipCheck, StageContext
from stages.device import DeviceInfo
from stages.isolate import IsolatedOutcome
from stages.perf import copy_bandwidth, efficiency


def _ctx(info: DeviceInfo, **opts: Any) -> StageContext:
    env = Environment(torch_version="2.5.1", python="3.11", host="h", device_kind=info.kind, device_name=info.name)
    return StageContext(
        "performance_baseline", CommonOptions(), pb.Options(**opts), info, env, Recorder("pb", io.StringIO())
    )


class FakeWorker:
    """Stands in for stages.isolate.Worker: answers each call with ``answer(target, *args)``."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.calls: list[tuple[Any, ...]] = []

    def __enter__(self) -> FakeWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def call(self, target: str, *args: Any, timeout: float, **kwargs: Any) -> IsolatedOutcome:
        self.calls.append(args)
        return self.answer(target, *args)


def test_flop_counts() -> None:
    assert efficiency.matmul_flops(8192) == 2 * 8192**3
    assert efficiency.conv_flops(32, 256, 56) == 2 * 32 * 256 * 56 * 56 * 256 * 9


def test_measure_point_runs_on_the_cpu() -> None:
    v = efficiency.measure_point("matmul", "float32", "cpu", 64, 0.05)
    assert v["tflops"] > 0
    assert len(v["samples"]) >= 1
    assert v["flops"] == efficiency.matmul_flops(64)
    i8 = efficiency.measure_point("matmul", "int8", "cpu", 64, 0.05)  # torch._int_mm has CPU kernels
    assert i8["tflops"] > 0
    with pytest.raises(SkipCheck, match="int8 conv2d"):
        efficiency.measure_point("conv2d", "int8", "cpu", (1, 8, 8), 0.05)


def test_efficiency_is_a_fraction_of_the_rated_peak_on_a_listed_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    def answer(target: str, op: str, dtype: str, *rest: Any) -> IsolatedOutcome:
        if dtype == "int8" and op == "conv2d":
            return IsolatedOutcome("raised", None, "SkipCheck: torch has no eager int8 conv2d", "SkipCheck")
        return IsolatedOutcome(
            "ok", {"tflops": 1000.0, "samples": [990.0, 1000.0, 1010.0], "compute_units": 304, "name": "x"}
        )

    monkeypatch.setattr(efficiency, "Worker", lambda: FakeWorker(answer))
    ctx = _ctx(DeviceInfo("rocm", "cuda:0", "AMD Instinct MI300X", 1, "gfx942:sramecc+:xnack-"))
    summary = efficiency.run(ctx)
    m = ctx.rec.metrics
    assert m["tflops[dtype=float16,op=matmul]"].value == 1000.0
    assert m["compute_efficiency[dtype=float16,op=matmul]"].value == pytest.approx(1000.0 / 1307.4)
    assert m["compute_efficiency[dtype=int8,op=matmul]"].value == pytest.approx(1000.0 / 2614.9)
    assert m["tflops[dtype=int8,op=matmul]"].unit == "TOPS"
    assert "MI300X" in m["compute_efficiency[dtype=float16,op=matmul]"].description
    assert m["tflops[dtype=int8,op=conv2d]"].value is None
    assert summary["peak"]["product"] == "MI300X"
    assert "amd.com" in summary["peak"]["source"]
    checks = {c.name: c for c in ctx.rec.checks}
    assert checks["efficiency[dtype=int8,op=conv2d]"].status == "skipped"
    assert "76% of the 1307 rated for MI300X" in checks["efficiency[dtype=float16,op=matmul]"].message


def test_an_unlisted_gpu_reports_tflops_without_a_fraction(monkeypatch: pytest.MonkeyPatch) -> None:
    ok = IsolatedOutcome("ok", {"tflops": 50.0, "samples": [50.0], "compute_units": 96, "name": "RX 7900 XTX"})
    monkeypatch.setattr(efficiency, "Worker", lambda: FakeWorker(lambda *a: ok))
    ctx = _ctx(DeviceInfo("rocm", "cuda:0", "AMD Radeon RX 7900 XTX", 1, "gfx1100"))
    efficiency.run(ctx)
    eff = ctx.rec.metrics["compute_efficiency[dtype=bfloat16,op=matmul]"]
    assert ctx.rec.metrics["tflops[dtype=bfloat16,op=matmul]"].value == 50.0
    assert eff.value is None
    assert eff.description.startswith("skipped: no rated peak in the table for arch gfx1100")


def test_measure_copy_runs_on_any_device_and_refuses_pinned_without_one() -> None:
    v = copy_bandwidth.measure_copy("h2d", False, 1, "cpu", min_run_s=0.05)
    assert v["gbps"] > 0
    assert v["bytes"] == 1_000_000
    with pytest.raises(SkipCheck, match="pinned"):
        copy_bandwidth.measure_copy("d2h", True, 1, "cpu", min_run_s=0.05)


def test_copy_bandwidth_on_cpu_is_skipped_with_the_reason_for_two_sizes_both_directions() -> None:
    ctx = _ctx(DeviceInfo("cpu", "cpu", why_cpu="torch sees no GPU"))
    copy_bandwidth.run(ctx, "auto")
    names = [n for n in ctx.rec.metrics if n.startswith("copy_bandwidth_gbps")]
    assert sorted(names) == sorted(
        copy_bandwidth.metric_name(d, p, s) for d in ("h2d", "d2h") for p in (True, False) for s in (1, 64)
    )
    for n in names:
        assert ctx.rec.metrics[n].value is None
        assert ctx.rec.metrics[n].description == "skipped: no GPU (torch sees no GPU): host-device copies need a device"
    assert {c.status for c in ctx.rec.checks} == {"skipped"}
    assert "copy_bandwidth_gbps[dir=h2d,pinned=true,size_mb=64]" in names


def test_copy_bandwidth_on_a_gpu_records_every_point(monkeypatch: pytest.MonkeyPatch) -> None:
    def answer(target: str, direction: str, pinned: bool, size_mb: int, device: str) -> IsolatedOutcome:
        gbps = (25.0 if pinned else 12.0) if direction == "h2d" else 26.0
        return IsolatedOutcome("ok", {"gbps": gbps, "samples": [gbps], "seconds_per_copy": 0.01, "bytes": 1})

    fake = FakeWorker(answer)
    monkeypatch.setattr(copy_bandwidth, "Worker", lambda: fake)
    ctx = _ctx(DeviceInfo("cuda", "cuda:0", "NVIDIA H100 PCIe", 1, compute_capability="9.0"))
    summary = copy_bandwidth.run(ctx, "1,64")
    assert ctx.rec.metrics["copy_bandwidth_gbps[dir=h2d,pinned=true,size_mb=64]"].value == 25.0
    assert ctx.rec.metrics["copy_bandwidth_gbps[dir=h2d,pinned=false,size_mb=1]"].value == 12.0
    assert len(fake.calls) == 8
    assert all(call[3] == "cuda:0" for call in fake.calls)
    assert {r["status"] for r in summary["points"]} == {"measured"}


def test_copy_sizes_are_checked() -> None:
    from gatekeeper.core.errors import InputError

    assert copy_bandwidth.parse_sizes("auto", gpu=True) == copy_bandwidth.GPU_SIZES_MB
    assert copy_bandwidth.parse_sizes("64, 1,64", gpu=False) == (1, 64)
    for bad in ("0", "x", "9999", "1,,2"):
        with pytest.raises(InputError, match="--copy-sizes"):
            copy_bandwidth.parse_sizes(bad, gpu=True)


@pytest.mark.slow
def test_stage_efficiency_and_copy_on_cpu(tmp_path: Path) -> None:
    argv = ["--out", str(tmp_path), "--device", "cpu", "--processes", "1", "--iterations", "2", "--warmup", "0"]
    assert pb.main([*argv, "--batch-size", "1", "--efficiency", "--copy-bandwidth"]) == 0
    from gatekeeper.contract.stage_report import read_stage

    r = read_stage(tmp_path / "performance_baseline.json")
    for op in efficiency.OPS:
        for dtype in ("float32", "bfloat16"):
            assert r.metrics[f"tflops[dtype={dtype},op={op}]"].value > 0
            eff = r.metrics[f"compute_efficiency[dtype={dtype},op={op}]"]
            assert eff.value is None
            assert "no rated peak" in eff.description
    assert r.metrics["copy_bandwidth_gbps[dir=d2h,pinned=false,size_mb=1]"].value is None
    assert r.summary["efficiency"]["peak"]["product"] is None

from __future__ import annotations

import io
from pathlib import Path

import pytest

from gatekeeper.contract.stage_report import Environment, read_stage
from stages import verify_hip
from stages._stage import CommonOptions, Recorder, StageContext
from stages.device import DeviceInfo

GPU_ONLY = {
    "device.visible",
    "device.memory",
    "versions.miopen",
    "versions.driver",
    "versions.compute_capability",
    "arch.compatible",
}


@pytest.mark.slow
def test_stage_on_cpu_writes_valid_artifacts(tmp_path: Path) -> None:
    assert verify_hip.main(["--out", str(tmp_path), "--device", "cpu", "--smoke-timeout", "60"]) == 0
    report = read_stage(tmp_path / "verify_hip.json")  # validates against the stage schema
    checks = {c.name: c for c in report.checks}
    for name in GPU_ONLY:
        assert checks[name].status == "skipped", name
        assert checks[name].message, f"{name} skipped without a reason"
    for kind in verify_hip.SMOKE:
        assert checks[f"smoke.{kind}"].status == "passed"
        assert report.metrics[f"smoke_rel_error.{kind}"].value < verify_hip.SMOKE[kind]
    assert report.metrics["device_available"].value == 0.0
    assert report.metrics["device_count"].value == 0.0
    assert "arch_compatible" not in report.metrics  # omitted without a GPU
    assert report.metrics["hygiene_problems"].value is not None
    assert {c.group for c in report.checks} == {"device", "versions", "arch", "smoke", "hygiene"}
    assert report.summary["verify_hip"]["device"]["available"] is False
    junit = (tmp_path / "verify_hip.junit.xml").read_text()
    for name in checks:
        assert f'name="{name}"' in junit


def _ctx(info: DeviceInfo, hip: str | None = "6.2.41133-dd7f95766", cuda: str | None = None) -> StageContext:
    env = Environment(
        torch_version="2.5.1", python="3.11", host="h", hip_version=hip, cuda_version=cuda, device_kind=info.kind
    )
    return StageContext(
        "verify_hip", CommonOptions(), verify_hip.Options(), info, env, Recorder("verify_hip", io.StringIO())
    )


def test_incompatible_gfx_fails_before_any_kernel() -> None:
    info = DeviceInfo(
        "rocm", "cuda:0", "AMD Instinct MI300X", 1, "gfx942:sramecc+:xnack-", arch_list=("gfx90a", "gfx1030")
    )
    ctx = _ctx(info)
    arch = verify_hip._arch(ctx)
    verify_hip._smoke(ctx, arch)  # must not start a worker: every smoke check is skipped
    checks = {c.name: c for c in ctx.rec.checks}
    assert checks["arch.compatible"].status == "failed"
    assert "PYTORCH_ROCM_ARCH=gfx942" in checks["arch.compatible"].message
    assert "whl/rocm6.2" in checks["arch.compatible"].message
    assert ctx.rec.metrics["arch_compatible"].value == 0.0
    assert all(checks[f"smoke.{k}"].status == "skipped" for k in verify_hip.SMOKE)


def test_compatible_cuda_records_metric() -> None:
    info = DeviceInfo("cuda", "cuda:0", "NVIDIA L40S", 1, compute_capability="8.9", arch_list=("sm_80", "sm_86"))
    ctx = _ctx(info, hip=None, cuda="12.4")
    assert verify_hip._arch(ctx).compatible is True
    assert ctx.rec.checks[-1].status == "passed"
    assert ctx.rec.metrics["arch_compatible"].value == 1.0


def test_unknown_arch_list_is_skipped_without_metric() -> None:
    ctx = _ctx(DeviceInfo("rocm", "cuda:0", "gpu", 1, "gfx90a"))
    verify_hip._arch(ctx)
    assert ctx.rec.checks[-1].status == "skipped"
    assert "arch_compatible" not in ctx.rec.metrics


def test_override_note_reaches_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HSA_OVERRIDE_GFX_VERSION", "10.3.0")
    ctx = _ctx(DeviceInfo("rocm", "cuda:0", "RX 6700 XT", 1, "gfx1030", arch_list=("gfx1030", "gfx1100")))
    verify_hip._arch(ctx)
    assert ctx.rec.checks[-1].status == "passed"
    assert "HSA_OVERRIDE_GFX_VERSION=10.3.0 is in effect" in ctx.rec.checks[-1].message


def test_hygiene_hiding_gpus_fails_when_a_gpu_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "")
    monkeypatch.setenv("GATEKEEPER_REQUIRE_DEVICE", "1")
    ctx = _ctx(DeviceInfo("cpu", "cpu", why_cpu="torch sees no GPU"))
    findings = verify_hip._hygiene(ctx)
    checks = {c.name: c for c in ctx.rec.checks}
    assert checks["hygiene.HIP_VISIBLE_DEVICES"].status == "failed"
    assert ctx.rec.metrics["hygiene_problems"].value == sum(f.is_problem for f in findings) >= 1


def test_rocm_versions_from_install_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".info").mkdir()
    (tmp_path / ".info" / "version").write_text("6.2.0-66\n")
    (tmp_path / "lib").mkdir()
    for name in ("librocblas.so.4.2.60200", "libhipblaslt.so.0.8.60200"):
        (tmp_path / "lib" / name).write_bytes(b"")
    monkeypatch.setenv("ROCM_PATH", str(tmp_path))
    ctx = _ctx(DeviceInfo("cpu", "cpu", why_cpu="no GPU here"))
    found = verify_hip._versions(ctx)
    assert found["rocm"] == "6.2.0-66"
    assert found["rocblas"] == "4.2.60200"
    assert found["hipblaslt"] == "0.8.60200"
    assert found["hip_runtime"] == "6.2.41133-dd7f95766"
    checks = {c.name: c.status for c in ctx.rec.checks}
    assert checks["versions.driver"] == "skipped"
    assert checks["versions.miopen"] == "skipped"


def test_hygiene_does_not_block_a_cpu_job_in_a_rocm_image(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "")
    monkeypatch.delenv("GATEKEEPER_REQUIRE_DEVICE", raising=False)
    ctx = _ctx(DeviceInfo("cpu", "cpu", why_cpu="torch sees no GPU"))  # a HIP build of torch, no GPU
    verify_hip._hygiene(ctx)
    assert not [c for c in ctx.rec.checks if c.status == "failed"]


def _link_text(capture: str) -> str:
    """A real sysfs capture rendered as ``pcie_link.read_sysfs`` renders a live reading (path:value lines)."""
    from gatekeeper.machine.probes import pcie

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "env"
    lines = []
    for link in pcie.parse_sysfs((fixtures / capture).read_text()).links:
        d = f"/sys/devices/pci0000:00/{link.device}"
        lines += [
            f"{d}/current_link_speed:{link.current.speed_gts:.1f} GT/s PCIe",
            f"{d}/current_link_width:{link.current.width}",
            f"{d}/max_link_speed:{link.maximum.speed_gts:.1f} GT/s PCIe",
            f"{d}/max_link_width:{link.maximum.width}",
        ]
    return "\n".join(lines) + "\n"


def test_pcie_link_below_its_maximum_is_a_hygiene_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    from stages.isolate import IsolatedOutcome

    # the real two-port capture: the GPU's switch (01:00.0) trained x8 Gen4 in a Gen5 x16 slot
    value = {
        "bdf": "0000:03:00.0",
        "text": _link_text("sysfs-pcie__resources-512-tail-v-two-ports.txt"),
        "vendors": {"0000:01:00.0": "0x1002", "0000:03:00.0": "0x1002"},
    }
    monkeypatch.setattr(verify_hip, "run_isolated", lambda *a, **k: IsolatedOutcome("ok", value))
    ctx = _ctx(DeviceInfo("rocm", "cuda:0", "AMD Radeon", 1, "gfx1201"))
    findings = verify_hip._hygiene(ctx)
    check = next(c for c in ctx.rec.checks if c.name == "hygiene.pcie_link")
    assert check.status == "info"  # a warning is a fact, never a pass; hygiene_problems carries it to the gate
    assert check.message.startswith("WARNING: PCIe link of 0000:01:00.0 (sysfs) runs at 16 GT/s (Gen4) x8")
    assert "below its maximum 32 GT/s (Gen5) x16" in check.message
    assert ctx.rec.metrics["hygiene_problems"].value == sum(f.is_problem for f in findings) >= 1
    m = ctx.rec.metrics
    assert (m["pcie_link_gen"].value, m["pcie_link_width"].value) == (4.0, 8.0)
    assert (m["pcie_link_gen_max"].value, m["pcie_link_width_max"].value) == (5.0, 16.0)
    assert ctx.rec.summary["pcie"]["link"]["below_max"] is True


def test_pcie_link_without_a_gpu_or_an_address_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    from stages.isolate import IsolatedOutcome

    ctx = _ctx(DeviceInfo("cpu", "cpu", why_cpu="torch sees no GPU"))
    verify_hip._hygiene(ctx)
    check = next(c for c in ctx.rec.checks if c.name == "hygiene.pcie_link")
    assert (check.status, check.message) == ("skipped", "no GPU: torch sees no GPU")
    said = "SkipCheck: torch 2.0 does not report the device's PCI address (pci_bus_id)\nTraceback ..."
    monkeypatch.setattr(verify_hip, "run_isolated", lambda *a, **k: IsolatedOutcome("raised", None, said, "SkipCheck"))
    ctx = _ctx(DeviceInfo("cuda", "cuda:0", "NVIDIA H100 PCIe", 1, compute_capability="9.0"), hip=None)
    verify_hip._hygiene(ctx)
    check = next(c for c in ctx.rec.checks if c.name == "hygiene.pcie_link")
    assert check.status == "skipped"
    assert check.message == "torch 2.0 does not report the device's PCI address (pci_bus_id)"
    assert "pcie_link_gen" not in ctx.rec.metrics

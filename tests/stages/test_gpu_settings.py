"""The GPU settings a stage records (stages.device.read_gpu_settings) and performance_baseline's check that
they held while the timings ran. rocm-smi is a script on PATH that prints real captured output
(tests/fixtures/env/index.jsonl); the second call may print another GPU state."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from gatekeeper.contract.stage_report import Environment
from gatekeeper.machine.gpu_state import DEVICES_KEY
from stages import device
from stages import performance_baseline as pb
from stages._stage import CommonOptions, Recorder, StageContext
from stages.device import read_gpu_settings
from stages.perf import measure

FIXTURE = Path(__file__).parents[1] / "fixtures" / "env" / "rocm-smi__thamada-mi300x-x4-concise.txt"
SHOWALL = FIXTURE.with_name("rocm-smi__thamada-mi300x-x4-showall.txt")  # its "PCI Bus ID" section: --showbus's
ROW = "{n}       [0x74a1 : 0x00]       {t}°C      {p}W    NPS1, SPX       13{s}Mhz  900Mhz  0%   auto  750.0W"


def _fake_smi(tmp_path: Path, *outputs: str, exit_code: int = 0, showbus: str | None = None) -> dict[str, str]:
    """A rocm-smi that prints ``outputs`` one per call (the last again after that), and ``showbus`` for
    ``rocm-smi --showbus`` (counted apart, in ``showbus_calls``); the environment to run it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for n, text in enumerate(outputs):
        (tmp_path / f"out{n}.txt").write_text(text, encoding="utf-8")
    bus = ""
    if showbus is not None:
        (tmp_path / "showbus.txt").write_text(showbus, encoding="utf-8")
        bus = (
            'if [ "$1" = "--showbus" ]; then\n'
            f'  echo x >> "{tmp_path}/showbus_calls"; cat "{tmp_path}/showbus.txt"; exit 0\nfi\n'
        )
    script = bin_dir / "rocm-smi"
    script.write_text(
        f"#!/bin/sh\n{bus}"
        f'd="{tmp_path}"; n=$(cat "$d/calls" 2>/dev/null || echo 0); echo $((n + 1)) > "$d/calls"\n'
        f'[ -f "$d/out$n.txt" ] || n={len(outputs) - 1}\n'
        f'cat "$d/out$n.txt"\nexit {exit_code}\n',
        encoding="utf-8",
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


def test_the_settings_of_the_jobs_gpu_from_rocm_smi(tmp_path: Path) -> None:
    real = FIXTURE.read_text(encoding="utf-8")
    other = real.replace("3       [0x74a1 : 0x00]       38.0°C      137.0W    NPS1, SPX       131Mhz  900Mhz  0%   auto  750.0W",
                         "3       [0x74a1 : 0x00]       38.0°C      137.0W    NPS1, SPX       131Mhz  900Mhz  0%   high  550.0W")  # fmt: skip
    assert other != real
    environ = _fake_smi(tmp_path, other)
    settings, why = read_gpu_settings("rocm", {**environ, "HIP_VISIBLE_DEVICES": "3"})
    assert why == ""
    assert settings == {"gpu_perf_level": "high", "gpu_power_cap_w": 550.0, "gpu_memory_partition": "NPS1",
                        "gpu_compute_partition": "SPX", DEVICES_KEY: "index 3"}  # fmt: skip
    assert read_gpu_settings("rocm", {**environ, "HIP_VISIBLE_DEVICES": "0"})[0]["gpu_power_cap_w"] == 750.0


def _gpus_1_and_3_capped() -> str:
    """The real 4-GPU concise table with GPU 1 and 3 at 550 W, performance level high (another job's doing)."""
    text = FIXTURE.read_text(encoding="utf-8")
    for n, t, p, s in ((1, "37.0", "131.0", "2"), (3, "38.0", "137.0", "1")):
        row = ROW.format(n=n, t=t, p=p, s=s)
        assert row in text
        text = text.replace(row, row.replace("auto  750.0W", "high  550.0W"))
    return text


BUS_1_3 = ("0000:46:00.0", "0000:85:00.0")  # GPU 1 and 3 in the capture's PCI Bus ID section


def test_the_jobs_gpus_by_pci_bus_id_from_rocm_smi_showbus(tmp_path: Path) -> None:
    environ = _fake_smi(tmp_path, _gpus_1_and_3_capped(), showbus=SHOWALL.read_text(encoding="utf-8"))
    # a container given GPU 1 and 3 with --device: rocm-smi lists all four; torch's bus ids say which are the job's,
    # over ROCR_VISIBLE_DEVICES (which counts the container's devices, not the host's)
    settings, why = read_gpu_settings("rocm", {**environ, "ROCR_VISIBLE_DEVICES": "0,1"}, bus_ids=BUS_1_3)
    assert why == ""
    assert settings == {"gpu_perf_level": "high", "gpu_power_cap_w": 550.0, "gpu_memory_partition": "NPS1",
                        "gpu_compute_partition": "SPX", DEVICES_KEY: "bus 0000:46:00.0,0000:85:00.0"}  # fmt: skip
    assert (tmp_path / "showbus_calls").read_text() == "x\n"  # one short second call
    # torch gave no bus ids (an older torch): no second call, today's mapping
    (tmp_path / "showbus_calls").unlink()
    settings, _ = read_gpu_settings("rocm", {**environ, "ROCR_VISIBLE_DEVICES": "0"})
    assert (settings["gpu_power_cap_w"], settings[DEVICES_KEY]) == (750.0, "index 0")
    assert not (tmp_path / "showbus_calls").exists()


def test_a_bus_id_rocm_smi_does_not_list_records_every_gpu_and_says_so(tmp_path: Path) -> None:
    environ = _fake_smi(tmp_path, _gpus_1_and_3_capped(), showbus=SHOWALL.read_text(encoding="utf-8"))
    settings, why = read_gpu_settings("rocm", environ, bus_ids=("0000:46:00.0", "0000:e6:00.0"))
    assert why == ""
    assert settings["gpu_power_cap_w"] == "750 on GPU 0, 550 on GPU 1, 750 on GPU 2, 550 on GPU 3"
    assert settings[DEVICES_KEY] == "every GPU: bus 0000:e6:00.0 not listed by the tool"


def test_the_recorded_environment_and_the_check_after_the_timings_use_the_same_gpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    start = _gpus_1_and_3_capped()
    gpu0_changed = start.replace(ROW.format(n=0, t="35.0", p="133.0", s="1"),
                                 ROW.format(n=0, t="35.0", p="133.0", s="1").replace("750.0W", "400.0W"))  # fmt: skip
    assert gpu0_changed != start
    environ = _fake_smi(tmp_path, start, gpu0_changed, showbus=SHOWALL.read_text(encoding="utf-8"))
    monkeypatch.setenv("PATH", environ["PATH"])
    monkeypatch.setattr(device, "_miopen_version", lambda: None)
    monkeypatch.setattr(device, "_nccl_version", lambda: None)
    monkeypatch.setattr(device, "read_amdgpu_driver_version", lambda *a, **k: None)
    info = device.DeviceInfo("rocm", "cuda:0", name="AMD Instinct MI300X", count=2, pci_bus_ids=BUS_1_3)
    env = device.environment(info, channel="stable")
    assert (env.extra["gpu_power_cap_w"], env.extra[DEVICES_KEY]) == (550.0, "bus 0000:46:00.0,0000:85:00.0")
    ctx = _ctx(tmp_path, dict(env.extra))
    ctx.device.pci_bus_ids = BUS_1_3
    measure.settings_check(ctx)  # another job's GPU 0 changed its cap meanwhile: not this run's GPUs
    assert [(c.status, c.message) for c in ctx.rec.checks] == [
        ("passed", "GPU performance level high, GPU power cap 550 W, GPU compute partition SPX, "
                   "GPU memory partition NPS1")]  # fmt: skip


def test_detect_reads_the_pci_bus_ids_torch_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    props = [SimpleNamespace(name="AMD Instinct MI300X", total_memory=1 << 30, gcnArchName="gfx942:sramecc+:xnack-",
                             major=9, minor=4, pci_domain_id=0, pci_bus_id=b, pci_device_id=0)
             for b in (0x46, 0x85)]  # fmt: skip
    monkeypatch.setattr(torch.version, "hip", "6.4.0", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props[i])
    monkeypatch.setattr(torch.cuda, "get_arch_list", lambda: ["gfx942"])
    assert device.detect().pci_bus_ids == BUS_1_3
    props[1] = SimpleNamespace(name="AMD Instinct MI300X", total_memory=1 << 30, gcnArchName="gfx942", major=9,
                               minor=4)  # an older torch: no pci_* attributes  # fmt: skip
    assert device.detect().pci_bus_ids == ()


def test_no_settings_say_why(tmp_path: Path) -> None:
    assert read_gpu_settings("cpu") == ({}, "no GPU")
    assert read_gpu_settings("rocm", {"PATH": str(tmp_path)}) == ({}, "rocm-smi not found on PATH")
    settings, why = read_gpu_settings("rocm", _fake_smi(tmp_path, "ROCk module is NOT loaded\n", exit_code=1))
    assert settings == {}
    assert why == "rocm-smi exited with code 1"


def _ctx(tmp_path: Path, extra: dict[str, object], kind: str = "rocm") -> StageContext:
    env = Environment("2.13.0+rocm7.1", "3.11", "runner", device_kind=kind, extra=extra)  # type: ignore[arg-type]
    device = SimpleNamespace(kind=kind, torch_device="cuda:0", is_gpu=kind != "cpu")
    return StageContext("performance_baseline", CommonOptions(out=tmp_path), pb.Options(), device, env, Recorder("pb"))


def test_a_setting_changed_during_the_timings_fails_the_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = FIXTURE.read_text(encoding="utf-8")
    capped = real.replace("auto  750.0W", "auto  550.0W")
    environ = _fake_smi(tmp_path, real, capped)
    monkeypatch.setenv("PATH", environ["PATH"])
    start, _ = read_gpu_settings("rocm")  # what stages.device.environment records when the job starts
    ctx = _ctx(tmp_path, {"torch_device": "cuda:0", **start})
    measure.settings_check(ctx)  # rocm-smi's second call: every cap now 550 W
    [check] = ctx.rec.checks
    assert check.name == "gpu_settings"
    assert check.status == "failed"
    assert "GPU power cap 750 W -> 550 W" in check.message


def test_settings_that_held_pass_and_no_gpu_skips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    environ = _fake_smi(tmp_path, FIXTURE.read_text(encoding="utf-8"))
    monkeypatch.setenv("PATH", environ["PATH"])
    ctx = _ctx(tmp_path, read_gpu_settings("rocm")[0])
    measure.settings_check(ctx)
    [check] = ctx.rec.checks
    assert (check.status, check.message) == (
        "passed",
        "GPU performance level auto, GPU power cap 750 W, GPU compute partition SPX, GPU memory partition NPS1",
    )
    cpu = _ctx(tmp_path, {}, kind="cpu")
    measure.settings_check(cpu)
    assert (cpu.rec.checks[0].status, cpu.rec.checks[0].message) == ("skipped", "no GPU: the settings are a GPU's")
    unknown = _ctx(tmp_path, {"gpu_settings_unknown": "rocm-smi not found on PATH"})
    measure.settings_check(unknown)
    assert (unknown.rec.checks[0].status, unknown.rec.checks[0].message) == ("skipped", "rocm-smi not found on PATH")

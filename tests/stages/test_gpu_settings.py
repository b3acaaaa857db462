"""The GPU settings a stage records (stages.device.read_gpu_settings) and performance_baseline's check that
they held while the timings ran. rocm-smi is a script on PATH that prints real captured output
(tests/fixtures/env/index.jsonl); the second call may print another GPU state."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest

from gatekeeper.contract.stage_report import Environment
from stages import performance_baseline as pb
from stages._stage import CommonOptions, Recorder, StageContext
from stages.device import read_gpu_settings
from stages.perf import measure

FIXTURE = Path(__file__).parents[1] / "fixtures" / "env" / "rocm-smi__thamada-mi300x-x4-concise.txt"


def _fake_smi(tmp_path: Path, *outputs: str, exit_code: int = 0) -> dict[str, str]:
    """A rocm-smi that prints ``outputs`` one per call (the last again after that); the environment to run it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for n, text in enumerate(outputs):
        (tmp_path / f"out{n}.txt").write_text(text, encoding="utf-8")
    script = bin_dir / "rocm-smi"
    script.write_text(
        "#!/bin/sh\n"
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
                        "gpu_compute_partition": "SPX"}  # fmt: skip
    assert read_gpu_settings("rocm", {**environ, "HIP_VISIBLE_DEVICES": "0"})[0]["gpu_power_cap_w"] == 750.0


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

"""`gatekeeper doctor --from DIR` on capture directories assembled from the real
fixtures, the live snapshot with a hanging fake tool, and bad input."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import types
from pathlib import Path

import pytest

from gatekeeper import cli
from gatekeeper.machine.checklist import diagnose
from gatekeeper.machine.snapshot import TOOLS, read_capture, take_snapshot, write_capture

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "env"
INDEX = {e["file"]: e for e in (json.loads(x) for x in (FIXTURES / "index.jsonl").read_text().splitlines() if x)}
ROCM_WHEEL = ["gfx900", "gfx906", "gfx908", "gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1101"]


def _capture(tmp_path: Path, name: str, files: dict[str, str], extra: dict[str, str] | None = None) -> Path:
    d = tmp_path / name
    d.mkdir()
    for target, fixture in files.items():
        shutil.copyfile(FIXTURES / fixture, d / target)
    for target, text in (extra or {}).items():
        (d / target).write_text(text)
    return d


def _doctor_json(capsys: pytest.CaptureFixture[str], directory: Path) -> tuple[int, dict]:
    code = cli.main(["doctor", "--from", str(directory), "--format", "json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def _torch_json(arch_list: list[str], hip: str | None = "6.2.41133-dd7f95766", devices: list | None = None) -> str:
    return json.dumps(
        {
            "version": "2.5.1+rocm6.2",
            "hip": hip,
            "cuda": None if hip else "12.8",
            "available": True,
            "arch_list": arch_list,
            "devices": devices or [],
        }
    )


ROCMINFO = sorted(f for f in INDEX if f.startswith("rocminfo__"))


@pytest.mark.parametrize("fixture", ROCMINFO)
def test_from_rocminfo_capture(tmp_path: Path, capsys: pytest.CaptureFixture[str], fixture: str) -> None:
    facts = INDEX[fixture]["facts"]
    d = _capture(tmp_path, "cap", {"rocminfo.txt": fixture})
    code, doc = _doctor_json(capsys, d)
    assert code == 0
    devices = doc["devices"]
    assert len(devices) == facts["gpu_count"]
    assert sorted({x["gfx_arch"].split(":")[0] for x in devices}) == facts["gfx"]
    assert sorted({x["marketing_name"] for x in devices}) == sorted(facts["marketing_names"])
    assert {x["name"] for x in devices} == set(facts["gfx"])
    if "compute_units" in facts:
        assert devices[0]["compute_units"] == facts["compute_units"]
    if isinstance(facts.get("isa"), str):
        assert devices[0]["gfx_arch"] == facts["isa"].split("--", 1)[1]
    assert doc["rocm_version"] is None
    assert {f["severity"] for f in doc["findings"]} <= {"ok", "info", "skipped", "warning"}


@pytest.mark.parametrize("fixture", sorted(f for f in INDEX if f.startswith("rocm-smi__")))
def test_from_rocm_smi_capture(tmp_path: Path, capsys: pytest.CaptureFixture[str], fixture: str) -> None:
    facts = INDEX[fixture]["facts"]
    d = _capture(tmp_path, "cap", {"rocm-smi.txt": fixture})
    code, doc = _doctor_json(capsys, d)
    assert code == 0
    assert len(doc["devices"]) == facts["gpu_count"]
    for key in ("names", "card_series", "device_name"):
        if key in facts:
            want = facts[key] if isinstance(facts[key], list) else [facts[key]]
            assert sorted({x["marketing_name"] for x in doc["devices"]}) == want


def test_full_capture_mi300x(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _capture(
        tmp_path,
        "mi300x",
        {
            "rocminfo.txt": "rocminfo__thamada-mi300x-x4.txt",
            "rocm-smi.txt": "rocm-smi__thamada-mi300x-x4-concise.txt",
            "rocm-smi.json": "rocm-smi__thamada-mi300x-x4-showall.txt",
            "version": "rocm-version__rocm-221-rocm-1.6.180.txt",
        },
        {"torch.json": _torch_json(ROCM_WHEEL)},
    )
    code, doc = _doctor_json(capsys, d)
    assert doc["rocm_version"] == "1.6.180"
    assert [x["gfx_arch"] for x in doc["devices"]] == ["gfx942:sramecc+:xnack-"] * 4
    assert doc["devices"][0]["temperature_c"] == 35.0
    assert doc["torch"]["arch_list"] == ROCM_WHEEL
    arch = [f for f in doc["findings"] if f["check"] == "arch.compatible"]
    assert [f["severity"] for f in arch] == ["ok"]
    # torch built for ROCm 6.2 on a system with ROCm 1.6: a major mismatch
    match = next(f for f in doc["findings"] if f["check"] == "versions.rocm_match")
    assert match["severity"] == "warning"
    assert code == 0


def test_missing_gfx_target_is_an_error_with_remediation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _capture(
        tmp_path,
        "old-wheel",
        {"rocminfo.txt": "rocminfo__thamada-mi300x-x4.txt"},
        {"torch.json": _torch_json(["gfx900", "gfx906", "gfx908", "gfx90a", "gfx1030"])},
    )
    code, doc = _doctor_json(capsys, d)
    assert code == 1
    err = next(f for f in doc["findings"] if f["severity"] == "error")
    assert err["check"] == "arch.compatible"
    assert "hipErrorNoBinaryForGpu" in err["message"]
    assert "PYTORCH_ROCM_ARCH=gfx942" in err["remediation"]
    assert "whl/rocm6.2" in err["remediation"]


def test_override_capture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _capture(
        tmp_path,
        "override",
        {
            "rocminfo.txt": "rocminfo__vbs-nn-rx6700xt-override.txt",
            "rocm-smi.txt": "rocm-smi__vbs-nn-rx6700xt-watch.txt",
        },
        {"torch.json": _torch_json(ROCM_WHEEL), "env.txt": "HSA_OVERRIDE_GFX_VERSION=10.3.0\nPATH=/usr/bin\n"},
    )
    code, doc = _doctor_json(capsys, d)
    assert code == 0
    checks = {(f["check"], f["severity"]) for f in doc["findings"]}
    assert ("arch.compatible", "ok") in checks
    assert ("hygiene.HSA_OVERRIDE_GFX_VERSION", "warning") in checks
    notes = " ".join(f["message"] for f in doc["findings"] if f["check"] == "arch.notes")
    assert "natively gfx1031" in notes
    assert "HSA_OVERRIDE_GFX_VERSION=10.3.0 is in effect" in notes


@pytest.mark.parametrize(
    ("fixture", "torch_version", "hip", "gfx"),
    [
        ("collect_env__amd-gpu-hello-rx7900xtx-rocm631.txt", "2.4.0+rocm6.3.1", "6.3.42133-1b9c17779", "gfx1100"),
        (
            "collect_env__vllm-10663-mi250x.txt",
            "2.6.0.dev20240918+rocm6.2",
            "6.2.41133-dd7f95766",
            "gfx90a:sramecc+:xnack-",
        ),
        ("collect_env__pytorch-pr44106-rocm37-device66a1.txt", "1.7.0a0+9ddd3df", "3.7.20315-077bcfa0", None),
    ],
)
def test_from_collect_env_capture(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fixture: str, torch_version: str, hip: str, gfx: str | None
) -> None:
    d = _capture(tmp_path, "cap", {"collect_env.txt": fixture})
    code, doc = _doctor_json(capsys, d)
    assert code == 0
    assert doc["torch"]["version"] == torch_version
    assert doc["torch"]["hip"] == hip
    assert doc["torch"]["arch_list"] is None
    assert doc["devices"][0]["gfx_arch"] == gfx


def test_crashed_collect_env_is_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _capture(tmp_path, "cap", {"collect_env.txt": "collect_env__pytorch-99983-indexerror-hip-runtime.txt"})
    code, doc = _doctor_json(capsys, d)
    assert code == 0
    crash = next(f for f in doc["findings"] if f["check"] == "probes.collect_env")
    assert crash["severity"] == "warning"
    assert "IndexError" in crash["message"]


def test_nvidia_capture_predicts_dropped_arch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cu128 = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"]
    d = _capture(
        tmp_path,
        "nv",
        {"nvidia-smi.csv": "nvidia-smi__synthetic-a100-v100-query.csv"},
        {"torch.json": _torch_json(cu128, hip=None)},
    )
    code, doc = _doctor_json(capsys, d)
    assert code == 1
    assert [x["compute_capability"] for x in doc["devices"]] == ["8.0", "7.0"]
    arch = {f["message"].split(":")[0]: f for f in doc["findings"] if f["check"] == "arch.compatible"}
    assert arch["NVIDIA A100-SXM4-80GB"]["severity"] == "ok"
    assert arch["Tesla V100-SXM2-16GB"]["severity"] == "error"
    assert "TORCH_CUDA_ARCH_LIST=7.0" in arch["Tesla V100-SXM2-16GB"]["remediation"]


def test_rock_not_loaded_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _capture(tmp_path, "cap", {}, {"rocminfo.txt": "ROCk module is NOT loaded, possibly no GPU devices\n"})
    code, doc = _doctor_json(capsys, d)
    assert code == 1
    assert {f["check"] for f in doc["findings"] if f["severity"] == "error"} == {"driver.rock", "devices.visible"}


def test_text_checklist(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _capture(
        tmp_path,
        "cap",
        {"rocminfo.txt": "rocminfo__thamada-mi300x-x4.txt"},
        {
            "torch.json": _torch_json(["gfx90a"]),
            "fs.json": json.dumps(
                {
                    "kfd": {
                        "path": "/dev/kfd",
                        "exists": True,
                        "readable": False,
                        "writable": False,
                        "group": "render",
                    },
                    "dri": {"path": "/dev/dri", "exists": True, "readable": True, "writable": False, "group": "root"},
                    "render_nodes": [],
                    "groups": ["users"],
                    "is_root": False,
                }
            ),
        },
    )
    assert cli.main(["doctor", "--from", str(d)]) == 1
    out = capsys.readouterr().out
    assert "4 x AMD Instinct MI300X (gfx942:sramecc+:xnack-, 304 CUs, 192 GiB)" in out
    assert "[FAIL] arch.compatible" in out
    assert "[FAIL] hygiene.dev_kfd" in out
    assert "fix: add the user to group render" in out
    assert "Summary: will fail" in out


def test_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["doctor", "--from", str(tmp_path / "nope")]) == 2
    assert "capture directory not found" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert cli.main(["doctor", "--from", str(tmp_path / "empty")]) == 2
    assert "no capture files here" in capsys.readouterr().err
    bad = _capture(tmp_path, "bad", {}, {"torch.json": '{"version": "2.5",\n  "hip": }'})
    assert cli.main(["doctor", "--from", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"gatekeeper: {bad / 'torch.json'}:2:")
    assert len(err.splitlines()) == 1
    assert cli.main(["doctor", "--from", str(bad), "--capture", str(tmp_path / "x")]) == 2


def _fake_tools(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "rocm-smi").write_text("#!/bin/sh\nsleep 30\n")
    (bin_dir / "rocminfo").write_text(f"#!/bin/sh\ncat {FIXTURES / 'rocminfo__thamada-mi300x-x4.txt'}\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    return bin_dir


def test_hanging_tool_is_reported_as_timed_out(tmp_path: Path) -> None:
    bin_dir = _fake_tools(tmp_path)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "GITLAB_TOKEN": "glpat-abcdefghijklmnopqrst"}
    start = time.monotonic()
    snap = take_snapshot(
        timeout=1.0,
        environ=env,
        tools_to_run={k: v for k, v in TOOLS.items() if k != "collect_env"},
        probe_torch=False,
    )
    assert time.monotonic() - start < 15
    assert snap.tools["rocm-smi"].status == "timed out"
    assert snap.tools["rocm-smi --json"].status == "skipped"
    assert snap.tools["rocminfo"].status == "ok"
    assert snap.tools["nvidia-smi"].status == "missing"
    diagnosis = diagnose(snap)
    hang = next(f for f in diagnosis.findings if f.check == "tools.rocm-smi")
    assert hang.severity == "warning"
    assert "timed out" in hang.message
    assert "dmesg" in hang.remediation
    out = write_capture(snap, tmp_path / "cap")
    assert (out / "rocminfo.txt").read_text() == (FIXTURES / "rocminfo__thamada-mi300x-x4.txt").read_text()
    env_txt = (out / "env.txt").read_text()
    assert "glpat-" not in env_txt
    assert "GITLAB_TOKEN=[REDACTED]" in env_txt
    back = read_capture(out)
    assert back.tools["rocm-smi"].status == "timed out"
    assert diagnose(back).devices == diagnosis.devices


@pytest.mark.slow
def test_cli_capture_end_to_end_with_hanging_tool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = _fake_tools(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.path.dirname(sys.executable)}:/usr/bin:/bin")
    cap = tmp_path / "cap"
    code = cli.main(["doctor", "--capture", str(cap), "--timeout", "1", "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["tools"]["rocm-smi"]["status"] == "timed out"
    assert doc["torch"]["version"]  # the torch probe ran in a child
    assert [x["gfx_arch"] for x in doc["devices"]] == ["gfx942:sramecc+:xnack-"] * 4
    # a CPU-only torch on a machine whose rocminfo lists GPUs: torch will not see them
    assert code == 1
    assert {p.name for p in cap.iterdir()} >= {"rocminfo.txt", "env.txt", "tools.json", "fs.json", "torch.json"}
    assert cli.main(["doctor", "--from", str(cap), "--format", "json"]) == code


def test_cli_wiring(monkeypatch: pytest.MonkeyPatch) -> None:
    import gatekeeper.machine.doctor

    seen = {}

    def fake(**kwargs: object) -> object:
        seen.update(kwargs)
        return types.SimpleNamespace(has_errors=True)  # an error finding: exit 1

    monkeypatch.setattr(gatekeeper.machine.doctor, "run_doctor", fake)
    monkeypatch.setattr(gatekeeper.machine.doctor, "render_json", lambda report: "{}\n")
    assert cli.main(["doctor", "--from", "d", "--format", "json", "--timeout", "5"]) == 1
    assert seen == {"capture": None, "from_dir": "d", "timeout": 5.0}


def test_doctor_does_not_import_torch() -> None:
    from gatekeeper.core import proc

    code = "import sys, gatekeeper.cli, gatekeeper.machine.doctor; assert 'torch' not in sys.modules, 'torch imported'"
    result = proc.run([sys.executable, "-c", code], timeout=60, cwd=Path(__file__).resolve().parents[2])
    assert result.ok, result.stderr

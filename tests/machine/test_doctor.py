"""`gatekeeper doctor --from DIR` on capture directories assembled from the real
fixtures, the live snapshot with a hanging fake tool, and bad input."""

from __future__ import annotations

import json
import os
import shutil
import sys
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
    assert sorted({x["gfx_arch"].split(":")[0] for x in devices}) == sorted(facts["gfx"])
    if "marketing_names" in facts:
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


@pytest.mark.timeout(60)
def test_a_pasted_gpu_line_with_a_long_blank_run_is_read_in_linear_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The device name/arch split once had a lazy "(.*?)\s*\(" prefix: quadratic on a long run of blanks.
    gpu = "AMD Instinct MI250X" + " " * 400_000 + "x (gfx90a:sramecc+:xnack-)"
    text = f"PyTorch version: 2.5.1+rocm6.2\nGPU models and configuration:\nGPU 0: {gpu}\n"
    code, doc = _doctor_json(capsys, _capture(tmp_path, "cap", {}, {"collect_env.txt": text}))
    assert code == 0
    assert doc["devices"][0]["gfx_arch"] == "gfx90a:sramecc+:xnack-"
    assert doc["devices"][0]["name"] == gpu[: -len(" (gfx90a:sramecc+:xnack-)")]


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


# A field of the wrong type in a capture's JSON files (a hand-edited or hostile paste): exit 2 naming the file and
# the field, never exit 70 and never a wrong fact ("is_root": "false" read as root, "exists": "no" as present).
WRONG_FIELDS = [
    ("torch.json", {"version": "2.5", "hip": "6.2", "available": True, "devices": 5}, "devices"),
    ("torch.json", {"version": "2.5", "hip": ["6.2"], "available": True}, "hip"),
    ("torch.json", {"version": "2.5", "hip": "6.2", "available": True, "arch_list": 7}, "arch_list"),
    ("torch.json", {"version": "2.5", "available": "no"}, "available"),
    ("torch.json", {"version": "2.5", "devices": [{"name": "MI300X", "total_memory": "x"}]}, "devices[0].total_memory"),
    ("torch.json", [1, 2], "(top level)"),
    ("fs.json", {"kfd": {"path": "/dev/kfd"}, "dri": {"path": "/dev/dri"}, "is_root": "false"}, "is_root"),
    ("fs.json", {"kfd": {"path": "/dev/kfd", "exists": "no"}, "dri": {"path": "/dev/dri"}}, "kfd.exists"),
    ("fs.json", {"kfd": {"path": "/dev/kfd"}, "dri": {"path": "/dev/dri"}, "groups": "render"}, "groups"),
    ("fs.json", {"kfd": {"path": "/dev/kfd"}, "dri": {"path": "/dev/dri", "group": ["video"]}}, "dri.group"),
    ("fs.json", {"kfd": {"path": "/dev/kfd"}}, "(top level)"),
    ("tools.json", {"rocminfo": {"status": "ok", "duration_s": "0.4"}}, "rocminfo.duration_s"),
    ("tools.json", {"rocminfo": "ok"}, "rocminfo"),
]


@pytest.mark.parametrize(("name", "doc", "field"), WRONG_FIELDS, ids=[f"{n}:{f}" for n, _, f in WRONG_FIELDS])
def test_a_capture_file_with_a_wrong_field_is_exit_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, doc: object, field: str
) -> None:
    d = _capture(tmp_path, "cap", {"rocminfo.txt": ROCMINFO[0]}, {name: json.dumps(doc)})
    assert cli.main(["doctor", "--from", str(d)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"gatekeeper: {d / name}:"), err
    assert f"{field}:" in err, err
    assert "gatekeeper.capture-" in err, err


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
    snap = take_snapshot(
        timeout=1.0,
        environ=env,
        tools_to_run={k: v for k, v in TOOLS.items() if k != "collect_env"},
        probe_torch=False,
    )
    assert snap.tools["rocm-smi"].status == "timed out"  # the event; pytest-timeout guards a real hang
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


# --- partial captures: what came from where, and what is missing -------------------------------------

PARTIAL = [
    # (capture file name, fixture, facts read from it, facts the capture must name as missing)
    (
        "rocminfo.txt",
        "rocminfo__instructlab-gpu-acceleration-gfx1100-gfx1036-grep.txt",
        {"GPU count": 2, "gfx targets": ["gfx1036", "gfx1100"]},
        ["ROCm version", "GPU names", "amdgpu driver", "torch version"],
    ),
    (
        "rocm-smi.txt",
        "rocm-smi__easybuild-3978-showproductname-csv-mi100x2.csv",
        {"GPU count": 2, "GPU names": ["Arcturus GL-XL [AMD Instinct MI100]"]},
        ["ROCm version", "gfx targets", "torch version"],
    ),
    (
        "rocm-smi.txt",
        "rocm-smi__marimo-9237-csv-rx7900xt.csv",
        {"GPU count": 1, "gfx targets": ["gfx1100"], "GPU names": ["Radeon RX 7900 XT"]},
        ["ROCm version", "amdgpu driver", "torch version"],
    ),
    (
        "rocm-smi.json",
        "rocm-smi__rocm-smi-lib-159-showproductname-json-mi250x.json",
        {"GPU count": 1, "gfx targets": ["gfx90a"]},
        ["ROCm version", "torch version"],
    ),
    (
        "amd-smi.txt",
        "amd-smi__pve-mods-348-static-phoenix3-no-target.txt",
        {"GPU count": 1, "GPU names": ["Phoenix3"], "amdgpu driver": "7.0.14-17-pve"},
        ["ROCm version", "gfx targets", "torch version"],
    ),
    (
        "amd-smi.txt",
        "amd-smi__therock-1737-default-table-7900xtx-6700xt.txt",
        {"GPU count": 2, "ROCm version": "7.9.0", "amdgpu driver": "6.12.12"},
        ["gfx targets", "torch version"],
    ),
    (
        "amd-smi.json",
        "amd-smi__ajean-39-static-json-rx7800xt.json",
        {"GPU count": 1, "gfx targets": ["gfx1101"], "GPU names": ["AMD Radeon RX 7800 XT"]},
        ["ROCm version", "amdgpu driver", "torch version"],
    ),
    (
        "collect_env.txt",
        "collect_env__vllm-36615-sectioned-gfx1151-fragment.txt",
        {"torch version": "2.9.1+git8907517", "torch ROCm build": "7.0.51831-a3e329ad8"},
        ["ROCm version", "GPU count", "gfx targets", "HIP runtime", "MIOpen"],
    ),
    (
        "lspci.txt",
        "lspci__radeontop-184-vnn-r9700.txt",
        {"GPU count": 1, "GPU names": ["Navi 48 [Radeon AI PRO R9700]"]},
        ["ROCm version", "gfx targets", "amdgpu driver", "torch version"],
    ),
    (
        "kfd-topology.txt",
        "kfd-topology__rocm-cli-343-mi300x-grep.txt",
        {"GPU count": 1, "gfx targets": ["gfx942"]},
        ["ROCm version", "GPU names", "torch version"],
    ),
]


@pytest.mark.parametrize(("target", "fixture", "found", "missing"), PARTIAL, ids=[p[1] for p in PARTIAL])
def test_partial_capture_names_sources_and_missing_facts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str, fixture: str, found: dict, missing: list
) -> None:
    d = _capture(tmp_path, "cap", {target: fixture})
    code, doc = _doctor_json(capsys, d)
    assert code == 0
    for name, value in found.items():
        assert doc["facts"][name]["value"] == value
        assert doc["facts"][name]["source"] == target
    assert set(missing) <= set(doc["missing_facts"])
    assert not set(found) & set(doc["missing_facts"])
    # the old shape is still there
    assert {"schema", "source", "rocm_version", "devices", "torch", "tools", "findings"} <= set(doc)
    assert cli.main(["doctor", "--from", str(d)]) == 0
    out = capsys.readouterr().out
    for name in missing:
        assert f"  {name}: not in the capture" in out
    for name in found:
        assert f"[{target}" in next(line for line in out.splitlines() if line.startswith(f"  {name}: "))
    assert "as far as the capture shows" in out


def test_no_gfx_target_is_reported_missing_not_guessed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """lspci names the card (1002:7551), amd-smi on an iGPU prints no target: doctor says so."""
    for name, (target, fixture) in {
        "lspci": ("lspci.txt", "lspci__radeontop-184-vnn-r9700.txt"),
        "amd-smi": ("amd-smi.txt", "amd-smi__pve-mods-348-static-phoenix3-no-target.txt"),
    }.items():
        d = _capture(tmp_path, name, {target: fixture}, {"torch.json": _torch_json(ROCM_WHEEL)})
        code, doc = _doctor_json(capsys, d)
        assert code == 0
        assert [x["gfx_arch"] for x in doc["devices"]] == [None]
        assert "gfx targets" in doc["missing_facts"]
        arch = [f for f in doc["findings"] if f["check"] == "arch.compatible"]
        assert [f["severity"] for f in arch] == ["skipped"]
        assert "gfx target (or compute capability) not in the capture" in arch[0]["message"]


def test_kfd_target_and_lspci_name_complete_each_other(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Same machine, two fragments: lspci names the card, KFD gives its target (here the line KFD
    prints for the R9700's gfx1201, written for this test), each named as the source of its part."""
    d = _capture(
        tmp_path,
        "cap",
        {"lspci.txt": "lspci__radeontop-184-vnn-r9700.txt"},
        {"kfd-topology.txt": "gfx_target_version 120001\n"},
    )
    _, doc = _doctor_json(capsys, d)
    (dev,) = doc["devices"]
    assert (dev["source"], dev["gfx_arch"]) == ("kfd-topology", "gfx1201")
    assert (dev["marketing_name"], dev["name_source"]) == ("Navi 48 [Radeon AI PRO R9700]", "lspci.txt")
    assert doc["facts"]["GPU count"] == {
        "value": 1,
        "source": "kfd-topology.txt",
        "also_in": ["lspci.txt"],
        "conflicts": [],
    }
    lspci_only = _capture(tmp_path, "lspci", {"lspci.txt": "lspci__radeontop-184-vnn-r9700.txt"})
    _, doc = _doctor_json(capsys, lspci_only)
    assert "gfx_source" not in doc["devices"][0]
    assert doc["devices"][0]["gfx_arch"] is None


def test_files_that_disagree_on_the_target_are_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _capture(
        tmp_path,
        "cap",
        {
            "rocminfo.txt": "rocminfo__thamada-mi300x-x4.txt",
            "amd-smi.txt": "amd-smi__rocm-systems-2987-static-mi350x.txt",
        },
    )
    code, doc = _doctor_json(capsys, d)
    assert code == 0
    fact = doc["facts"]["gfx targets"]
    assert (fact["value"], fact["source"]) == (["gfx942"], "rocminfo.txt")
    assert fact["conflicts"] == [{"source": "amd-smi.txt", "value": ["gfx950"]}]
    warning = next(f for f in doc["findings"] if f["check"] == "facts.gfx_targets")
    assert warning["severity"] == "warning"
    assert "amd-smi.txt says gfx950" in warning["message"]


def test_amd_smi_rocm_version_when_no_version_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _capture(tmp_path, "cap", {"amd-smi.txt": "amd-smi__therock-1737-default-table-7900xtx-6700xt.txt"})
    _, doc = _doctor_json(capsys, d)
    assert doc["rocm_version"] == "7.9.0"
    assert [x["marketing_name"] for x in doc["devices"]] == ["AMD Radeon RX 7900 XTX", "AMD Radeon RX 6700 XT"]
    both = _capture(
        tmp_path,
        "both",
        {
            "amd-smi.txt": "amd-smi__therock-1737-default-table-7900xtx-6700xt.txt",
            "version": "rocm-version__rocm-221-rocm-1.6.180.txt",
        },
    )
    _, doc = _doctor_json(capsys, both)
    assert doc["rocm_version"] == "1.6.180"  # .info/version first; amd-smi's differing value is kept as a conflict
    assert doc["facts"]["ROCm version"]["conflicts"] == [{"source": "amd-smi.txt", "value": "7.9.0"}]


def test_capture_records_amd_smi_and_skips_it_after_a_hang(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    mi350 = FIXTURES / "amd-smi__rocm-systems-2987-static-mi350x.txt"
    (bin_dir / "amd-smi").write_text(f'#!/bin/sh\nif [ "$1" = version ]; then sleep 30; fi\ncat {mi350}\n')
    (bin_dir / "amd-smi").chmod(0o755)
    amd_tools = {k: v for k, v in TOOLS.items() if k.startswith("amd-smi")}
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    snap = take_snapshot(timeout=1.0, environ=env, tools_to_run=amd_tools, probe_torch=False)
    assert snap.tools["amd-smi version"].status == "timed out"
    assert snap.tools["amd-smi static"].status == "skipped"
    assert "amd-smi" in snap.tools["amd-smi static"].detail
    ordered = dict(reversed(list(amd_tools.items())))  # static first: it runs and is recorded
    snap = take_snapshot(timeout=5.0, environ=env, tools_to_run=ordered, probe_torch=False)
    assert snap.tools["amd-smi static"].status == "ok"
    out = write_capture(snap, tmp_path / "cap")
    assert (out / "amd-smi.txt").read_text() == mi350.read_text()
    assert (out / "amd-smi.json").is_file()
    back = diagnose(read_capture(out))
    assert [d["gfx_arch"] for d in back.devices] == ["gfx950"]
    absent = take_snapshot(timeout=1.0, environ={"PATH": "/nonexistent"}, tools_to_run=amd_tools, probe_torch=False)
    assert absent.tools["amd-smi version"].status == "missing"
    assert "not found" in absent.tools["amd-smi version"].detail
    assert absent.tools["amd-smi static"].status == "skipped"


def test_capture_reads_the_kfd_topology(tmp_path: Path) -> None:
    nodes = tmp_path / "sys" / "class" / "kfd" / "kfd" / "topology" / "nodes"
    for node, props in {
        "0": "cpu_cores_count 16\nsimd_count 0\ngfx_target_version 0\n",
        "4": "gfx_target_version 90402\n",
    }.items():
        (nodes / node).mkdir(parents=True)
        (nodes / node / "properties").write_text(props)
    (nodes / "not-a-node").mkdir()
    snap = take_snapshot(
        timeout=1.0, environ={"PATH": "/nonexistent"}, tools_to_run={}, probe_torch=False, kfd_root=nodes
    )
    assert snap.tools["kfd-topology"].status == "ok"
    assert snap.texts["kfd-topology.txt"].splitlines()[-1] == f"{nodes}/4/properties:gfx_target_version 90402"
    back = diagnose(read_capture(write_capture(snap, tmp_path / "cap")))
    assert [(d["source"], d["gfx_arch"]) for d in back.devices] == [("kfd-topology", "gfx942")]
    gone = take_snapshot(timeout=1.0, environ={}, tools_to_run={}, probe_torch=False, kfd_root=tmp_path / "none")
    assert gone.tools["kfd-topology"].status == "missing"
    assert "kfd-topology.txt" not in gone.texts


def test_target_conflict_explained_by_an_override_is_info(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """rocminfo under HSA_OVERRIDE_GFX_VERSION=10.3.0 says gfx1030; KFD says what the RX 6700 XT is
    (gfx1031: the line KFD prints for it, written for this test)."""
    files = {"rocminfo.txt": "rocminfo__vbs-nn-rx6700xt-override.txt"}
    kfd = {"kfd-topology.txt": "gfx_target_version 100301\n"}
    plain = _capture(tmp_path, "plain", files, kfd)
    _, doc = _doctor_json(capsys, plain)
    (f,) = [f for f in doc["findings"] if f["check"] == "facts.gfx_targets"]
    assert (f["severity"], f["message"]) == ("warning", "rocminfo.txt says gfx1030, but kfd-topology.txt says gfx1031")
    override = _capture(tmp_path, "override", files, {**kfd, "env.txt": "HSA_OVERRIDE_GFX_VERSION=10.3.0\n"})
    _, doc = _doctor_json(capsys, override)
    (f,) = [f for f in doc["findings"] if f["check"] == "facts.gfx_targets"]
    assert f["severity"] == "info"
    assert "HSA_OVERRIDE_GFX_VERSION selects gfx1030" in f["message"]


def test_a_pasted_lspci_link_below_its_maximum_is_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the real LnkCap/LnkSta of a 4090 trained at Gen1 behind a riser, pasted as lspci.txt
    d = _capture(tmp_path, "riser", {"lspci.txt": "lspci-vv__jan-183-downgraded-gen1-4090.txt"})
    code, doc = _doctor_json(capsys, d)
    (link,) = [f for f in doc["findings"] if f["check"] == "hygiene.pcie_link"]
    assert link["severity"] == "warning"
    assert "2.5 GT/s (Gen1) x16, below its maximum 16 GT/s (Gen4) x16" in link["message"]
    assert "read at rest" in link["message"]  # a paste cannot say whether the GPU was busy
    assert code == 0  # a warning, not an error
    d = _capture(tmp_path, "smi", {"rocm-smi.txt": "rocm-smi__roc-smi-87-showclocks-pcie-level.txt"})
    _, doc = _doctor_json(capsys, d)
    (link,) = [f for f in doc["findings"] if f["check"] == "hygiene.pcie_link"]
    assert link["severity"] == "info"  # rocm-smi shows the current level only
    assert "8 GT/s (Gen3) x16 now" in link["message"]


def test_a_collapsed_rocminfo_is_a_missing_fact_not_a_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # issue 28: rocminfo pasted onto one line (newlines lost) says nothing readable about agents
    d = tmp_path / "collapsed"
    d.mkdir()
    text = (FIXTURES / "rocminfo__thamada-mi300x-x4.txt").read_text()
    (d / "rocminfo.txt").write_text(" ".join(text.split("\n")))
    code, doc = _doctor_json(capsys, d)
    assert code == 0, doc
    assert "GPU count" in doc["missing_facts"]
    visible = next(f for f in doc["findings"] if f["check"] == "devices.visible")
    assert visible["severity"] == "skipped", visible
    rock = next(f for f in doc["findings"] if f["check"] == "driver.rock")
    assert rock["message"] == "rocminfo: ROCk module is loaded", "only the sentence, not the whole collapsed output"
    assert cli.main(["doctor", "--from", str(d)]) == 0
    out = capsys.readouterr().out
    assert "GPUs     not in the capture" in out
    assert "no GPU found" not in out
    # a rocminfo that lists CPU agents and no GPU agent still fails
    cpu_only = tmp_path / "cpu-only"
    cpu_only.mkdir()
    cut = text[: text.index("Agent 3")]
    (cpu_only / "rocminfo.txt").write_text(cut + "*** Done ***\n")
    code, doc = _doctor_json(capsys, cpu_only)
    assert code == 1
    assert next(f for f in doc["findings"] if f["check"] == "devices.visible")["severity"] == "error"


def test_an_allocator_key_torch_rejects_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # docs/doctor.md: an unknown key is an error, because torch raises at the first allocation
    d = _capture(tmp_path, "alloc", {"rocminfo.txt": "rocminfo__thamada-mi300x-x4.txt"})
    (d / "env.txt").write_text("PYTORCH_HIP_ALLOC_CONF=max_split_size:512\n")
    code, doc = _doctor_json(capsys, d)
    finding = next(f for f in doc["findings"] if f["check"] == "hygiene.PYTORCH_HIP_ALLOC_CONF")
    assert finding["severity"] == "error", finding
    assert code == 1


def test_the_rocm_version_file_is_read_bounded_and_a_bad_one_is_a_failed_probe(tmp_path: Path) -> None:
    """$ROCM_PATH is the job's to set: its .info/version is read at most 64 KiB, and one that cannot be read is a
    failed probe with the reason, never the end of doctor."""
    info = tmp_path / ".info"
    info.mkdir()
    (info / "version").write_text("6.2.4-120\n", encoding="utf-8")
    env = {"PATH": "/nonexistent", "ROCM_PATH": str(tmp_path)}
    snap = take_snapshot(timeout=1.0, environ=env, tools_to_run={}, probe_torch=False)
    assert snap.texts["version"] == "6.2.4-120\n"
    assert snap.tools["version"].status == "ok"
    with (info / "version").open("r+b") as fh:  # sparse: one byte over the bound, no disk used
        fh.truncate(64 * 1024 + 1)
    snap = take_snapshot(timeout=1.0, environ=env, tools_to_run={}, probe_torch=False)
    assert "version" not in snap.texts
    assert snap.tools["version"].status == "failed"
    assert "ROCm version file is larger than" in snap.tools["version"].detail


HIP_WARNING = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "logs"
    / "device_not_available__pytorch-pr80405-hipgetdevicecount-invalid-device-container.log"
)


def _probe(monkeypatch: pytest.MonkeyPatch, body: str) -> tuple[str, str, object]:
    """take_snapshot with the torch probe replaced by ``body`` (run by this Python in a child, as the probe is)."""
    from gatekeeper.machine import snapshot

    monkeypatch.setattr(snapshot, "_TORCH_PROBE", body)
    snap = take_snapshot(timeout=30.0, environ={"PATH": "/nonexistent"}, tools_to_run={})
    return snap.tools["torch"].status, snap.tools["torch"].detail, snap.torch


def test_the_torch_probe_is_read_past_a_warning_torch_wrote_on_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    """ROCm torch warns on stderr where doctor is needed most (a real warning from a container without a visible
    GPU); the tool's output holds stderr after stdout, so the answer is found by its marker, not as the last line."""
    answer = {
        "version": "2.4.0+rocm6.1",
        "hip": "6.1",
        "cuda": None,
        "available": False,
        "arch_list": [],
        "devices": [],
    }
    body = (
        "import json, sys\n"
        f"print('gatekeeper-torch-probe: ' + json.dumps({answer!r}))\n"
        f"sys.stderr.write(open({str(HIP_WARNING)!r}).read())\n"
    )
    status, detail, torch_info = _probe(monkeypatch, body)
    assert (status, detail) == ("ok", "")
    assert torch_info == answer


@pytest.mark.parametrize(
    ("printed", "why"),
    [
        ("print('no marker here')", "no line starts with 'gatekeeper-torch-probe:'"),
        ("print('gatekeeper-torch-probe: ' + '[' * 5000 + ']' * 5000)", "nested"),
        ('print(\'gatekeeper-torch-probe: {"available": "yes"}\')', "is not of type 'boolean'"),
        ('print(\'gatekeeper-torch-probe: {"version": "a", "version": "b"}\')', "duplicate key"),
    ],
)
def test_a_torch_probe_answer_that_is_not_a_valid_one_is_a_failed_probe(
    monkeypatch: pytest.MonkeyPatch, printed: str, why: str
) -> None:
    """The job's Python prints the answer, so it is read as a captured torch.json is (strict JSON, its schema):
    anything else is a failed probe with the reason, never a crash or a half-read answer."""
    status, detail, torch_info = _probe(monkeypatch, printed)
    assert status == "failed"
    assert detail.startswith("torch probe printed no valid JSON: ")
    assert why in detail
    assert torch_info is None


HUGE = "9" * 5000  # int() refuses more than 4,300 digits (ValueError); float() of 400 nines is infinity


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("rocm-smi.txt", f"GPU[{HUGE}]\t\t: Performance Level: auto\nGPU[0]\t\t: Performance Level: auto\n"),
        ("rocm-smi.txt", "GPU[0]\t\t: VRAM Total Memory (B): " + "9" * 400 + "\n"),
        ("rocm-smi.txt", f'device,Card series\ncard{HUGE},MI300X\ncard0,"{"a" * 200_000}"\n'),
        ("rocm-smi.json", json.dumps({f"card{HUGE}": {"Performance Level": "auto"}})),
        ("rocm-smi.json", f'{{"card0": {{"Max Graphics Package Power (W)": {HUGE}}}}}'),
        ("amd-smi.json", f'[{{"gpu": {HUGE}}}]'),
        ("amd-smi.txt", f"GPU: {HUGE}\n    ASIC:\n        MARKET_NAME: MI300X\n"),
        ("nvidia-smi.csv", f'name, index, memory.total [MiB]\n"{"a" * 200_000}", 0, 1\nH100, {HUGE}, 1\n'),
        ("rocminfo.txt", f"Agent {HUGE}\n  Name:                    gfx942\n"),
        ("kfd-topology.txt", f"/sys/class/kfd/kfd/topology/nodes/{HUGE}/properties:simd_count 304\n"),
        ("version", f"6.{HUGE}.0-1\n"),
    ],
)
def test_a_capture_with_numbers_or_cells_no_tool_prints_is_read_never_exit_70(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str
) -> None:
    # 2026-12-04 audit, fourth pass: each of these was an uncaught ValueError, OverflowError or csv.Error (exit 70);
    # the probes read numbers through probes.integer/number and CSV lines through probes.csv_row
    code = cli.main(["doctor", "--from", str(_capture(tmp_path, "cap", {}, {name: text}))])
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err
    assert "internal error" not in captured.err

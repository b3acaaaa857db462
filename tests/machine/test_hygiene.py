from __future__ import annotations

import os
from pathlib import Path

import pytest

from gatekeeper.machine.findings import count_problems
from gatekeeper.machine.hygiene import DeviceNode, FsFacts, hygiene_findings


def _fs(*, kfd: bool = True, rw: bool = True, groups: tuple[str, ...] = ("render", "video"), root: bool = False):
    node = DeviceNode("/dev/kfd", kfd, rw, rw, "render")
    render = DeviceNode("/dev/dri/renderD128", True, rw, rw, "render")
    return FsFacts(node, DeviceNode("/dev/dri", True, True, False, "root"), (render,), groups, root)


def _by_check(findings):
    return {f.check: f for f in findings}


def test_clean_amd_runner_has_no_problems() -> None:
    findings = hygiene_findings({}, _fs(), amd=True)
    assert count_problems(findings) == 0
    assert {f.severity for f in findings} == {"ok"}


def test_override_is_reported_with_what_it_does() -> None:
    f = _by_check(hygiene_findings({"HSA_OVERRIDE_GFX_VERSION": "10.3.0"}, _fs(), amd=True))
    assert f["hygiene.HSA_OVERRIDE_GFX_VERSION"].severity == "warning"
    assert "gfx1030" in f["hygiene.HSA_OVERRIDE_GFX_VERSION"].message
    bad = _by_check(hygiene_findings({"HSA_OVERRIDE_GFX_VERSION": "gfx1030"}, _fs(), amd=True))
    assert bad["hygiene.HSA_OVERRIDE_GFX_VERSION"].severity == "error"


@pytest.mark.parametrize(
    ("value", "severity"),
    [
        ("expandable_segments:True", "info"),
        ("max_split_size_mb:512,garbage_collection_threshold:0.8", "info"),
        ("expandable_segments", "error"),
        ("max_split_size:512", "error"),  # an unknown key: torch raises at the first allocation (docs/doctor.md)
    ],
)
def test_alloc_conf(value: str, severity: str) -> None:
    for name in ("PYTORCH_HIP_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"):
        assert _by_check(hygiene_findings({name: value}, None, amd=False))[f"hygiene.{name}"].severity == severity


def test_both_alloc_confs_warn() -> None:
    env = {"PYTORCH_HIP_ALLOC_CONF": "expandable_segments:True", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    assert _by_check(hygiene_findings(env, None, amd=False))["hygiene.alloc_conf_combined"].severity == "warning"


@pytest.mark.parametrize("name", ["HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"])
def test_visible_devices(name: str) -> None:
    assert _by_check(hygiene_findings({name: ""}, None, amd=False))[f"hygiene.{name}"].severity == "error"
    assert _by_check(hygiene_findings({name: "-1"}, None, amd=False))[f"hygiene.{name}"].severity == "error"
    info = _by_check(hygiene_findings({name: "0,1"}, None, amd=False))[f"hygiene.{name}"]
    assert info.severity == "info"
    assert "0,1" in info.message


def test_hiding_gpus_in_a_cpu_job_warns_but_does_not_block() -> None:
    f = _by_check(hygiene_findings({"CUDA_VISIBLE_DEVICES": ""}, None, amd=False, gpu_expected=False))
    assert f["hygiene.CUDA_VISIBLE_DEVICES"].severity == "warning"  # a masked device reaches the verdict


def test_hip_and_rocr_together_warn() -> None:
    f = _by_check(hygiene_findings({"HIP_VISIBLE_DEVICES": "0", "ROCR_VISIBLE_DEVICES": "1"}, None, amd=False))
    assert f["hygiene.visible_devices_combined"].severity == "warning"


def test_missing_kfd_and_no_access() -> None:
    f = _by_check(hygiene_findings({}, _fs(kfd=False), amd=True))
    assert f["hygiene.dev_kfd"].severity == "error"
    assert "--device=/dev/kfd" in f["hygiene.dev_kfd"].remediation
    f = _by_check(hygiene_findings({}, _fs(rw=False, groups=("users",)), amd=True))
    assert f["hygiene.dev_kfd"].severity == "error"
    assert f["hygiene.dev_dri"].severity == "error"
    assert f["hygiene.groups"].severity == "warning"
    assert "usermod -aG render" in f["hygiene.groups"].remediation


def test_device_node_errors_do_not_block_a_cpu_job() -> None:
    f = _by_check(hygiene_findings({}, _fs(kfd=False), amd=True, gpu_expected=False))
    assert f["hygiene.dev_kfd"].severity == "warning"
    assert "not blocking" in f["hygiene.dev_kfd"].message


def test_root_needs_no_groups() -> None:
    assert _by_check(hygiene_findings({}, _fs(groups=(), root=True), amd=True))["hygiene.groups"].severity == "ok"


def test_device_nodes_skipped_off_amd() -> None:
    f = _by_check(hygiene_findings({}, _fs(kfd=False), amd=False))
    assert f["hygiene.dev_kfd"].severity == "skipped"
    assert "not an AMD" in f["hygiene.dev_kfd"].message


def test_probe_reads_a_real_tree(tmp_path: Path) -> None:
    (tmp_path / "dri").mkdir()
    (tmp_path / "dri" / "renderD128").write_text("")  # a regular file is not a device node
    facts = FsFacts.probe(tmp_path)
    assert facts.kfd.exists is False
    assert len(facts.render_nodes) == 1
    assert facts.render_nodes[0].exists is False
    assert facts.is_root == (os.geteuid() == 0)
    assert FsFacts.from_dict(facts.to_dict()) == facts

"""The GPU settings a timing depends on, read from real rocm-smi output (tests/fixtures/env/index.jsonl)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gatekeeper.contract import gpu_state
from gatekeeper.machine.gpu_state import NVIDIA_QUERY, from_nvidia_smi, from_rocm_smi, visible_indices

FIXTURES = Path(__file__).parents[1] / "fixtures" / "env"
MI300X = {"gpu_perf_level": "auto", "gpu_power_cap_w": 750.0, "gpu_compute_partition": "SPX",
          "gpu_memory_partition": "NPS1"}  # fmt: skip


def _text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("rocm-smi__thamada-mi300x-x4-concise.txt", MI300X),  # plain rocm-smi: the concise table
        ("rocm-smi__thamada-mi300x-x4-showall.txt", MI300X),  # rocm-smi -a: GPU[N] sections
        ("rocm-smi__thamada-mi300x-x1-concise.txt", MI300X),
        ("rocm-smi__amd-gpu-hello-rx7900xtx.txt", {"gpu_perf_level": "auto", "gpu_power_cap_w": 291.0}),
        ("rocm-smi__rainbowminer-749-legacy-table-and-json.txt", {"gpu_perf_level": "auto", "gpu_power_cap_w": 250.0}),
        ("rocm-smi__vbs-nn-rx6700xt-watch.txt", {"gpu_perf_level": "auto", "gpu_power_cap_w": 186.0}),
        ("rocm-smi__systeminformation-960-json-780m.txt", {"gpu_perf_level": "auto"}),  # --json: no cap printed
    ],
)
def test_the_settings_of_every_rocm_smi_layout(fixture: str, expected: dict[str, object]) -> None:
    assert from_rocm_smi(_text(fixture)) == expected


def _concise_with(caps: list[str], levels: list[str]) -> str:
    """The real MI300X concise table with other settings on some GPUs (as another job would leave them)."""
    lines = _text("rocm-smi__thamada-mi300x-x4-concise.txt").splitlines()
    out, gpu = [], 0
    for line in lines:
        if line.startswith(f"{gpu}       [0x74a1"):
            out.append(line.replace("auto  750.0W", f"{levels[gpu]:<4}  {caps[gpu]}"))
            gpu += 1
        else:
            out.append(line)
    assert gpu == 4
    return "\n".join(out)


def test_the_jobs_own_gpus_when_the_visible_devices_say_which() -> None:
    text = _concise_with(["750.0W", "750.0W", "550.0W", "550.0W"], ["auto", "auto", "high", "high"])
    assert from_rocm_smi(text, (2, 3))["gpu_power_cap_w"] == 550.0
    assert from_rocm_smi(text, (0,))["gpu_perf_level"] == "auto"
    # every GPU when the job's are not known: a setting they do not share is the list of values, so it compares
    every = from_rocm_smi(text)
    assert every["gpu_power_cap_w"] == "750 on GPU 0, 750 on GPU 1, 550 on GPU 2, 550 on GPU 3"
    assert every["gpu_memory_partition"] == "NPS1"
    assert from_rocm_smi(text, (7,)) == every  # an index that names no listed GPU: every GPU, never none


def test_visible_devices_map_to_smi_indices() -> None:
    assert visible_indices("rocm", {}) is None
    assert visible_indices("rocm", {"HIP_VISIBLE_DEVICES": "2"}) == (2,)
    # HIP's indices count the devices ROCR left visible
    assert visible_indices("rocm", {"ROCR_VISIBLE_DEVICES": "4,5,6", "HIP_VISIBLE_DEVICES": "1,2"}) == (5, 6)
    assert visible_indices("rocm", {"ROCR_VISIBLE_DEVICES": "GPU-1234abcd"}) is None  # a UUID: not mapped
    # CUDA numbers devices fastest first unless told PCI order, which is nvidia-smi's
    assert visible_indices("cuda", {"CUDA_VISIBLE_DEVICES": "1"}) is None
    assert visible_indices("cuda", {"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}) == (1,)


def test_nvidia_smi_query_settings() -> None:
    # Constructed in the form nvidia-smi --format=csv prints (header units in brackets, units after numbers,
    # [N/A]); no public capture of this exact query was found.
    header = ", ".join(f"{f} [W]" if f == "power.limit" else f"{f} [MHz]" if f.startswith("clocks") else f
                       for f in NVIDIA_QUERY)  # fmt: skip
    text = (
        f"{header}\n"
        "0, 700.00 W, 1980 MHz, Enabled, Default, Enabled, Disabled\n"
        "1, 500.00 W, 1980 MHz, Enabled, Default, Enabled, [N/A]\n"
    )
    assert from_nvidia_smi(text, (0,)) == {
        "gpu_power_cap_w": 700.0, "gpu_app_clock_mhz": 1980.0, "gpu_persistence_mode": "Enabled",
        "gpu_compute_mode": "Default", "gpu_ecc_mode": "Enabled", "gpu_mig_mode": "Disabled",
    }  # fmt: skip
    both = from_nvidia_smi(text)
    assert both["gpu_power_cap_w"] == "700 on GPU 0, 500 on GPU 1"
    assert both["gpu_mig_mode"] == "Disabled on GPU 0, unknown on GPU 1"  # not known on GPU 1: not "Disabled"


def test_differences_name_only_what_both_sides_recorded() -> None:
    before = {**MI300X, "torch_device": "cuda:0"}
    assert gpu_state.differences(before, {**MI300X, "gpu_power_cap_w": 550.0}) == [("GPU power cap", "750 W", "550 W")]
    assert gpu_state.differences(before, {"gpu_perf_level": "auto"}) == []  # the rest unknown, not different
    assert gpu_state.differences(before, None) == []
    assert gpu_state.describe(MI300X) == (
        "GPU performance level auto, GPU power cap 750 W, GPU compute partition SPX, GPU memory partition NPS1"
    )

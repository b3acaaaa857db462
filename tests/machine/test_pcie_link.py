"""The PCIe link: sysfs read along the GPU's bridges (a fake /sys built from a real capture's values),
AMD's own switch skipped to the slot's link, and a link below its maximum as a hygiene warning that
says what it costs."""

from __future__ import annotations

from pathlib import Path

import pytest

from gatekeeper.machine import pcie_link
from gatekeeper.machine.findings import count_problems
from gatekeeper.machine.probes import pcie

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "env"

# The real machine of tests/fixtures/env/sysfs-pcie__resources-512-tail-v-two-ports.txt: the GPU's own
# switch (upstream port 01:00.0, downstream port 02:00.0) in front of the GPU 03:00.0. 01:00.0 trained x8
# at Gen4 in a Gen5 x16 capable slot; the GPU function behind the switch reports its internal link.
CAPTURED = {
    link.device: link
    for link in pcie.parse_sysfs((FIXTURES / "sysfs-pcie__resources-512-tail-v-two-ports.txt").read_text()).links
}


def _fake_sys(tmp_path: Path, chain: list[tuple[str, str, pcie.PcieLink | None]]) -> Path:
    """/sys/devices/pci0000:00/<bdf>/<bdf>/... with vendor and link files, and /sys/bus/pci/devices links."""
    sys_root = tmp_path / "sys"
    parent = sys_root / "devices" / "pci0000:00"
    (sys_root / "bus" / "pci" / "devices").mkdir(parents=True)
    for bdf, vendor, link in chain:
        parent = parent / bdf
        parent.mkdir(parents=True)
        (parent / "vendor").write_text(vendor + "\n")
        if link is not None:
            (parent / "current_link_speed").write_text(f"{link.current.speed_gts:.1f} GT/s PCIe\n")
            (parent / "current_link_width").write_text(f"{link.current.width}\n")
            (parent / "max_link_speed").write_text(f"{link.maximum.speed_gts:.1f} GT/s PCIe\n")
            (parent / "max_link_width").write_text(f"{link.maximum.width}\n")
        (sys_root / "bus" / "pci" / "devices" / bdf).symlink_to(parent)
    return sys_root


def test_amd_gpu_behind_its_own_switch_reports_the_slot_link(tmp_path: Path) -> None:
    full = CAPTURED["0000:03:00.0"]
    sys_root = _fake_sys(
        tmp_path,
        [
            ("0000:00:01.1", "0x1022", pcie.PcieLink("", pcie.LinkState(16.0, 8), pcie.LinkState(32.0, 16))),
            ("0000:01:00.0", "0x1002", CAPTURED["0000:01:00.0"]),
            ("0000:02:00.0", "0x1002", full),
            ("0000:03:00.0", "0x1002", full),
        ],
    )
    text, vendors = pcie_link.read_sysfs("0000:03:00.0", sys_root)
    links = pcie_link.parse_read(text)
    assert [x.device for x in links] == ["0000:00:01.1", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0"]
    chosen = pcie_link.external_link(links, "0000:03:00.0", vendors)
    assert chosen is not None
    assert chosen.device == "0000:01:00.0"  # not the root port (another vendor), not the GPU's internal link
    assert (chosen.current.generation, chosen.current.width) == (4, 8)
    assert (chosen.maximum.generation, chosen.maximum.width) == (5, 16)
    (finding,) = pcie_link.link_findings(chosen)
    assert finding.severity == "warning"
    assert "16 GT/s (Gen4) x8, below its maximum 32 GT/s (Gen5) x16" in finding.message
    assert "15.8 of 63.0 GB/s" in finding.message  # what the narrower, slower link costs
    assert "slot" in finding.remediation
    assert "lspci -vv" in finding.remediation
    assert count_problems([finding]) == 1


def test_a_gpu_with_its_own_link_at_maximum_passes(tmp_path: Path) -> None:
    at_max = pcie.parse_sysfs((FIXTURES / "sysfs-pcie__lact-334-grep-7800xt.txt").read_text()).links[0]
    sys_root = _fake_sys(tmp_path, [("0000:00:03.1", "0x1022", None), ("0000:0c:00.0", "0x10de", at_max)])
    text, vendors = pcie_link.read_sysfs("0000:0c:00.0", sys_root)
    chosen = pcie_link.external_link(pcie_link.parse_read(text), "0000:0c:00.0", vendors)
    assert chosen is not None
    assert chosen.device == "0000:0c:00.0"
    (finding,) = pcie_link.link_findings(chosen)
    assert finding.severity == "ok"
    assert "at its maximum" in finding.message
    assert "busy" in finding.message


def test_lspci_downgraded_link_is_a_warning_and_unknown_maximum_is_a_fact() -> None:
    down = pcie.parse_lspci((FIXTURES / "lspci-vv__jan-183-downgraded-gen1-4090.txt").read_text()).links[0]
    (finding,) = pcie_link.link_findings(down, under_load=False)
    assert finding.severity == "warning"
    assert "2.5 GT/s (Gen1) x16, below its maximum 16 GT/s (Gen4) x16" in finding.message
    assert "at rest" in finding.message  # an idle GPU may lower its speed: the message says when it was read
    half = pcie.parse_lspci((FIXTURES / "lspci-vv__lact-334-lnksta-lnkcap2-7800xt.txt").read_text()).links[0]
    (fact,) = pcie_link.link_findings(half)
    assert fact.severity == "info"
    assert "maximum is not reported" in fact.message


def test_no_link_is_skipped_with_the_reason(tmp_path: Path) -> None:
    assert pcie_link.read_sysfs("0000:99:00.0", tmp_path) == ("", {})
    (finding,) = pcie_link.link_findings(None, why_missing="no PCIe link files under /sys")
    assert finding.severity == "skipped"
    assert "no PCIe link files" in finding.message


def test_bandwidth_per_generation_and_width() -> None:
    assert pcie_link.link_bandwidth_gbps(4, 16) == 1.969 * 16
    assert pcie_link.link_bandwidth_gbps(3, 16) < pcie_link.link_bandwidth_gbps(4, 8) + 1  # Gen3 x16 ~ Gen4 x8
    assert pcie_link.link_bandwidth_gbps(None, 16) is None
    assert pcie.generation(8.0) == 3
    assert pcie.generation(7.0) is None


@pytest.mark.timeout(60)
def test_hostile_long_lines_parse_in_linear_time() -> None:
    digits = "9" * 500_000
    spaces = " " * 500_000
    pcie.parse_lspci(
        f"LnkSta: Speed {digits}{spaces}x\nLnkCap: {'Speed ' * 100_000}\nLnkCap2: Supported Link Speeds: {digits}\n"
    )
    pcie.parse_sysfs(f"/sys/{'a' * 500_000}/current_link_speed:{digits} GT/s\n==> {'/x' * 200_000} <==\n{digits}\n")
    pcie.parse_pp_dpm(f"1: {digits}GT/s, x{digits} *\n")
    pcie.parse_rocm_smi(f"GPU[0] : pcie clock level: 1 ({digits}GT/s, x16)\n")

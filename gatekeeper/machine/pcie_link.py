"""The PCIe link of a GPU: read from sysfs, chosen along the device's bridges, judged against its maximum.

A link below its maximum (a x16 card in a x8 slot, a Gen4 card trained at Gen3 or Gen1 behind a
riser) caps host-device copies; the field report measured 35% slower copies on such boards.

``read_sysfs(bdf)`` renders the link files of the GPU and of its same-vendor bridges as the
``path:value`` lines ``grep .`` prints, so the live reading and a pasted capture go through one
parser (``gatekeeper.machine.probes.pcie``). AMD GPUs sit behind a switch of their own: the GPU
function reports the internal link (always at full speed); the slot's link is on the upstream
port of that switch, the top-most ancestor with the GPU's vendor id. ``external_link`` picks it.

GPUs lower their link speed when idle to save power, so verify_hip reads it while a kernel runs
(``stages.verify_hip.pcie_under_load``); a reading taken at rest says so in its message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from gatekeeper.machine.findings import Finding
from gatekeeper.machine.probes.pcie import PcieLink, parse_sysfs

__all__ = ["CHECK", "LANE_GBPS", "external_link", "link_bandwidth_gbps", "link_findings", "parse_read", "read_sysfs"]

CHECK = "hygiene.pcie_link"
# Usable bandwidth of one lane per direction in GB/s, after line encoding (8b/10b for Gen1-2,
# 128b/130b for Gen3-5, FLIT for Gen6): what a link of N lanes can carry at most.
LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
_FILES = ("current_link_speed", "max_link_speed", "current_link_width", "max_link_width")
_MAX_BYTES = 256  # a link file holds one short line
_MAX_DEPTH = 8  # bridges between a GPU and its root port


def _read(path: Path) -> str | None:
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            return fh.read(_MAX_BYTES).strip() or None
    except OSError:
        return None


def read_sysfs(bdf: str, sys_root: str | Path = "/sys") -> tuple[str, dict[str, str]]:
    """(``path:value`` lines of the link files of ``bdf`` and of its ancestors, {bdf: vendor id}).

    Ancestors are the PCI devices in the resolved sysfs path (``.../0000:01:00.0/0000:02:00.0/0000:03:00.0``),
    nearest last; each has its own link files. Nothing readable gives ("", {}).
    """
    base = Path(sys_root) / "bus" / "pci" / "devices" / bdf
    try:
        real = base.resolve(strict=True)
    except OSError:
        return "", {}
    chain = [p for p in [*reversed(real.parents), real] if _is_bdf(p.name)][-_MAX_DEPTH:]
    lines: list[str] = []
    vendors: dict[str, str] = {}
    for device in chain:
        vendor = _read(device / "vendor")
        if vendor:
            vendors[device.name] = vendor.lower()
        for name in _FILES:
            value = _read(device / name)
            if value is not None:
                lines.append(f"{device}/{name}:{value}")
    return "".join(line + "\n" for line in lines), vendors


def _is_bdf(name: str) -> bool:
    parts = name.split(":")
    return len(parts) == 3 and len(parts[0]) == 4 and "." in parts[2]


def external_link(links: Sequence[PcieLink], gpu_bdf: str, vendors: Mapping[str, str]) -> PcieLink | None:
    """The link that leaves the GPU's board: the top-most ancestor in an unbroken run of bridges with
    the GPU's vendor id above it (AMD's own switch), else the GPU's own link."""
    by_device = {link.device: link for link in links}
    gpu = by_device.get(gpu_bdf.lower())
    vendor = vendors.get(gpu_bdf.lower())
    order = [link.device for link in links]  # read root-side first, the GPU last
    if gpu is None or vendor is None or gpu_bdf.lower() not in order:
        return gpu
    chosen = gpu
    for device in reversed(order[: order.index(gpu_bdf.lower())]):
        if vendors.get(device) != vendor:
            break
        chosen = by_device[device]
    return chosen


def link_bandwidth_gbps(generation: int | None, width: int | None) -> float | None:
    if generation is None or width is None or generation not in LANE_GBPS:
        return None
    return LANE_GBPS[generation] * width


def link_findings(link: PcieLink | None, *, why_missing: str = "", under_load: bool = True) -> list[Finding]:
    """One ``hygiene.pcie_link`` finding: ok at its maximum, a warning below it, info when the maximum is unknown."""
    if link is None:
        return [Finding(CHECK, "skipped", why_missing or "no PCIe link facts for the device")]
    cur, top = link.current, link.maximum
    where = f"PCIe link of {link.device or 'the GPU'} ({link.source})"
    when = "read while the GPU was busy" if under_load else "read at rest (an idle GPU may lower its link speed)"
    below = link.below_max
    if below is None:
        return [Finding(CHECK, "info", f"{where}: {cur.describe()} now; its maximum is not reported ({when})")]
    if not below:
        return [Finding(CHECK, "ok", f"{where}: {cur.describe()}, at its maximum ({when})")]
    have = link_bandwidth_gbps(cur.generation, cur.width)
    could = link_bandwidth_gbps(top.generation, top.width)
    share = f": at most {have:.1f} of {could:.1f} GB/s per direction ({have / could:.0%})" if have and could else ""
    return [
        Finding(
            CHECK,
            "warning",
            f"{where} runs at {cur.describe()}, below its maximum {top.describe()}{share}; host-device copies are "
            f"capped accordingly ({when})",
            "seat the GPU in a slot wired for its full width and generation; check the BIOS/firmware PCIe speed "
            "setting, risers, retimers and bifurcation; compare with `lspci -vv` (LnkSta against LnkCap)",
        )
    ]


def parse_read(text: str) -> list[PcieLink]:
    """The links in what ``read_sysfs`` rendered, root side first (the order the text lists them)."""
    return list(parse_sysfs(text).links)

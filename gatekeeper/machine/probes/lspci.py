"""``lspci`` lines for display devices, as pasted: plain, ``-nn`` (``[1002:7551]`` ids),
``-D`` (a ``0000:`` domain), ``-v``/``-k`` detail lines (``Kernel driver in use``),
``grep``-filtered, tab-indented or quoted (``> ``) in markdown.

lspci names the PCI device, never the gfx target: doctor reports the target as
missing rather than mapping a device id to one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gatekeeper.machine.probes.rocminfo import strip_ansi

__all__ = ["Lspci", "PciDevice", "parse"]

DISPLAY_CLASSES = ("VGA compatible controller", "Display controller", "3D controller")
_VENDORS = {"1002": "AMD", "10de": "NVIDIA", "8086": "Intel"}
_LINE = re.compile(
    r"^(?P<slot>(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+"
    r"(?P<cls>[^:\[]+)(?:\[(?P<cls_id>[0-9a-fA-F]{4})\])?:\s+(?P<desc>.*)$"  # greedy: lazy was quadratic on blank runs
)
_IDS = re.compile(r"\[([0-9a-fA-F]{4}):([0-9a-fA-F]{4})\]")
_DETAIL = re.compile(r"^(Kernel driver in use|Subsystem):\s*(.*)$")


@dataclass(frozen=True)
class PciDevice:
    slot: str  # "0000:74:00.0" when lspci -D printed the domain, else "74:00.0"
    pci_class: str  # "VGA compatible controller"
    description: str  # the rest of the line
    vendor_id: str | None = None  # "1002", from -nn
    device_id: str | None = None  # "7551", from -nn
    kernel_driver: str | None = None  # from -k / -v

    @property
    def pci_id(self) -> str | None:
        return f"{self.vendor_id}:{self.device_id}" if self.vendor_id and self.device_id else None

    @property
    def vendor(self) -> str | None:
        if self.vendor_id:
            return _VENDORS.get(self.vendor_id, self.vendor_id)
        d = self.description
        if "Advanced Micro Devices" in d or "AMD/ATI" in d:
            return "AMD"
        return "NVIDIA" if "NVIDIA" in d else ("Intel" if d.startswith("Intel") else None)

    @property
    def name(self) -> str:
        """The device name lspci prints after the vendor ("Navi 48 [Radeon AI PRO R9700]")."""
        d = re.sub(r"\s*\(rev [0-9a-fA-F]+\).*$", "", self.description)
        d = re.sub(r"\s*\(prog-if .*$", "", d)
        d = _IDS.sub("", d).strip()
        for prefix in ("Advanced Micro Devices, Inc. [AMD/ATI] ", "Advanced Micro Devices [AMD] nee ATI "):
            if d.startswith(prefix):
                return d[len(prefix) :].strip()
        return re.sub(r"^NVIDIA Corporation ", "", d).strip()

    @property
    def is_gpu(self) -> bool:
        """A display-class device from a GPU compute vendor (AMD or NVIDIA)."""
        return self.pci_class in DISPLAY_CLASSES and self.vendor in ("AMD", "NVIDIA")


@dataclass(frozen=True)
class Lspci:
    devices: tuple[PciDevice, ...] = ()
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def gpus(self) -> tuple[PciDevice, ...]:
        return tuple(d for d in self.devices if d.is_gpu)


def parse(text: str) -> Lspci:
    found: dict[str, PciDevice] = {}
    last: str | None = None
    warnings: list[str] = []
    for raw in strip_ansi(text).splitlines():
        line = raw.strip().lstrip(">").strip().strip("`")
        m = _LINE.match(line)
        if m:
            slot = m.group("slot").lower()
            key = slot[-7:]  # the same device with and without the -D domain
            if key not in found:
                ids = _IDS.findall(m.group("desc"))
                vendor, device = (ids[-1][0].lower(), ids[-1][1].lower()) if ids else (None, None)
                found[key] = PciDevice(slot, m.group("cls").strip(), m.group("desc").strip(), vendor, device)
            last = key
            continue
        d = _DETAIL.match(line)
        if d and last is not None and d.group(1) == "Kernel driver in use":
            dev = found[last]
            found[last] = PciDevice(
                dev.slot, dev.pci_class, dev.description, dev.vendor_id, dev.device_id, d.group(2).strip()
            )
    if not found:
        warnings.append("no lspci device lines found (expected 'BB:DD.F Class: Vendor Device')")
    elif not any(d.is_gpu for d in found.values()):
        warnings.append("no AMD or NVIDIA display device among the lspci lines")
    return Lspci(devices=tuple(found.values()), warnings=tuple(warnings))

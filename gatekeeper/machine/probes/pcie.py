"""PCIe link state (current and maximum speed and width) as Linux, lspci and amdgpu report it.

Four sources, each as people paste it:

- sysfs: ``current_link_speed``, ``max_link_speed``, ``current_link_width``, ``max_link_width`` of
  ``/sys/bus/pci/devices/<bdf>/`` (``grep . .../*_link_*`` prints ``path:value``; ``tail -v``
  prints ``==> path <==`` then the value); ``parse_sysfs`` groups them by device directory.
- ``lspci -vv``: ``LnkCap`` (the maximum), ``LnkSta`` (the current link, with ``(downgraded)``
  or ``(ok)`` since pciutils 3.7), ``LnkCap2: Supported Link Speeds: 2.5-16GT/s`` (the maximum
  speed when ``LnkCap`` is missing); under the ``BB:DD.F`` header of each device.
- amdgpu's ``pp_dpm_pcie`` levels (``1: 16.0GT/s, x8 1143Mhz *``; ``*`` is the current level)
  and rocm-smi's ``pcie clock level: 1 (8.0GT/s, x16)`` (the current level only).

Speeds are GT/s per lane; the generation follows from it (2.5 -> 1 ... 64 -> 6). What is not in
the text stays None: a current link alone never becomes a maximum.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gatekeeper.machine.probes.rocminfo import strip_ansi

__all__ = [
    "GENERATIONS",
    "LinkState",
    "PcieLink",
    "PcieLinks",
    "generation",
    "parse_lspci",
    "parse_pp_dpm",
    "parse_rocm_smi",
    "parse_sysfs",
]

# PCIe generation by transfer rate per lane (GT/s)
GENERATIONS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
_SPEED = re.compile(r"(?<![\d.])(\d{1,3}(?:\.\d{1,3})?)\s{0,3}GT/s", re.I)  # bounded: no backtracking on digit runs
_WIDTH = re.compile(r"\bx(\d{1,2})\b")
_SYSFS_FILES = ("current_link_speed", "max_link_speed", "current_link_width", "max_link_width")
_SYSFS_LINE = re.compile(r"^(?P<dir>\S*?)/?(?P<file>(?:current|max)_link_(?:speed|width)):(?P<value>.*)$")
_TAIL_HEADER = re.compile(r"^==>\s*(?P<dir>\S*?)/?(?P<file>(?:current|max)_link_(?:speed|width))\s*<==$")
_BDF = re.compile(r"(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")
_LSPCI_HEADER = re.compile(r"^(?P<slot>(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+\S")
_DPM_LEVEL = re.compile(
    r"^(?P<level>\d{1,3}):\s*(?P<speed>\d{1,3}(?:\.\d{1,3})?)\s*GT/s,?\s*x(?P<width>\d{1,2})\b(?P<rest>.*)$", re.I
)
_SMI_PCIE = re.compile(
    r"^GPU\[(?P<gpu>\d{1,4})\]\s*:\s*pcie clock level:\s*\d{1,3}:?\s*"
    r"\((?P<speed>\d{1,3}(?:\.\d{1,3})?)\s*GT/s,?\s*x(?P<width>\d{1,2})\)",
    re.I,
)


def generation(speed_gts: float | None) -> int | None:
    """2.5 -> 1, 8.0 -> 3, 16.0 -> 4 ...; None for no speed or one PCIe does not define."""
    if speed_gts is None:
        return None
    return GENERATIONS.get(round(speed_gts, 1))


@dataclass(frozen=True)
class LinkState:
    speed_gts: float | None = None
    width: int | None = None

    @property
    def generation(self) -> int | None:
        return generation(self.speed_gts)

    def describe(self) -> str:
        if self.speed_gts is None and self.width is None:
            return "unknown"
        gen = self.generation
        speed = f"{self.speed_gts:g} GT/s" + (f" (Gen{gen})" if gen else "") if self.speed_gts else "? GT/s"
        return f"{speed} x{self.width if self.width is not None else '?'}"


@dataclass(frozen=True)
class PcieLink:
    device: str  # "0000:03:00.0", a sysfs directory, "GPU[1]", or "" when the text does not say
    current: LinkState = LinkState()
    maximum: LinkState = LinkState()
    source: str = ""  # "sysfs", "lspci", "pp_dpm_pcie", "rocm-smi"
    downgraded: tuple[str, ...] = ()  # what lspci itself flags as downgraded ("speed", "width")

    @property
    def below_max(self) -> bool | None:
        """True when speed or width is below its maximum; None when a maximum or current value is missing."""
        pairs = [
            (self.current.speed_gts, self.maximum.speed_gts),
            (self.current.width, self.maximum.width),
        ]
        known = [(c, m) for c, m in pairs if c is not None and m is not None]
        if any(c < m for c, m in known):
            return True
        if self.downgraded:
            return True
        return False if len(known) == len(pairs) else None

    def to_dict(self) -> dict[str, object]:
        def state(s: LinkState) -> dict[str, object]:
            return {"speed_gts": s.speed_gts, "generation": s.generation, "width": s.width}

        return {
            "device": self.device,
            "source": self.source,
            "current": state(self.current),
            "max": state(self.maximum),
            "below_max": self.below_max,
        }


@dataclass(frozen=True)
class PcieLinks:
    links: tuple[PcieLink, ...] = ()
    warnings: tuple[str, ...] = field(default_factory=tuple)


def _speed(text: str) -> float | None:
    m = _SPEED.search(text)
    return float(m.group(1)) if m else None


def _int(text: str) -> int | None:
    m = re.search(r"(?<!\d)\d{1,4}(?!\d)", text)
    return int(m.group(0)) if m else None


def _lines(text: str) -> list[str]:
    out = []
    for raw in strip_ansi(text).splitlines():
        line = raw.strip().lstrip(">").strip()
        if line.startswith("```"):
            continue
        out.append(line)
    return out


def _device_of(directory: str) -> str:
    """The PCI address in a sysfs directory (the last one: a device behind a bridge), else the directory."""
    found = _BDF.findall(directory)
    return found[-1].lower() if found else directory


def parse_sysfs(text: str) -> PcieLinks:
    """The four link files per device, from ``grep .`` (path:value) or ``tail -v`` (==> path <==) output."""
    values: dict[str, dict[str, str]] = {}
    pending: tuple[str, str] | None = None
    for line in _lines(text):
        if not line:
            continue
        m = _TAIL_HEADER.match(line)
        if m:
            pending = (m.group("dir"), m.group("file"))
            continue
        m = _SYSFS_LINE.match(line)
        if m:
            values.setdefault(m.group("dir"), {})[m.group("file")] = m.group("value").strip()
            pending = None
            continue
        if pending is not None:
            values.setdefault(pending[0], {})[pending[1]] = line
            pending = None
    links = []
    for directory, files in values.items():
        links.append(
            PcieLink(
                _device_of(directory),
                LinkState(_speed(files.get("current_link_speed", "")), _int(files.get("current_link_width", ""))),
                LinkState(_speed(files.get("max_link_speed", "")), _int(files.get("max_link_width", ""))),
                "sysfs",
            )
        )
    warnings = [] if links else ["no *_link_speed / *_link_width values found"]
    for link in links:
        missing = [f for f in _SYSFS_FILES if f not in values.get(_dir_of(values, link), {})]
        if missing:
            warnings.append(f"{link.device}: {', '.join(missing)} not in the text")
    return PcieLinks(tuple(links), tuple(warnings))


def _dir_of(values: dict[str, dict[str, str]], link: PcieLink) -> str:
    return next((d for d in values if _device_of(d) == link.device), "")


def parse_lspci(text: str) -> PcieLinks:
    """LnkCap / LnkSta / LnkCap2 lines of ``lspci -vv``, per device header (one unnamed device without one)."""
    devices: dict[str, dict[str, str]] = {}
    current = ""
    for line in _lines(text):
        m = _LSPCI_HEADER.match(line)
        if m:
            current = m.group("slot").lower()
            continue
        for key in ("LnkCap", "LnkSta", "LnkCap2"):
            if line.startswith(f"{key}:"):
                devices.setdefault(current, {}).setdefault(key, line[len(key) + 1 :].strip())
    links = []
    for device, fields in devices.items():
        cap, sta, cap2 = fields.get("LnkCap", ""), fields.get("LnkSta", ""), fields.get("LnkCap2", "")
        if not sta and not cap:
            continue
        max_speed = _speed(cap) if cap else None
        if max_speed is None and cap2:
            supported = cap2.split("Supported Link Speeds:")[-1].split(",")[0]  # "2.5-16GT/s"
            speeds = [float(s) for s in re.findall(r"\d{1,3}(?:\.\d{1,3})?", supported[:64])]
            max_speed = max(speeds) if speeds else None
        cap_width = _WIDTH.search(cap)
        sta_width = _WIDTH.search(sta)
        flagged = []
        if re.search(r"Speed [^,(]{0,24}\(downgraded\)", sta):
            flagged.append("speed")
        if re.search(r"Width [^,(]{0,24}\(downgraded\)", sta):
            flagged.append("width")
        links.append(
            PcieLink(
                device,
                LinkState(_speed(sta) if sta else None, int(sta_width.group(1)) if sta_width else None),
                LinkState(max_speed, int(cap_width.group(1)) if cap_width else None),
                "lspci",
                tuple(flagged),
            )
        )
    return PcieLinks(tuple(links), () if links else ("no LnkSta or LnkCap line found (lspci -vv needs root for them)",))


def parse_pp_dpm(text: str, device: str = "") -> PcieLinks:
    """amdgpu's ``pp_dpm_pcie``: the starred level is the current link, the highest level the most it offers."""
    levels = []
    current = None
    for line in _lines(text):
        m = _DPM_LEVEL.match(line)
        if not m:
            continue
        state = LinkState(float(m.group("speed")), int(m.group("width")))
        levels.append(state)
        if "*" in m.group("rest"):
            current = state
    if not levels:
        return PcieLinks((), ("no pp_dpm_pcie level lines ('N: 16.0GT/s, x16 ...') found",))
    top = LinkState(max(s.speed_gts or 0.0 for s in levels), max(s.width or 0 for s in levels))
    warnings = () if current else ("no level is marked current ('*')",)
    return PcieLinks((PcieLink(device, current or LinkState(), top, "pp_dpm_pcie"),), warnings)


def parse_rocm_smi(text: str) -> PcieLinks:
    """``pcie clock level: 1 (8.0GT/s, x16)`` lines of rocm-smi (``--showclocks``): the current link per GPU."""
    links = []
    seen = set()
    for line in _lines(text):
        m = _SMI_PCIE.match(line)
        if m and m.group("gpu") not in seen:
            seen.add(m.group("gpu"))
            state = LinkState(float(m.group("speed")), int(m.group("width")))
            links.append(PcieLink(f"GPU[{m.group('gpu')}]", state, LinkState(), "rocm-smi"))
    return PcieLinks(tuple(links), () if links else ("no 'pcie clock level' line found",))

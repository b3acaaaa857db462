"""``rocminfo`` output: the GPU agents (CPU agents are counted, not kept), the
ROCk (amdgpu kernel driver) line and the HSA runtime version."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["GpuAgent", "RocmInfo", "parse", "strip_ansi"]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_AGENT = re.compile(r"^\s*Agent\s+(\d+)\s*$")
_KEY_VALUE = re.compile(r"^(\s*)([^:]+?):\s*(.*?)\s*$")
_NUM_HEX = re.compile(r"^(\d+)\s*\((0x[0-9a-fA-F]+)\)")
_ISA_TARGET = re.compile(r"^amdgcn-amd-amdhsa--(\S+)$")
_GFX_NAME = re.compile(r"^gfx[0-9a-f]+$")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


@dataclass(frozen=True)
class GpuAgent:
    agent: int  # the "Agent N" number (CPU agents come first)
    name: str  # "gfx90a": what the runtime reports, HSA_OVERRIDE_GFX_VERSION included
    marketing_name: str | None = None
    isa: tuple[str, ...] = ()  # "amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-", in order
    compute_units: int | None = None
    chip_id: str | None = None  # "0x74a1"
    device_type: str | None = None  # "GPU"; None when the block was cut before that line
    uuid: str | None = None
    vram_kb: int | None = None  # first GLOBAL COARSE GRAINED pool

    @property
    def gfx_arch(self) -> str:
        """The full target with feature suffixes ("gfx942:sramecc+:xnack-") from the first
        non-generic ISA line; the bare Name when the ISA section is missing."""
        for isa in self.isa:
            m = _ISA_TARGET.match(isa)
            if m and "generic" not in m.group(1):
                return m.group(1)
        return self.name

    @property
    def gfx_base(self) -> str:
        return self.gfx_arch.split(":")[0]


@dataclass(frozen=True)
class RocmInfo:
    gpus: tuple[GpuAgent, ...] = ()
    cpu_agents: int = 0
    rock_line: str | None = None  # "ROCk module is loaded" / "ROCk module version 6.10.5 is loaded"
    rock_loaded: bool | None = None  # None: no ROCk line (WSL, clipped output)
    runtime_version: str | None = None
    runtime_ext_version: str | None = None
    wsl: bool = False
    complete: bool = False  # saw "*** Done ***"
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def gfx_bases(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(g.gfx_base for g in self.gpus))


@dataclass
class _Agent:
    number: int
    fields: dict[str, str] = field(default_factory=dict)
    isa: list[str] = field(default_factory=list)
    vram_kb: int | None = None
    section: str = ""
    pending_segment: str = ""


def _int_of(value: str | None) -> int | None:
    if value is None:
        return None
    m = re.match(r"^(\d+)", value)
    return int(m.group(1)) if m else None


def _chip_id(value: str | None) -> str | None:
    if not value:
        return None
    m = _NUM_HEX.match(value)
    if m:
        return m.group(2).lower()
    n = _int_of(value)
    return hex(n) if n is not None else None


def parse(text: str) -> RocmInfo:
    lines = strip_ansi(text).splitlines()
    warnings: list[str] = []
    agents: list[_Agent] = []
    rock_line = rock_loaded = runtime = runtime_ext = None
    wsl = complete = False
    current: _Agent | None = None
    for raw in lines:
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped or set(stripped) <= {"*", "="}:
            continue
        if stripped.startswith("ROCk module"):
            rock_line = stripped
            rock_loaded = "NOT" not in stripped
            continue
        if "WSL environment detected" in stripped:
            wsl = True
            continue
        if stripped.startswith("*** Done ***"):
            complete = True
            continue
        m = _AGENT.match(line)
        if m:
            current = _Agent(int(m.group(1)))
            agents.append(current)
            continue
        kv = _KEY_VALUE.match(line)
        if not kv:
            continue
        indent, key, value = len(kv.group(1)), kv.group(2).strip(), kv.group(3)
        if current is None:
            if key == "Runtime Version":
                runtime = value
            elif key == "Runtime Ext Version":
                runtime_ext = value
            continue
        if indent <= 2:
            current.section = key if key in ("Pool Info", "ISA Info", "Cache Info") else ""
            current.fields.setdefault(key, value)
        elif current.section == "ISA Info" and key == "Name":
            current.isa.append(value)
        elif current.section == "Pool Info" and key == "Segment":
            current.pending_segment = value
        elif (
            current.section == "Pool Info"
            and key == "Size"
            and current.vram_kb is None
            and "GLOBAL" in current.pending_segment
            and "COARSE" in current.pending_segment
        ):
            current.vram_kb = _int_of(value)
    gpus: list[GpuAgent] = []
    cpus = 0
    for a in agents:
        dtype = a.fields.get("Device Type")
        name = a.fields.get("Name", "")
        if dtype == "CPU" or (dtype is None and a.fields.get("Vendor Name") == "CPU"):
            cpus += 1
            continue
        if dtype is None and not _GFX_NAME.match(name):
            warnings.append(f"agent {a.number}: no Device Type and name {name!r} is not a gfx target; skipped")
            continue
        if dtype not in (None, "GPU"):
            continue  # DSP and other agent kinds
        if dtype is None:
            warnings.append(f"agent {a.number}: block cut before 'Device Type'; taken as a GPU from its name {name}")
        missing = [k for k in ("Marketing Name", "Compute Unit", "Chip ID") if k not in a.fields]
        if missing:
            warnings.append(f"agent {a.number} ({name}): missing {', '.join(missing)}")
        if not a.isa and dtype == "GPU":
            warnings.append(f"agent {a.number} ({name}): no ISA line; feature suffixes (xnack, sramecc) unknown")
        gpus.append(
            GpuAgent(
                agent=a.number,
                name=name,
                marketing_name=a.fields.get("Marketing Name") or None,
                isa=tuple(a.isa),
                compute_units=_int_of(a.fields.get("Compute Unit")),
                chip_id=_chip_id(a.fields.get("Chip ID")),
                device_type=dtype,
                uuid=a.fields.get("Uuid") or None,
                vram_kb=a.vram_kb,
            )
        )
    if not agents:
        warnings.append("no 'Agent N' blocks found: not rocminfo output, or it failed before listing agents")
    if rock_line is None and not wsl:
        warnings.append("no 'ROCk module' line: cannot tell whether the amdgpu kernel driver is loaded")
    if runtime is None:
        warnings.append("no 'Runtime Version' line (HSA System Attributes missing or cut)")
    if agents and not complete:
        warnings.append("output ends before '*** Done ***': truncated")
    return RocmInfo(
        gpus=tuple(gpus),
        cpu_agents=cpus,
        rock_line=rock_line,
        rock_loaded=rock_loaded,
        runtime_version=runtime,
        runtime_ext_version=runtime_ext,
        wsl=wsl,
        complete=complete,
        warnings=tuple(warnings),
    )

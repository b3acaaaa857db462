"""``rocminfo`` output: the GPU agents (CPU agents are counted, not kept), the
ROCk (amdgpu kernel driver) line and the HSA runtime version.

Any subset of the lines is accepted. Without ``Agent N`` headers (``rocminfo | grep gfx``,
``rocminfo | grep -i name``, a few lines copied from the middle) each agent-level
``Name:`` line starts an agent: ``Name: gfx1100`` is a GPU, an ISA line
(``amdgcn-amd-amdhsa--gfx1100``) belongs to the agent above it, and what the
fragment does not show stays unknown."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gatekeeper.machine.probes import integer

__all__ = ["GpuAgent", "RocmInfo", "parse", "strip_ansi"]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_ROCK = re.compile(r"ROCk module(?: version \S+)? is (?:NOT )?loaded")
_AGENT = re.compile(r"^\s*Agent\s+(\d+)\s*$")
# matched on the right-stripped line: a lazy "(.*?)\s*$" tail backtracked quadratically on long blank runs
_KEY_VALUE = re.compile(r"^(\s*)([^:]+?):\s*(.*)$")
_NUM_HEX = re.compile(r"^(\d+)\s*\((0x[0-9a-fA-F]+)\)")
_ISA_TARGET = re.compile(r"^amdgcn-amd-amdhsa--(\S+)$")
_GFX_NAME = re.compile(r"^gfx[0-9a-f]+$")
_FRAGMENT_KEYS = ("Marketing Name", "Vendor Name", "Device Type", "Compute Unit", "Chip ID", "Uuid")


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
            if m and "generic" not in m.group(1) and self._isa_matches(m.group(1)):
                return m.group(1)
        return self.name

    def _isa_matches(self, target: str) -> bool:
        """An ISA line names the agent's own target; a cut one ("gfx103" under gfx1036) does not count."""
        return not _GFX_NAME.match(self.name) or target.split(":", maxsplit=1)[0] == self.name

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
    fragment: bool = False  # no "Agent N" headers: grep-filtered or copied lines
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
    return integer(m.group(1)) if m else None


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
    fragment = not any(_AGENT.match(raw.rstrip()) for raw in lines)
    current: _Agent | None = None
    for raw in lines:
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped or set(stripped) <= {"*", "="}:
            continue
        if stripped.startswith("ROCk module"):
            # only the sentence: a capture collapsed onto one line carries the whole output after it
            m_rock = _ROCK.match(stripped)
            rock_line = m_rock.group(0) if m_rock else stripped[:80]
            rock_loaded = "NOT" not in rock_line
            continue
        if "WSL environment detected" in stripped:
            wsl = True
            continue
        if stripped.startswith("*** Done ***"):
            complete = True
            continue
        m = _AGENT.match(line)
        if m:
            current = _Agent(integer(m.group(1)) or 0)
            agents.append(current)
            continue
        kv = _KEY_VALUE.match(line.rstrip())
        if not kv:
            continue
        indent, key, value = len(kv.group(1)), kv.group(2).strip(), kv.group(3)
        if fragment:
            current = _fragment_line(agents, current, key, value)
            continue
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
            if fragment:
                continue  # a CPU or other agent's Name line in a grep
            warnings.append(f"agent {a.number}: no Device Type and name {name!r} is not a gfx target; skipped")
            continue
        if dtype not in (None, "GPU"):
            continue  # DSP and other agent kinds
        if dtype is None and not fragment:
            warnings.append(f"agent {a.number}: block cut before 'Device Type'; taken as a GPU from its name {name}")
        missing = [k for k in ("Marketing Name", "Compute Unit", "Chip ID") if k not in a.fields]
        if missing and not fragment:
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
    for g in gpus:
        cut = [
            i for i in g.isa if (m := _ISA_TARGET.match(i)) and "generic" not in i and not g._isa_matches(m.group(1))
        ]
        if cut:
            warnings.append(f"agent {g.agent} ({g.name}): ISA line {cut[0]!r} does not match its name; kept the name")
    if fragment and agents:
        warnings.append(
            "no 'Agent N' headers: read as a filtered fragment (agents numbered in order of their Name lines)"
        )
    elif not agents:
        warnings.append("no 'Agent N' blocks found: not rocminfo output, or it failed before listing agents")
    if rock_line is None and not wsl:
        warnings.append("no 'ROCk module' line: cannot tell whether the amdgpu kernel driver is loaded")
    if runtime is None:
        warnings.append("no 'Runtime Version' line (HSA System Attributes missing or cut)")
    if agents and not complete and not fragment:
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
        fragment=fragment and bool(agents),
        warnings=tuple(warnings),
    )


def _fragment_line(agents: list[_Agent], current: _Agent | None, key: str, value: str) -> _Agent | None:
    """One line of a fragment without Agent headers; returns the agent the next line belongs to."""
    if key == "Name" and value.startswith("amdgcn-"):
        if current is not None:
            current.isa.append(value)
        return current
    if key == "Name":
        current = _Agent(len(agents) + 1)
        agents.append(current)
        current.fields["Name"] = value
        return current
    if current is not None and key in _FRAGMENT_KEYS:
        current.fields.setdefault(key, value)
    return current

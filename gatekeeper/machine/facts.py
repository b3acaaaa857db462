"""Which facts about the GPU stack a snapshot holds, and which file each came from.

A capture is often partial: a grep of rocminfo, amd-smi without rocminfo, a few
lines of collect_env. ``parse_texts`` reads every file that is there with its
parser; ``gather`` lists each fact doctor knows (ROCm version, GPUs, gfx targets,
driver, torch...) with the file it was read from, the other files that agree,
those that disagree, and the facts no file holds. Nothing is inferred: a PCI device
id is not turned into a gfx target, a torch ROCm build is not taken for the
installed ROCm release.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gatekeeper.machine.probes import (
    amd_smi,
    collect_env,
    kfd_topology,
    lspci,
    nvidia_smi,
    rocm_smi,
    rocminfo,
    versions,
)
from gatekeeper.machine.probes.rocm_smi import RocmSmi

__all__ = ["FACT_NAMES", "Fact", "Parsed", "gather", "parse_texts"]

# fact name -> applies to (None: any machine; "amd": only where something says AMD/ROCm)
FACT_NAMES: dict[str, str | None] = {
    "ROCm version": "amd",
    "GPU count": None,
    "GPU names": None,
    "gfx targets": "amd",
    "amdgpu driver": "amd",
    "torch version": None,
    "torch ROCm build": "amd",
    "HIP runtime": "amd",
    "MIOpen": "amd",
}


@dataclass(frozen=True)
class Parsed:
    """Every capture file that is present, parsed; None where the file is absent."""

    rocminfo: rocminfo.RocmInfo | None = None
    rocm_smi: RocmSmi | None = None
    amd_smi: dict[str, amd_smi.AmdSmi] = field(default_factory=dict)  # file name -> parsed
    nvidia_smi: nvidia_smi.NvidiaSmi | None = None
    collect_env: collect_env.CollectEnv | None = None
    version: versions.RocmVersion | None = None
    kfd: kfd_topology.KfdTopology | None = None
    lspci: lspci.Lspci | None = None
    rocm_smi_files: dict[str, RocmSmi] = field(default_factory=dict)

    @property
    def amd(self) -> bool:
        """Anything in the capture says AMD/ROCm."""
        return bool(
            self.rocminfo
            or self.rocm_smi
            or self.amd_smi
            or self.version
            or (self.kfd and self.kfd.gpus)
            or (self.lspci and any(g.vendor == "AMD" for g in self.lspci.gpus))
            or (self.collect_env and self.collect_env.rocm_build)
        )


def parse_texts(texts: Mapping[str, str]) -> Parsed:
    smi_files = {n: rocm_smi.parse(texts[n]) for n in ("rocm-smi.txt", "rocm-smi.json") if n in texts}
    smi = None
    for parsed in smi_files.values():
        smi = parsed if smi is None else rocm_smi.merge(smi, parsed)
    return Parsed(
        rocminfo=rocminfo.parse(texts["rocminfo.txt"]) if "rocminfo.txt" in texts else None,
        rocm_smi=smi,
        amd_smi={n: amd_smi.parse(texts[n]) for n in ("amd-smi.txt", "amd-smi.json") if n in texts},
        nvidia_smi=nvidia_smi.parse(texts["nvidia-smi.csv"]) if "nvidia-smi.csv" in texts else None,
        collect_env=collect_env.parse(texts["collect_env.txt"]) if "collect_env.txt" in texts else None,
        version=versions.parse(texts["version"]) if "version" in texts else None,
        kfd=kfd_topology.parse(texts["kfd-topology.txt"]) if "kfd-topology.txt" in texts else None,
        lspci=lspci.parse(texts["lspci.txt"]) if "lspci.txt" in texts else None,
        rocm_smi_files=smi_files,
    )


@dataclass(frozen=True)
class Fact:
    name: str
    value: Any = None  # None: not in the snapshot
    source: str | None = None  # the file the value was read from ("rocminfo.txt", "torch.json")
    agreeing: tuple[str, ...] = ()  # other files with the same value
    conflicting: tuple[tuple[str, Any], ...] = ()  # (file, its different value)

    @property
    def missing(self) -> bool:
        return self.source is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "source": self.source,
            "also_in": list(self.agreeing),
            "conflicts": [{"source": s, "value": v} for s, v in self.conflicting],
        }


def _rock_version(info: rocminfo.RocmInfo) -> str | None:
    line = info.rock_line or ""
    return line.split("version", 1)[1].split()[0] if " version " in line else None


def _candidates(p: Parsed, torch: Mapping[str, Any] | None) -> dict[str, list[tuple[str, Any]]]:
    """fact -> [(file, value)] in order of trust; empty values are left out."""
    out: dict[str, list[tuple[str, Any]]] = {name: [] for name in FACT_NAMES}
    t = torch or {}
    tdev = [d for d in t.get("devices") or [] if isinstance(d, dict)]
    if p.version and p.version.version:
        out["ROCm version"].append(("version", p.version.version))
    for name, a in p.amd_smi.items():
        out["ROCm version"].append((name, a.rocm_version))
        out["amdgpu driver"].append((name, a.driver_version))
    if p.rocminfo:
        out["amdgpu driver"].append(("rocminfo.txt", _rock_version(p.rocminfo)))
    if p.rocm_smi:
        out["amdgpu driver"].append((_smi_file(p, "driver_version"), p.rocm_smi.driver_version))

    def gpus(name: str, count: int, names: list[Any], gfx: list[Any]) -> None:
        if not count:
            return
        out["GPU count"].append((name, count))
        out["GPU names"].append((name, sorted({n for n in names if n}) or None))
        out["gfx targets"].append((name, sorted({g.split(":")[0] for g in gfx if g}) or None))

    if p.rocminfo:
        r = p.rocminfo
        gpus("rocminfo.txt", len(r.gpus), [g.marketing_name for g in r.gpus], [g.gfx_arch for g in r.gpus])
    if tdev:
        gpus("torch.json", len(tdev), [d.get("name") for d in tdev], [d.get("gfx_arch") for d in tdev])
    for name, a in p.amd_smi.items():
        gpus(name, len(a.devices), [d.market_name for d in a.devices], [d.gfx for d in a.devices])
    for name, s in p.rocm_smi_files.items():
        gpus(name, len(s.devices), [d.name for d in s.devices], [d.gfx for d in s.devices])
    if p.kfd:
        gpus("kfd-topology.txt", len(p.kfd.gpus), [g.get("product_name") for g in p.kfd.gpus], list(p.kfd.gfx_targets))
    if p.nvidia_smi:
        gpus("nvidia-smi.csv", len(p.nvidia_smi.gpus), [g.name for g in p.nvidia_smi.gpus], [])
    if p.lspci:
        gpus("lspci.txt", len(p.lspci.gpus), [g.name for g in p.lspci.gpus], [])
    if p.collect_env and p.collect_env.gpus:
        c = p.collect_env
        # one line per GPU on CUDA; ROCm builds often print one line for all: names and targets, not a count
        out["GPU names"].append(("collect_env.txt", sorted({g.split(" (gfx")[0] for g in c.gpus})))
        out["gfx targets"].append(("collect_env.txt", sorted({g.split(":")[0] for g in c.gfx_archs}) or None))
    if t.get("version"):
        out["torch version"].append(("torch.json", t.get("version")))
        out["torch ROCm build"].append(("torch.json", t.get("hip")))
        out["MIOpen"].append(("torch.json", t.get("miopen")))
    if p.collect_env:
        c = p.collect_env
        out["torch version"].append(("collect_env.txt", c.torch_version))
        out["torch ROCm build"].append(("collect_env.txt", c.rocm_build))
        out["HIP runtime"].append(("collect_env.txt", c.hip_runtime))
        out["MIOpen"].append(("collect_env.txt", c.miopen))
    return {k: [(s, v) for s, v in vs if v not in (None, "", [])] for k, vs in out.items()}


def _smi_file(p: Parsed, attr: str) -> str:
    return next((n for n, s in p.rocm_smi_files.items() if getattr(s, attr)), "rocm-smi.txt")


def gather(p: Parsed, torch: Mapping[str, Any] | None) -> tuple[tuple[Fact, ...], tuple[str, ...]]:
    """(facts found, names of the facts no file holds); AMD-only facts count as missing only on AMD captures."""
    found: list[Fact] = []
    missing: list[str] = []
    amd = p.amd or bool((torch or {}).get("hip"))
    for name, values in _candidates(p, torch).items():
        if not values:
            if FACT_NAMES[name] is None or amd:
                missing.append(name)
            continue
        source, value = values[0]
        agree = tuple(s for s, v in values[1:] if v == value and s != source)
        differ = tuple((s, v) for s, v in values[1:] if v != value)
        found.append(Fact(name, value, source, agree, differ))
    return tuple(found), tuple(missing)

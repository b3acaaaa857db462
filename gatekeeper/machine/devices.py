"""Which GPUs a snapshot lists, and from which file: the first source that lists them, with a
missing gfx target or name filled in from another source that lists as many GPUs. Pure: parsed
texts in, device dicts out."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gatekeeper.machine.facts import Parsed

__all__ = ["select_devices"]


def select_devices(p: Parsed, torch: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """From the first source that lists GPUs: rocminfo, torch, amd-smi, rocm-smi, nvidia-smi,
    collect_env, the KFD topology, lspci. A device without a gfx target (or a name) gets one from
    another source that lists as many GPUs (same machine, same order), with that source named."""
    out = _devices_from_first(p, torch)
    if out and any(not d.get("gfx_arch") and not d.get("compute_capability") for d in out):
        for source, targets in _gfx_lists(p, torch):
            if len(targets) == len(out) and all(targets):
                for d, gfx in zip(out, targets, strict=True):
                    if not d.get("gfx_arch") and not d.get("compute_capability"):
                        d.update(gfx_arch=gfx, gfx_source=source)
                break
    if out and any(not d.get("marketing_name") for d in out):
        for source, names in _name_lists(p):
            if len(names) == len(out) and all(names):
                for d, name in zip(out, names, strict=True):
                    if not d.get("marketing_name"):
                        d.update(marketing_name=name, name_source=source)
                break
    return out


def _name_lists(p: Parsed) -> list[tuple[str, list[str | None]]]:
    out: list[tuple[str, list[str | None]]] = [(n, [d.market_name for d in a.devices]) for n, a in p.amd_smi.items()]
    out += [(n, [d.name for d in s.devices]) for n, s in p.rocm_smi_files.items()]
    if p.lspci and p.lspci.gpus:
        out.append(("lspci.txt", [g.name for g in p.lspci.gpus]))
    return out


def _gfx_lists(p: Parsed, torch: Mapping[str, Any] | None) -> list[tuple[str, list[str | None]]]:
    out: list[tuple[str, list[str | None]]] = []
    if p.rocminfo and p.rocminfo.gpus:
        out.append(("rocminfo.txt", [g.gfx_arch for g in p.rocminfo.gpus]))
    tdev = (torch or {}).get("devices") or []
    if tdev:
        out.append(("torch.json", [d.get("gfx_arch") for d in tdev if isinstance(d, dict)]))
    for name, a in p.amd_smi.items():
        out.append((name, [d.gfx for d in a.devices]))
    for name, s in p.rocm_smi_files.items():
        out.append((name, [d.gfx for d in s.devices]))
    if p.kfd and p.kfd.gpus:
        out.append(("kfd-topology.txt", [g.gfx for g in p.kfd.gpus]))
    return out


def _devices_from_first(p: Parsed, torch: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    info, smi, nv, cenv = p.rocminfo, p.rocm_smi, p.nvidia_smi, p.collect_env
    smi_devices = list(smi.devices) if smi else []
    if info and info.gpus:
        out = []
        for i, g in enumerate(info.gpus):
            d: dict[str, Any] = {
                "name": g.name,
                "marketing_name": g.marketing_name,
                "gfx_arch": g.gfx_arch,
                "compute_units": g.compute_units,
                "chip_id": g.chip_id,
                "vram_mib": g.vram_kb // 1024 if g.vram_kb else None,
                "source": "rocminfo",
            }
            if len(smi_devices) == len(info.gpus):  # same machine, same order (rocm-smi's GPU[i] = i-th agent)
                s = smi_devices[i]
                d.update(temperature_c=s.temperature_c, power_w=s.power_w, vram_percent=s.vram_percent)
            out.append(d)
        return out
    if torch and torch.get("devices"):
        return [
            {
                "name": t.get("name"),
                "marketing_name": t.get("name"),
                "gfx_arch": t.get("gfx_arch"),
                "compute_units": None,
                "compute_capability": None if t.get("gfx_arch") else t.get("compute_capability"),
                "vram_mib": int(t["total_memory"]) // 2**20 if t.get("total_memory") else None,
                "source": "torch",
            }
            for t in torch["devices"]
        ]
    amd = next((a for a in p.amd_smi.values() if a.devices), None)
    if amd:
        return [
            {
                "name": a.market_name,
                "marketing_name": a.market_name,
                "gfx_arch": a.gfx,
                "compute_units": a.compute_units,
                "chip_id": a.device_id,
                "vram_mib": a.vram_mb,
                "source": "amd-smi",
            }
            for a in amd.devices
        ]
    if smi_devices:
        return [
            {
                "name": s.name,
                "marketing_name": s.card_series or s.name,
                "gfx_arch": s.gfx,
                "compute_units": None,
                "chip_id": s.device_id,
                "temperature_c": s.temperature_c,
                "power_w": s.power_w,
                "vram_percent": s.vram_percent,
                "source": "rocm-smi",
            }
            for s in smi_devices
        ]
    if nv and nv.gpus:
        return [
            {
                "name": g.name,
                "marketing_name": g.name,
                "gfx_arch": None,
                "compute_units": None,
                "compute_capability": g.compute_cap,
                "vram_mib": g.memory_total_mib,
                "temperature_c": g.temperature_c,
                "power_w": g.power_w,
                "driver": g.driver_version,
                "source": "nvidia-smi",
            }
            for g in nv.gpus
        ]
    if cenv and cenv.gpus:
        out = []
        for line in cenv.gpus:
            # greedy and on the stripped line: a lazy "(.*?)\s*" prefix backtracked quadratically on long blank runs
            m = re.match(r"^(.*)\((gfx[^()]*)\)$", line.strip())
            name, gfx = (m.group(1).rstrip(), m.group(2)) if m else (line, None)
            out.append(
                {"name": name, "marketing_name": name, "gfx_arch": gfx, "compute_units": None, "source": "collect_env"}
            )
        return out
    if p.kfd and p.kfd.gpus:
        return [
            {
                "name": g.get("name") or g.gfx,
                "marketing_name": g.get("product_name"),
                "gfx_arch": g.gfx,
                "compute_units": None,
                "chip_id": g.device_id,
                "source": "kfd-topology",
            }
            for g in p.kfd.gpus
        ]
    if p.lspci and p.lspci.gpus:
        return [
            {
                "name": g.name,
                "marketing_name": g.name,
                "gfx_arch": None,
                "compute_units": None,
                "chip_id": f"0x{g.device_id}" if g.device_id else None,
                "pci_id": g.pci_id,
                "source": "lspci",
            }
            for g in p.lspci.gpus
        ]
    return []

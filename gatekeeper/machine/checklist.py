"""From a Snapshot (live or captured) to a MachineReport: what is installed, what
matches, what will fail and what to do. Pure: parses texts, never runs tools."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gatekeeper.machine import archcompat, pcie_link
from gatekeeper.machine.devices import select_devices
from gatekeeper.machine.fact_conflicts import fact_conflict_findings
from gatekeeper.machine.facts import Fact, gather, parse_texts
from gatekeeper.machine.findings import Finding, Severity
from gatekeeper.machine.hygiene import hygiene_findings
from gatekeeper.machine.probes import collect_env, pcie, versions
from gatekeeper.machine.snapshot import Snapshot

__all__ = ["MachineReport", "diagnose"]

SCHEMA = "gatekeeper.doctor/v1"


@dataclass(frozen=True)
class MachineReport:
    source: str
    rocm_version: str | None
    devices: tuple[dict[str, Any], ...]
    torch: dict[str, Any]
    tools: dict[str, dict[str, Any]]
    findings: tuple[Finding, ...] = field(default_factory=tuple)
    facts: tuple[Fact, ...] = ()  # what the snapshot says, each with the file it came from
    missing_facts: tuple[str, ...] = ()  # facts no file in the snapshot holds

    @property
    def has_errors(self) -> bool:
        return any(f.severity == "error" for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "source": self.source,
            "rocm_version": self.rocm_version,
            "devices": list(self.devices),
            "torch": self.torch,
            "tools": self.tools,
            "findings": [f.to_dict() for f in self.findings],
            "facts": {f.name: f.to_dict() for f in self.facts},
            "missing_facts": list(self.missing_facts),
        }


def _torch(snapshot: Snapshot, cenv: collect_env.CollectEnv | None) -> dict[str, Any]:
    t = snapshot.torch or {}
    if t.get("version"):
        return {
            "version": t.get("version"),
            "hip": t.get("hip"),
            "cuda": t.get("cuda"),
            "arch_list": t.get("arch_list") if t.get("available") else None,
            "miopen": t.get("miopen"),
            "gpu_available": t.get("available"),
            "source": "torch",
        }
    if cenv and cenv.torch_version:
        return {
            "version": cenv.torch_version,
            "hip": cenv.rocm_build,
            "cuda": cenv.cuda_build,
            "arch_list": None,  # collect_env does not print it
            "miopen": cenv.miopen,
            "gpu_available": cenv.cuda_available,
            "source": "collect_env",
        }
    return {"version": None, "hip": None, "cuda": None, "arch_list": None, "miopen": None, "source": None}


_TOOL_HINT = {
    "rocm-smi": "rocm-smi hanging usually means a wedged amdgpu driver or GPU: check `dmesg | grep -i amdgpu`, "
    "and reset the GPU or reboot the node before running jobs on it",
    "amd-smi": "amd-smi hanging usually means a wedged amdgpu driver or GPU: check `dmesg | grep -i amdgpu`, "
    "and reset the GPU or reboot the node before running jobs on it",
    "rocminfo": "rocminfo hanging or failing means the HSA runtime cannot start: torch will hang or see no GPU; "
    "check `dmesg | grep -i amdgpu` and /dev/kfd access",
    "torch": "importing torch or querying the GPU from torch failed: see the detail; jobs on this machine will too",
}


def _tool_findings(snapshot: Snapshot, amd: bool) -> list[Finding]:
    out = []
    for name, run in snapshot.tools.items():
        base = name.split()[0]
        check = f"tools.{base}"
        if run.status == "timed out":
            sev: Severity = "error" if base in ("rocminfo", "torch") else "warning"
            out.append(Finding(check, sev, f"{name} timed out ({run.detail})", _TOOL_HINT.get(base, "")))
        elif run.status == "failed":
            sev = "error" if base == "torch" else "warning"
            out.append(Finding(check, sev, f"{name} failed: {run.detail}", _TOOL_HINT.get(base, "")))
        elif run.status == "missing" and amd and base in ("rocminfo", "rocm-smi"):
            out.append(Finding(check, "info", f"{name} not available: {run.detail}"))
    if snapshot.torch and snapshot.torch.get("error"):
        out.append(Finding("tools.torch", "error", f"torch probe: {snapshot.torch['error']}", _TOOL_HINT["torch"]))
    return out


def diagnose(snapshot: Snapshot) -> MachineReport:
    p = parse_texts(snapshot.texts)
    info, smi, nv, cenv, ver = p.rocminfo, p.rocm_smi, p.nvidia_smi, p.collect_env, p.version
    torch = _torch(snapshot, cenv)
    devices = select_devices(p, snapshot.torch)
    amd = bool(p.amd or torch.get("hip"))
    facts, missing = gather(p, snapshot.torch)
    findings: list[Finding] = []

    findings += _tool_findings(snapshot, amd)
    if info is not None:
        if info.rock_loaded is False:
            findings.append(
                Finding(
                    "driver.rock",
                    "error",
                    f"rocminfo: {info.rock_line}: the amdgpu kernel driver is not loaded; no GPU will be visible",
                    "install/load amdgpu-dkms matching the ROCm release (sudo modprobe amdgpu) and check dmesg",
                )
            )
        elif info.rock_loaded:
            findings.append(Finding("driver.rock", "ok", f"rocminfo: {info.rock_line}"))
        if not info.gpus and not info.cpu_agents and info.rock_loaded is not False:
            # nothing readable about agents (a collapsed or clipped capture): a missing fact, never a failure
            findings.append(
                Finding(
                    "devices.visible",
                    "skipped",
                    "rocminfo: no agent could be read (the GPU count is not in the capture), so whether the HSA "
                    "runtime sees a GPU is unknown",
                    "capture rocminfo's output as it prints it (gatekeeper doctor --capture DIR)",
                )
            )
        elif not info.gpus:
            findings.append(
                Finding(
                    "devices.visible",
                    "error",
                    "rocminfo lists no GPU agent: the HSA runtime sees no GPU",
                    "check /dev/kfd and /dev/dri access (hygiene checks below) and the ROCk line",
                )
            )
        else:
            findings.append(Finding("devices.visible", "ok", f"rocminfo lists {len(info.gpus)} GPU agent(s)"))
    if snapshot.torch and snapshot.torch.get("version") and devices and snapshot.torch.get("available") is False:
        build = "HIP" if torch["hip"] else ("CUDA" if torch["cuda"] else "CPU-only")
        findings.append(
            Finding(
                "torch.gpu_available",
                "error",
                f"torch {torch['version']} ({build} build) sees no GPU although {len(devices)} are installed",
                "CPU-only wheel: install from the matching ROCm/CUDA wheel index; otherwise check the visible-device "
                "variables and device-node access below",
            )
        )
    parsed_files: list[tuple[str, Any]] = [
        ("rocminfo", info),
        ("rocm-smi", smi),
        *((name.rsplit(".", 1)[0] + (" (json)" if name.endswith(".json") else ""), a) for name, a in p.amd_smi.items()),
        ("nvidia-smi", nv),
        ("collect_env", cenv),
        ("version", ver),
        ("kfd-topology", p.kfd),
        ("lspci", p.lspci),
    ]
    for name, parsed in parsed_files:
        for w in getattr(parsed, "warnings", ()) or ():
            sev: Severity = "warning" if name == "collect_env" and cenv and cenv.crashed else "info"
            findings.append(Finding(f"probes.{name.split()[0]}", sev, f"{name}: {w}"))
    findings += fact_conflict_findings(facts, snapshot.environ)
    rocm_version = next((f.value for f in facts if f.name == "ROCm version"), None)
    rocm_family = ver.family if ver else versions.family(rocm_version)
    hip_family = versions.family(torch.get("hip"))
    if rocm_family and hip_family and rocm_family != hip_family:
        major_differs = rocm_family.split(".")[0] != hip_family.split(".")[0]
        findings.append(
            Finding(
                "versions.rocm_match",
                "warning" if major_differs else "info",
                f"torch was built against ROCm {hip_family}, the system has ROCm {rocm_family}",
                "wheels bundle their ROCm libraries, so this mostly works; extensions built against /opt/rocm "
                f"(apex, flash-attn) need the same family: use https://download.pytorch.org/whl/rocm{rocm_family}"
                if major_differs
                else "",
            )
        )
    findings += _arch_findings(devices, torch, snapshot.environ, rocm_family or hip_family)
    gpu_expected = amd or bool(devices) or bool(torch.get("hip") or torch.get("cuda"))
    findings += hygiene_findings(snapshot.environ, snapshot.fs, amd=amd, gpu_expected=gpu_expected)
    findings += _pcie_findings(snapshot.texts)
    return MachineReport(
        source=snapshot.source,
        rocm_version=rocm_version,
        devices=tuple(devices),
        torch=torch,
        tools={k: v.to_dict() for k, v in snapshot.tools.items()},
        findings=tuple(findings),
        facts=facts,
        missing_facts=missing,
    )


def _pcie_findings(texts: Mapping[str, str]) -> list[Finding]:
    """The PCIe links a pasted ``lspci -vv`` (LnkCap/LnkSta) or rocm-smi (pcie clock level) shows; none without."""
    links = list(pcie.parse_lspci(texts["lspci.txt"]).links) if "lspci.txt" in texts else []
    for name in ("rocm-smi.txt",):
        if name in texts:
            links += pcie.parse_rocm_smi(texts[name]).links
    # a capture does not say whether the GPU was busy: an idle GPU may have lowered its link speed
    return [f for link in links for f in pcie_link.link_findings(link, under_load=False)]


def _arch_findings(
    devices: list[dict[str, Any]], torch: dict[str, Any], environ: dict[str, str] | Any, family: str | None
) -> list[Finding]:
    out = []
    arch_list = torch.get("arch_list")
    seen: set[tuple[str, str | None]] = set()
    for d in devices:
        gfx, cc = d.get("gfx_arch"), d.get("compute_capability")
        key = (gfx or cc or "", d.get("chip_id"))
        if key in seen:
            continue
        seen.add(key)
        if not key[0]:
            label = d.get("marketing_name") or d.get("name") or "GPU"
            out.append(
                Finding(
                    "arch.compatible",
                    "skipped",
                    f"{label}: gfx target (or compute capability) not in the capture "
                    f"({d.get('source')} does not print it)",
                    "add rocminfo, amd-smi static or the KFD gfx_target_version lines to the capture",
                )
            )
            continue
        if gfx:
            r = archcompat.check_rocm(
                gfx,
                arch_list or [],
                override=environ.get("HSA_OVERRIDE_GFX_VERSION"),
                chip_id=d.get("chip_id"),
                rocm_family=family,
            )
        else:
            r = archcompat.check_cuda(str(cc), arch_list or [])
        label = d.get("marketing_name") or d.get("name")
        if r.compatible is None:
            reason = (
                "arch list unknown (capture has no torch.json, or torch sees no GPU)" if not arch_list else r.message
            )
            out.append(Finding("arch.compatible", "skipped", f"{label} ({r.device_arch}): {reason}"))
        elif r.compatible:
            out.append(Finding("arch.compatible", "ok", f"{label}: {r.message}"))
        else:
            out.append(Finding("arch.compatible", "error", f"{label}: {r.message}", r.remediation))
        out += [Finding("arch.notes", "warning", f"{label}: {n}") for n in r.notes]
    return out

"""``gatekeeper doctor``: the pre-flight checklist for a GPU machine.

The flow: take a snapshot (run the tools, each with a timeout) or read a
capture directory, optionally save the snapshot, diagnose it, render it as a
terminal checklist or JSON. Exit 0 when no finding is an error, 1 when one is
(something will fail), 2 on bad input (raised as InputError).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gatekeeper.core.errors import InputError
from gatekeeper.core.escape import terminal_lines
from gatekeeper.machine.checklist import MachineReport, diagnose
from gatekeeper.machine.snapshot import read_capture, take_snapshot, write_capture

__all__ = ["render_json", "render_text", "run_doctor"]

_MARK = {"ok": " ok ", "info": "info", "skipped": "skip", "warning": "WARN", "error": "FAIL"}


def render_json(diagnosis: MachineReport) -> str:
    return json.dumps(diagnosis.to_dict(), indent=2, default=str) + "\n"


def _device_line(d: dict[str, Any]) -> str:
    parts = [d.get("gfx_arch") or (f"CC {d['compute_capability']}" if d.get("compute_capability") else None)]
    if d.get("compute_units"):
        parts.append(f"{d['compute_units']} CUs")
    if d.get("vram_mib"):
        parts.append(f"{d['vram_mib'] / 1024:.0f} GiB")
    if d.get("temperature_c") is not None:
        parts.append(f"{d['temperature_c']:g} °C")
    name = d.get("marketing_name") or d.get("name") or "unnamed GPU"
    detail = ", ".join(p for p in parts if p)
    return f"{name} ({detail})" if detail else name


def _fact_value(value: Any) -> str:
    return ", ".join(str(v) for v in value) if isinstance(value, (list, tuple)) else str(value)


def _fact_lines(diagnosis: MachineReport) -> list[str]:
    """Each fact with the file it was read from; a fact no file holds is named, never guessed."""
    live = diagnosis.source == "live"
    lines = ["Facts" if live else "Facts (file each was read from)"]
    for f in diagnosis.facts:
        where = f.source if not live else ""
        also = f" = {', '.join(f.agreeing)}" if f.agreeing and not live else ""
        lines.append(f"  {f.name}: {_fact_value(f.value)}" + (f"  [{where}{also}]" if where else ""))
        for source, value in f.conflicting:
            lines.append(f"      but {source}: {_fact_value(value)}")
    absent = "not found on this machine" if live else "not in the capture"
    lines += [f"  {name}: {absent}" for name in diagnosis.missing_facts]
    return lines


def _gpus_unknown(diagnosis: MachineReport) -> bool:
    """A capture that does not say how many GPUs there are: "none found" would be a guess."""
    return diagnosis.source != "live" and "GPU count" in diagnosis.missing_facts


def render_text(diagnosis: MachineReport) -> str:
    t = diagnosis.torch
    lines = [f"gatekeeper doctor: {'this machine' if diagnosis.source == 'live' else diagnosis.source}", ""]
    lines.append("Installed")
    lines.append(f"  ROCm     {diagnosis.rocm_version or 'not found'}")
    if t.get("version"):
        build = f"HIP {t['hip']}" if t.get("hip") else (f"CUDA {t['cuda']}" if t.get("cuda") else "CPU-only")
        extra = f", MIOpen {t['miopen']}" if t.get("miopen") else ""
        archs = f"; archs {' '.join(t['arch_list'])}" if t.get("arch_list") else ""
        lines.append(f"  torch    {t['version']} ({build}{extra}{archs})")
    else:
        lines.append("  torch    not found")
    counts: dict[str, int] = {}
    for d in diagnosis.devices:
        counts[_device_line(d)] = counts.get(_device_line(d), 0) + 1
    if counts:
        for i, (line, n) in enumerate(counts.items()):
            lines.append(f"  {'GPUs' if i == 0 else '':<8} {n} x {line}")
    elif _gpus_unknown(diagnosis):
        lines.append("  GPUs     not in the capture")
    else:
        lines.append("  GPUs     none found")
    if diagnosis.tools:
        tools = " · ".join(f"{k} {v['status']}" for k, v in diagnosis.tools.items())
        lines.append(f"  tools    {tools}")
    lines += ["", *_fact_lines(diagnosis), "", "Checks"]
    for f in diagnosis.findings:
        lines.append(f"  [{_MARK[f.severity]}] {f.check}: {f.message}")
        if f.remediation and f.severity in ("warning", "error"):
            lines.append(f"         fix: {f.remediation}")
    errors = sum(f.severity == "error" for f in diagnosis.findings)
    warnings = sum(f.severity == "warning" for f in diagnosis.findings)
    verdict = "will fail" if errors else ("usable, with warnings" if warnings else "ready")
    if not diagnosis.devices and not errors:
        verdict += " (the GPUs are not in the capture)" if _gpus_unknown(diagnosis) else " (CPU only: no GPU found)"
    if diagnosis.missing_facts and diagnosis.source != "live" and not errors:
        verdict += f" as far as the capture shows ({len(diagnosis.missing_facts)} fact(s) not in it)"
    lines += ["", f"Summary: {verdict}: {errors} error(s), {warnings} warning(s)"]
    # a device name or tool detail of a capture (someone's paste) with a newline starts no line of its own
    return terminal_lines(lines) + "\n"


def run_doctor(
    *,
    capture: str | Path | None = None,
    from_dir: str | Path | None = None,
    timeout: float = 20.0,
) -> MachineReport:
    """Diagnose this machine (or the capture ``from_dir``); save the raw outputs to ``capture`` if given."""
    if capture is not None and from_dir is not None:
        raise InputError(None, "--capture/--from", "give one of --capture and --from", "capture here, diagnose there")
    if timeout <= 0:
        raise InputError(
            None, "--timeout", f"must be positive (got {timeout:g})", "pass a positive --timeout in seconds"
        )
    snapshot = read_capture(from_dir) if from_dir is not None else take_snapshot(timeout=timeout)
    if capture is not None:
        write_capture(snapshot, capture)
    return diagnose(snapshot)

"""Per-process GPU clock and temperature from nvidia-smi or rocm-smi, when they report them."""

from __future__ import annotations

import re
import shutil
from typing import Any

from gatekeeper.core import proc

__all__ = ["parse_nvidia_smi", "parse_rocm_smi_json", "read_clocks"]

_TIMEOUT_S = 15.0
_MHZ = re.compile(r"(\d+(?:\.\d+)?)\s*Mhz", re.I)
_PAIR = re.compile(r'"([^"]+)"\s*:\s*(?:"([^"]*)"|\{)')


def parse_nvidia_smi(text: str) -> list[dict[str, float | None]]:
    """Rows of ``nvidia-smi --query-gpu=clocks.sm,temperature.gpu --format=csv,noheader,nounits``."""
    out = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 2:
            out.append({"sclk_mhz": _num(parts[0]), "temperature_c": _num(parts[1])})
    return out


def parse_rocm_smi_json(text: str) -> list[dict[str, float | None]]:
    """Cards of ``rocm-smi --showtemp --showclocks --json`` (keys like 'sclk clock speed:' '(800Mhz)').

    Read pair by pair rather than with json.loads: captured output is often cut
    off or wrapped in other text, and the pairs we need come early in each card.
    """
    cards: dict[str, dict[str, str]] = {}
    current = None
    for m in _PAIR.finditer(text):
        key, value = m.group(1), m.group(2)
        if value is None:
            current = cards.setdefault(key, {}) if key.startswith("card") else None
        elif current is not None:
            current[key] = value
    out = []
    for _, fields in sorted(cards.items()):
        sclk = next((v for k, v in fields.items() if k.lower().startswith("sclk clock speed")), "")
        temp = next((v for k, v in fields.items() if k.lower().startswith("temperature")), "")
        mhz = _MHZ.search(sclk)
        out.append({"sclk_mhz": float(mhz.group(1)) if mhz else None, "temperature_c": _num(temp)})
    return out


def read_clocks(kind: str) -> tuple[list[dict[str, Any]] | None, str]:
    """(per-device clock/temperature, "") or (None, the reason they are not available)."""
    if kind == "cpu":
        return None, "no GPU: clocks and temperature are reported for GPUs only"
    tool = "rocm-smi" if kind == "rocm" else "nvidia-smi"
    if shutil.which(tool) is None:
        return None, f"{tool} not found on PATH"
    argv = (
        [tool, "--showtemp", "--showclocks", "--json"]
        if kind == "rocm"
        else [tool, "--query-gpu=clocks.sm,temperature.gpu", "--format=csv,noheader,nounits"]
    )
    res = proc.run(argv, timeout=_TIMEOUT_S)
    if not res.ok:
        return None, f"{tool} {res.describe()}"
    rows = parse_rocm_smi_json(res.stdout) if kind == "rocm" else parse_nvidia_smi(res.stdout)
    return (rows, "") if rows else (None, f"{tool} reported no clocks")


def _num(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None

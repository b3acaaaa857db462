"""``amd-smi`` output (the successor of rocm-smi), every shape seen pasted:

- text ``amd-smi static`` / ``amd-smi list`` (``GPU: N`` blocks, indented ``SECTION:`` and
  ``KEY: value`` lines; ``AI_NIC: N`` / ``CPU: N`` blocks are not GPUs);
- ``amd-smi version`` (``AMDSMI Tool: ... | ROCm version: 7.2.0 | amdgpu version: ...``);
- the default box table (``| AMD-SMI 26.1.0 amdgpu version: 6.12.12 ROCm version: 7.9.0 |``
  header, one ``| BDF  GPU-Name |`` row per GPU);
- ``--json``: a list of per-GPU objects or ``{"gpu_data": [...]}``, after warnings, possibly cut.

Shell prompts and Python warnings around the output are ignored. Nothing is guessed:
a field that is not in the text stays None.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from gatekeeper.machine.probes import integer
from gatekeeper.machine.probes.rocminfo import strip_ansi

__all__ = ["AmdSmi", "AmdSmiDevice", "parse"]

_NA = {"", "N/A", "n/a", "NA", "UNKNOWN", "None"}
_BLOCK = re.compile(r"^(GPU|AI_NIC|NIC|CPU|CPU CORE)\s*:\s*(\d+)\s*$")
# matched on the right-stripped line: a lazy "(.*?)\s*$" tail backtracked quadratically on long blank runs
_KEY = re.compile(r"^(\s*)([A-Z](?:[A-Z0-9_ ]*[A-Z0-9_])?)\s*:\s*(.*)$")
_VERSION_PARTS = {
    "rocm_version": re.compile(r"ROCm version:\s*([0-9][\w.+-]*)"),
    "driver_version": re.compile(r"amdgpu version:\s*([0-9][\w.+-]*)"),
    "amdsmi_version": re.compile(r"(?:AMDSMI Tool|AMD-SMI)[: ]\s*([0-9][\w.+-]*)"),
}
# possessive: "\s+(.*?)\s*\|" backtracked quadratically on a row with a long blank run and no closing "|"
_TABLE_ROW = re.compile(r"^\|\s*([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d)\s++([^|]*+)\|")
_GFX = re.compile(r"^gfx[0-9a-f]+$")


@dataclass(frozen=True)
class AmdSmiDevice:
    index: int
    market_name: str | None = None
    gfx: str | None = None  # TARGET_GRAPHICS_VERSION, as printed ("gfx942")
    device_id: str | None = None  # "0x74a1"
    compute_units: int | None = None
    bdf: str | None = None
    uuid: str | None = None
    vram_mb: int | None = None


@dataclass(frozen=True)
class AmdSmi:
    devices: tuple[AmdSmiDevice, ...] = ()
    layouts: tuple[str, ...] = ()  # "text", "table", "json", "version"
    rocm_version: str | None = None
    driver_version: str | None = None  # amdgpu
    amdsmi_version: str | None = None
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def gfx_targets(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(d.gfx for d in self.devices if d.gfx))


def _clean(value: Any) -> str | None:
    if value is None or isinstance(value, (dict, list)):
        return None
    text = str(value).strip()
    return None if text in _NA else text


def _int(value: Any) -> int | None:
    text = _clean(value)
    m = re.match(r"^(\d+)", text or "")
    return integer(m.group(1)) if m else None


class _Builder:
    def __init__(self) -> None:
        self.devices: dict[int, dict[str, Any]] = {}
        self.versions: dict[str, str] = {}

    def fill(self, index: int, **values: Any) -> None:
        d = self.devices.setdefault(index, {"index": index})
        for k, v in values.items():
            if v is not None and d.get(k) is None:
                d[k] = v

    def version(self, **values: str | None) -> None:
        for k, v in values.items():
            if v and k not in self.versions:
                self.versions[k] = v


def _versions(line: str) -> dict[str, str | None]:
    found = {k: p.search(line) for k, p in _VERSION_PARTS.items()}
    return {k: m.group(1) if m else None for k, m in found.items()}


def _gfx(value: Any) -> str | None:
    text = (_clean(value) or "").lower()
    return text if _GFX.match(text) else None


def _apply(b: _Builder, index: int, section: str, key: str, value: str) -> None:
    key = key.upper().replace(" ", "_")
    if key == "MARKET_NAME":
        b.fill(index, market_name=_clean(value))
    elif key == "TARGET_GRAPHICS_VERSION":
        b.fill(index, gfx=_gfx(value))
    elif key == "DEVICE_ID" and section in ("ASIC", ""):
        b.fill(index, device_id=(_clean(value) or "").lower() or None)
    elif key == "NUM_COMPUTE_UNITS":
        b.fill(index, compute_units=_int(value))
    elif key == "BDF":
        b.fill(index, bdf=(_clean(value) or "").lower() or None)
    elif key == "UUID":
        b.fill(index, uuid=_clean(value))
    elif key == "SIZE" and section == "VRAM":
        b.fill(index, vram_mb=_int(value))
    elif key == "VERSION" and section == "DRIVER":
        b.version(driver_version=_clean(value))
    else:
        b.fill(index)


def _parse_text(lines: list[str], b: _Builder) -> bool:
    seen = False
    gpu: int | None = None
    section = ""
    for line in lines:
        if not line.strip():
            continue
        m = _BLOCK.match(line.strip())
        if m and not line.startswith(" "):
            gpu = integer(m.group(2)) if m.group(1) == "GPU" else None
            section = ""
            if gpu is not None:
                b.fill(gpu)
                seen = True
            continue
        if gpu is None:
            continue
        kv = _KEY.match(line.rstrip())
        if not kv:
            continue
        indent, key, value = len(kv.group(1)), kv.group(2), kv.group(3)
        if indent == 0:
            gpu = None  # a prompt, a warning, the next command: the block is over
            continue
        if not value:
            if indent <= 4:
                section = key.upper()
            continue
        if indent <= 4:
            section = ""
        _apply(b, gpu, section, key, value)
    return seen


def _parse_table(lines: list[str], b: _Builder) -> bool:
    seen = False
    rows = [line for line in lines if line.startswith("|")]
    for i, line in enumerate(rows):
        if "AMD-SMI" in line or "ROCm version" in line:
            b.version(**_versions(line))
        m = _TABLE_ROW.match(line)
        if not m:
            continue
        nxt = rows[i + 1] if i + 1 < len(rows) else ""
        n = re.match(r"^\|\s*(\d+)\s", nxt)
        found = integer(n.group(1)) if n else None
        index = len(b.devices) if found is None else found
        b.fill(index, bdf=m.group(1).lower(), market_name=_clean(m.group(2)))
        seen = True
    return seen


def _json_start(text: str) -> int:
    for m in re.finditer(r"^\s*[\[{]", text, re.M):
        rest = text[m.start() :].lstrip()
        if rest.startswith("[") or re.match(r'\{\s*"', rest) or rest.strip() == "{":
            return m.start()
    return -1


def _gpu_objects(doc: Any) -> list[dict[str, Any]]:
    if isinstance(doc, dict):
        doc = doc.get("gpu_data", [doc] if "gpu" in doc else [])
    return [d for d in doc if isinstance(d, dict)] if isinstance(doc, list) else []


def _apply_json(b: _Builder, obj: dict[str, Any], fallback_index: int) -> None:
    number = obj.get("gpu")
    index = number if isinstance(number, int) else fallback_index
    b.fill(index)
    for section, body in obj.items():
        if isinstance(body, dict):
            for key, value in body.items():
                plain = value["value"] if isinstance(value, dict) and "value" in value else value
                _apply(b, index, section.upper(), key, plain)
        elif not isinstance(body, list):
            _apply(b, index, "", section, body)


def _parse_json(text: str, b: _Builder, warnings: list[str]) -> bool:
    start = _json_start(text)
    if start < 0:
        return False
    body = text[start:]
    try:
        doc, _ = json.JSONDecoder().raw_decode(body.lstrip())
    except (ValueError, RecursionError):  # a JSONDecodeError, a 5,000-digit number, nesting too deep
        doc = None
    if doc is not None:
        objects = _gpu_objects(doc)
        for i, obj in enumerate(objects):
            _apply_json(b, obj, i)
        return bool(objects) or isinstance(doc, (list, dict))
    # cut JSON: read each GPU's complete "key": value pairs before the cut
    warnings.append("JSON is truncated; read the complete key/value pairs before the cut")
    chunks = re.split(r'"gpu"\s*:\s*(\d+)', body)
    if len(chunks) < 3:
        return False
    for number, chunk in zip(chunks[1::2], chunks[2::2], strict=True):
        index = integer(number)
        if index is None:
            continue
        b.fill(index)
        section = ""
        for m in re.finditer(r'"([a-z_ ]+)"\s*:\s*(\{|"([^"]*)"|(-?\d+))', chunk):
            if m.group(2) == "{":
                section = m.group(1).upper()
                continue
            value = m.group(3) if m.group(3) is not None else m.group(4)
            _apply(b, index, section, m.group(1), value)
    return True


def parse(text: str) -> AmdSmi:
    text = strip_ansi(text)
    lines = text.splitlines()
    warnings: list[str] = []
    b = _Builder()
    layouts = []
    if _parse_json(text, b, warnings):
        layouts.append("json")
    if _parse_table(lines, b):
        layouts.append("table")
    if _parse_text(lines, b):
        layouts.append("text")
    for line in lines:
        if "AMDSMI Tool" in line or "AMDSMI Library" in line:
            layouts.append("version")
            b.version(**_versions(line))
    if not layouts:
        warnings.append("no amd-smi GPU blocks, table rows, version line or JSON found")
    devices = tuple(AmdSmiDevice(**b.devices[i]) for i in sorted(b.devices))
    if devices and not any(d.gfx for d in devices):
        warnings.append("no TARGET_GRAPHICS_VERSION for any GPU (amd-smi static --asic prints it)")
    return AmdSmi(
        devices=devices,
        layouts=tuple(dict.fromkeys(layouts)),
        rocm_version=b.versions.get("rocm_version"),
        driver_version=b.versions.get("driver_version"),
        amdsmi_version=b.versions.get("amdsmi_version"),
        warnings=tuple(warnings),
    )

"""``rocm-smi`` output, every layout seen in the field: the legacy 2019 table,
the concise table (with the ``Node``/``IDs`` columns, or ``[Model : Revision]``
with the name on a second row), ``GPU[N] : key: value`` sections
(``--showproductname``, ``--showbus``, ``-a``), ``--csv`` (a ``device,...`` header, then ``cardN`` rows
and a ``cardsystem`` row for the driver), and ``--json`` (also truncated JSON and the
legacy ``(c)`` keys). One text may mix them (a table, then the JSON).

``GFX Version`` is printed as ``gfx`` + major + minor + stepping in *decimal*
(MI250X: ``gfx9010``); ``gfx_from_smi`` turns it into the target name (``gfx90a``)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

from gatekeeper.machine.probes import csv_row, integer, number
from gatekeeper.machine.probes.rocminfo import strip_ansi

__all__ = ["RocmSmi", "SmiDevice", "gfx_from_smi", "merge", "parse"]


@dataclass(frozen=True)
class SmiDevice:
    index: int
    device_id: str | None = None  # PCI device id, "0x74a1"
    name: str | None = None  # the best product name seen (series, "Device Name", concise name row)
    card_series: str | None = None
    card_model: str | None = None
    card_vendor: str | None = None
    card_sku: str | None = None
    vbios: str | None = None
    temperature_c: float | None = None  # the table's (edge or junction) temperature, else the first sensor
    temperatures_c: tuple[tuple[str, float], ...] = ()  # (sensor, °C) from -a / --json
    power_w: float | None = None
    power_cap_w: float | None = None
    vram_percent: float | None = None
    vram_total_bytes: int | None = None  # --showmeminfo vram
    vram_used_bytes: int | None = None
    gpu_percent: float | None = None
    partition: str | None = None  # the concise table's "Partitions" cell as printed ("NPS1, SPX")
    gfx_version: str | None = None  # "GFX Version" as printed ("gfx9010")
    perf_level: str | None = None  # "auto", "high", "manual", "stable_peak", "determinism", ...
    memory_partition: str | None = None  # "NPS1" (MI300: how HBM is interleaved)
    compute_partition: str | None = None  # "SPX", "CPX" (MI300: how many devices the GPU shows as)
    pci_bus: str | None = None  # "PCI Bus" as printed ("0000:26:00.0"): --showbus, -a, --json, --csv

    @property
    def gfx(self) -> str | None:
        return gfx_from_smi(self.gfx_version)


def gfx_from_smi(value: str | None) -> str | None:
    """rocm-smi's "GFX Version" as a target name: gfx9010 -> gfx90a, gfx1201 -> gfx1201.

    rocm-smi prints major, minor and stepping as decimal numbers one after the other;
    target names spell minor and stepping as one hex digit each. Majors are 6-12.
    """
    text = (value or "").strip().lower()
    if re.fullmatch(r"gfx[0-9]*[a-f][0-9a-f]*", text):
        return text  # already a target name (a hex digit in it)
    m = re.fullmatch(r"gfx(\d+)", text)
    if not m or len(m.group(1)) < 3:
        return None
    digits = m.group(1)
    split = 2 if digits[:2] in ("10", "11", "12") and len(digits) >= 4 else 1
    major, minor, stepping = integer(digits[:split]), int(digits[split]), integer(digits[split + 1 :])
    if major is None or stepping is None or stepping > 15:
        return None
    return f"gfx{major}{minor:x}{stepping:x}"


@dataclass(frozen=True)
class RocmSmi:
    devices: tuple[SmiDevice, ...] = ()
    layouts: tuple[str, ...] = ()  # "concise", "legacy-table", "sections", "json"
    driver_version: str | None = None
    smi_lib_version: str | None = None
    warnings: tuple[str, ...] = field(default_factory=tuple)


_NUM = r"(-?\d+(?:\.\d+)?)"
_TEMP = re.compile(r"(?<![\w.])" + _NUM + r"\s*(?:°C|°c|C|c)\b")  # not the "744c" of "0x744c"
_POWER = re.compile(r"(?<![\w.])" + _NUM + r"\s*W\b")
_PCT = re.compile(_NUM + r"\s*%")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_MHZ = re.compile(r"\d+\s*Mhz|None\b", re.I)
_SECTION_LINE = re.compile(r"^GPU\[(\d+)\]\s*:\s*(.*)$")
# every table layout ends "... Fan  Perf  PwrCap  VRAM%  GPU%": the performance level is the word between
# the fan cell (a percentage or N/A) and the power cap
_PERF_CELL = re.compile(r"(?:\d+(?:\.\d+)?%|N/A)\s+([a-z][a-z_]*)\s+(?:-?\d+(?:\.\d+)?\s*W\b|N/A|Unsupported)")
_NA = {"", "N/A", "n/a", "None", "Not supported", "UNKNOWN"}


def _num(text: str | None) -> float | None:
    if text is None:
        return None
    m = re.search(_NUM, text)
    return number(m.group(1)) if m else None


def _clean(value: str | None) -> str | None:
    value = (value or "").strip()
    return None if value in _NA else value


class _Builder:
    def __init__(self) -> None:
        self.devices: dict[int, dict[str, Any]] = {}

    def get(self, index: int) -> dict[str, Any]:
        return self.devices.setdefault(index, {"index": index, "temperatures_c": []})

    def fill(self, index: int, **values: Any) -> None:
        d = self.get(index)
        for k, v in values.items():
            if v is not None and d.get(k) is None:
                d[k] = v

    def build(self) -> tuple[SmiDevice, ...]:
        out = []
        for index in sorted(self.devices):
            d = dict(self.devices[index])
            d["temperatures_c"] = tuple(d["temperatures_c"])
            if d.get("temperature_c") is None and d["temperatures_c"]:
                d["temperature_c"] = d["temperatures_c"][0][1]
            if d.get("name") is None:
                d["name"] = d.get("card_series")
            out.append(SmiDevice(**d))
        return tuple(out)


def _parse_table(lines: list[str], b: _Builder, warnings: list[str]) -> str | None:
    """The concise/legacy tables: a header row naming Temp, then '=' rows around the data."""
    layout = None
    i = 0
    while i < len(lines):
        head = lines[i].strip()
        if not (re.match(r"^(Device|GPU)\s", head) and "Temp" in head):
            i += 1
            continue
        layout = "concise" if head.startswith("Device") else "legacy-table"
        i += 1
        # skip the rest of the header down to the '=' rule (legacy tables have none)
        j = i
        while j < len(lines) and not lines[j].strip().startswith("="):
            if re.match(r"^\s*\d+\s", lines[j]):
                break
            j += 1
        i = j + 1 if j < len(lines) and lines[j].strip().startswith("=") else j
        last: int | None = None
        while i < len(lines) and not lines[i].strip().startswith("="):
            row = lines[i]
            m = re.match(r"^\s*(\d+)\s+(.*)$", row)
            index = integer(m.group(1)) if m else None
            if m and index is not None:
                last = index
                _table_row(last, m.group(2), b)
            elif row.strip() and last is not None and row.startswith(" "):
                b.fill(last, name=row.strip())  # the concise layout's "Name (20 chars)" row
            elif row.strip():
                warnings.append(f"table row not understood: {row.strip()[:60]!r}")
            i += 1
    return layout


def _table_row(index: int, rest: str, b: _Builder) -> None:
    hexes = _HEX.findall(rest)
    temp = _TEMP.search(rest)
    powers = list(_POWER.finditer(rest))
    pcts = _PCT.findall(rest)
    perf = _PERF_CELL.search(rest)
    partition = None
    if powers:
        tail = rest[powers[0].end() :]
        mhz = _MHZ.search(tail)
        partition = _clean(tail[: mhz.start()] if mhz else "")
    # the concise table's "Partitions" header says "(Mem, Compute[, ID])"
    cells = [_clean(c) for c in (partition or "").split(",")]
    b.fill(
        index,
        device_id=hexes[0].lower() if hexes else None,
        temperature_c=number(temp.group(1)) if temp else None,
        power_w=number(powers[0].group(1)) if powers else None,
        power_cap_w=number(powers[-1].group(1)) if len(powers) >= 2 else None,
        vram_percent=number(pcts[-2]) if len(pcts) >= 2 else None,
        gpu_percent=number(pcts[-1]) if pcts else None,
        partition=partition,
        perf_level=_clean(perf.group(1)) if perf else None,
        memory_partition=cells[0] if len(cells) >= 2 else None,
        compute_partition=cells[1] if len(cells) >= 2 else None,
    )


_SECTION_KEYS = {
    "Card series": "card_series",
    "Card Series": "card_series",
    "Card model": "card_model",
    "Card Model": "card_model",
    "Card vendor": "card_vendor",
    "Card Vendor": "card_vendor",
    "Card SKU": "card_sku",
    "Device ID": "device_id",
    "Device Name": "name",
    "VBIOS version": "vbios",
    "GFX Version": "gfx_version",
}


def _apply_key(b: _Builder, index: int, key: str, value: str) -> None:
    value = value.strip()
    if key in _SECTION_KEYS:
        v = _clean(value)
        b.fill(index, **{_SECTION_KEYS[key]: v.lower() if v and key == "Device ID" else v})
    elif key.startswith("Temperature (Sensor"):
        t = _num(value)
        if t is not None:
            sensor = key.split("(Sensor", 1)[1].split(")", 1)[0].strip()
            b.get(index)["temperatures_c"].append((sensor, t))
    elif "Graphics Package Power (W)" in key and key.startswith("Max"):
        b.fill(index, power_cap_w=_num(value))
    elif "Graphics Package Power (W)" in key:
        b.fill(index, power_w=_num(value))
    elif key == "PCI Bus":
        b.fill(index, pci_bus=_clean(value))
    elif key == "Performance Level":
        b.fill(index, perf_level=_clean(value))
    elif key in ("Compute Partition", "Memory Partition"):
        b.fill(index, **{"compute_partition" if key.startswith("Compute") else "memory_partition": _clean(value)})
    elif key in ("GPU use (%)",):
        b.fill(index, gpu_percent=_num(value))
    elif key in ("GPU memory use (%)", "GPU Memory Allocated (VRAM%)"):
        b.fill(index, vram_percent=_num(value))
    elif key in ("VRAM Total Memory (B)", "VRAM Total Used Memory (B)"):
        n = _num(value)
        field_name = "vram_total_bytes" if "Used" not in key else "vram_used_bytes"
        b.fill(index, **{field_name: int(n) if n is not None else None})


def _parse_sections(lines: list[str], b: _Builder) -> bool:
    seen = False
    for line in lines:
        m = _SECTION_LINE.match(line.strip())
        if not m or ":" not in m.group(2):
            continue
        key, value = m.group(2).split(":", 1)
        index = integer(m.group(1))
        if index is None:
            continue
        _apply_key(b, index, key.strip(), value)
        seen = True
    return seen


def _json_objects(text: str) -> list[tuple[dict[str, Any] | None, str]]:
    """Each top-level JSON object in the text; (None, fragment) for one that is cut."""
    out: list[tuple[dict[str, Any] | None, str]] = []
    decoder = json.JSONDecoder()
    pos = 0
    while True:
        start = text.find("{", pos)
        if start < 0:
            return out
        try:
            obj, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):  # a JSONDecodeError, a 5,000-digit number, nesting too deep
            if re.match(r'\{\s*"card\d+"|\{\s*"system"', text[start:]):
                out.append((None, text[start:]))
                return out
            pos = start + 1
            continue
        if isinstance(obj, dict):
            out.append((obj, ""))
        pos = end


def _parse_json(text: str, b: _Builder, warnings: list[str]) -> tuple[bool, str | None, str | None]:
    seen = False
    driver = lib = None
    for obj, fragment in _json_objects(text):
        doc: dict[str, Any] = obj if obj is not None else {}
        if obj is None:
            warnings.append("JSON is truncated; read the complete key/value pairs before the cut")
            for m in re.finditer(r'"card(\d+)"\s*:\s*\{(.*?)(?=\}|"card\d+"\s*:|\Z)', fragment, re.S):
                pairs = re.findall(r'"([^"]+)"\s*:\s*"([^"]*)"', m.group(2))
                doc[f"card{m.group(1)}"] = dict(pairs)
        for key, value in doc.items():
            if key == "system" and isinstance(value, dict):
                driver = value.get("Driver version") or driver
                lib = value.get("ROCM-SMI-LIB version") or value.get("ROCm-SMI-LIB version") or lib
                continue
            card = re.match(r"^card(\d+)$", key)
            if not card or not isinstance(value, dict):
                continue
            index = integer(card.group(1))
            if index is None:
                continue
            seen = True
            b.get(index)
            for k, v in value.items():
                _apply_key(b, index, k, str(v))
    return seen, driver, lib


def _parse_csv(lines: list[str], b: _Builder) -> tuple[bool, str | None]:
    """``--csv``: a ``device,<column>...`` header, then ``card<N>`` rows (``cardsystem``: system values)."""
    seen = False
    driver = None
    header: list[str] | None = None
    for line in lines:
        stripped = line.strip()
        if stripped.lower().startswith("device,"):
            header = csv_row(stripped)
            continue
        if header is None:
            continue
        m = re.match(r"^card(\d+|system),", stripped)
        if not m:
            header = None  # the table is over
            continue
        row = csv_row(stripped)
        if row is None:
            continue
        seen = True
        values = dict(zip(header[1:], row[1:], strict=False))
        if m.group(1) == "system":
            driver = _clean(values.get("Driver version")) or driver
            continue
        index = integer(m.group(1))
        if index is None:
            continue
        b.get(index)
        for key, value in values.items():
            _apply_key(b, index, key.strip(), value)
    return seen, driver


def parse(text: str) -> RocmSmi:
    text = strip_ansi(text)
    lines = text.splitlines()
    warnings: list[str] = []
    b = _Builder()
    layouts = []
    table = _parse_table(lines, b, warnings)
    if table:
        layouts.append(table)
    if _parse_sections(lines, b):
        layouts.append("sections")
    seen_json, driver, lib = _parse_json(text, b, warnings)
    if seen_json:
        layouts.append("json")
    seen_csv, csv_driver = _parse_csv(lines, b)
    if seen_csv:
        layouts.append("csv")
        driver = driver or csv_driver
    for line in lines:
        m = re.match(r"^\s*Driver version:\s*(\S+)", line)
        if m:
            driver = driver or m.group(1)
        m = re.match(r"^\s*ROCM-SMI-LIB version:\s*(\S+)", line, re.I)
        if m:
            lib = lib or m.group(1)
    if not layouts:
        warnings.append("no rocm-smi table, GPU[N] lines or JSON found")
    devices = b.build()
    if devices and not any(d.name or d.device_id for d in devices):
        warnings.append("no product name or device id for any GPU (add --showproductname to the capture)")
    return RocmSmi(
        devices=devices,
        layouts=tuple(layouts),
        driver_version=driver,
        smi_lib_version=lib,
        warnings=tuple(warnings),
    )


def merge(first: RocmSmi, second: RocmSmi) -> RocmSmi:
    """Plain text and --json of the same machine: fields from ``first`` win, ``second`` fills gaps."""
    by_index = {d.index: d for d in first.devices}
    for d in second.devices:
        base = by_index.get(d.index)
        if base is None:
            by_index[d.index] = d
            continue
        gaps = {k: v for k, v in d.__dict__.items() if getattr(base, k) in (None, ()) and v not in (None, ())}
        by_index[d.index] = replace(base, **gaps)
    return RocmSmi(
        devices=tuple(by_index[i] for i in sorted(by_index)),
        layouts=first.layouts + second.layouts,
        driver_version=first.driver_version or second.driver_version,
        smi_lib_version=first.smi_lib_version or second.smi_lib_version,
        warnings=first.warnings + second.warnings,
    )

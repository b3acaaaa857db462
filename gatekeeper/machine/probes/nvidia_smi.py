"""``nvidia-smi --query-gpu=... --format=csv`` output. Columns are found by the
header (``memory.total [MiB]``: name, then unit), so any field order parses;
``noheader`` output is read in the order of ``QUERY``. Uses the csv module
because product names never contain commas but driver messages may."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gatekeeper.machine.probes import csv_row, number

__all__ = ["QUERY", "NvidiaGpu", "NvidiaSmi", "parse"]

# What ``gatekeeper doctor --capture`` asks for, in this order.
QUERY = (
    "name",
    "driver_version",
    "compute_cap",
    "memory.total",
    "memory.used",
    "temperature.gpu",
    "power.draw",
    "clocks.sm",
)
# nvidia-smi prints some fields under their long name in the header.
_ALIASES = {"clocks.current.sm": "clocks.sm", "gpu_name": "name", "compute_capability": "compute_cap"}
_MISSING = {"", "N/A", "[N/A]", "[Not Supported]", "Not Supported", "[Unknown Error]"}
_HEADER = re.compile(r"^\s*([a-z_.]+)(?:\s*\[([^\]]+)\])?\s*$")


@dataclass(frozen=True)
class NvidiaGpu:
    name: str | None
    driver_version: str | None = None
    compute_cap: str | None = None  # "8.6"
    memory_total_mib: float | None = None
    memory_used_mib: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    sm_clock_mhz: float | None = None
    other: tuple[tuple[str, str], ...] = ()  # fields beyond QUERY, raw


@dataclass(frozen=True)
class NvidiaSmi:
    gpus: tuple[NvidiaGpu, ...] = ()
    columns: tuple[str, ...] = ()
    units: tuple[tuple[str, str], ...] = ()  # (field, unit) from the header
    warnings: tuple[str, ...] = field(default_factory=tuple)


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    m = re.match(r"^\s*(-?\d+(?:\.\d+)?)", value)
    return number(m.group(1)) if m else None


def _header(cells: list[str]) -> tuple[list[str], dict[str, str]] | None:
    names, units = [], {}
    for cell in cells:
        m = _HEADER.match(cell)
        if not m or ("." not in m.group(1) and "_" not in m.group(1) and m.group(1) not in ("name", "index", "uuid")):
            return None
        name = _ALIASES.get(m.group(1), m.group(1))
        names.append(name)
        if m.group(2):
            units[name] = m.group(2)
    return names, units


def parse(text: str) -> NvidiaSmi:
    lines = (csv_row(line, skipinitialspace=True) for line in text.splitlines())
    rows = [r for r in lines if r and any(c.strip() for c in r)]  # a line csv refuses is left out
    warnings: list[str] = []
    columns: list[str] = []
    units: dict[str, str] = {}
    start = 0
    for i, row in enumerate(rows):
        header = _header(row)
        if header:
            columns, units = header
            start = i + 1
            break
    if not columns:
        columns = list(QUERY)
        if rows:
            warnings.append("no header row: read columns in the order of the doctor's query (--format=csv,noheader)")
    gpus = []
    for n, row in enumerate(rows[start:], start + 1):
        if _header(row):
            continue
        if len(row) != len(columns):
            warnings.append(f"row {n}: {len(row)} fields, header has {len(columns)}: {', '.join(row)[:80]!r}")
            if len(row) < 2:
                continue
        cells = {c: (None if v.strip() in _MISSING else v.strip()) for c, v in zip(columns, row, strict=False)}
        gpus.append(
            NvidiaGpu(
                name=cells.get("name"),
                driver_version=cells.get("driver_version"),
                compute_cap=cells.get("compute_cap"),
                memory_total_mib=_number(cells.get("memory.total")),
                memory_used_mib=_number(cells.get("memory.used")),
                temperature_c=_number(cells.get("temperature.gpu")),
                power_w=_number(cells.get("power.draw")),
                sm_clock_mhz=_number(cells.get("clocks.sm")),
                other=tuple((k, v) for k, v in cells.items() if k not in QUERY and v is not None),
            )
        )
    if rows and not gpus:
        warnings.append("header but no GPU rows")
    return NvidiaSmi(tuple(gpus), tuple(columns), tuple(units.items()), tuple(warnings))

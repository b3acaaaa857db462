"""The GPU settings a timing depends on (``gatekeeper.contract.gpu_state``), from rocm-smi or nvidia-smi text.

Which devices: the job's own when it can be told. rocm-smi and nvidia-smi list every GPU of the host, also in
a container that was given only some of them, and another job's settings are not this run's. So:
one device listed: that one; else the indices of ``ROCR_VISIBLE_DEVICES`` then ``HIP_VISIBLE_DEVICES`` (ROCm),
or of ``CUDA_VISIBLE_DEVICES`` with ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (CUDA's default order is not
nvidia-smi's), when they are plain numbers; else every device listed. A setting the chosen devices do not
share is recorded as the list of their values (``"auto on GPU 0, high on GPU 1"``), so it still compares.
Pure: text in, settings out; ``stages.device`` runs the tools."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gatekeeper.machine.probes import nvidia_smi, rocm_smi

__all__ = ["NVIDIA_QUERY", "from_nvidia_smi", "from_rocm_smi", "visible_indices"]

# what ``stages.device`` asks nvidia-smi for (--format=csv: the header names the columns)
NVIDIA_QUERY = (
    "index",
    "power.limit",
    "clocks.applications.graphics",
    "persistence_mode",
    "compute_mode",
    "ecc.mode.current",
    "mig.mode.current",
)
_NVIDIA_KEYS = {
    "power.limit": "gpu_power_cap_w",
    "clocks.applications.graphics": "gpu_app_clock_mhz",
    "persistence_mode": "gpu_persistence_mode",
    "compute_mode": "gpu_compute_mode",
    "ecc.mode.current": "gpu_ecc_mode",
    "mig.mode.current": "gpu_mig_mode",
}
_NUMBERS = frozenset({"gpu_power_cap_w", "gpu_app_clock_mhz"})


def visible_indices(kind: str, environ: Mapping[str, str]) -> tuple[int, ...] | None:
    """The smi indices of the job's devices from the visible-devices variables; None when they do not say."""
    if kind == "rocm":
        chosen: list[int] | None = None
        for name in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):  # HIP's indices count ROCR's devices
            numbers = _numbers(environ.get(name))
            if numbers is None:
                if environ.get(name):
                    return None  # a UUID or another form this cannot map: every device
                continue
            chosen = [chosen[i] for i in numbers if i < len(chosen)] if chosen is not None else numbers
        return tuple(chosen) if chosen is not None else None
    if kind == "cuda" and environ.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID":
        numbers = _numbers(environ.get("CUDA_VISIBLE_DEVICES"))
        return tuple(numbers) if numbers is not None else None
    return None


def _numbers(value: str | None) -> list[int] | None:
    parts = [p.strip() for p in (value or "").split(",") if p.strip()]
    return [int(p) for p in parts] if parts and all(p.isdigit() for p in parts) else None


def from_rocm_smi(text: str, indices: Sequence[int] | None = None) -> dict[str, str | float]:
    """The settings of plain ``rocm-smi`` (any table layout), ``-a`` or ``--json`` output."""
    devices = rocm_smi.parse(text).devices
    rows = [
        (
            d.index,
            {
                "gpu_perf_level": d.perf_level,
                "gpu_power_cap_w": d.power_cap_w,
                "gpu_compute_partition": d.compute_partition,
                "gpu_memory_partition": d.memory_partition,
            },
        )
        for d in devices
    ]
    return _summarise(rows, indices)


def from_nvidia_smi(text: str, indices: Sequence[int] | None = None) -> dict[str, str | float]:
    """The settings of ``nvidia-smi --query-gpu=<NVIDIA_QUERY> --format=csv``."""
    rows = []
    for n, gpu in enumerate(nvidia_smi.parse(text).gpus):
        cells = dict(gpu.other)
        index = int(cells["index"]) if str(cells.get("index", "")).isdigit() else n
        values: dict[str, Any] = {}
        for column, key in _NVIDIA_KEYS.items():
            raw = cells.get(column)
            values[key] = _number(raw) if key in _NUMBERS else raw
        rows.append((index, values))
    return _summarise(rows, indices)


def _number(raw: str | None) -> float | None:
    try:
        return float((raw or "").split()[0])
    except (ValueError, IndexError):
        return None


def _summarise(rows: list[tuple[int, dict[str, Any]]], indices: Sequence[int] | None) -> dict[str, str | float]:
    if len(rows) > 1 and indices is not None:
        wanted = [r for r in rows if r[0] in set(indices)]
        rows = wanted or rows  # indices that name no listed device: every device, never none
    out: dict[str, str | float] = {}
    for key in dict.fromkeys(k for _, values in rows for k in values):
        seen = [(index, values.get(key)) for index, values in rows]
        known = {v for _, v in seen if v is not None}
        if not known:
            continue
        if len(known) == 1 and all(v is not None for _, v in seen):
            out[key] = known.pop()
        else:
            out[key] = ", ".join(f"{'unknown' if v is None else _plain(v)} on GPU {i}" for i, v in seen)
    return out


def _plain(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)

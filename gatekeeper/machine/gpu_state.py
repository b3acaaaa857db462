"""The GPU settings a timing depends on (``gatekeeper.contract.gpu_state``), from rocm-smi or nvidia-smi text.

Which devices: the job's own when it can be told. rocm-smi and nvidia-smi list every GPU of the host, also in
a container that was given only some of them (``--device /dev/dri/renderD128``: sysfs is not namespaced), and
another job's settings are not this run's. So: one device listed: that one; else the PCI bus ids torch gives
for every device the job sees (``bus_ids``), matched with the tool's (``rocm-smi --showbus``, nvidia-smi's
``pci.bus_id``); else the indices of ``ROCR_VISIBLE_DEVICES`` then ``HIP_VISIBLE_DEVICES`` (ROCm), or of
``CUDA_VISIBLE_DEVICES`` with ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (CUDA's default order is not nvidia-smi's),
when they are plain numbers; else every device listed. A bus id or an index the tool does not list means
every device, and the record says so (``DEVICES_KEY``): never a guess. A setting the chosen devices do not
share is recorded as the list of their values (``"auto on GPU 0, high on GPU 1"``), so it still compares.
Pure: text in, settings out; ``stages.device`` runs the tools and asks torch."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from gatekeeper.machine.probes import integer, number, nvidia_smi, rocm_smi

__all__ = [
    "DEVICES_KEY",
    "NVIDIA_QUERY",
    "bus_ids",
    "from_nvidia_smi",
    "from_rocm_smi",
    "normalise_bus_id",
    "nvidia_settings",
    "rocm_settings",
    "visible_indices",
]

# environment.extra's note of which devices the settings are of ("bus 0000:26:00.0", "index 2,3", "every GPU");
# not a setting (not in gatekeeper.contract.gpu_state.GPU_STATE): two runs on other GPUs of the same kind compare
DEVICES_KEY = "gpu_settings_devices"

# what ``stages.device`` asks nvidia-smi for (--format=csv: the header names the columns)
NVIDIA_QUERY = (
    "index",
    "pci.bus_id",
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
_BUS = re.compile(r"(?:([0-9a-f]{1,8}):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})\.([0-7])")

# (smi index, PCI bus id normalised or None, settings)
_Row = tuple[int, str | None, dict[str, Any]]


def bus_ids(props: Sequence[Any]) -> tuple[str, ...] | None:
    """The PCI bus ids ("0000:26:00.0") of the devices torch sees, from ``torch.cuda.get_device_properties``
    (``pci_domain_id``, ``pci_bus_id``, ``pci_device_id``, on CUDA and ROCm builds); None unless every device
    has them (an older torch, no device). torch gives no function number: ``.0``, as torch itself assumes."""
    out = []
    for p in props:
        parts = [getattr(p, name, None) for name in ("pci_domain_id", "pci_bus_id", "pci_device_id")]
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in parts):
            return None
        out.append(f"{parts[0]:04x}:{parts[1]:02x}:{parts[2]:02x}.0")
    return tuple(out) or None


def normalise_bus_id(text: str | None) -> str | None:
    """domain:bus:device.function, lower case, the domain in 4 digits or more: rocm-smi's "0000:26:00.0" and
    nvidia-smi's "00000000:26:00.0" both read "0000:26:00.0"; None for anything else."""
    m = _BUS.fullmatch((text or "").strip().lower())
    if not m:
        return None
    domain, bus, device, function = m.groups()
    return f"{int(domain or '0', 16):04x}:{int(bus, 16):02x}:{int(device, 16):02x}.{function}"


def _slot(bus: str) -> str:
    return bus.rsplit(".", 1)[0]  # domain:bus:device, what torch knows (a partition may sit on .1, .2 ...)


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
    found = [integer(p) for p in (value or "").split(",") if p.strip()]
    return [i for i in found if i is not None] if found and None not in found else None


def rocm_settings(
    text: str,
    indices: Sequence[int] | None = None,
    bus: Sequence[str] | None = None,
    bus_text: str = "",
) -> tuple[dict[str, str | float], str]:
    """(the settings, which devices they are of) from plain ``rocm-smi`` (any table layout), ``-a`` or
    ``--json`` output; ``bus_text`` is ``rocm-smi --showbus`` (or ``-a``) output when ``text`` has no bus ids."""
    parsed = rocm_smi.parse(text)
    if bus_text:
        parsed = rocm_smi.merge(parsed, rocm_smi.parse(bus_text))
    rows: list[_Row] = [
        (
            d.index,
            normalise_bus_id(d.pci_bus),
            {
                "gpu_perf_level": d.perf_level,
                "gpu_power_cap_w": d.power_cap_w,
                "gpu_compute_partition": d.compute_partition,
                "gpu_memory_partition": d.memory_partition,
            },
        )
        for d in parsed.devices
    ]
    return _settings(rows, indices, bus)


def nvidia_settings(
    text: str, indices: Sequence[int] | None = None, bus: Sequence[str] | None = None
) -> tuple[dict[str, str | float], str]:
    """(the settings, which devices they are of) from ``nvidia-smi --query-gpu=<NVIDIA_QUERY> --format=csv``."""
    rows: list[_Row] = []
    for n, gpu in enumerate(nvidia_smi.parse(text).gpus):
        cells = dict(gpu.other)
        listed = integer(cells.get("index"))
        index = n if listed is None else listed
        values: dict[str, Any] = {}
        for column, key in _NVIDIA_KEYS.items():
            raw = cells.get(column)
            values[key] = _number(raw) if key in _NUMBERS else raw
        rows.append((index, normalise_bus_id(cells.get("pci.bus_id")), values))
    return _settings(rows, indices, bus)


def from_rocm_smi(text: str, indices: Sequence[int] | None = None) -> dict[str, str | float]:
    """The settings of plain ``rocm-smi`` (any table layout), ``-a`` or ``--json`` output."""
    return rocm_settings(text, indices)[0]


def from_nvidia_smi(text: str, indices: Sequence[int] | None = None) -> dict[str, str | float]:
    """The settings of ``nvidia-smi --query-gpu=<NVIDIA_QUERY> --format=csv``."""
    return nvidia_settings(text, indices)[0]


def _number(raw: str | None) -> float | None:
    words = (raw or "").split()
    return number(words[0]) if words else None  # "300.00 W"; no NaN, infinity or 1e308


def _settings(
    rows: list[_Row], indices: Sequence[int] | None, bus: Sequence[str] | None
) -> tuple[dict[str, str | float], str]:
    chosen, how = _choose(rows, indices, bus)
    return _summarise([(index, values) for index, _, values in chosen]), how


def _choose(rows: list[_Row], indices: Sequence[int] | None, bus: Sequence[str] | None) -> tuple[list[_Row], str]:
    """The job's rows and how they were told: torch's bus ids, else the variables' indices, else every row."""
    if len(rows) <= 1:
        return rows, "the only GPU listed" if rows else "no GPU listed"
    wanted_bus = [b for b in (normalise_bus_id(x) for x in bus or ()) if b]
    listed = {_slot(b) for _, b, _ in rows if b}
    if wanted_bus and listed:
        missing = [b for b in dict.fromkeys(wanted_bus) if _slot(b) not in listed]
        if missing:  # the tool and torch disagree: every GPU, said, rather than a guess
            return rows, f"every GPU: bus {','.join(missing)} not listed by the tool"
        slots = {_slot(b) for b in wanted_bus}
        return [r for r in rows if r[1] and _slot(r[1]) in slots], "bus " + ",".join(dict.fromkeys(wanted_bus))
    unmapped = " (the tool listed no PCI bus id)" if wanted_bus else ""
    if indices is not None:
        wanted = [r for r in rows if r[0] in set(indices)]
        numbers = ",".join(str(i) for i in indices)
        if not wanted:  # indices that name no listed device: every device, never none
            return rows, f"every GPU: index {numbers} not listed by the tool{unmapped}"
        return wanted, f"index {numbers}{unmapped}"
    return rows, f"every GPU{unmapped}"


def _summarise(rows: list[tuple[int, dict[str, Any]]]) -> dict[str, str | float]:
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

"""The GPU's settings a timing depends on, as a stage report records them (``environment.extra``).

A power cap lowered from 750 W to 550 W, a performance level pinned to ``high`` or left on ``auto``, an
MI300X split into eight CPX devices, ECC switched off: each moves the timings as much as a regression does,
and none of them is the code's. A stage records them when its job starts (``stages.device``); a baseline
whose recorded settings differ from this run's is not comparable (``gatekeeper.history.comparability``),
and ``gatekeeper history changes`` names a setting that changed at a change point beside the software stack.

The keys are ``GPU_STATE``'s, each optional: a CPU run, a missing tool, or a field the tool does not report
records none."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["GPU_STATE", "describe", "differences", "state_of", "text"]

# (key in environment.extra, what a person calls it, unit appended to a number)
GPU_STATE: tuple[tuple[str, str, str], ...] = (
    ("gpu_perf_level", "GPU performance level", ""),  # rocm-smi "Perf": auto, high, manual, determinism...
    ("gpu_power_cap_w", "GPU power cap", " W"),  # rocm-smi "PwrCap", nvidia-smi power.limit
    ("gpu_compute_partition", "GPU compute partition", ""),  # MI300: SPX, DPX, QPX, CPX
    ("gpu_memory_partition", "GPU memory partition", ""),  # MI300: NPS1, NPS4
    ("gpu_app_clock_mhz", "GPU application clock", " MHz"),  # nvidia-smi clocks.applications.graphics
    ("gpu_persistence_mode", "GPU persistence mode", ""),  # nvidia-smi: Enabled, Disabled
    ("gpu_compute_mode", "GPU compute mode", ""),  # nvidia-smi: Default, Exclusive_Process
    ("gpu_ecc_mode", "GPU ECC mode", ""),  # nvidia-smi: Enabled, Disabled
    ("gpu_mig_mode", "GPU MIG mode", ""),  # nvidia-smi: Enabled, Disabled
)
_KEYS = frozenset(key for key, _, _ in GPU_STATE)
_LABELS = {key: (label, unit) for key, label, unit in GPU_STATE}


def state_of(extra: Mapping[str, Any] | None) -> dict[str, str | float | bool]:
    """The GPU settings an ``environment.extra`` records (the keys above that have a value)."""
    if not isinstance(extra, Mapping):
        return {}
    return {k: v for k, v in extra.items() if k in _KEYS and isinstance(v, (str, int, float, bool)) and v != ""}


def text(key: str, value: Any) -> str:
    """One setting in words: ``750 W``, ``auto``."""
    unit = _LABELS.get(key, ("", ""))[1]
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value}{unit}"


def describe(extra: Mapping[str, Any] | None) -> str:
    """The recorded settings in words, in ``GPU_STATE`` order: "GPU performance level auto, GPU power cap 750 W"."""
    state = state_of(extra)
    return ", ".join(f"{label} {text(key, state[key])}" for key, label, _ in GPU_STATE if key in state)


def differences(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> list[tuple[str, str, str]]:
    """(label, before, after) for each setting both sides recorded and that differs, in ``GPU_STATE`` order.

    A setting only one side recorded (a record from before gatekeeper kept it, a tool that did not report it)
    is not a difference: nothing is known to have changed."""
    a, b = state_of(before), state_of(after)
    return [
        (label, text(key, a[key]), text(key, b[key]))
        for key, label, _ in GPU_STATE
        if key in a and key in b and a[key] != b[key]
    ]

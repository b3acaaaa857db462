"""Sweeps: ``--sweep KEY=V1,V2,...`` axes, their points, and each point's timing-child config.

Keys: ``batch_size`` (positive integers), ``input_shape`` (a resolution, ``224``, which
replaces the height and width of the model's image input, or a full per-sample shape
``3x224x224``), ``dtype`` (float32, float16, bfloat16, int8 = dynamic quantization of
the Linear layers) and ``mode`` (forward, train). Points are the product of the axes, in
the order given, so a budget that runs out cuts the last values (put the costly ones last).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gatekeeper.core.errors import InputError

__all__ = ["DTYPES", "KEYS", "MODES", "Axis", "child_config", "parse_sweep", "points", "unsupported"]

DTYPES = ("float32", "float16", "bfloat16", "int8")
MODES = ("forward", "train")
KEYS = ("batch_size", "dtype", "input_shape", "mode")
_SHAPE = re.compile(r"^\d+(?:x\d+)*$")


@dataclass(frozen=True)
class Axis:
    key: str
    values: tuple[str, ...]


def parse_sweep(specs: Sequence[str]) -> tuple[Axis, ...]:
    """The axes of ``--sweep`` arguments; one clear InputError per mistake."""
    axes: list[Axis] = []
    for spec in specs:
        key, sep, rest = spec.partition("=")
        key = key.strip()
        if not sep or not rest.strip():
            raise InputError(None, "--sweep", f"{spec!r} is not KEY=V1,V2,...", "e.g. --sweep batch_size=1,8,64")
        if key not in KEYS:
            raise InputError(None, "--sweep", f"unknown key {key!r} in {spec!r}", f"use one of: {', '.join(KEYS)}")
        if any(a.key == key for a in axes):
            raise InputError(None, "--sweep", f"{key} is swept twice", f"give all its values once: --sweep {key}=A,B")
        values = tuple(_normalise(key, v.strip(), spec) for v in rest.split(","))
        if len(set(values)) != len(values):
            raise InputError(None, "--sweep", f"{spec!r} repeats a value", "list each value once")
        axes.append(Axis(key, values))
    return tuple(axes)


def _normalise(key: str, value: str, spec: str) -> str:
    bad = f"{value!r} in {spec!r}"
    if key == "batch_size":
        if not value.isdigit() or int(value) < 1:
            raise InputError(None, "--sweep", f"batch_size {bad} is not a positive integer", "e.g. batch_size=1,8,64")
        return str(int(value))
    if key == "dtype":
        if value not in DTYPES:
            raise InputError(None, "--sweep", f"dtype {bad} is not supported", f"use: {', '.join(DTYPES)}")
        return value
    if key == "mode":
        if value not in MODES:
            raise InputError(None, "--sweep", f"mode {bad} is not a mode", f"use: {', '.join(MODES)}")
        return value
    shape = value.lower().replace(",", "x")
    if not _SHAPE.match(shape) or any(int(d) < 1 for d in shape.split("x")):
        raise InputError(
            None, "--sweep", f"input_shape {bad} is neither a resolution nor a shape", "e.g. 224,512 or 3x224x224"
        )
    return "x".join(str(int(d)) for d in shape.split("x"))


def points(axes: Sequence[Axis]) -> list[dict[str, str]]:
    """Every combination, first axis slowest."""
    return [
        dict(zip([a.key for a in axes], combo, strict=True)) for combo in itertools.product(*(a.values for a in axes))
    ]


def child_config(base: Mapping[str, Any], point: Mapping[str, str]) -> dict[str, Any]:
    """The timing child's config for ``point`` (what it does not name stays as in ``base``)."""
    cfg = dict(base)
    if "batch_size" in point:
        cfg["batch_size"] = int(point["batch_size"])
    if "dtype" in point:
        cfg["dtype"] = point["dtype"]
    if "mode" in point:
        cfg["backward"] = point["mode"] == "train"
    shape = point.get("input_shape")
    if shape is not None and "x" in shape:
        cfg["input_shape"] = shape.replace("x", ",")
    elif shape is not None:
        cfg["resolution"] = int(shape)
    return cfg


def unsupported(cfg: Mapping[str, Any], device_kind: str) -> str | None:
    """Why the device cannot run this point at all, decided before any process starts (None: try it)."""
    if cfg.get("dtype") == "int8":
        if device_kind != "cpu":
            return (
                f"int8: dynamic quantization (torch.ao.quantization.quantize_dynamic) has CPU kernels only; "
                f"this device is {device_kind}"
            )
        if cfg.get("backward"):
            return "int8: dynamically quantized layers are inference-only (no backward), so mode=train has no int8"
    return None

"""Metric names of a sweep point, ``latency_ms[batch_size=4,dtype=bfloat16]``, and the ``[*]`` pattern.

A point is a set of ``key=value`` pairs written with the keys sorted, so one point
has exactly one name. A statistic goes after the point (``latency_ms[batch_size=4].p99``),
as it goes after a plain metric. A gate on ``latency_ms[*]`` applies to every point
(``gatekeeper.evaluate.point_gates`` expands it). Stages write these names; the gatekeeper reads them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

__all__ = [
    "PATTERN",
    "SKIPPED",
    "is_pattern",
    "pattern_error",
    "point_label",
    "point_name",
    "points_of",
    "sort_key",
    "split_point",
]

PATTERN = "[*]"
# A point the stage could not measure is still written: value None, description "skipped: <why>",
# so a gate on it says why instead of "no such metric".
SKIPPED = "skipped: "
_KEY = re.compile(r"^[a-z][a-z0-9_]*$")
_VALUE = re.compile(r"^[A-Za-z0-9_.+-]+$")  # no ',', '=', '[' or ']': they delimit the point
_NAME = re.compile(r"^(?P<base>[^\[\]]+)\[(?P<point>[^\[\]]*)\](?P<suffix>(?:\.[A-Za-z0-9_]+)*)$")


def point_label(point: Mapping[str, object]) -> str:
    """``[k1=v1,k2=v2]`` with the keys sorted; "" for no point. Raises ValueError on a key or value
    that could not be read back."""
    if not point:
        return ""
    parts = []
    for key in sorted(point):
        value = str(point[key])
        if not _KEY.fullmatch(key):
            raise ValueError(f"point key {key!r}: use lowercase letters, digits and _")
        if not _VALUE.fullmatch(value):
            raise ValueError(f"point value {value!r} of {key}: use letters, digits and . _ + - only")
        parts.append(f"{key}={value}")
    return "[" + ",".join(parts) + "]"


def point_name(base: str, point: Mapping[str, object], suffix: str = "") -> str:
    """``latency_ms`` + {dtype: bfloat16, batch_size: 4} -> ``latency_ms[batch_size=4,dtype=bfloat16]``."""
    return f"{base}{point_label(point)}{suffix}"


def split_point(name: str) -> tuple[str, dict[str, str], str] | None:
    """(base, point, suffix) of a point metric name (suffix: ``.p99`` or ""); None for a plain name."""
    m = _NAME.fullmatch(name)
    if not m:
        return None
    point: dict[str, str] = {}
    for part in m.group("point").split(","):
        key, sep, value = part.partition("=")
        if not sep or not _KEY.fullmatch(key) or not _VALUE.fullmatch(value) or key in point:
            return None
        point[key] = value
    return m.group("base"), point, m.group("suffix")


def is_pattern(metric: str) -> bool:
    return PATTERN in metric


def pattern_error(metric: str) -> str | None:
    """Why ``metric`` is not a usable name or pattern (None when it is)."""
    if "[" not in metric and "]" not in metric:
        return None
    if is_pattern(metric):
        head, _, tail = metric.partition(PATTERN)
        if "[" in head or "]" in head or "[" in tail or "]" in tail or not head.rstrip(".") or head.endswith("."):
            return f"{metric!r}: write [*] once, right after the metric name (e.g. latency_ms[*] or latency_ms[*].p99)"
        if tail and not re.fullmatch(r"(?:\.[A-Za-z0-9_]+)+", tail):
            return f"{metric!r}: only a .statistic may follow [*] (e.g. latency_ms[*].p99)"
        return None
    if split_point(metric.partition(".")[2] or metric) is None:
        return f"{metric!r} is neither a point name (metric[key=value,...]) nor a pattern (metric[*])"
    return None


def points_of(pattern: str, names: Iterable[str]) -> list[tuple[str, str]]:
    """(concrete name, point label) for every point of ``pattern`` (``latency_ms[*].p99``) among ``names``,
    sorted by point (numbers as numbers). Stage prefixes are the caller's business."""
    head, _, tail = pattern.partition(PATTERN)
    found: dict[str, dict[str, str]] = {}
    for name in names:
        parts = split_point(name)
        if parts is None:
            continue
        base, point, suffix = parts
        if base == head and suffix in ("", tail):
            found[point_label(point)] = point
    ordered = sorted(found.items(), key=lambda item: sort_key(item[1]))
    return [(f"{head}{label}{tail}", label) for label, _ in ordered]


def sort_key(point: Mapping[str, str]) -> tuple[tuple[str, int, float, str], ...]:
    """Points in natural order: by key, numbers by value (2 before 16), then text."""
    out = []
    for key in sorted(point):
        value = point[key]
        try:
            out.append((key, 0, float(value), ""))
        except ValueError:
            out.append((key, 1, 0.0, value))
    return tuple(out)

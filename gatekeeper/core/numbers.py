"""The one bounded number reader: every number gatekeeper reads from JSON, YAML or a history store.

Artifacts, verdicts, state files, capture files, gates files and stored history rows are written by
code gatekeeper does not control (see docs/security.md). Python reads any JSON integer (a 400-digit
one too) and any float spelling (``NaN``, ``Infinity``, ``1e999`` as infinity); arithmetic on them
then raises (``float(10**400)`` is an OverflowError) or silently poisons a statistic. So every
number read is checked here, once, before anything computes with it:

    a number is accepted when it is finite and in the 64-bit integer range
    [-2**63, 2**63) (about +-9.2e18), floats included.

Why that range: every count, byte size, duration and measurement gatekeeper writes fits in it
(a nanosecond clock reaches 2**63 in the year 2262; the kernel-cache snapshot keeps nanosecond
times), sqlite's INTEGER holds it, and the squares and products the statistics take of such numbers
stay finite in float64. Outside it: InputError (exit 2) naming the file and the field. Booleans are
not numbers here, and strings are never parsed as numbers except through ``parse_number``.

What gatekeeper writes never leaves the range: ``files.write_json`` writes a non-finite float as
``null`` (JSON has no NaN), so nothing it wrote is refused when it reads it back.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gatekeeper.core.errors import InputError

__all__ = ["HINT", "MAX", "MIN", "check_tree", "dotted", "finite_or_none", "parse_number", "problem"]

MIN = -(2**63)
MAX = 2**63  # exclusive
HINT = "every number is finite and within +-9.2e18 (the 64-bit integer range); rewrite the file with its own tool"


def problem(value: Any) -> str | None:
    """Why ``value`` (a number read from an input) is refused, or None when it is in range (or not a number)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float):
        if math.isnan(value):
            return "is NaN (not a finite number)"
        if math.isinf(value):
            return f"is {'-' if value < 0 else ''}Infinity (not a finite number)"
        if MIN <= value < MAX:
            return None
        return f"is {value:.3g}, outside the accepted range +-9.2e18"
    if MIN <= value < MAX:
        return None
    # never str(value) in full: a 400-digit integer would flood the error line (and 5,000 digits cannot be printed)
    digits = value.bit_length() * 0.30103
    return f"is an integer of about {digits:.0f} digits, outside the accepted range +-9.2e18"


def dotted(keys: Sequence[str | int]) -> str:
    """``metrics.latency_ms.samples[3]``: a key path as errors name it."""
    out = ""
    for key in keys:
        name = str(key) if len(str(key)) <= 80 else str(key)[:77] + "..."
        out += f"[{key}]" if isinstance(key, int) else (f".{name}" if out else name)
    return out or "(top level)"


def check_tree(
    doc: Any,
    path: str | Path | None,
    *,
    hint: str = HINT,
    position: Callable[[Sequence[str | int]], str] | None = None,
) -> None:
    """Raise InputError at the first number in ``doc`` (parsed JSON or YAML) that ``problem`` refuses.

    The problem names the key path (``gates[0].value``); the place is that path, or ``position(keys)``
    (a YAML file's line:column). Iterative, so a deeply nested document costs no recursion, and linear
    in the number of values.
    """
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(doc, ())]
    while stack:
        node, keys = stack.pop()
        if isinstance(node, Mapping):
            stack.extend((v, (*keys, str(k))) for k, v in reversed(list(node.items())))
        elif isinstance(node, list | tuple):
            stack.extend((v, (*keys, i)) for i, v in reversed(list(enumerate(node))))
        else:
            why = problem(node)
            if why:
                field = dotted(keys)
                raise InputError(path, position(keys) if position else field, f"{field} {why}", hint)


def parse_number(text: str) -> float:
    """A number written as text (a gate rule's threshold), bounded like every other; ValueError otherwise."""
    value = float(text)
    why = problem(value)
    if why:
        raise ValueError(f"{text.strip()[:40]!r} {why}")
    return value


def finite_or_none(obj: Any) -> Any:
    """A JSON-like value with every non-finite float as None (what ``files.write_json`` writes: JSON has no NaN)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {k: finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite_or_none(v) for v in obj]
    return obj

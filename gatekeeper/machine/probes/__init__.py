"""Parsers of real tool output: text in, frozen typed records out.

Each ``parse(text)`` is pure and never raises on odd input: outputs vary
across ROCm releases and are often truncated or interleaved with warnings, so
a parser keeps what it could read and lists what it could not in ``warnings``.
Running the tools is ``gatekeeper.machine.snapshot``'s job, not theirs.

Every number a parser takes from the text goes through ``integer`` or ``number``: the text is a capture
someone pasted (``doctor --from``) or the output of a tool found on the job's PATH, so a 5,000-digit index
(``int()`` raises past 4,300 digits), a 400-digit power cap (``float()`` gives infinity, which ``int()``
then refuses) or ``nan`` is no value, never an exception.
"""

from __future__ import annotations

import csv

from gatekeeper.core import numbers

__all__ = [
    "MAX_DIGITS",
    "amd_smi",
    "collect_env",
    "csv_row",
    "integer",
    "kfd_topology",
    "lspci",
    "number",
    "nvidia_smi",
    "pcie",
    "rocm_smi",
    "rocminfo",
    "versions",
]

MAX_DIGITS = 18  # a whole number of at most 18 digits fits the 64-bit range every reader accepts


def integer(text: str | None) -> int | None:
    """The whole number ``text`` is (digits, surrounding blanks allowed), or None: a longer run of digits
    than ``MAX_DIGITS`` is no count, index or size a tool prints."""
    digits = (text or "").strip()
    if not digits or len(digits) > MAX_DIGITS or not digits.isdecimal():
        return None
    return int(digits)


def number(text: str | None) -> float | None:
    """The number ``text`` is, or None unless it is finite and in the range every reader accepts
    (``gatekeeper.core.numbers``): no NaN, no infinity, no 1e308."""
    try:
        value = float((text or "").strip())
    except ValueError:
        return None
    return None if numbers.problem(value) else value


def csv_row(line: str, *, skipinitialspace: bool = False) -> list[str] | None:
    """One line of a tool's CSV as its cells, or None when ``csv`` refuses it (a cell over its 128 KiB field
    limit raises ``csv.Error``, which no parser caught: ``doctor --from`` exit 70)."""
    try:
        return next(csv.reader([line], skipinitialspace=skipinitialspace), [])
    except csv.Error:
        return None

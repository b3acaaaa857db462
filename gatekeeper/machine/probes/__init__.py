"""Parsers of real tool output: text in, frozen typed records out.

Each ``parse(text)`` is pure and never raises on odd input: outputs vary
across ROCm releases and are often truncated or interleaved with warnings, so
a parser keeps what it could read and lists what it could not in ``warnings``.
Running the tools is ``gatekeeper.machine.snapshot``'s job, not theirs.
"""

from __future__ import annotations

__all__ = [
    "amd_smi",
    "collect_env",
    "kfd_topology",
    "lspci",
    "nvidia_smi",
    "pcie",
    "rocm_smi",
    "rocminfo",
    "versions",
]

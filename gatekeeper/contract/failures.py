"""The failure taxonomy, and how a stage declares the category of each check and metric it writes.

The categories are part of the output format of ``gatekeeper analyze`` (analysis.json) and of the
stage artifacts: a stage writes the category of every failed check and of every metric, taken from
the check and metric kinds it declares beside its checks (``CHECKS`` and ``METRICS`` in each stage
module). The stage framework refuses to record a check or a metric that matches no declared kind,
so a new check cannot be added without its category; ``tests/analyze/test_failure_registry.py``
walks every declared kind and every default gate.

``analyze`` reads the categories from the artifacts (it never imports the stages), so a diagnosis
comes from what the checks measured, not from the wording of a log line.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "CATEGORIES",
    "CATEGORY_MEANING",
    "CONFIG_CHECK",
    "CONFIG_FIX",
    "CheckKind",
    "MetricKind",
    "UndeclaredName",
    "crash_category",
    "find_kind",
]

# category -> what it means (docs/failure_analysis.md shows the same table)
CATEGORY_MEANING: dict[str, str] = {
    "no_binary_for_gpu": "the build has no code for this GPU's architecture",
    "device_oom": "GPU memory exhausted",
    "gpu_hang_or_timeout": "a kernel or a check never finished: the driver declared a hang, or a timeout ran out",
    "illegal_memory_access": "a kernel touched memory it does not own",
    "device_not_available": "the process cannot open or use a GPU where one is required",
    "miopen_error": "MIOpen failed to build, find or load a kernel or its databases",
    "collective_comm_error": "an RCCL/NCCL/gloo collective failed, deadlocked or timed out",
    "library_mismatch": "libraries (or the wheel and the driver) do not fit together",
    "compile_error": "building native code, torch.compile, an ONNX export or an extension failed",
    "numerical_mismatch": "results differ from the reference beyond tolerance, or NaN/Inf",
    "segfault": "a native crash (a signal) with no earlier cause",
    "infra_error": "the runner, not the code: disk full, network, runner failure, killed by the CI",
    "performance_regression": "a latency, throughput, memory or bandwidth gate regressed against its rule or baseline",
    "configuration_error": "the pipeline is set up wrong: a model that does not import, an invalid gates file, "
    "a component/version mismatch, a missing stage artifact",
    "unknown": "nothing decisive was found",
}
CATEGORIES: tuple[str, ...] = tuple(CATEGORY_MEANING)

# The check every stage records when it refused its configuration (a model that does not import,
# an option it rejects) and did no work: a configuration error no log line can explain better.
CONFIG_CHECK = "stage.config"
CONFIG_FIX = "fix the option or the model named in the message (the stage did no work)"


class UndeclaredName(LookupError):
    """A stage recorded a check or a metric that none of its declared kinds covers (a gatekeeper bug)."""


@dataclass(frozen=True)
class CheckKind:
    """A family of checks (``pattern``: a glob over check names) and what its failure means.

    ``category`` is the failure category when the check fails its own assertion or raises;
    a check that ran past its timeout is ``on_timeout``; a worker killed by a signal is
    categorised by the signal and the message (``crash_category``). ``fix`` is the first thing
    to try; ``what`` says in one line what the check verifies.
    """

    pattern: str
    category: str
    what: str
    fix: str
    on_timeout: str = "gpu_hang_or_timeout"

    def __post_init__(self) -> None:
        for value in (self.category, self.on_timeout):
            if value not in CATEGORIES or value == "unknown":
                raise ValueError(f"check kind {self.pattern!r}: {value!r} is not a failure category")
        if not self.what or not self.fix:
            raise ValueError(f"check kind {self.pattern!r}: say what it checks and what to do when it fails")

    def matches(self, name: str) -> bool:
        return fnmatch.fnmatchcase(name, self.pattern)


@dataclass(frozen=True)
class MetricKind:
    """A family of metrics (``pattern``: a glob over metric names) and the category of a gate failing on it."""

    pattern: str
    category: str
    what: str

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES or self.category == "unknown":
            raise ValueError(f"metric kind {self.pattern!r}: {self.category!r} is not a failure category")

    def matches(self, name: str) -> bool:
        return fnmatch.fnmatchcase(name, self.pattern)


def find_kind(name: str, kinds: Iterable[CheckKind | MetricKind]) -> CheckKind | MetricKind | None:
    """The first declared kind whose pattern covers ``name``."""
    return next((k for k in kinds if k.matches(name)), None)


_ILLEGAL_ACCESS = re.compile(
    r"(?i)illegal memory access|memory access fault|page fault|misaligned address|VM_L2_PROTECTION_FAULT"
)
_HOST_KILL = re.compile(r"\bSIGKILL\b|\bsignal 9\b")


def crash_category(message: str) -> str:
    """The category of a process that died: a GPU memory fault, a kill by the host, else a native crash."""
    if _ILLEGAL_ACCESS.search(message):
        return "illegal_memory_access"
    if _HOST_KILL.search(message):
        return "infra_error"  # the OOM killer or the runner took the process: the host, not the code
    return "segfault"

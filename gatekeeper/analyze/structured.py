"""The diagnosis from the artifacts: what the checks and the gates measured, before any log text.

Every failed check carries the category its kind declares (``gatekeeper.contract.failures``;
a timeout or a crash its own), every metric the category of a gate failing on it. A blocking
gate's category is its metric's; a gate counting a stage's failed checks takes theirs; a gate
whose stage wrote no artifact is a configuration error. The root cause is the first category
in ``ORDER`` among the findings; within it a failed check (it has the numbers) is named before
the gate it blocked.

A log signature refines the artifacts' category only when it names a more specific cause the
category allows (``REFINERS``: a ``hipErrorNoBinaryForGpu`` behind a failed smoke kernel, a GPU
memory fault behind a crashed worker) and its priority is above the category's threshold. A
configuration error the stage reported itself (``stage.config``) and a performance regression
are never refined: the artifacts say exactly what happened.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gatekeeper.contract.failures import CATEGORY_MEANING, CONFIG_CHECK, CONFIG_FIX
from gatekeeper.contract.stage_names import STAGE_NAMES
from gatekeeper.contract.stage_report import Check, StageReport
from gatekeeper.contract.verdict import GateResult, Verdict

__all__ = ["ORDER", "REFINERS", "Finding", "blocking_lines", "findings", "gate_category", "may_refine", "root"]

# The root cause first: a pipeline that did not run as set up, then the device and the stack,
# then device faults, crashes, communication, builds, numbers, speed.
ORDER = (
    "configuration_error",
    "device_not_available",
    "no_binary_for_gpu",
    "library_mismatch",
    "infra_error",
    "illegal_memory_access",
    "device_oom",
    "gpu_hang_or_timeout",
    "collective_comm_error",
    "segfault",
    "miopen_error",
    "compile_error",
    "numerical_mismatch",
    "performance_regression",
)

_DEVICE = frozenset(
    {"no_binary_for_gpu", "illegal_memory_access", "device_oom", "miopen_error", "library_mismatch",
     "device_not_available"}
)  # fmt: skip
# artifacts' category -> (log categories that may refine it, the priority a signature must exceed)
REFINERS: dict[str, tuple[frozenset[str], int]] = {
    "numerical_mismatch": (_DEVICE | {"gpu_hang_or_timeout"}, 70),
    "segfault": (_DEVICE | {"gpu_hang_or_timeout", "collective_comm_error", "infra_error"}, 30),
    "gpu_hang_or_timeout": (_DEVICE | {"gpu_hang_or_timeout", "collective_comm_error"}, 64),
    "collective_comm_error": (
        frozenset(
            {"device_not_available", "gpu_hang_or_timeout", "illegal_memory_access", "device_oom", "infra_error"}
        ),
        70,
    ),
    "compile_error": (frozenset({"library_mismatch", "no_binary_for_gpu", "device_oom", "infra_error"}), 50),
    "illegal_memory_access": (frozenset({"no_binary_for_gpu"}), 83),
    "device_oom": (frozenset({"infra_error"}), 95),
    "miopen_error": (_DEVICE | {"infra_error"}, 78),
    "library_mismatch": (frozenset({"infra_error"}), 95),
    "device_not_available": (frozenset({"infra_error"}), 95),
    "no_binary_for_gpu": (frozenset({"infra_error"}), 95),
    "infra_error": (frozenset({"infra_error"}), 95),
    # a check that could not run the model (a timing process, the capture): the stack may be why
    "configuration_error": (_DEVICE | {"infra_error", "gpu_hang_or_timeout", "segfault"}, 60),
    "performance_regression": (frozenset(), 1000),
}
_HARD: tuple[frozenset[str], int] = (frozenset(), 1000)  # never refined

# Gates that read no stage metric: the built-in one evaluate adds (decide._device_required).
_BUILT_IN = {"environment.device_kind": "device_not_available"}

# The first things to try per category, after the failing check's own fix.
CATEGORY_STEPS: dict[str, tuple[str, ...]] = {
    "configuration_error": (
        "Fix the setting named above; the run did not test the model, so no other result of it counts.",
    ),
    "device_not_available": (
        "Run the job on a runner that has the GPU (the component's gpu_tags input), with /dev/kfd and /dev/dri "
        "(ROCm) or the NVIDIA driver passed into the container; set device_required: false only for a CPU job.",
    ),
    "no_binary_for_gpu": (
        "Use a torch build that carries this GPU's architecture ({gfx_arch}); gatekeeper doctor shows the archs "
        "of the installed torch.",
    ),
    "library_mismatch": (
        "Install versions that fit together: torch {torch_version} with the ROCm/CUDA it was built for.",
    ),
    "infra_error": ("Retry the job; if it fails the same way, check the runner.",),
    "illegal_memory_access": (
        "Rerun the failing check alone with AMD_SERIALIZE_KERNEL=3 (HIP) or CUDA_LAUNCH_BLOCKING=1 to find the kernel.",
    ),
    "device_oom": ("Lower the batch size or free device memory (other processes on the GPU).",),
    "gpu_hang_or_timeout": (
        "Rerun the check alone with a longer --check-timeout: a check that finishes slowly is a performance problem, "
        "one that never finishes a hang (dmesg on the runner shows GPU resets).",
    ),
    "collective_comm_error": ("Rerun with NCCL_DEBUG=INFO (RCCL reads it too) and read the first rank that failed.",),
    "segfault": (
        "Rerun the check alone under gdb or with faulthandler (python -X faulthandler) to get the native stack.",
    ),
    "miopen_error": ("Clear the MIOpen user database (MIOPEN_USER_DB_PATH) and rerun.",),
    "compile_error": ("Read the compiler's first error in the stage log; the message above names the step.",),
    "numerical_mismatch": (
        "Check whether the baseline's run on the same device passed this check: what changed between the two runs "
        "(torch, the ROCm/CUDA libraries, the model) is the first suspect.",
    ),
    "performance_regression": (
        "Run gatekeeper ab --base <the baseline's commit> to confirm the regression on one device, then bisect "
        "the commits between the baseline and this run.",
    ),
}


@dataclass(frozen=True)
class Finding:
    """One failure the artifacts report: a failed check or a blocking gate, with its category."""

    source: str  # "check" or "gate"
    stage: str
    name: str
    category: str
    status: str
    message: str
    fix: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)
    gate: GateResult | None = None
    hard: bool = False  # reported by the stage itself as its configuration: no log refines it

    @property
    def label(self) -> str:
        return f"{self.stage}/{self.name}" if self.source == "check" else f"gate {self.name}"

    def numbers(self) -> str:
        """The check's or the gate's own numbers, in one sentence."""
        if self.gate is not None:
            return gate_numbers(self.gate)
        return check_numbers(self.message, self.details)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source, "stage": self.stage, "name": self.name,
                               "category": self.category, "status": self.status, "message": self.message}  # fmt: skip
        if self.fix:
            out["fix"] = self.fix
        if self.gate is not None:
            g = self.gate
            out.update(metric=g.metric, value=g.value, unit=g.unit, baseline_value=g.baseline_value,
                       change=g.change, rule=g.rule)  # fmt: skip
            if g.comparison and g.comparison.get("ci"):
                out["interval"] = list(g.comparison["ci"])
        elif self.details.get("drift"):
            out["drift"] = dict(self.details["drift"])
        return out


def check_numbers(message: str, details: Mapping[str, Any]) -> str:
    first = message.strip().splitlines()[0] if message.strip() else ""
    drift = details.get("drift")
    if isinstance(drift, Mapping) and drift.get("op"):
        shape = drift.get("shape")
        return (
            f"{drift.get('op')} in {drift.get('dtype', '?')}"
            + (f" at shape {list(shape)}" if isinstance(shape, list) else "")
            + f": relative error {_num(drift.get('error'))} against the tolerance {_num(drift.get('tolerance'))}"
            + f" ({first})"
        )
    return first


def gate_numbers(g: GateResult) -> str:
    if g.value is None:
        return g.reason
    unit = f" {g.unit}" if g.unit and g.unit not in _UNITLESS else ""
    text = f"{g.metric} = {_num(g.value)}{unit}"
    if g.baseline_value is not None:
        text += f" against the baseline's {_num(g.baseline_value)}{unit}"
        if g.change is not None:
            text += f" ({g.change:+.1%}"
            ci = (g.comparison or {}).get("ci")
            if isinstance(ci, list | tuple) and len(ci) == 2 and all(isinstance(x, int | float) for x in ci):
                text += f", 95% interval {ci[0] - 1:+.1%} to {ci[1] - 1:+.1%}"
            p = (g.comparison or {}).get("p_value")
            if isinstance(p, int | float):
                text += f", p={p:.2g}"
            text += ")"
    return text + f"; the rule is {g.rule}" if g.rule else text


_UNITLESS = frozenset({"ratio", "bool", "count", "checks", "abs"})


def _num(x: Any) -> str:
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(float(x)):
        return str(x)
    return f"{x:.4g}"


def findings(
    reports: Mapping[str, StageReport], verdict: Verdict | None, artifacts: Path | None = None
) -> list[Finding]:
    """Every failed check with a category, and every blocking gate, ordered root cause first."""
    out: list[Finding] = list(stopped_stages(artifacts, reports)) if artifacts is not None else []
    for report in sorted(reports.values(), key=lambda r: STAGE_NAMES.index(r.stage) if r.stage in STAGE_NAMES else 99):
        for c in report.checks:
            if c.status in ("failed", "error") and c.category in ORDER:
                out.append(_check_finding(report.stage, c))
    if verdict is not None:
        for g in verdict.blocking_gates:
            category = gate_category(g, reports)
            if category is not None:
                stage = g.metric.partition(".")[0]
                out.append(
                    Finding("gate", stage, g.name, category, "blocked", g.reason, gate=g, hard=_hard_gate(g, reports))
                )
    # root cause first; within a category a check (it has the numbers), then a gate on a stage's metric,
    # then the built-in gate
    return sorted(out, key=lambda f: (ORDER.index(f.category), f.source != "check", _built_in(f)))


def _built_in(f: Finding) -> bool:
    return f.gate is not None and f.gate.metric in _BUILT_IN


_LOG_TAIL = 64 * 1024  # the refusal is the log's last line: only its end is read


def stopped_stages(artifacts: Path, reports: Mapping[str, StageReport]) -> list[Finding]:
    """Stages that left a log but no ``<stage>.json``: one that refused its configuration (exit 2) logs the
    refusal as its last ``gatekeeper: `` line (stages/_stage.py). That line is the finding; a log that ends
    otherwise (a process killed) is left to the log signatures."""
    from gatekeeper.core.budgets import open_regular

    found = []
    for stage in STAGE_NAMES:
        log = artifacts / f"{stage}.log"
        if stage in reports or not log.is_file():
            continue
        with open_regular(log, what="stage log") as fh:  # never a FIFO
            size = fh.seek(0, 2)
            fh.seek(max(0, size - _LOG_TAIL))
            tail = fh.read(_LOG_TAIL).decode("utf-8", errors="replace")
        lines = [ln for ln in tail.splitlines() if ln.strip()]
        if lines and lines[-1].startswith("gatekeeper: "):  # the refusal is appended last, after the stage ended
            message = lines[-1][len("gatekeeper: ") :][:2000]
            found.append(
                Finding("check", stage, CONFIG_CHECK, "configuration_error", "error", message, CONFIG_FIX, hard=True)
            )
    return found


def _check_finding(stage: str, c: Check) -> Finding:
    return Finding(
        "check",
        stage,
        c.name,
        c.category or "",
        c.status,
        c.message,
        c.fix,
        dict(c.details),
        hard=c.name == CONFIG_CHECK,
    )


def _hard_gate(g: GateResult, reports: Mapping[str, StageReport]) -> bool:
    stage = g.metric.partition(".")[0]
    return stage in STAGE_NAMES and stage not in reports


def blocking_lines(verdict: Verdict, artifacts: Path) -> list[str]:
    """One line per blocking gate with its failure category, so that the job log alone names the cause
    (``gatekeeper analyze`` reads it: the gatekeeper-failed-* signatures of analyze/known_issues.yaml). The
    category is the one the diagnosis takes from the artifacts (``gate_category``); the artifacts are read
    again only for a blocked verdict. A ``junit:`` gate has none: the failed tests' own lines say more."""
    if not verdict.blocking_gates:
        return []
    from gatekeeper.contract.stage_report import read_artifacts
    from gatekeeper.core import escape

    reports = read_artifacts(artifacts) if artifacts.is_dir() else {}
    out = []
    for g in verdict.blocking_gates:
        category = gate_category(g, reports)
        if category is not None:
            name, metric = (escape.terminal(x, newlines=False) for x in (g.name, g.metric))  # one line each
            out.append(
                f"gatekeeper: blocking gate {name}: {category} on {metric} ({CATEGORY_MEANING.get(category, '')})"
            )
    return out


def gate_category(g: GateResult, reports: Mapping[str, StageReport]) -> str | None:
    """The category of a gate failing: its metric's, its stage's failed checks', or a missing artifact."""
    if g.metric in _BUILT_IN:
        return _BUILT_IN[g.metric]
    stage, _, name = g.metric.partition(".")
    if stage not in STAGE_NAMES:
        return None  # a junit: gate: the failed tests' logs say more
    report = reports.get(stage)
    if report is None:
        return "configuration_error"  # the stage's artifact is missing: the job did not run or pass it on
    failed = [c.category for c in report.checks if c.status in ("failed", "error") and c.category in ORDER]
    if name.startswith("checks."):
        return min(failed, key=ORDER.index) if failed else "configuration_error"
    metric = _metric_of(name, report)
    if metric is not None and metric.category in ORDER:
        if metric.value is None and failed:
            return min(failed, key=ORDER.index)  # not measured because a check failed: that check's cause
        return metric.category
    if failed:
        return min(failed, key=ORDER.index)
    return "configuration_error" if metric is None else None


def _metric_of(name: str, report: StageReport) -> Any:
    if name in report.metrics:
        return report.metrics[name]
    base = name.rpartition(".")[0]
    while base:
        if base in report.metrics:
            return report.metrics[base]
        base = base.rpartition(".")[0]
    return None


def root(found: Sequence[Finding]) -> tuple[Finding, Finding | None]:
    """The root finding (a check when one has the root category) and the blocking gate that goes with it."""
    first = found[0]
    gates = [f for f in found if f.source == "gate"]
    same = [g for g in gates if g.category == first.category and (first.source == "gate" or g.stage == first.stage)]
    same.sort(key=lambda g: g.gate is not None and ".checks." in g.gate.metric)  # a measured metric says more
    gate = same[0] if same and same[0] is not first else None
    if gate is None and first.source == "check":
        gate = next((g for g in gates if g.stage == first.stage), None)
    return first, gate


def may_refine(finding: Finding, category: str, priority: int) -> bool:
    """Whether a log signature of ``category`` and ``priority`` names a more specific cause than ``finding``."""
    if category in ("unknown", finding.category):
        return False
    allowed, threshold = _HARD if finding.hard else REFINERS.get(finding.category, _HARD)
    return category in allowed and priority > threshold


def meaning(category: str) -> str:
    return CATEGORY_MEANING.get(category, category)

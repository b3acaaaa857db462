"""evaluate(inputs) -> Verdict: the gate decisions. Pure: no I/O, no clock, no environment.

Reading happens before (``gatekeeper.evaluate.run``), writing after; that is what
lets any step rerun on a finished pipeline's files.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gatekeeper.contract.junit import JUnitSummary
from gatekeeper.contract.stage_report import StageReport
from gatekeeper.contract.verdict import GateResult, Outcome, Verdict, WaivedCheck
from gatekeeper.core.ci_context import PipelineContext
from gatekeeper.evaluate.facts import Facts
from gatekeeper.evaluate.gates import Gate, Gates, Waiver
from gatekeeper.evaluate.history_gate import anchor_words, history_gate
from gatekeeper.evaluate.judge import holm_adjust, judge_gate, uses_judge
from gatekeeper.evaluate.metrics import FAILING_SHOWN, Resolved, resolve
from gatekeeper.evaluate.point_gates import expand, named

__all__ = ["NOT_GPU", "Inputs", "evaluate"]


@dataclass(frozen=True)
class Inputs:
    gates: Gates
    reports: Mapping[str, StageReport]
    channel: str
    today: dt.date
    context: PipelineContext = field(default_factory=PipelineContext)
    baselines: Mapping[str, StageReport] = field(default_factory=dict)  # stage -> comparable baseline
    baseline_notes: Mapping[str, str] = field(default_factory=dict)  # stage -> why there is none
    junit: Mapping[str, JUnitSummary | None] = field(default_factory=dict)  # gate -> summary (None: no file)
    environ: Mapping[str, str] = field(default_factory=dict)
    generated_at: str = ""
    not_selected: frozenset[str] = frozenset()  # stages deliberately not run (pipeline --stages)
    baseline_runs: Mapping[str, Mapping[str, str | None]] = field(default_factory=dict)  # stage -> RunInfo dict
    warnings: tuple[str, ...] = ()  # integrity warnings found while reading the inputs
    provenance: Mapping[str, object] = field(default_factory=dict)
    # compare: anchor and compare: history (gatekeeper.evaluate.anchors reads them)
    anchors: Mapping[str, StageReport] = field(default_factory=dict)  # stage -> its anchor run's result
    anchor_notes: Mapping[str, str] = field(default_factory=dict)  # stage -> why there is no anchor
    anchor_runs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # stage -> Anchor.to_dict()
    history_changes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # gate metric -> newest change
    history_notes: Mapping[str, str] = field(default_factory=dict)  # gate metric -> why it was not judged


def evaluate(inputs: Inputs) -> Verdict:
    facts = Facts(inputs.channel, inputs.reports, PipelineContext.from_env(inputs.environ).kind)
    stage_of = {g.name: g.stage for g in inputs.gates.gates}
    active, expired = _split_waivers(inputs.gates.waivers, inputs.today, facts, stage_of, inputs.environ)
    waived_checks = _waived_checks(active, inputs.reports)
    results = [
        named(
            _evaluate_gate(
                point, inputs, facts=facts.of(point.stage), active=active, expired=expired, waived_checks=waived_checks
            ),
            label,
        )
        for gate in inputs.gates.for_channel(inputs.channel)
        for point, label in expand(gate, inputs.reports, _references(gate, inputs))  # a [*] gate: one per point
    ]
    results = holm_adjust(results)  # across gates and sweep points alike
    required = _device_required(inputs)
    if required:
        results.insert(0, required)
    blocking = [r for r in results if r.blocking]
    warnings = [r for r in results if r.warns]
    result = "blocked" if blocking else ("warn" if warnings or inputs.warnings else "pass")
    summary = _summary(results, blocking, warnings)
    if inputs.warnings:
        summary += f" {len(inputs.warnings)} integrity warning(s): {inputs.warnings[0]}"
    env = next(iter(inputs.reports.values())).environment.to_dict() if inputs.reports else {}
    return Verdict(
        result=result,
        summary=summary,
        channel=inputs.channel,
        gates=tuple(results),
        context=inputs.context.to_dict(),
        environment=env,
        stages={name: r.status for name, r in inputs.reports.items()},
        waived_checks=tuple(w for ws in waived_checks.values() for w in ws),
        expired_waivers=tuple(
            {**w.to_dict(), "message": f"waiver for {w.gate} ({w.owner}) expired on {w.expires}; it no longer applies"}
            for w in expired
        ),
        generated_at=inputs.generated_at,
        gates_file=inputs.gates.source,
        baselines={k: dict(v) for k, v in inputs.baseline_runs.items()},
        warnings=tuple(inputs.warnings),
        provenance=dict(inputs.provenance),
        anchors={k: dict(v) for k, v in inputs.anchor_runs.items()},
    )


def _references(gate: Gate, inputs: Inputs) -> Mapping[str, StageReport]:
    """What a gate compares with: the baselines, or the anchors for ``compare: anchor``."""
    return inputs.anchors if gate.compare == "anchor" else inputs.baselines


NOT_GPU = "not a GPU verdict"
NAME_SHOWN = 120  # characters of one failing check or test name in a reason


def _device_required(inputs: Inputs) -> GateResult | None:
    """Built in, whatever gates.yaml says: a job meant for a GPU (GATEKEEPER_REQUIRE_DEVICE=1) that ran without one."""
    if not inputs.context.require_device:
        return None
    kinds = {r.environment.device_kind for r in inputs.reports.values()}
    if kinds and kinds <= {"rocm", "cuda"}:
        return None
    ran = ", ".join(sorted(kinds)) or "no stage ran"
    return GateResult(
        name="gpu-verified",
        outcome=Outcome.FAIL,
        reason=f"GATEKEEPER_REQUIRE_DEVICE=1 (a GPU job) but the stages ran on: {ran}; nothing was verified on a "
        "GPU. Fix the runner (tags, device nodes) or set device_required: false for a CPU job",
        metric="environment.device_kind",
        rule="in (rocm, cuda)",
        description="Built in: a job meant for a GPU must have run on one.",
    )


def _split_waivers(
    waivers: tuple[Waiver, ...],
    today: dt.date,
    facts: Facts,
    stage_of: Mapping[str, str | None],
    environ: Mapping[str, str],
) -> tuple[list[Waiver], list[Waiver]]:
    """Active and expired waivers; one whose ``when:`` does not hold for its gate's stage is neither."""
    active: list[Waiver] = []
    expired: list[Waiver] = []
    for w in waivers:
        if w.when and w.when.unmet(facts.of(stage_of.get(w.gate)), environ):
            continue
        (expired if w.expired(today) else active).append(w)
    return active, expired


def _waived_checks(active: list[Waiver], reports: Mapping[str, StageReport]) -> dict[str, list[WaivedCheck]]:
    """gate name -> the failing checks its check-level waivers cover."""
    out: dict[str, list[WaivedCheck]] = {}
    for w in active:
        if not w.checks:
            continue
        for stage, report in reports.items():
            for c in report.checks:
                if c.status not in ("failed", "error"):
                    continue
                full = f"{stage}.{c.name}"
                if any(fnmatch.fnmatchcase(full, p) or fnmatch.fnmatchcase(c.name, p) for p in w.checks):
                    out.setdefault(w.gate, []).append(
                        WaivedCheck(stage, c.name, c.status, c.message[:300], w.to_dict())
                    )
    return out


def _evaluate_gate(
    gate: Gate,
    inputs: Inputs,
    *,
    facts: Mapping[str, str | None],
    active: list[Waiver],
    expired: list[Waiver],
    waived_checks: Mapping[str, list[WaivedCheck]],
) -> GateResult:
    base: dict[str, Any] = {"name": gate.name, "metric": gate.metric, "severity": gate.severity, "mode": gate.mode}
    base |= {"rule": gate.pass_rule.text, "warn_rule": gate.warn_rule.text if gate.warn_rule else None}
    base["description"] = gate.description
    label = f"{gate.junit} {gate.metric}" if gate.junit else gate.metric
    unmet = gate.when.unmet(facts, inputs.environ) if gate.when else None
    if unmet:
        return GateResult(outcome=Outcome.SKIPPED, reason=f"not evaluated: {unmet}", **base)
    if gate.stage in inputs.not_selected and gate.stage not in inputs.reports:
        return GateResult(outcome=Outcome.SKIPPED, reason=f"not evaluated: stage {gate.stage} was not selected", **base)
    mine = waived_checks.get(gate.name, [])
    if gate.compare == "history":
        result = history_gate(gate, inputs.history_changes, inputs.history_notes, base)
        if result.outcome is Outcome.SKIPPED and gate.on_missing != "skip":
            result = _missing(gate, base, result.reason)
        return _apply_waivers(result, gate, active=active, expired=expired, mine=mine, reports=inputs.reports)
    compared = gate.compare in ("baseline", "anchor")
    baseline = _references(gate, inputs).get(gate.stage or "") if compared else None
    if compared and baseline is None and gate.stage in inputs.reports:
        # Said before the metric is resolved: no statistic is computed for nothing.
        if gate.compare == "anchor":
            note = inputs.anchor_notes.get(gate.stage or "", "no history store was given (--baseline)")
            return _missing(gate, base, f"no anchor: {note}")
        note = inputs.baseline_notes.get(gate.stage or "", "no baseline store was given (--baseline)")
        return _missing(gate, base, f"no comparable baseline: {note}")
    got = _resolve(gate, inputs, {w.check for w in mine})
    if not got.ok:
        return _missing(gate, base, got.missing)
    base |= {"value": got.value, "unit": got.unit}
    if baseline is not None:
        ref = resolve(gate.metric, {baseline.stage: baseline})
        if not ref.ok:
            return _missing(gate, base, f"the baseline has no value: {ref.missing}")
        unconverged = _unconverged_warmup(gate.stage or "", inputs.reports, _references(gate, inputs))
        if unconverged and uses_judge(got, ref):
            return GateResult(outcome=Outcome.INCONCLUSIVE, reason=f"{label}: {unconverged}", **base)
        judged = uses_judge(got, ref)
        if judged:
            # the rounds of a sequentially sampled run were decided against the baseline, never the anchor
            report = inputs.reports.get(gate.stage or "") if gate.compare == "baseline" else None
            sequential = report.summary.get("sequential") if report else None
            result = judge_gate(gate, got, ref, base, sequential if isinstance(sequential, Mapping) else None)
        else:
            result = _point(gate, label, got, ref.value, base)
        if gate.compare == "anchor":
            result = replace(result, reason=f"{result.reason} (vs the anchor: {_anchor_words(gate, inputs)})")
    else:
        result = _point(gate, label, got, None, base)
    result = _bound_skips(result, gate, inputs)
    return _apply_waivers(result, gate, active=active, expired=expired, mine=mine, reports=inputs.reports)


def _anchor_words(gate: Gate, inputs: Inputs) -> str:
    run = inputs.anchor_runs.get(gate.stage or "", {})
    return anchor_words(run)


def _bound_skips(result: GateResult, gate: Gate, inputs: Inputs) -> GateResult:
    """``max_skipped``: a gate whose checks were mostly skipped has not been checked, whatever its metric says."""
    from dataclasses import replace

    if gate.max_skipped is None or result.outcome is Outcome.FAIL:
        return result
    if gate.junit:
        summary = inputs.junit.get(gate.name)
        skipped = [f"{int(summary.metric('skipped') or 0)} JUnit tests"] if summary else []
        count = int(summary.metric("skipped") or 0) if summary else 0
    else:
        report = inputs.reports.get(gate.stage or "")
        patterns = gate.skip_checks or ("*",)
        skipped = [
            c.name
            for c in (report.checks if report else ())
            if c.status == "skipped" and any(fnmatch.fnmatchcase(c.name, p) for p in patterns)
        ]
        count = len(skipped)
    if count <= gate.max_skipped:
        return result
    names = ", ".join(skipped[:5]) + (", ..." if len(skipped) > 5 else "")
    reason = f"{count} checks skipped (at most {gate.max_skipped} allowed: {names}); {result.reason}"
    return replace(result, outcome=Outcome.FAIL, reason=reason)


def _unconverged_warmup(stage: str, reports: Mapping[str, StageReport], baselines: Mapping[str, StageReport]) -> str:
    """Timings taken before compilation/autotuning settled are not comparable (validity first)."""
    for side, rep in (("this run", reports.get(stage)), ("the baseline", baselines.get(stage))):
        m = rep.metrics.get("warmup_converged") if rep else None
        if m is not None and m.value == 0.0:
            return f"warm-up did not converge in {side}, so its timings cannot be judged"
    return ""


def _resolve(gate: Gate, inputs: Inputs, waived: set[str]) -> Resolved:
    if gate.junit:
        summary = inputs.junit.get(gate.name)
        if summary is None:
            return Resolved(None, missing=f"no JUnit file matches {gate.junit!r}")
        value = summary.metric(gate.metric)
        # Fail closed: "0 failures" in files where no test ran (an empty <testsuites/>, every case skipped) is
        # not a result, it is no data; the gate's on_missing decides. The count of tests is a result either way.
        ran = summary.tests - summary.skipped
        if value is None or (gate.metric in ("failures", "errors") and ran <= 0):
            return Resolved(None, missing=f"no test ran in {', '.join(summary.files)}")
        if gate.metric == "skipped" and summary.tests == 0:
            return Resolved(None, missing=f"no test case in {', '.join(summary.files)}")
        unit = "ratio" if gate.metric == "pass_rate" else "tests"
        if gate.metric not in ("failures", "errors", "pass_rate"):
            return Resolved(value, unit)
        names, total = {
            "failures": (summary.failure_names, summary.failures),
            "errors": (summary.error_names, summary.errors),
        }.get(gate.metric, (summary.failed_names, summary.failures + summary.errors))
        return Resolved(value, unit, failing=names[:FAILING_SHOWN], failing_total=total)
    return resolve(gate.metric, inputs.reports, waived)


def _missing(gate: Gate, base: dict, why: str) -> GateResult:
    outcome = {"fail": Outcome.FAIL, "warn": Outcome.WARN, "skip": Outcome.SKIPPED}[gate.on_missing]
    return GateResult(outcome=outcome, reason=f"{why} (on_missing: {gate.on_missing})", **base)


def fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "n/a"
    text = f"{value:.4g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.3g}"
    return f"{text} {unit}".strip() if unit not in ("", "ratio", "bool") else text


def _point(gate: Gate, label: str, got: Resolved, baseline: float | None, base: dict) -> GateResult:
    value = got.value
    assert value is not None  # narrows the type for mypy; checked just above  # nosec B101
    change = None
    if baseline is not None:
        change = (value / baseline - 1.0) if baseline else None
        base = {**base, "baseline_value": baseline, "change": change}
    versus = f" ({_pct(change)} vs baseline {fmt(baseline, got.unit)})" if baseline is not None else ""
    shown = f"{label} = {fmt(value, got.unit)}{versus}"
    if gate.pass_rule.holds(value, baseline):
        return GateResult(outcome=Outcome.PASS, reason=f"{shown} meets {gate.pass_rule.text}", **base)
    if gate.warn_rule and gate.warn_rule.holds(value, baseline):
        reason = f"{shown} misses {gate.pass_rule.text} but meets the warn rule {gate.warn_rule.text}"
        return GateResult(outcome=Outcome.WARN, reason=reason + _not_passing(got), **base)
    tail = f" (nor the warn rule {gate.warn_rule.text})" if gate.warn_rule else ""
    reason = f"{shown} fails {gate.pass_rule.text}{tail}{_not_passing(got)}"
    return GateResult(outcome=Outcome.FAIL, reason=reason, **base)


def _not_passing(got: Resolved) -> str:
    """ "; not passing: a, b and 3 more": the checks or tests behind a count that missed its rule. The names come
    from the code under test: each is cut to NAME_SHOWN characters here and escaped by each output."""
    if not got.failing:
        return ""
    names = [n if len(n) <= NAME_SHOWN else n[: NAME_SHOWN - 1] + "…" for n in got.failing]
    more = got.failing_total - len(names)
    return "; not passing: " + ", ".join(names) + (f" and {more} more" if more > 0 else "")


def _pct(change: float | None) -> str:
    return "n/a" if change is None else f"{change * 100:+.1f}%"


def _apply_waivers(
    result: GateResult,
    gate: Gate,
    *,
    active: list[Waiver],
    expired: list[Waiver],
    mine: list[WaivedCheck],
    reports: Mapping[str, StageReport],
) -> GateResult:
    from dataclasses import replace

    if result.outcome not in (Outcome.FAIL, Outcome.WARN):
        return result
    whole = next((w for w in active if w.gate == gate.name and not w.checks), None)
    if whole:
        return replace(
            result,
            outcome=Outcome.WAIVED,
            waiver=whole.to_dict(),
            reason=f"waived ({whole.reason}; owner {whole.owner}, until {whole.expires}): {result.reason}",
        )
    if mine and gate.stage:
        report = reports.get(gate.stage)
        covered = {w.check for w in mine}
        left = (
            [c.name for c in report.checks if c.status in ("failed", "error") and c.name not in covered]
            if report
            else []
        )
        if not left:
            w = mine[0].waiver
            return replace(
                result,
                outcome=Outcome.WAIVED,
                waiver=w,
                reason=f"waived: all {len(mine)} failing checks are covered ({mine[0].check}, ...; {w['reason']}): "
                f"{result.reason}",
            )
        result = replace(
            result, reason=f"{result.reason}; {len(left)} failing checks are not waived (e.g. {', '.join(left[:3])})"
        )
    lapsed = next((w for w in expired if w.gate == gate.name), None)
    if lapsed:
        result = replace(result, reason=f"{result.reason}; the waiver ({lapsed.reason}) expired on {lapsed.expires}")
    return result


def _summary(results: list[GateResult], blocking: list[GateResult], warnings: list[GateResult]) -> str:
    counted = [r for r in results if r.outcome is not Outcome.SKIPPED]
    if blocking:
        names = ", ".join(r.name for r in blocking)
        return f"Blocked by {len(blocking)} of {len(counted)} gates: {names}."
    if warnings:
        names = ", ".join(r.name for r in warnings)
        return f"Passed with warnings from {len(warnings)} of {len(counted)} gates: {names}."
    waived = sum(r.outcome is Outcome.WAIVED for r in results)
    extra = f" ({waived} waived)" if waived else ""
    return f"All {len(counted)} evaluated gates passed{extra}."

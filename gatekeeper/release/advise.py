"""``gatekeeper advise``: stable or nightly for this repo.

The field team's hand-written ``should_use_nightly(...)`` scores made measurable:
hard exclusions first (a downstream ONNX Runtime or TensorRT blocks nightly; a
vision transformer or diffusion model on an unlocked ROCm minor is high risk),
then evidence from both channels' recent recorded runs on this device, then the
repo's inputs (a nightly-only feature need, a compatibility owner). ``risk`` is
the risk of running *nightly* for this repo; every reason carries its numbers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from gatekeeper.core.errors import InputError
from gatekeeper.core.escape import terminal_lines
from gatekeeper.history import BaselineStore, open_store
from gatekeeper.release.evidence import ChannelEvidence, collect_evidence, read_breakers

__all__ = ["Advice", "AdviseInputs", "Reason", "advise", "render_text", "run_advise"]

# Downstream runtimes that pin the torch ABI/opset they were built against (field report):
# a nightly torch breaks them between their releases.
BLOCKING_DOWNSTREAM = {
    "onnxruntime": "ONNX Runtime",
    "onnxruntime-gpu": "ONNX Runtime",
    "onnxruntime-rocm": "ONNX Runtime",
    "ort": "ONNX Runtime",
    "tensorrt": "TensorRT",
    "torch-tensorrt": "TensorRT",
    "torch_tensorrt": "TensorRT",
}
RISKY_FAMILIES = {"vit": "vision transformer", "diffusion": "diffusion"}
RISK_LEVELS = ("low", "medium", "high", "blocked")


@dataclass(frozen=True)
class AdviseInputs:
    downstream: tuple[str, ...] = ()
    model_family: str = "other"
    rocm_minor_locked: bool = True
    needs_nightly_feature: bool = False
    compat_owner: str | None = None


@dataclass(frozen=True)
class Reason:
    rule: str
    points: int  # added to the nightly risk score (a hard rule: 0, it decides alone)
    text: str


@dataclass(frozen=True)
class Advice:
    decision: str  # stable | nightly
    risk: str  # low | medium | high | blocked: the risk of running nightly here
    score: int
    arch: str | None
    reasons: tuple[Reason, ...]
    evidence: Mapping[str, ChannelEvidence]

    def to_dict(self) -> dict[str, Any]:
        return {
            "decision": self.decision,
            "risk": self.risk,
            "score": self.score,
            "arch": self.arch,
            "reasons": [asdict(r) for r in self.reasons],
            "evidence": {k: {**asdict(v), "blocked_share": v.blocked_share} for k, v in self.evidence.items()},
        }


def _pct(x: float) -> str:
    return f"{x * 100:.1f}%"


def _evidence_reasons(stable: ChannelEvidence, nightly: ChannelEvidence, arch: str | None) -> list[Reason]:
    on = f"on {arch}" if arch else "on this device"
    out: list[Reason] = []
    if nightly.runs == 0:
        return [Reason("nightly-evidence", 2, f"no recorded nightly runs {on}: its risk here is unknown")]
    if nightly.runs < 3:
        out.append(Reason("nightly-evidence", 1, f"only {nightly.runs} recorded nightly run(s) {on}: thin evidence"))
    share, s_share = nightly.blocked_share, stable.blocked_share
    if share is None:
        out.append(
            Reason(
                "nightly-verdicts",
                1,
                f"no gate verdict recorded for the {nightly.runs} nightly run(s) {on} (the store keeps none)",
            )
        )
    else:
        # Weigh what nightly adds over stable: when both are blocked alike, the setup (not the
        # channel) is failing; a mostly blocked nightly still counts for something.
        excess = round(share - (s_share or 0.0), 9)  # 0.3 - 0.1 must reach the 0.2 step
        points = 3 if excess >= 0.5 else 2 if excess >= 0.2 else 1 if excess > 0 else 0
        if share >= 0.5:
            points = max(points, 2)
        blocked = nightly.verdicts.get("blocked", 0)
        known = sum(v for k, v in nightly.verdicts.items() if k != "unknown")
        s_known = sum(v for k, v in stable.verdicts.items() if k != "unknown")
        versus = (
            f"; stable {stable.verdicts.get('blocked', 0)} of {s_known} ({_pct(s_share)})"
            if s_share is not None
            else ""
        )
        out.append(
            Reason(
                "nightly-verdicts", points, f"nightly blocked {blocked} of {known} runs {on} ({_pct(share)}){versus}"
            )
        )
    if nightly.op_pass_rate is not None:
        ref = stable.op_pass_rate
        if ref is not None:
            diff = nightly.op_pass_rate - ref
            drop = -diff
            points = 2 if drop >= 0.05 else 1 if drop >= 0.01 else 0
            out.append(
                Reason(
                    "op-pass-rate",
                    points,
                    f"operator pass rate (median) nightly {_pct(nightly.op_pass_rate)} vs stable {_pct(ref)} "
                    f"({diff * 100:+.1f} points)",
                )
            )
        else:
            points = 1 if nightly.op_pass_rate < 0.95 else 0
            out.append(
                Reason("op-pass-rate", points, f"operator pass rate (median) nightly {_pct(nightly.op_pass_rate)}")
            )
    if nightly.restore_rate is not None:
        points = 2 if nightly.restore_rate < 0.99 else 0
        out.append(
            Reason(
                "checkpoint-restore", points, f"checkpoint restore rate nightly (lowest) {_pct(nightly.restore_rate)}"
            )
        )
    if nightly.p99_ms is not None and stable.p99_ms:
        ratio = nightly.p99_ms / stable.p99_ms
        points = 2 if ratio > 1.5 else 1 if ratio > 1.2 else 0
        out.append(
            Reason(
                "tail-latency",
                points,
                f"P99 latency (median of runs) nightly {nightly.p99_ms:.4g} ms vs stable {stable.p99_ms:.4g} ms "
                f"({ratio:.2f}x)",
            )
        )
    if nightly.breaker in ("open", "half_open"):
        points = 3 if nightly.breaker == "open" else 1
        out.append(Reason("breaker", points, f"the nightly circuit breaker is {nightly.breaker.replace('_', '-')}"))
    elif nightly.breaker == "closed":
        out.append(Reason("breaker", 0, "the nightly circuit breaker is closed"))
    return out


def advise(inputs: AdviseInputs, evidence: Mapping[str, ChannelEvidence], arch: str | None) -> Advice:
    """Pure: the decision from the inputs and the recorded evidence."""
    stable = evidence.get("stable") or ChannelEvidence("stable")
    nightly = evidence.get("nightly") or ChannelEvidence("nightly")
    reasons: list[Reason] = []
    hard = [d for d in inputs.downstream if d.lower() in BLOCKING_DOWNSTREAM]
    for d in hard:
        reasons.append(
            Reason(
                "downstream",
                0,
                f"downstream dependency {d} ({BLOCKING_DOWNSTREAM[d.lower()]}) is built against released torch: "
                "nightly is excluded",
            )
        )
    floor = "low"
    if inputs.model_family in RISKY_FAMILIES and not inputs.rocm_minor_locked:
        floor = "high"
        reasons.append(
            Reason(
                "model-family",
                3,
                f"{RISKY_FAMILIES[inputs.model_family]} models with an unlocked ROCm minor version: kernels "
                "(attention, MIOpen convolutions) change under them; high risk",
            )
        )
    reasons += _evidence_reasons(stable, nightly, arch)
    if inputs.compat_owner:
        reasons.append(Reason("compat-owner", 0, f"{inputs.compat_owner} owns compatibility fixes"))
    else:
        reasons.append(Reason("compat-owner", 1, "nobody owns compatibility fixes (--compat-owner)"))
    score = sum(r.points for r in reasons)
    level = "low" if score <= 1 else "medium" if score <= 3 else "high"
    risk = "blocked" if hard else max(level, floor, key=RISK_LEVELS.index)
    decision, why = _decide(inputs, risk, stable, nightly)
    reasons.append(Reason("decision", 0, why))
    return Advice(decision, risk, score, arch, tuple(reasons), {"stable": stable, "nightly": nightly})


def _decide(inputs: AdviseInputs, risk: str, stable: ChannelEvidence, nightly: ChannelEvidence) -> tuple[str, str]:
    if risk == "blocked":
        return "stable", "stable: a hard rule excludes nightly"
    if inputs.needs_nightly_feature:
        if risk == "high":
            return "stable", (
                "stable: the nightly-only feature does not outweigh the high risk; wait for the next stable "
                "release, or lower the risk (lock the ROCm minor, name a compat owner) and ask again"
            )
        return "nightly", f"nightly: the repo needs a nightly-only feature and the nightly risk is {risk}"
    s, n = stable.blocked_share, nightly.blocked_share
    if s is not None and n is not None and s >= 0.5 and n < 0.2 and risk == "low":
        return "nightly", f"nightly: stable is blocked in {_pct(s)} of runs where nightly is blocked in {_pct(n)}"
    return "stable", "stable: no nightly-only feature is needed, so the released channel is the default"


def run_advise(
    inputs: AdviseInputs,
    *,
    history: str | None = None,
    breaker_state: Sequence[str] = (),
    arch: str | None = None,
    runs: int = 10,
    fmt: str = "text",
    store: BaselineStore | None = None,
) -> str:
    if runs < 1:
        raise InputError(None, "--runs", f"must be at least 1 (got {runs})", "e.g. --runs 10")
    if inputs.model_family not in (*RISKY_FAMILIES, "cnn", "llm", "other"):
        raise InputError(
            None, "--model-family", f"unknown family {inputs.model_family!r}", "cnn, vit, diffusion, llm or other"
        )
    if store is None and history:
        store = open_store(history)
    breakers, notes = read_breakers(breaker_state)
    given = arch
    evidence, arch = collect_evidence(store, arch, runs, breakers, notes)
    if given is None and arch is not None:
        notes.append(f"device {arch}: that of the newest recorded run (--arch chooses another)")
    advice = advise(inputs, evidence, arch)
    if store is None:
        notes.append("no --history store given: no recorded evidence")
    if fmt == "json":
        return json.dumps({**advice.to_dict(), "notes": notes}, indent=2) + "\n"
    return render_text(advice, notes, runs)


def render_text(advice: Advice, notes: Sequence[str], runs: int) -> str:
    lines = [f"decision: {advice.decision}", f"nightly risk: {advice.risk} (score {advice.score})"]
    lines.append(f"device: {advice.arch or 'unknown (no recorded runs)'}")
    lines.append("reasons:")
    for r in advice.reasons:
        tag = "rule" if r.rule in ("downstream", "decision") else f"+{r.points}"
        lines.append(f"  [{tag}] {r.text}")
    lines += [f"note: {n}" for n in notes]
    lines.append(f"evidence (newest {runs} runs per channel):")
    head = f"  {'channel':8} {'runs':>4}  {'pass/warn/blocked':>17}  {'op pass':>8}  {'restore':>8}  {'P99 ms':>8}"
    lines.append(head + "  breaker")
    for ev in advice.evidence.values():
        v = ev.verdicts
        counts = f"{v.get('pass', 0)}/{v.get('warn', 0)}/{v.get('blocked', 0)}"
        lines.append(
            f"  {ev.channel:8} {ev.runs:>4}  {counts:>17}  {_opt(ev.op_pass_rate, True):>8}  "
            f"{_opt(ev.restore_rate, True):>8}  {_opt(ev.p99_ms):>8}  {ev.breaker or '—'}"
        )
    # a recorded device or breaker name with a newline in it starts no line of its own (a second "decision:")
    return terminal_lines(lines) + "\n"


def _opt(x: float | None, pct: bool = False) -> str:
    if x is None:
        return "—"
    return _pct(x) if pct else f"{x:.4g}"

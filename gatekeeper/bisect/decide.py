"""Deciding one candidate: good, bad or unknown, by the same judge as the gates.

``decide`` is the one place where a comparison is decided and where processes
are added while it is unknown (Pinpoint's "more attempts while the comparison
is inconclusive", up to ``--max-processes`` per side). A different stopping
rule (an always-valid sequential test) replaces this one function; the
judges below and the search do not change.

Two judges:

- ``StageJudge``: the candidate's stage result is evaluated by
  ``gatekeeper.evaluate.decide.evaluate`` (the gates' own code: rules,
  ``gatekeeper.evaluate.judge`` for baseline comparisons, Holm across gates) with
  the reference candidate's result as the baseline. A gate that fails is
  *bad*; one that is inconclusive (the statistical judge could not tell) is
  *unknown*; passes and warnings are *good*. "Bad" is relative to the
  reference: a gate that already fails on the reference itself does not make a
  candidate bad (that is how a second, later culprit is told from the first).
- ``CommandJudge``: the exit code, as ``git bisect run`` reads it: 0 good, 125
  skip, 1-127 bad; anything else (a signal, a timeout, above 127) stops the
  bisection with the candidate named.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from gatekeeper.bisect.measure import Measured
from gatekeeper.contract.stage_report import StageReport
from gatekeeper.contract.verdict import GateResult, Outcome
from gatekeeper.core.errors import InputError
from gatekeeper.evaluate.decide import Inputs, evaluate
from gatekeeper.evaluate.gates import Gates

__all__ = ["CommandJudge", "Decision", "Judge", "Judgement", "StageJudge", "decide", "select_gates"]

Decision = Literal["good", "bad", "unknown", "skip"]
SKIP_CODE = 125


@dataclass(frozen=True)
class Judgement:
    decision: Decision
    reason: str
    gates: tuple[dict[str, str], ...] = ()
    processes: int = 0
    reference_processes: int | None = None

    def record(self, reference: int | None) -> dict[str, Any]:
        """The decision as bisect.json keeps it."""
        return {
            "reference": reference,
            "decision": self.decision,
            "reason": self.reason,
            "gates": [dict(g) for g in self.gates],
            "processes": self.processes,
            "reference_processes": self.reference_processes,
        }


class Judge(Protocol):
    def __call__(self, candidate: Measured, reference: Measured | None) -> Judgement: ...


def decide(
    candidate: Measured,
    reference: Measured | None,
    *,
    judge: Judge,
    add_round: Callable[[Measured], None],
    max_processes: int,
) -> Judgement:
    """Decide ``candidate`` against ``reference``, adding processes while the judge says unknown.

    While unknown, every side below ``max_processes`` whose process count is not
    above the other side's gets one more round (a stage run, or a command run),
    then the judge looks again at everything measured so far. At the budget the
    answer stays unknown: the search treats that candidate like a skipped one
    rather than guessing. Rounds already in bisect.json are reused by
    ``add_round`` (``--resume``), so a resumed run asks for the same rounds again.
    """
    while True:
        judgement = judge(candidate, reference)
        if judgement.decision != "unknown":
            return judgement
        sides = [s for s in (reference, candidate) if s is not None]
        below = [s for s in sides if s.processes() < max_processes]
        if not below:
            why = f"still unknown with {candidate.processes()} processes (the budget, --max-processes {max_processes})"
            return dataclasses.replace(judgement, reason=f"{judgement.reason}; {why}")
        fewest = min(s.processes() for s in below)
        for side in below:
            if side.processes() == fewest:
                add_round(side)


class CommandJudge:
    """The exit code decides (``git bisect run``): 0 good, 125 skip, 1-127 bad, anything else stops."""

    def __init__(self, labels: Sequence[str]) -> None:
        self.labels = list(labels)

    def __call__(self, candidate: Measured, reference: Measured | None) -> Judgement:
        last = candidate.rounds[-1]
        code = last["exit_code"]
        label = self.labels[candidate.index]
        n = len(candidate.rounds)
        if code == 0:
            return Judgement("good", "the command exited with 0", processes=n)
        if code == SKIP_CODE:
            return Judgement("skip", "the command exited with 125 (skip this candidate)", processes=n)
        if isinstance(code, int) and 1 <= code <= 127:
            return Judgement("bad", f"the command exited with {code}", processes=n)
        raise InputError(
            None,
            "--",
            f"the command {last['outcome']} at candidate {label}: as for git bisect run, only exit codes "
            "0 (good), 125 (skip) and 1-127 (bad) decide; the bisection stops here (finished measurements are kept)",
            "make the command exit 1-127 when bad (e.g. sh -c 'cmd || exit 1'), raise --timeout, then --resume",
        )


def select_gates(gates: Gates, *, stage: str, metric: str | None, channel: str) -> Gates:
    """The gates that decide a bisection: those of ``stage`` (only those on ``metric`` with ``--metric``).

    Waivers do not apply: a bisection looks for where a result changed, and a
    waiver says whether that may ship, not whether it changed.
    """
    active = [g for g in gates.for_channel(channel) if g.stage == stage]
    if metric:
        wanted = {metric, f"{stage}.{metric}"}
        chosen = [g for g in active if g.metric in wanted]
        if not chosen:
            known = ", ".join(sorted({g.metric.split(".", 1)[1] for g in active})) or "none"
            raise InputError(
                gates.source,
                "",
                f"no gate judges {stage}.{metric}",
                f"pick --metric from the gated ones ({known}), or add a gate",
            )
    else:
        chosen = active
        if not chosen:
            raise InputError(gates.source, "", f"no gate judges the stage {stage}", "add one, or use -- COMMAND")
    names = {g.name for g in chosen}
    return dataclasses.replace(gates, gates=tuple(g for g in gates.gates if g.name in names), waivers=())


class StageJudge:
    """The gates decide, with the reference candidate's result as the baseline."""

    def __init__(self, gates: Gates, *, stage: str, channel: str, labels: Sequence[str]) -> None:
        self.gates = gates
        self.stage = stage
        self.channel = channel
        self.labels = list(labels)
        self._own: dict[tuple[int, int], frozenset[str]] = {}

    def results(self, report: StageReport, baseline: StageReport | None) -> list[GateResult]:
        inputs = Inputs(
            gates=self.gates,
            reports={self.stage: report},
            channel=self.channel,
            today=dt.date.today(),
            baselines={self.stage: baseline} if baseline is not None else {},
            baseline_notes={self.stage: "no reference candidate"},
        )
        return list(evaluate(inputs).gates)

    def own_failures(self, reference: Measured) -> frozenset[str]:
        """The gates that fail on the reference against itself (absolute rules it already breaks)."""
        key = (reference.index, len(reference.rounds))
        if key not in self._own:
            report = reference.report()
            fails = (
                {r.name for r in self.results(report, report) if r.outcome is Outcome.FAIL}
                if report is not None
                else set()
            )
            self._own[key] = frozenset(fails)
        return self._own[key]

    def __call__(self, candidate: Measured, reference: Measured | None) -> Judgement:
        n = candidate.processes()
        rn = reference.processes() if reference is not None else None
        report = candidate.report()
        if report is None:
            outcome = candidate.rounds[-1]["outcome"] if candidate.rounds else "did not run"
            return Judgement("bad", f"the stage wrote no result ({outcome})", processes=n, reference_processes=rn)
        base = reference.report() if reference is not None else None
        results = self.results(report, base)
        known = self.own_failures(reference) if reference is not None else frozenset()
        shown = tuple(
            {"name": r.name, "metric": r.metric, "outcome": r.outcome.value, "reason": r.reason[:400]} for r in results
        )
        failed = [r for r in results if r.outcome is Outcome.FAIL and r.name not in known]
        unsure = [r for r in results if r.outcome is Outcome.INCONCLUSIVE and r.name not in known]
        versus = (
            f" vs {self.labels[reference.index]}"
            if reference is not None and reference.index != candidate.index
            else ""
        )
        if failed:
            why = "; ".join(f"{r.name}: {r.reason}" for r in failed)
            return Judgement("bad", f"{why}{versus}", shown, n, rn)
        if unsure:
            why = "; ".join(f"{r.name}: {r.reason}" for r in unsure)
            return Judgement("unknown", f"inconclusive: {why}{versus}", shown, n, rn)
        judged = [r for r in results if r.outcome is not Outcome.SKIPPED]
        if not judged:
            return Judgement("unknown", "no gate could judge this result (every one was skipped)", shown, n, rn)
        names = ", ".join(f"{r.name} {r.outcome.value}" for r in judged)
        return Judgement("good", f"{names}{versus}", shown, n, rn)

"""Deciding one candidate: good, bad or unknown, by the same judge as the gates.

``decide`` is the one place where a comparison is decided and where processes
are added while it is unknown (Pinpoint's "more attempts while the comparison
is inconclusive", up to ``--max-processes`` per side). Every time the judge is
asked is a *look*, recorded as the (reference, candidate) rounds measured then.
Looking again after more rounds until the answer suits is optional stopping:
a fixed-sample test consulted at every look calls an unchanged candidate bad
several times as often as its alpha says. So a sampled (performance) metric is
judged by the sequential rule, ``gatekeeper.stats.sequential``, replayed on all
the looks of this comparison (``StageJudge`` hands them to the gates' evaluation
as the candidate's ``summary.sequential``, as ``performance_baseline`` records
its own rounds): its regression, improvement and equivalence claims keep the
gate's alpha whenever the loop stops, the gate's tolerance is its
``min_effect``, its noise guard its ``max_cv`` (gates.yaml; the looks recorded
here carry none), and clear cases stop at the first look. Metrics without
per-process samples (functional results, counts) stay pass/fail by their rule.

Two judges:

- ``StageJudge``: the candidate's stage result is evaluated by
  ``gatekeeper.evaluate.decide.evaluate`` (the gates' own code: rules,
  ``gatekeeper.evaluate.judge`` for baseline comparisons, the sequential rule
  on the looks so far, Holm across gates) with the reference candidate's result
  as the baseline. A gate that fails is
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

__all__ = ["CommandJudge", "Decision", "Judge", "Judgement", "Look", "StageJudge", "decide", "select_gates"]

Decision = Literal["good", "bad", "unknown", "skip"]
Look = tuple[int, int]  # (reference rounds, candidate rounds) measured when the judge was asked
SKIP_CODE = 125
POWER = 0.9  # the sequential rule's power at detect = 2 x the gate's tolerance (as performance_baseline's rounds)


@dataclass(frozen=True)
class Judgement:
    decision: Decision
    reason: str
    gates: tuple[dict[str, str], ...] = ()
    processes: int = 0
    reference_processes: int | None = None
    looks: tuple[Look, ...] = ()  # every look of this comparison, this one last

    def record(self, reference: int | None) -> dict[str, Any]:
        """The decision as bisect.json keeps it."""
        return {
            "reference": reference,
            "decision": self.decision,
            "reason": self.reason,
            "gates": [dict(g) for g in self.gates],
            "processes": self.processes,
            "reference_processes": self.reference_processes,
            "looks": [list(x) for x in self.looks],
        }


class Judge(Protocol):
    def __call__(self, candidate: Measured, reference: Measured | None, looks: Sequence[Look] = ()) -> Judgement:
        """``looks``: the looks of this comparison so far, the current one last (empty: this is the only one)."""
        ...


def decide(
    candidate: Measured,
    reference: Measured | None,
    *,
    judge: Judge,
    add_round: Callable[[Measured], None],
    max_processes: int,
    looks: Sequence[Look] = (),
    on_look: Callable[[Judgement], None] | None = None,
) -> Judgement:
    """Decide ``candidate`` against ``reference``, adding processes while the judge says unknown.

    Each time the judge is asked, the rounds measured on both sides are a new
    look, and the judge sees all the looks of this comparison (the sequential
    rule's error rates depend on them). While unknown, every side below
    ``max_processes`` whose process count is not above the other side's gets one
    more round (a stage run, or a command run), then the judge looks again at
    everything measured so far. At the budget the answer stays unknown: the
    search treats that candidate like a skipped one rather than guessing.

    ``looks``: the earlier looks of this same comparison (an interrupted one, from
    bisect.json, on ``--resume``); ``on_look`` sees every undecided look before more
    rounds are measured (the engine records it, so an interruption loses no look).
    """
    seen: list[Look] = [(int(r), int(c)) for r, c in looks]
    while True:
        now = (len(reference.rounds) if reference is not None else 0, len(candidate.rounds))
        if not seen or seen[-1] != now:
            seen.append(now)
        judgement = dataclasses.replace(judge(candidate, reference, tuple(seen)), looks=tuple(seen))
        if judgement.decision != "unknown":
            return judgement
        sides = [s for s in (reference, candidate) if s is not None]
        below = [s for s in sides if s.processes() < max_processes]
        if not below:
            why = f"still unknown with {candidate.processes()} processes (the budget, --max-processes {max_processes})"
            return dataclasses.replace(judgement, reason=f"{judgement.reason}; {why}")
        if on_look is not None:
            on_look(judgement)
        fewest = min(s.processes() for s in below)
        for side in below:
            if side.processes() == fewest:
                add_round(side)


class CommandJudge:
    """The exit code decides (``git bisect run``): 0 good, 125 skip, 1-127 bad, anything else stops."""

    def __init__(self, labels: Sequence[str]) -> None:
        self.labels = list(labels)

    def __call__(self, candidate: Measured, reference: Measured | None, looks: Sequence[Look] = ()) -> Judgement:
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
    """The gates decide, with the reference candidate's result as the baseline.

    ``max_processes``: the budget per side, the sequential rule's plan (its
    information at the budget is what the spending is measured against).
    """

    def __init__(
        self, gates: Gates, *, stage: str, channel: str, labels: Sequence[str], max_processes: int = 15
    ) -> None:
        self.gates = gates
        self.stage = stage
        self.channel = channel
        self.labels = list(labels)
        self.max_processes = max_processes
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

    def sampling(self, candidate: Measured, reference: Measured, looks: Sequence[Look]) -> dict[str, Any]:
        """The looks as ``summary.sequential`` records them, per sampled metric: (reference, candidate) processes.

        The rounds of a look are turned into each metric's own process counts (its
        sample groups in those rounds), so the evaluation replays the rule on
        exactly the samples it judges.
        """
        every = list(looks) or [(len(reference.rounds), len(candidate.rounds))]
        names = {
            name
            for side in (candidate, reference)
            for r in side.reports
            if r is not None
            for name, m in r.metrics.items()
            if m.samples
        }
        per = {
            name: [[_groups(reference, name, rb), _groups(candidate, name, rc)] for rb, rc in every]
            for name in sorted(names)
        }
        plan = {"max_processes": self.max_processes, "power": POWER, "baseline_grows": True}
        return {"sequential": True, "metrics": per, "plan": plan, "rounds": [list(x) for x in every]}

    def __call__(self, candidate: Measured, reference: Measured | None, looks: Sequence[Look] = ()) -> Judgement:
        n = candidate.processes()
        rn = reference.processes() if reference is not None else None
        report = candidate.report()
        if report is None:
            outcome = candidate.rounds[-1]["outcome"] if candidate.rounds else "did not run"
            return Judgement("bad", f"the stage wrote no result ({outcome})", processes=n, reference_processes=rn)
        base = reference.report() if reference is not None else None
        if reference is not None and base is not None:
            # The stage's own summary.sequential (if any) is about its own rounds: the looks here replace it.
            sequential = self.sampling(candidate, reference, looks)
            report = dataclasses.replace(report, summary={**report.summary, "sequential": sequential})
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


def _groups(side: Measured, metric: str, rounds: int) -> int:
    """Sample groups (processes) of ``metric`` in the first ``rounds`` rounds of ``side``."""
    return sum(
        len(r.metrics[metric].samples or ()) for r in side.reports[:rounds] if r is not None and metric in r.metrics
    )

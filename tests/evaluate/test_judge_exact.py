"""judge_gate and holm_adjust, exactly, with the statistics replaced by fixed answers (written against
surviving mutants: each branch's outcome, reason, comparison fields and the judge's arguments)."""

from __future__ import annotations

import pytest

from gatekeeper.contract.verdict import GateResult, Outcome
from gatekeeper.evaluate import judge
from gatekeeper.evaluate.gates import parse_gates
from gatekeeper.evaluate.metrics import Resolved
from gatekeeper.stats import compare
from gatekeeper.stats.compare import Comparison

S = ((10.0, 10.1), (10.2, 9.9), (10.0, 10.05))


def _gate(**kw):
    g = {"metric": "performance_baseline.latency_ms", "compare": "baseline", "pass": "<= +3%", **kw}
    return parse_gates({"version": 1, "gates": {"g": g}}).gates[0]


def _cmp(verdict="equivalent", tail="no_change", better="lower") -> Comparison:
    return Comparison(verdict, 1.05, (1.01, 1.09), 0.004, tail, 0.01, 0.02, 0.3, 12.0, 13.0, None, None, "why",
                      better=better, min_effect=0.03, unit="ms")  # fmt: skip


@pytest.fixture
def calls(monkeypatch):
    seen = {}

    def fake(base, cand, **kw):
        seen.update(kw, base=base, cand=cand)
        return seen["answer"]

    monkeypatch.setattr(compare, "compare_runs", fake)
    return seen


def _run(calls, cmp, gate=None, stat=None, got=10.5, ref=10.0, better="lower"):
    calls["answer"] = cmp
    g = gate or _gate()
    cand = Resolved(got, "ms", better, "latency_ms" if stat else "", stat, S)
    base = Resolved(ref, "ms", better, "latency_ms" if stat else "", stat, S)
    return judge.judge_gate(g, cand, base, {"name": "g", "metric": g.metric})


def test_the_judge_gets_the_gate_settings(calls):
    _run(calls, _cmp(), gate=_gate(alpha=0.05))
    assert (calls["better"], calls["alpha"], calls["min_effect"], calls["unit"]) == ("lower", 0.05, 0.03, "ms")
    assert calls["base"] == [list(p) for p in S]
    _run(calls, _cmp(), gate=_gate(min_effect=0.07), better="none")
    assert (calls["better"], calls["min_effect"], calls["alpha"]) == ("lower", 0.07, 0.01)
    _run(calls, _cmp(), gate=_gate(**{"pass": "<= 12", "compare": "baseline"}), better="higher")
    assert (calls["better"], calls["min_effect"]) == ("higher", 0.02)
    assert calls["max_cv"] == 0.05
    _run(calls, _cmp(), gate=_gate(max_cv=0.12))
    assert calls["max_cv"] == 0.12
    assert calls["noise_hint"].startswith("max_cv of gate g; ")


def test_body_outcomes_exactly(calls):
    line = _cmp("regression").line()
    r = _run(calls, _cmp("regression"))
    assert (r.outcome, r.reason) == (Outcome.FAIL, f"{line}; rule <= +3%")
    assert (r.baseline_value, r.change) == (10.0, pytest.approx(0.05))
    assert r.comparison == {**_cmp("regression").to_dict(), "alpha": 0.01, "max_cv": 0.05, "kind": "body"}
    r = _run(calls, _cmp("regression"), gate=_gate(warn="<= +10%"))
    assert (r.outcome, r.reason) == (Outcome.WARN, f"{line}; within the warn rule <= +10%")
    r = _run(calls, _cmp("regression"), gate=_gate(warn="<= +1%"))
    assert r.outcome is Outcome.FAIL
    r = _run(calls, _cmp("inconclusive"))
    assert (r.outcome, r.reason) == (Outcome.INCONCLUSIVE, _cmp("inconclusive").line())
    r = _run(calls, _cmp("equivalent"), stat="median")
    assert (r.outcome, r.reason) == (Outcome.PASS, _cmp("equivalent").line())
    assert _run(calls, _cmp("improvement"), stat="mean").outcome is Outcome.PASS
    assert _run(calls, _cmp("equivalent"), ref=0.0).change is None


@pytest.mark.parametrize(
    ("got", "tail", "body", "outcome", "middle"),
    [
        (12.0, "regression", "equivalent", Outcome.FAIL, "breaks <= +3%, and "),
        (10.1, "regression", "equivalent", Outcome.WARN, "within <= +3%, but "),
        (
            12.0,
            "inconclusive",
            "equivalent",
            Outcome.INCONCLUSIVE,
            "breaks <= +3%, but the comparison is inconclusive: ",
        ),
        (
            12.0,
            "no_change",
            "inconclusive",
            Outcome.INCONCLUSIVE,
            "breaks <= +3%, but the comparison is inconclusive: ",
        ),
        (12.0, "no_change", "equivalent", Outcome.WARN, "breaks <= +3%, but the tail test finds no change: "),
        (10.1, "no_change", "equivalent", Outcome.PASS, "meets <= +3%; "),
    ],
)
def test_tail_outcomes_exactly(calls, got, tail, body, outcome, middle):
    cmp = _cmp(body, tail)
    r = _run(calls, cmp, stat="p99", got=got)
    shown = f"performance_baseline.latency_ms 10 -> {got:.4g} ms"
    assert r.outcome is outcome
    assert r.reason == f"{shown} {middle}{cmp.line()}"
    assert r.comparison["kind"] == "tail"
    assert r.comparison["alpha"] == 0.01


def test_uses_judge_needs_two_processes_on_both_sides():
    two = Resolved(1.0, samples=((1.0,), (2.0,)))
    one = Resolved(1.0, samples=((1.0,),))
    assert judge.uses_judge(two, two)
    assert not judge.uses_judge(two, one)
    assert not judge.uses_judge(one, two)
    assert not judge.uses_judge(Resolved(1.0), two)


def _judged(name, p, outcome=Outcome.FAIL, alpha=0.01):
    return GateResult(name, outcome, "r", "m", comparison={"kind": "body", "p_value": p, "alpha": alpha})


def test_holm_exactly():
    one = [_judged("a", 0.001)]
    assert judge.holm_adjust(one) == one  # a single comparison is not adjusted
    out = judge.holm_adjust([_judged("a", 0.001), _judged("b", 0.006), GateResult("c", Outcome.PASS, "r", "m")])
    assert [r.comparison["p_value_holm"] for r in out[:2]] == [0.002, 0.006]
    assert [r.outcome for r in out] == [Outcome.FAIL, Outcome.INCONCLUSIVE, Outcome.PASS]
    assert out[1].reason == "r; not significant after Holm over 2 comparisons (p=0.006)"
    assert out[2].comparison is None
    # held against alpha/2 of each gate's own alpha
    out = judge.holm_adjust([_judged("a", 0.001, alpha=0.1), _judged("b", 0.02, alpha=0.1)])
    assert [r.outcome for r in out] == [Outcome.FAIL, Outcome.FAIL]
    out = judge.holm_adjust([_judged("a", 0.001), _judged("b", 0.02, outcome=Outcome.PASS)])
    assert out[1].outcome is Outcome.PASS
    assert out[1].reason == "r"
    out = judge.holm_adjust([_judged("a", 0.001), _judged("b", 0.006, outcome=Outcome.WARN)])
    assert out[1].outcome is Outcome.INCONCLUSIVE
    tail = GateResult("t", Outcome.FAIL, "r", "m", comparison={"kind": "tail", "p_value": 0.5})
    out = judge.holm_adjust([_judged("a", 0.001), _judged("b", 0.001), tail])
    assert out[2] == tail
    no_alpha = GateResult("n", Outcome.FAIL, "r", "m", comparison={"kind": "body", "p_value": 0.006})
    out = judge.holm_adjust([_judged("a", 0.001), no_alpha])
    assert out[1].outcome is Outcome.INCONCLUSIVE  # default alpha 0.01: 0.006 >= 0.005

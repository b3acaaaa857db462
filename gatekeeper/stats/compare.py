"""The regression judge: pure statistics over per-process samples (no I/O, no torch).

Iterations inside one process are not independent (kernel choice and allocator
layout are fixed per process), so the unit of every test here is the *process*:
the body is compared through per-process medians (one-sided Welch t-test on
their logs), and the tail through per-process exceedance counts (an exact
permutation test over processes, ``gatekeeper.stats.tail``), so a burst of spikes in
one process counts as one observation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, TypedDict

import numpy as np
from scipy import stats as sps

from gatekeeper.stats.quantiles import BOOTSTRAP, Interval, as_groups, cluster_interval, harrell_davis, run_summary
from gatekeeper.stats.tail import tail_test

__all__ = [
    "NOISE_HINT",
    "Comparison",
    "Interval",
    "cluster_interval",
    "compare_runs",
    "fluctuation",
    "harrell_davis",
    "holm",
    "process_cv",
    "run_summary",
    "theil_sen_slope",
]

Verdict = Literal["regression", "improvement", "equivalent", "inconclusive"]
TailVerdict = Literal["regression", "no_change", "inconclusive"]  # as in gatekeeper.stats.tail

MIN_PROCESSES = 3  # Welch's test on fewer process medians has almost no degrees of freedom
# Where the noise guard (max_cv) is set and how to get past it; a caller that knows the setting names it
# (the evaluate judge: "max_cv of gate NAME; ... raise max_cv in gates.yaml").
NOISE_HINT = "max_cv; more processes, a quieter runner, or a higher max_cv"


def fluctuation(name: str, cv: float, max_cv: float, hint: str = NOISE_HINT) -> str:
    """Why a side is not judged: its process medians vary more than ``max_cv``; ``hint`` (the setting and the
    fix, in parentheses) is left out when empty (both sides noisy: only the second names it)."""
    return f"{name} run fluctuates too much: CV of process medians {cv:.1%} > {max_cv * 100:g}%" + (
        f" ({hint})" if hint else ""
    )


@dataclass(frozen=True)
class Comparison:
    """The judge's answer for one metric; round-trips through ``to_dict``/``from_dict``."""

    verdict: Verdict
    ratio: float | None  # candidate / baseline, geometric means of process medians
    ci: tuple[float, float] | None  # 95% interval of ratio
    p_value: float | None  # one-sided: candidate worse than baseline
    tail_verdict: TailVerdict
    tail_rate_baseline: float | None
    tail_rate_candidate: float | None
    tail_p_value: float | None
    p99_baseline: float | None
    p99_candidate: float | None
    p99_baseline_ci: tuple[float, float] | None
    p99_candidate_ci: tuple[float, float] | None
    reason: str
    better: Literal["lower", "higher"] = "lower"
    min_effect: float = 0.02
    tail_factor: float = 1.5
    unit: str = ""
    processes: int | None = None  # candidate processes judged
    baseline_processes: int | None = None
    stopped: str = ""  # sequential sampling: why the run stopped adding processes ("" for a fixed number)
    ci_label: str = "95% CI"  # "99% always-valid CI" when the interval is a sequential one

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("ci", "p99_baseline_ci", "p99_candidate_ci"):
            out[key] = list(out[key]) if out[key] is not None else None
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Comparison:
        fields = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        for key in ("ci", "p99_baseline_ci", "p99_candidate_ci"):
            if fields.get(key) is not None:
                fields[key] = tuple(fields[key])
        return cls(**fields)

    def line(self, label: str = "", *, unit: str | None = None) -> str:
        """``median +3.1% [95% CI +1.9, +4.4], p=4e-4 -> regression; tail ...; P99 148.5 -> 512 ms``."""
        u = self.unit if unit is None else unit
        parts = []
        if self.ratio is not None and self.ci is not None:
            parts.append(
                f"median {_pct(self.ratio)} [{self.ci_label} {_pct(self.ci[0], sign_only=True)}, "
                f"{_pct(self.ci[1], sign_only=True)}], p={_p(self.p_value)} -> {self.verdict}"
            )
        else:
            parts.append(f"-> {self.verdict}")
        if self.tail_rate_baseline is not None and self.tail_rate_candidate is not None:
            op = ">" if self.better == "lower" else "<1/"
            tail = (
                f"tail {op}{self.tail_factor:g}x median {self.tail_rate_baseline:.1%} -> {self.tail_rate_candidate:.1%}"
            )
            if self.tail_p_value is not None:
                tail += f" (p={_p(self.tail_p_value)})"
            if self.tail_verdict == "regression":
                tail += " -> tail regression"
            parts.append(tail)
        if self.p99_baseline is not None and self.p99_candidate is not None:
            parts.append(f"P99 {_num(self.p99_baseline)} -> {_num(self.p99_candidate)}{' ' + u if u else ''}")
        text = "; ".join(parts)
        said = self.verdict == "inconclusive" and bool(self.reason)
        if said:
            text += f" ({self.reason})"
        if self.stopped:
            # the rule's reason is often why it stopped too: said once, not twice in one line
            why = "" if said and self.stopped == self.reason else f", stopped: {self.stopped}"
            text += f"; {self.processes} processes against {self.baseline_processes}{why}"
        return f"{label}: {text}" if label else text


class _Shared(TypedDict):
    """The fields of ``Comparison`` that both answers of ``compare_runs`` take from its arguments."""

    better: Literal["lower", "higher"]
    min_effect: float
    tail_factor: float
    unit: str
    processes: int
    baseline_processes: int


def compare_runs(
    baseline: Sequence[float] | Sequence[Sequence[float]],
    candidate: Sequence[float] | Sequence[Sequence[float]],
    *,
    better: Literal["lower", "higher"] = "lower",
    alpha: float = 0.01,
    min_effect: float = 0.02,
    max_cv: float = 0.05,
    tail_factor: float = 1.5,
    baseline_cv: float | None = None,
    candidate_cv: float | None = None,
    min_processes: int = MIN_PROCESSES,
    unit: str = "",
    resamples: int = BOOTSTRAP,
    noise_hint: str = NOISE_HINT,
) -> Comparison:
    """Judge ``candidate`` against ``baseline`` (each a list of per-process sample lists; a flat list = one process).

    ``alpha`` is the false-alarm rate of the whole comparison: body and tail
    are each tested at ``alpha/2`` (Bonferroni); the p-values reported are raw.

    ``baseline_cv``/``candidate_cv`` override the run's own fluctuation (CV of its
    process medians), e.g. with the stage's ``throughput_cv``. ``resamples``:
    cluster-bootstrap resamples for the P99 intervals (0: no intervals).
    ``max_cv``: a side whose fluctuation is above it is not judged (inconclusive);
    ``noise_hint`` names that setting and the fix in the reason.
    """
    if better not in ("lower", "higher"):
        raise ValueError(f"better must be 'lower' or 'higher', not {better!r}")
    b, c = as_groups(baseline), as_groups(candidate)
    if not b or not c:
        raise ValueError("baseline and candidate need at least one non-empty process each")
    if min(x for g in b + c for x in g) <= 0:
        raise ValueError("samples must be positive (times, rates, sizes)")
    common: _Shared = {
        "better": better,
        "min_effect": min_effect,
        "tail_factor": tail_factor,
        "unit": unit,
        "processes": len(c),
        "baseline_processes": len(b),
    }
    p99 = _p99s(b, c, resamples)
    problems = _validity(
        b,
        c,
        max_cv=max_cv,
        baseline_cv=baseline_cv,
        candidate_cv=candidate_cv,
        min_processes=min_processes,
        hint=noise_hint,
    )
    # Two claims per comparison (body and tail): each at alpha/2 keeps one comparison's false alarms within alpha.
    body = _body(b, c, better, alpha / 2, min_effect) if len(b) >= 2 and len(c) >= 2 else None
    tail = tail_test(b, c, better=better, alpha=alpha / 2, factor=tail_factor, min_processes=min_processes)
    if body is None:
        return Comparison("inconclusive", None, None, None, *tail, *p99, "; ".join(problems), **common)
    verdict, ratio, ci, p = body
    if problems:
        verdict = "inconclusive"
    reason = "; ".join(problems) or _body_reason(verdict, ci, min_effect)
    return Comparison(verdict, ratio, ci, p, *tail, *p99, reason, **common)


def _validity(
    b: list[np.ndarray],
    c: list[np.ndarray],
    *,
    max_cv: float,
    baseline_cv: float | None,
    candidate_cv: float | None,
    min_processes: int,
    hint: str,
) -> list[str]:
    problems = []
    noisy: list[tuple[str, float]] = []
    for name, groups, given in (("baseline", b, baseline_cv), ("candidate", c, candidate_cv)):
        if len(groups) < min_processes:
            problems.append(f"too few processes: {name} has {len(groups)}, need at least {min_processes}")
            continue
        cv = given if given is not None else process_cv(groups)
        if cv > max_cv:
            noisy.append((name, cv))
    problems += [fluctuation(n, cv, max_cv, hint if i == len(noisy) - 1 else "") for i, (n, cv) in enumerate(noisy)]
    return problems


def process_cv(groups: Sequence[Sequence[float]] | Sequence[np.ndarray]) -> float:
    """Coefficient of variation of the per-process medians (0 for a single process)."""
    meds = np.array([np.median(g) for g in groups])
    if len(meds) < 2:
        return 0.0
    return float(np.std(meds, ddof=1) / np.mean(meds))


def _body(
    b: list[np.ndarray], c: list[np.ndarray], better: str, alpha: float, min_effect: float
) -> tuple[Verdict, float, tuple[float, float], float]:
    lb = np.log([np.median(g) for g in b])
    lc = np.log([np.median(g) for g in c])
    d = float(lc.mean() - lb.mean())
    vb, vc = lb.var(ddof=1) / len(lb), lc.var(ddof=1) / len(lc)
    se = math.sqrt(vb + vc)
    if se == 0.0:  # identical medians in every process: exact, no noise to test against
        worse_sign = d if better == "lower" else -d
        p_worse, p_better = (0.0, 1.0) if worse_sign > 0 else (1.0, 0.0) if worse_sign < 0 else (1.0, 1.0)
        half = 0.0
    else:
        df = (vb + vc) ** 2 / (vb**2 / (len(lb) - 1) + vc**2 / (len(lc) - 1)) if vb + vc > 0 else len(lb) + len(lc) - 2
        t = d / se
        worse_t = t if better == "lower" else -t
        p_worse = float(sps.t.sf(worse_t, df))
        p_better = float(sps.t.cdf(worse_t, df))
        half = float(sps.t.ppf(0.975, df)) * se
    worse = d if better == "lower" else -d  # log-change in the "worse" direction
    margin = math.log1p(min_effect)
    worse_bound = (d + half) if better == "lower" else -(d - half)
    if p_worse < alpha and worse > margin:
        verdict: Verdict = "regression"
    elif p_better < alpha and -worse > margin:
        verdict = "improvement"
    elif worse_bound < margin:
        verdict = "equivalent"
    else:
        verdict = "inconclusive"
    return verdict, math.exp(d), (math.exp(d - half), math.exp(d + half)), p_worse


def _body_reason(verdict: str, ci: tuple[float, float], min_effect: float) -> str:
    if verdict == "regression":
        return f"significantly worse, by more than {min_effect:.0%}"
    if verdict == "improvement":
        return f"significantly better, by more than {min_effect:.0%}"
    if verdict == "equivalent":
        return f"the 95% interval excludes a change worse than {min_effect:.0%}"
    return f"the 95% interval {_pct(ci[0])}..{_pct(ci[1])} is too wide to exclude a {min_effect:.0%} change"


def _p99s(
    b: list[np.ndarray], c: list[np.ndarray], resamples: int
) -> tuple[float | None, float | None, tuple[float, float] | None, tuple[float, float] | None]:
    ib, ic = cluster_interval(b, 0.99, resamples=resamples), cluster_interval(c, 0.99, resamples=resamples)
    return ib.estimate, ic.estimate, ib.ci, ic.ci


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm-Bonferroni adjusted p-values, in the input order (None stays None)."""
    indexed = sorted(((p, i) for i, p in enumerate(p_values) if p is not None), key=lambda t: t[0])
    m = len(indexed)
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(indexed):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def theil_sen_slope(x: Sequence[float], y: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """Robust slope of y over x with its ``confidence`` interval: (slope, low, high)."""
    if len(x) != len(y) or len(x) < 3:
        raise ValueError("theil_sen_slope needs at least 3 paired points")
    res = sps.theilslopes(np.asarray(y, float), np.asarray(x, float), alpha=confidence)
    return float(res.slope), float(res.low_slope), float(res.high_slope)


def _pct(ratio: float, *, sign_only: bool = False) -> str:
    v = (ratio - 1.0) * 100
    return f"{v:+.1f}" if sign_only else f"{v:+.1f}%"


def _p(p: float | None) -> str:
    if p is None:
        return "n/a"
    if p >= 0.001:
        return f"{p:.3f}".rstrip("0").rstrip(".") if p < 1 else "1"
    mant, exp = f"{p:.0e}".split("e")
    return f"{mant}e{int(exp)}"


def _num(v: float) -> str:
    return f"{v:.4g}" if abs(v) < 1000 else f"{v:.0f}"

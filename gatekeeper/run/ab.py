"""``gatekeeper ab``: the strongest protocol, base and head measured alternately on one device in one job.

The base commit is checked out in a temporary git worktree; the stage runs
with each tree as its working directory (so ``--model pkg.mod:build`` imports
that tree's model code), in the order base, head, base, head... Interleaving
spreads slow drifts of the machine (thermal, noisy neighbours) over both sides.
The samples of all rounds are pooled per side. After every round (a fresh base
run and a head run) the sequential rule (``gatekeeper.stats.sequential``) is
asked; rounds go on until it decides or the budget (--max-processes per side,
--max-seconds, --rounds) is spent, and the last look is the verdict, with the
tail test of ``gatekeeper.stats.compare.compare_runs`` on the pooled samples.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import git

from gatekeeper.contract.stage_report import StageReport, read_stage
from gatekeeper.core import proc
from gatekeeper.core.errors import InputError
from gatekeeper.core.exitcodes import ExitCode
from gatekeeper.core.files import write_json
from gatekeeper.stats.compare import Comparison, compare_runs
from gatekeeper.stats.sequential import SequentialRule, compare_sequential
from gatekeeper.stats.sequential_plan import Plan, Step

__all__ = ["exit_code", "judge", "run_ab"]

GIT_TIMEOUT_S = 300
MAX_CV_LIMIT = 0.5  # as gates.yaml's max_cv: above it, "fluctuates too much" would never be said
# ab takes the noise guard from its own --max-cv (as the tolerance from --min-effect), never from gates.yaml
NOISE_HINT = "--max-cv of gatekeeper ab; more processes (--max-processes), a quieter runner, or raise --max-cv"


def exit_code(c: Comparison) -> ExitCode:
    """1 on a body or tail regression, 3 when inconclusive, else 0."""
    if c.verdict == "regression" or c.tail_verdict == "regression":
        return ExitCode.BLOCKED
    if c.verdict == "inconclusive":
        return ExitCode.WARN
    return ExitCode.PASS


def pooled(reports: Sequence[StageReport], metric: str, side: str) -> list[list[float]]:
    """The per-process samples of ``metric`` over every round of one side."""
    groups: list[list[float]] = []
    for r in reports:
        m = r.metrics.get(metric)
        if m is None or not m.samples:
            raise InputError(
                None,
                "--metric",
                f"{r.stage} ({side}) recorded no samples of {metric!r}",
                "name a metric the stage records (its <stage>.json lists them), or leave --metric out",
            )
        groups += [list(g) for g in m.samples]
    return groups


def _better(reports: Sequence[StageReport], metric: str) -> Literal["lower", "higher"]:
    return "higher" if reports[0].metrics[metric].better == "higher" else "lower"


def judge(
    base: Sequence[StageReport],
    head: Sequence[StageReport],
    metric: str,
    *,
    max_cv: float = 0.05,
    plan: Plan | None = None,
    looks: Sequence[tuple[int, int]] = (),
    stopped: str = "",
) -> Comparison:
    """Pool the per-process samples of ``metric`` over rounds and compare; inconclusive if warm-up did not converge.

    With ``plan``: the sequential rule at its last look (``looks``: the earlier ones), else a fixed-sample test."""
    sides = [pooled(base, metric, "base"), pooled(head, metric, "head")]
    first = base[0].metrics[metric]
    if plan is not None:  # the plan's max_cv (run_ab builds it from --max-cv)
        result = compare_sequential(
            sides[0], sides[1], plan, looks, stopped=stopped, unit=first.unit, noise_hint=NOISE_HINT
        )
    else:
        result = compare_runs(
            sides[0], sides[1], better=_better(base, metric), unit=first.unit, max_cv=max_cv, noise_hint=NOISE_HINT
        )
    cold = [
        name
        for name, reports in (("base", base), ("head", head))
        if any(r.metrics.get("warmup_converged") and r.metrics["warmup_converged"].value == 0.0 for r in reports)
    ]
    if cold:
        reason = f"warm-up did not converge in the {' and '.join(cold)} run"
        result = dataclasses.replace(result, verdict="inconclusive", reason=f"{reason}; {result.reason}")
    return result


def _run_stage(
    tree: Path, stage: str, out: Path, *, stage_args: Sequence[str], timeout: float, log: Callable[[str], None]
) -> None:
    argv = [sys.executable, "-m", "gatekeeper", "stage", stage, "--out", str(out), *stage_args]
    # The tree first (a gatekeeper checkout measures its own code), then this gatekeeper (for model repos).
    path = (str(tree), str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", ""))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
    res = proc.run(argv, timeout=timeout, env=env, cwd=tree)
    if not (out / f"{stage}.json").exists():
        tail = "\n".join((res.stderr or res.stdout).strip().splitlines()[-5:])
        raise InputError(out, "", f"stage {stage} wrote no result: {res.describe()}", tail.replace("\n", " | "))
    log(f"  {out.parent.name}/{out.name}: {res.describe() if not res.ok else 'ok'} ({res.duration_s:.0f} s)")


def run_ab(
    *,
    base: str,
    out: str | Path,
    stage: str = "performance_baseline",
    rounds: int | None = None,
    max_processes: int = 20,
    max_seconds: float | None = None,
    min_effect: float = 0.03,
    metric: str = "latency_ms",
    max_cv: float = 0.05,
    stage_args: Sequence[str] = (),
    repo: str | Path = ".",
    timeout: float = 3600.0,
    log: Callable[[str], None] = lambda _line: None,
) -> int:
    """Run ``stage`` for base and head alternately, a round at a time, until the judge decides; ``log`` gets
    each run's line and the judge's (the CLI passes the terminal writer; nothing here prints).

    Budget: ``max_processes`` per side (whole rounds only), ``max_seconds`` (no round starts after it),
    ``rounds`` (at most this many). ``min_effect``: the tolerance the rounds decide on. ``max_cv``: the noise
    guard (a side whose process medians vary more is not judged), at most ``MAX_CV_LIMIT`` as in gates.yaml."""
    if rounds is not None and rounds < 1:
        raise InputError(None, "--rounds", f"must be at least 1 (got {rounds})", "pass --rounds 1 or more")
    if max_processes < 3:
        raise InputError(None, "--max-processes", f"must be at least 3 (got {max_processes})", "e.g. 20")
    if max_seconds is not None and max_seconds <= 0:
        raise InputError(
            None, "--max-seconds", f"must be positive (got {max_seconds:g})", "pass a positive --max-seconds"
        )
    if not 0.0 < min_effect < 1.0:
        raise InputError(None, "--min-effect", f"must lie between 0 and 1 (got {min_effect:g})", "e.g. 0.03")
    if not 0.0 < max_cv <= MAX_CV_LIMIT:
        raise InputError(
            None, "--max-cv", f"must lie in (0, {MAX_CV_LIMIT:g}] (got {max_cv:g})", "e.g. 0.05 (a fraction, 5%)"
        )
    try:
        repository = git.Repo(repo, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise InputError(
            Path(repo), "", "not inside a git repository", "run gatekeeper ab from the repository"
        ) from None
    try:
        sha = repository.commit(base).hexsha
    except (git.BadName, ValueError):
        raise InputError(
            None, "--base", f"{base!r} is not a commit here", "fetch it first, e.g. git fetch origin main"
        ) from None
    head_tree = Path(repository.working_tree_dir or ".")
    out = Path(out).resolve()
    reports: dict[str, list[StageReport]] = {"base": [], "head": []}
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gatekeeper-ab-") as tmp:
        base_tree = Path(tmp) / "base"
        repository.git.worktree("add", "--detach", str(base_tree), sha, kill_after_timeout=GIT_TIMEOUT_S)
        try:
            budget = f"at most {max_processes} processes per side" + (f", {rounds} rounds" if rounds else "")
            budget += f", {max_seconds:g} s" if max_seconds else ""
            log(f"gatekeeper ab: {stage} in rounds until decided ({budget}), base {sha[:10]} vs head {head_tree}")
            rule: SequentialRule | None = None
            r = 0
            while True:
                r += 1
                for side, tree in (("base", base_tree), ("head", head_tree)):
                    side_out = out / side / f"round{r}"
                    _run_stage(tree, stage, side_out, stage_args=stage_args, timeout=timeout, log=log)
                    reports[side].append(read_stage(side_out / f"{stage}.json"))
                b, h = pooled(reports["base"], metric, "base"), pooled(reports["head"], metric, "head")
                if rule is None:  # the plan's budget in whole rounds of the first round's size
                    per_round = max(len(b), len(h))
                    cap = max(per_round, per_round * (max_processes // per_round))
                    cap = min(cap, per_round * rounds) if rounds else cap
                    rule = SequentialRule(
                        Plan(
                            max_processes=max(cap, 3),
                            better=_better(reports["base"], metric),
                            min_effect=min_effect,
                            max_cv=max_cv,
                            baseline_grows=True,
                        ),
                        noise_hint=NOISE_HINT,
                    )
                step = rule.look(b, h, budget_spent=_spent(r, rounds, start, max_seconds))
                log(f"  round {r}: {len(b)} + {len(h)} processes -> {_state(step)}")
                if step.stop:
                    break
        finally:
            repository.git.worktree("remove", "--force", str(base_tree), kill_after_timeout=GIT_TIMEOUT_S)
    looks = step.looks[:-1]
    result = judge(
        reports["base"], reports["head"], metric, max_cv=max_cv, plan=rule.plan, looks=looks, stopped=step.reason
    )
    summary: dict[str, Any] = {"base": sha, "stage": stage, "metric": metric, "rounds": r, **result.to_dict()}
    summary |= {
        "looks": [list(x) for x in step.looks],
        "plan": rule.plan.to_dict(),
        "seconds": time.monotonic() - start,
    }
    write_json(out / "ab.json", summary)
    log(result.line(f"{metric} ({stage}, base {sha[:10]} vs head, {r}x ABAB)"))
    return exit_code(result)


def _spent(done: int, rounds: int | None, start: float, max_seconds: float | None) -> str:
    if rounds is not None and done >= rounds:
        return f"--rounds {rounds} done"
    if max_seconds is not None and time.monotonic() - start >= max_seconds:
        return f"--max-seconds {max_seconds:g} spent"
    return ""


def _state(step: Step) -> str:
    ratio = f"median {(step.ratio - 1) * 100:+.1f}%, " if step.ratio is not None else ""
    return f"{ratio}{step.verdict}" if step.stop else f"{ratio}undecided, another round"

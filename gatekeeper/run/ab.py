"""``gatekeeper ab``: the strongest protocol, base and head measured alternately on one device in one job.

The base commit is checked out in a temporary git worktree; the stage runs
with each tree as its working directory (so ``--model pkg.mod:build`` imports
that tree's model code), in the order base, head, base, head... Interleaving
spreads slow drifts of the machine (thermal, noisy neighbours) over both sides.
The samples of all rounds are pooled per side and judged by
``gatekeeper.stats.compare.compare_runs``.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
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

__all__ = ["exit_code", "judge", "run_ab"]

GIT_TIMEOUT_S = 300


def exit_code(c: Comparison) -> ExitCode:
    """1 on a body or tail regression, 3 when inconclusive, else 0."""
    if c.verdict == "regression" or c.tail_verdict == "regression":
        return ExitCode.BLOCKED
    if c.verdict == "inconclusive":
        return ExitCode.WARN
    return ExitCode.PASS


def judge(base: Sequence[StageReport], head: Sequence[StageReport], metric: str, *, max_cv: float = 0.05) -> Comparison:
    """Pool the per-process samples of ``metric`` over rounds and compare; inconclusive if warm-up did not converge."""
    sides = []
    for name, reports in (("base", base), ("head", head)):
        groups: list[list[float]] = []
        for r in reports:
            m = r.metrics.get(metric)
            if m is None or not m.samples:
                raise InputError(None, "--metric", f"{r.stage} ({name}) recorded no samples of {metric!r}")
            groups += [list(g) for g in m.samples]
        sides.append(groups)
    first = base[0].metrics[metric]
    better: Literal["lower", "higher"] = "higher" if first.better == "higher" else "lower"
    result = compare_runs(sides[0], sides[1], better=better, unit=first.unit, max_cv=max_cv)
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
    rounds: int = 2,
    metric: str = "latency_ms",
    max_cv: float = 0.05,
    stage_args: Sequence[str] = (),
    repo: str | Path = ".",
    timeout: float = 3600.0,
    log: Callable[[str], None] = lambda _line: None,
) -> int:
    """Run ``stage`` for base and head alternately, ``rounds`` times each; ``log`` gets each run's line and the
    judge's (the CLI passes the terminal writer; nothing here prints)."""
    if rounds < 1:
        raise InputError(None, "--rounds", f"must be at least 1 (got {rounds})")
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
    with tempfile.TemporaryDirectory(prefix="gatekeeper-ab-") as tmp:
        base_tree = Path(tmp) / "base"
        repository.git.worktree("add", "--detach", str(base_tree), sha, kill_after_timeout=GIT_TIMEOUT_S)
        try:
            log(f"gatekeeper ab: {stage} {rounds} round(s), base {sha[:10]} vs head {head_tree}")
            for r in range(1, rounds + 1):
                for side, tree in (("base", base_tree), ("head", head_tree)):
                    side_out = out / side / f"round{r}"
                    _run_stage(tree, stage, side_out, stage_args=stage_args, timeout=timeout, log=log)
                    reports[side].append(read_stage(side_out / f"{stage}.json"))
        finally:
            repository.git.worktree("remove", "--force", str(base_tree), kill_after_timeout=GIT_TIMEOUT_S)
    result = judge(reports["base"], reports["head"], metric, max_cv=max_cv)
    summary: dict[str, Any] = {"base": sha, "stage": stage, "metric": metric, "rounds": rounds, **result.to_dict()}
    write_json(out / "ab.json", summary)
    log(result.line(f"{metric} ({stage}, base {sha[:10]} vs head, {rounds}x ABAB)"))
    return exit_code(result)
